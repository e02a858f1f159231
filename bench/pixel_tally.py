"""Issue 26's in-process tally of the pixel check (pdf.pixels.confirm): its cost and what it refuses.

``watch()`` wraps pixels.confirm while a section scans in this process (isolate=False) and tallies
its CPU time per scan and its verdicts on the addresses that passed the ink check: READ and LIKE may
link; UNREAD and REFUSED are candidates the pixel check refused (target on real producers: none).
Sections 1's résumés (bench/matching.py) and labelled corpus (bench/labelled.py) use it; comparing
commits in one run is bench/pixels.py.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdfbatch.pdf import pixels


@dataclass
class Tally:
    """CPU seconds in pixels.confirm and its verdicts on shown addresses, since ``watch`` began."""

    seconds: float = 0.0
    calls: int = 0
    checked: int = 0
    refused: list[str] = field(default_factory=list)  # "seen:read" of each refused check, no address

    def take(self) -> float:
        """The CPU seconds counted since the last take (one scan's pixel check)."""
        seconds, self.seconds = self.seconds, 0.0
        return seconds


@contextlib.contextmanager
def watch() -> Iterator[Tally]:
    """Tally pixels.confirm until the block ends."""
    tally = Tally()
    original = pixels.confirm

    def confirm(document: Any, emails: Sequence[str], shown: Sequence[str]) -> list[pixels.Check]:
        started = time.process_time()
        checks = original(document, emails, shown)
        tally.seconds += time.process_time() - started
        tally.calls += 1
        for check in checks:
            if check.email in shown:
                tally.checked += 1
                if check.seen not in (pixels.Seen.READ, pixels.Seen.LIKE):
                    tally.refused.append(check.seen.value)
        return checks

    pixels.confirm = confirm
    try:
        yield tally
    finally:
        pixels.confirm = original
