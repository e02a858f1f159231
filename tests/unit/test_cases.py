"""Every case of tests/fixtures/cases.py as a test of its own (over fakes), and docs/CASES.md kept in step."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes import FakeLedger
from fixtures import cases
from fixtures.pipeline import assert_counters_match_ledger
from pdfbatch.services.deps import Deps

DOC = Path(__file__).resolve().parents[2] / "docs" / "CASES.md"


# A parser that never finishes is stopped at its time budget (seconds): `make fast` leaves that case out.
_SLOW_CASES = {"parser_never_finishes"}


@pytest.mark.parametrize(
    "case",
    [pytest.param(c, marks=[pytest.mark.slow] if c.name in _SLOW_CASES else []) for c in cases.ENTRY_CASES],
    ids=lambda c: c.name,
)
def test_entry_case_ends_with_its_outcome_and_the_batch_goes_on(deps: Deps, case: cases.EntryCase) -> None:
    # GIVEN a ZIP holding the case's entries followed by an ordinary résumé
    assert isinstance(deps.ledger, FakeLedger)
    # WHEN it is staged and every message processed
    observed, statuses, _ = cases.run_entry_cases(deps, [case], cases.use_fake_table)
    # THEN each entry has the case's outcome, reason and link, the résumé after it is linked,
    assert cases.mismatches(case, observed[case.name]) == []
    assert observed["after_the_cases"][0].outcome == "linked"
    # AND the batch completed with counters equal to the ledger
    for status in statuses:
        assert_counters_match_ledger(deps, status["batchId"])
        assert status["status"] == "COMPLETED"


@pytest.mark.parametrize("case", cases.ARCHIVE_CASES, ids=lambda c: c.name)
def test_unreadable_upload_fails_the_batch_with_its_reason(deps: Deps, case: cases.ArchiveCase) -> None:
    status = cases.run_archive_case(deps, case)
    assert (status["status"], status["reason"], status["totalFiles"]) == ("FAILED", case.reason, None)


def test_docs_cases_md_is_generated_from_this_registry() -> None:
    # GIVEN what a passing pipeline run observes (tests/integration/test_cases.py checks it does)
    expected = cases.render(cases.expected_entries(), cases.expected_archives())
    # THEN docs/CASES.md is exactly its rendering
    assert DOC.read_text(encoding="utf-8") == expected, "docs/CASES.md is out of date: run `make cases`"


def test_every_outcome_of_the_registry_is_a_known_reason() -> None:
    from pdfbatch.model import REASON_OUTCOME

    for case in cases.ENTRY_CASES:
        for entry in case.entries:
            assert REASON_OUTCOME[entry.reason] == entry.outcome, (case.name, entry.name)


def test_every_proof_names_a_test_that_exists() -> None:
    tests = DOC.parents[1] / "tests"
    for case in (*cases.ENTRY_CASES, *cases.ARCHIVE_CASES, *cases.UPLOAD_CASES):
        path, name = case.proof.split("::")
        assert f"def {name}(" in (tests / path).read_text(encoding="utf-8"), case.name
