"""Where the CPU goes during a run: LocalStack, the function processes, MariaDB, Redis (from /proc)."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _classify(cmdline: str, comm: str) -> str | None:
    if "bootstrap.py" in cmdline:
        return "function processes"
    if "localstack" in cmdline:
        return "LocalStack"
    if comm.startswith("mariadbd") or comm.startswith("mysqld"):
        return "MariaDB"
    if comm.startswith("redis-server"):
        return "Redis"
    return None


def processes() -> Iterator[tuple[int, str, str, float]]:
    """(pid, command line, comm, CPU seconds user + system) of every process that can be read."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue  # the process ended while we looked
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        yield int(entry.name), cmdline, comm, (int(fields[11]) + int(fields[12])) / _TICK


def snapshot() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) per process of interest: pid -> (class, seconds)."""
    out: dict[int, tuple[str, float]] = {}
    me = os.getpid()
    for pid, cmdline, comm, seconds in processes():
        kind = "bench (this process)" if pid == me else _classify(cmdline, comm)
        if kind is not None:
            out[pid] = (kind, seconds)
    return out


def delta(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per class between two snapshots (processes that ended in between are not counted)."""
    out: dict[str, float] = defaultdict(float)
    for pid, (kind, seconds) in after.items():
        start = before.get(pid, (kind, 0.0))[1]
        out[kind] += max(0.0, seconds - start)
    return dict(out)
