"""Sections 2, 3 and 5: batches from upload to COMPLETED on the bench stack, stage timings, status latency."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.stack import BenchStack, Report
from pdfbatch.api_client import ApiClient, presigned_post
from pdfbatch.services.report import percentile

STAGES = ("download", "validate", "extract", "match", "copy", "update", "count")


@dataclass
class Run:
    """One batch from the start of its upload to COMPLETED."""

    batch_id: str
    files: int
    seconds: float  # upload start -> completedAt (server clock, same machine)
    upload_seconds: float
    body: dict[str, Any]
    since_ms: int
    until_ms: int
    status_ms: list[float] = field(default_factory=list)  # poller latencies, when pollers ran
    completed_at: float = 0.0  # epoch seconds

    @property
    def rate(self) -> float:
        """PDFs per second, end to end."""
        return self.files / self.seconds


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


def run_batch(stack: BenchStack, path: Path, files: int, *, pollers: int = 0, timeout: float = 900) -> Run:
    """Upload ``path`` through POST /batches and its presigned POST; wait for COMPLETED."""
    api = stack.api()
    created = api.create_batch()
    batch_id = created["batchId"]
    since_ms = int(time.time() * 1000) - 1000
    stop = threading.Event()
    latencies: list[float] = []
    threads = [
        threading.Thread(target=_poll, args=(stack.api(), batch_id, stop, latencies), daemon=True)
        for _ in range(pollers)
    ]
    t0 = time.time()
    presigned_post(created["upload"]["url"], created["upload"]["fields"], path)
    upload_seconds = time.time() - t0
    for t in threads:
        t.start()
    try:
        body = api.wait(batch_id, timeout=timeout, interval=0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
    if body["status"] != "COMPLETED":
        raise RuntimeError(f"batch {batch_id} ended {body['status']}: {body.get('reason')}")
    if body["processed"] != files:
        raise RuntimeError(f"batch {batch_id}: {body['processed']} of {files} files processed")
    done = _epoch(body["completedAt"])
    return Run(
        batch_id,
        files,
        done - t0,
        upload_seconds,
        body,
        since_ms,
        int(done * 1000) + 5000,
        latencies,
        done,
    )


def _poll(api: ApiClient, batch_id: str, stop: threading.Event, out: list[float]) -> None:
    # A well-behaved client: poll, then wait what Retry-After says (1 s) before the next poll.
    while not stop.is_set():
        t = time.perf_counter()
        body, retry_after = api.status(batch_id)
        out.append((time.perf_counter() - t) * 1000)
        if body["status"] in ("COMPLETED", "FAILED"):
            return
        stop.wait(retry_after or 1.0)


def idle_start(stack: BenchStack, path: Path, files: int, *, idle: float) -> tuple[float, float]:
    """One batch uploaded after ``idle`` seconds with an empty work queue: seconds from the upload's end to
    the first file started (the first process_pdf attempt, as the ledger recorded it), and from the ZIP
    unpacked (every message sent) to that start: the work queue's pick-up delay alone."""
    from bench.stack import REDIS_URL
    from pdfbatch.adapters.redis import RedisProgress

    time.sleep(idle)
    run = run_batch(stack, path, files)
    uploaded = run.completed_at - run.seconds + run.upload_seconds
    conn = stack.db()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT MIN(started_at) FROM pdfbatch_files WHERE batch_id = %s", (run.batch_id,))
            first = float(cur.fetchone()[0])
    finally:
        conn.close()
    live = RedisProgress.from_url(REDIS_URL).get(run.batch_id)
    unpacked = live.unpacked_at if live is not None and live.unpacked_at else float("nan")
    return first - uploaded, first - unpacked


def file_timings(stack: BenchStack, run: Run, timeout: float = 60) -> list[dict[str, float]]:
    """The per-file stage timings (ms) process_pdf logged for ``run``'s batch."""
    deadline = time.monotonic() + timeout
    while True:
        records = [
            r
            for r in stack.json_lines("process-pdf", run.since_ms, "file processed")
            if r.get("batch_id") == run.batch_id and isinstance(r.get("timings_ms"), dict)
        ]
        by_index = {r.get("file_index"): r["timings_ms"] for r in records}
        if len(by_index) >= run.files or time.monotonic() > deadline:
            return list(by_index.values())
        time.sleep(1)


