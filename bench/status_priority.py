"""Section 5, issue 15's row: GET /batches/{id} with 5 pollers during a batch, the batch's work at the
local stack's background niceness (10, the executor's PDFBATCH_BACKGROUND_NICE) and, interleaved, at
LocalStack's own priority (every environment reniced to 0 while the batch runs, as before the setting).

On AWS each execution environment has its own CPU: a poll never waits for a batch's file work. Here
LocalStack, the workers and the API share two cores, so the figure depends on who gets the CPU first.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from tools import localstack

from bench import pipeline
from bench.report import Row, Target
from bench.stack import BenchStack
from pdfbatch.services.report import percentile

POLLERS = 5
INTERACTIVE = "pdfbatch-status"  # the service the executor keeps at LocalStack's priority


def _background_pids() -> list[int]:
    """Processes of background execution environments (every function but the status API's)."""
    found = localstack.lambda_processes()
    return [pid for pid, env in found if env.get("POWERTOOLS_SERVICE_NAME") != INTERACTIVE]


def service_pids(service: str) -> list[int]:
    """Processes of ``service``'s execution environments (its forked readers too)."""
    return [
        pid for pid, env in localstack.lambda_processes() if env.get("POWERTOOLS_SERVICE_NAME") == service
    ]


def hold_niceness(nice: int, stop: threading.Event, pids: Callable[[], list[int]] = _background_pids) -> None:
    """Keep every process ``pids`` finds (new ones too; every background environment by default) at
    ``nice`` until ``stop``."""
    while not stop.is_set():
        for pid in pids():
            try:
                if os.getpriority(os.PRIO_PROCESS, pid) != nice:
                    os.setpriority(os.PRIO_PROCESS, pid, nice)
            except OSError:
                continue  # gone, or not ours to renice
        stop.wait(0.2)


def _run(stack: BenchStack, path: Path, users: list[str], nice: int | None) -> pipeline.Run:
    stop = threading.Event()
    holder = None
    if nice is not None:
        holder = threading.Thread(target=hold_niceness, args=(nice, stop), daemon=True)
        holder.start()
    try:
        stack.seed_users(users)
        return pipeline.run_batch(stack, path, len(users), pollers=POLLERS)
    finally:
        stop.set()
        if holder is not None:
            holder.join(timeout=5)


def compare(
    stack: BenchStack, path: Path, users: list[str], rounds: int = 2, log: Callable[[str], None] = print
) -> list[Row]:
    """Rows for each side (polls of every round pooled) and the p99 ratio."""
    sides: dict[str, list[pipeline.Run]] = {"background": [], "alike": []}
    _run(stack, path, users, None)  # warm-up: environments of both functions start
    for _ in range(rounds):
        sides["background"].append(_run(stack, path, users, None))
        sides["alike"].append(_run(stack, path, users, 0))
        log(
            "   5 pollers: p99 "
            + ", ".join(f"{k} {percentile(v[-1].status_ms, 99):.0f} ms" for k, v in sides.items())
        )
    names = {
        "background": "background work at niceness 10 (the local stack)",
        "alike": "every environment at niceness 0",
    }
    rows = []
    p99 = {}
    for side, runs in sides.items():
        lat = [ms for r in runs for ms in r.status_ms]
        handler = [x.duration_ms for r in runs for x in pipeline.reports_for(stack, "status", r)]
        p99[side] = percentile(lat, 99)
        rate = sum(r.files for r in runs) / sum(r.seconds for r in runs)
        rows.append(
            Row(
                "5",
                f"GET /batches/{{id}} p99, {POLLERS} pollers during a batch, {names[side]}",
                p99[side],
                "ms",
                Target("<=", 100, " ms") if side == "background" else None,
                f"{len(lat)} polls in {rounds} rounds, p50 {percentile(lat, 50):.1f}, p95 "
                f"{percentile(lat, 95):.1f} ms; status function's own duration p50 "
                f"{percentile(handler, 50):.1f}, p99 {percentile(handler, 99):.1f} ms; "
                f"batch {rate:.1f} PDFs/s",
            )
        )
    rows.append(
        Row(
            "5",
            f"GET /batches/{{id}} p99, {POLLERS} pollers: background at niceness 10 / all alike",
            p99["background"] / p99["alike"] if p99["alike"] else None,
            "x",
            note="interleaved rounds, one run",
        )
    )
    return rows
