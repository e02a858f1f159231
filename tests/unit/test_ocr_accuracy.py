"""The OCR lane's accuracy as a property over generated scans (the real engine, through its worker):
at least 95% of scanned résumés are linked to their owner, and a scan is never linked to anyone else."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from fixtures import scans
from pdfbatch import ocr
from pdfbatch.model import Reason

# Thirty scans through Tesseract (~40 s): `make fast` leaves it to `make unit`.
pytestmark = pytest.mark.slow

PER_DPI = 10  # 30 scans: 150, 200 and 300 dpi, every layout (header, lower on page 1, page 2)


@pytest.mark.timeout(900)  # a hang guard; the run takes ~1 s of CPU per scan
def test_scanned_resumes_are_linked_to_their_owner_and_nobody_else() -> None:
    # GIVEN generated scans of résumés and a users table holding every owner
    docs = scans.scan_set(PER_DPI, seed=5)
    users = {d.email: i for i, d in enumerate(docs)}

    def lookup(candidates: Sequence[str]) -> Mapping[str, int]:
        return {c: users[c] for c in candidates if c in users}

    engine = ocr.Tesseract()
    # WHEN each is read by the lane's engine, in its worker, with the default page limit (and a budget
    # far above the default: the budget is wall time, and this property is about reading, not a busy CPU)
    results = [ocr.scan(d.data, lookup, engine=engine, budget_seconds=600) for d in docs]
    # THEN no scan is linked to another person's address
    wrong = [(d.name, r.match) for d, r in zip(docs, results, strict=True) if r.email not in (None, d.email)]
    assert wrong == []
    # AND at least 95% are linked to their owner, at every layout the set has
    linked = [r.reason == Reason.MATCHED for r in results]
    assert sum(linked) / len(docs) >= 0.95, [d.name for d, ok in zip(docs, linked, strict=True) if not ok]
    assert {d.where for d in docs} == {"header", "lower", "page2"}
