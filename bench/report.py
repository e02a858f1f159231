"""The one table: every figure, its target, and whether (and by how much) it is met."""

from __future__ import annotations

import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path


@dataclass(frozen=True)
class Target:
    """``value op limit``: op is '>=' or '<='."""

    op: str
    limit: float
    unit: str = ""

    def met(self, value: float) -> bool:
        """Whether ``value`` meets the target."""
        return value >= self.limit if self.op == ">=" else value <= self.limit

    def margin(self, value: float) -> str:
        """By how much the target is met or missed, in the target's terms."""
        if self.limit == 0:
            return f"{value - self.limit:+.1f}{self.unit}"
        if self.op == ">=":
            ratio = value / self.limit
            return f"{ratio:.2f}x of target" if ratio < 1 else f"{(ratio - 1) * 100:.0f}% above"
        ratio = value / self.limit
        if ratio > 1:
            return f"{ratio:.2f}x over ({value - self.limit:+.1f}{self.unit})"
        return f"{(1 - ratio) * 100:.0f}% under"

    def __str__(self) -> str:
        return f"{self.op} {_fmt(self.limit)}{self.unit}"


@dataclass(frozen=True)
class Row:
    """One figure of the table; ``target`` None means measured for information."""

    section: str
    figure: str
    value: float | None
    unit: str = ""
    target: Target | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        """met / MISSED / (blank when there is no target)."""
        if self.target is None:
            return ""
        if self.value is None:
            return "MISSED (not measured)"
        if self.target.met(self.value):
            return f"met ({self.target.margin(self.value)})"
        return f"**MISSED** ({self.target.margin(self.value)})"


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if value == 0:
        return "0"
    if value == int(value) and abs(value) < 1e6:
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    if abs(value) >= 0.1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def render(
    rows: Sequence[Row], *, title: str, notes: Sequence[str] = (), seconds: float | None = None
) -> str:
    """The markdown report: header, one table, then notes."""
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"# {title}",
        "",
        f"Measured {when} on {platform.machine()} with {_cpus()} CPUs, Python {platform.python_version()}"
        + (f"; whole run {seconds:.0f} s" if seconds is not None else "")
        + ".",
        "",
        "| # | figure | value | target | verdict | note |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        value = f"{_fmt(r.value)} {r.unit}".strip()
        lines.append(f"| {r.section} | {r.figure} | {value} | {r.target or ''} | {r.verdict} | {r.note} |")
    if notes:
        lines += ["", "## Notes", ""]
        lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 0


def publish(
    rows: Sequence[Row], out: Path, *, title: str, notes: Sequence[str] = (), started: float | None = None
) -> str:
    """render() the report (``started``: time.monotonic() at the run's start), print it and write it to
    ``out``; the text."""
    seconds = time.monotonic() - started if started is not None else None
    text = render(rows, title=title, notes=notes, seconds=seconds)
    print(text)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text
