"""Every bad-input case at once through the real pipeline (MariaDB, Redis; moto S3/SQS); writes docs/CASES.md.

`make cases` runs this file with PDFBATCH_WRITE_CASES=1, which rewrites docs/CASES.md from what the run
observed; tests/unit/test_cases.py checks the file against the registry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from fixtures import cases
from fixtures.pipeline import assert_counters_match_ledger, ledger_rows
from plugins.services import add_users

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "CASES.md"


def test_one_zip_of_every_bad_entry_ends_with_its_outcome_and_the_batch_completes(deps: Any, db: Any) -> None:
    # GIVEN one ZIP holding every entry case, then an ordinary résumé, and the users they name
    # WHEN it is staged and every message processed over the real MySQL and Redis
    observed, status, rows = cases.run_entry_cases(deps, cases.ENTRY_CASES, lambda e: add_users(db, e)[e])
    # AND each unreadable upload is staged on its own
    archives = {case.name: cases.run_archive_case(deps, case) for case in cases.ARCHIVE_CASES}
    if os.environ.get("PDFBATCH_WRITE_CASES") == "1":
        DOC.write_text(cases.render(observed, archives), encoding="utf-8")

    # THEN every entry has its case's outcome, reason, link and pages read
    problems = [p for case in cases.ENTRY_CASES for p in cases.mismatches(case, observed[case.name])]
    assert problems == []
    assert observed["after_the_cases"][0].outcome == "linked"
    # AND the batch completed, its counters equal to the ledger
    assert status["status"] == "COMPLETED"
    assert status["processed"] == status["totalFiles"] == sum(1 for r in rows if r.kind == "pdf")
    assert_counters_match_ledger(deps, status["batchId"])
    # AND every entry name (unicode, backslashes, `..`, cp437, a lying UTF-8 flag) round-trips through the
    # MySQL ledger
    expected_names = [e.shown for case in cases.ENTRY_CASES for e in case.entries]
    stored = [r["entry_name"] for r in ledger_rows(db, status["batchId"])]
    assert stored == [*expected_names, "after-the-cases.pdf"]
    # AND each unreadable upload failed its batch with its reason
    assert {n: (s["status"], s.get("reason")) for n, s in archives.items()} == {
        n: (s["status"], s["reason"]) for n, s in cases.expected_archives().items()
    }
    # AND the observations are what docs/CASES.md shows
    assert cases.render(observed, archives) == cases.render(
        cases.expected_entries(), cases.expected_archives()
    )
