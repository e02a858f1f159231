"""How big each benchmark section's corpus is, and where results go: shared by `python -m bench` and the
sections that also run on their own (bench/seed_compare.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MiB = 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    """How big each section's corpus is (full run vs --quick smoke run)."""

    extract_resumes: int = 100
    extract_manuals: int = 8
    manual_pages: int = 100
    resumes: int = 300
    manuals: int = 20
    scale: tuple[int, int] = (1_000, 10_000)
    memory: tuple[tuple[str, int], ...] = (("10 MB", 10 * MiB), ("100 MB", 100 * MiB), ("1 GB", 1024 * MiB))
    pollers: int = 20
    priority_rounds: int = 2  # section 5: 5 pollers, background niceness 10 against all alike
    seed_rounds: int = 3  # section 7: measured rounds per side, interleaved with the seed system
    ocr_scans: int = 12  # generated scans per resolution (150/200/300 dpi), section 9
    lane: tuple[int, int, int] = (200, 5, 30)  # section 10: résumés, long scans beside them, their pages
    # Section 2's idle start: long enough for LocalStack's empty-poll backoff to reach its 10 s ceiling
    # (1, 2, 4, 8 s...) without the executor's idle long poll.
    idle_seconds: float = 20.0
    trace: tuple[int, int] = (1_000_000, 200)  # section 12: ledger rows, lookups per kind
    labelled_rounds: int = 3  # section 1: rounds per side of the labelled corpus against pre-issue-22 main


QUICK = Sizes(
    extract_resumes=5,
    extract_manuals=1,
    manual_pages=10,
    resumes=20,
    manuals=2,
    scale=(40, 80),
    memory=(("2 MB", 2 * MiB), ("4 MB", 4 * MiB)),
    pollers=3,
    priority_rounds=1,
    seed_rounds=1,
    ocr_scans=2,
    lane=(20, 1, 6),
    idle_seconds=2.0,
    trace=(20_000, 20),
    labelled_rounds=1,
)