def stage_stats(timings: Sequence[dict[str, float]]) -> dict[str, tuple[float, float, float, int]]:
    """Per stage: (p50, p95, p99, files that had the stage), plus `outside extraction` and `total`."""
    out: dict[str, tuple[float, float, float, int]] = {}
    series: dict[str, list[float]] = {
        s: [] for s in (*STAGES, "text extraction", "outside extraction", "total")
    }
    for t in timings:
        for s in STAGES:
            if s in t:
                value = t[s]
                if s == "extract":
                    value -= t.get("validate", 0.0)  # the log's extract covers validation too
                series[s].append(value)
        if "total" in t and "extract" in t:
            series["text extraction"].append(t["extract"] - t.get("validate", 0.0))
            series["outside extraction"].append(t["total"] - t["extract"] + t.get("validate", 0.0))
            series["total"].append(t["total"])
    for name, values in series.items():
        if values:
            out[name] = (percentile(values, 50), percentile(values, 95), percentile(values, 99), len(values))
    return out


def reports_for(stack: BenchStack, name: str, run: Run) -> list[Report]:
    """REPORT lines of ``name`` during ``run`` (the bench stack runs one batch at a time)."""
    return stack.reports(name, run.since_ms, run.until_ms)


def peak_concurrency(reports: Sequence[Report]) -> int:
    """The most invocations that overlapped in time (each spans [logged - duration, logged])."""
    edges: list[tuple[float, int]] = []
    for r in reports:
        edges += [(r.logged_ms - r.duration_ms, 1), (float(r.logged_ms), -1)]
    peak = current = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        current += step
        peak = max(peak, current)
    return peak


def concurrent_polls(stack: BenchStack, pollers: int) -> list[float]:
    """One GET /batches/{id} from each of ``pollers`` threads at once (of a new, empty batch); ms each."""
    batch_id = stack.api().create_batch()["batchId"]
    out: list[float] = []
    barrier = threading.Barrier(pollers)

    def once(api: ApiClient) -> None:
        barrier.wait()
        t = time.perf_counter()
        api.status(batch_id)
        out.append((time.perf_counter() - t) * 1000)

    threads = [threading.Thread(target=once, args=(stack.api(),)) for _ in range(pollers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return out


def phases(stack: BenchStack, run: Run) -> dict[str, float]:
    """Seconds from the upload's start to: the ZIP unpacked, the first PDF done, COMPLETED.

    Read from the batch's live progress in Redis (timestamps the functions wrote).
    """
    from bench.stack import REDIS_URL
    from pdfbatch.adapters.redis import RedisProgress

    live = RedisProgress.from_url(REDIS_URL).get(run.batch_id)
    t0 = run.completed_at - run.seconds
    out = {}
    if live is not None:
        for name, at in (
            ("unpacked", live.unpacked_at),
            ("first PDF done", live.first_done_at),
            ("completed", live.completed_at),
        ):
            if at:
                out[name] = at - t0
    return out


# --- section 10: the OCR lane isolates the résumés -------------------------------------------------------


def lane_zips(resumes: int, scans: int, pages: int, out: Path) -> tuple[Path, Path, list[str]]:
    """Two ZIPs of the same ``resumes`` résumés of known users: alone, and with ``scans`` long scans of
    ``pages`` pages naming nobody (each read by the OCR lane up to its page limit)."""
    import zipfile

    from tools import samples
    from tools import scans as scan_docs

    users: list[str] = []
    entries: list[tuple[str, bytes]] = []
    for i in range(resumes):
        name, email = samples.person(7000 + i)
        users.append(email)
        entries.append((f"resumes/{i:04d}.pdf", samples.resume(name, email)))
    long = [scan_docs.long_scan(pages, None, seed=70 + k).data for k in range(scans)]
    out.mkdir(parents=True, exist_ok=True)
    alone, mixed = out / f"lane-{resumes}r.zip", out / f"lane-{resumes}r-{scans}x{pages}p-scans.zip"
    for path, extra in ((alone, []), (mixed, [(f"scans/{k}.pdf", d) for k, d in enumerate(long)])):
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            # The scans first: they reach the OCR lane while the résumés are still being processed.
            for name, data in [*extra, *entries]:
                zf.writestr(zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0)), data)
    return alone, mixed, users


def resume_seconds(stack: BenchStack, path: Path, files: int, resumes: int, timeout: float = 1800) -> float:
    """Upload start -> the last résumé's outcome (finishedAt of files under resumes/), in seconds."""
    api = stack.api()
    created = api.create_batch()
    batch_id = created["batchId"]
    t0 = time.time()
    presigned_post(created["upload"]["url"], created["upload"]["fields"], path)
    body = api.wait(batch_id, timeout=timeout, interval=0.5)
    if body["status"] != "COMPLETED" or body["processed"] != files:
        raise RuntimeError(f"batch {batch_id} ended {body['status']} with {body['processed']} of {files}")
    files_ = api.files(batch_id)
    done = [_epoch(f["finishedAt"]) for f in files_ if f["name"].startswith("resumes/") and f["finishedAt"]]
    if len(done) != resumes:
        raise RuntimeError(f"batch {batch_id}: {len(done)} of {resumes} résumés finished")
    return max(done) - t0
