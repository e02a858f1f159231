"""Résumés printed by a real producer (Chromium's print-to-PDF, fixtures/chromium.py) against issue 16's
rule: scanned alone, then all together through the real pipeline (MariaDB, Redis; moto S3/SQS)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pytest

from fixtures import cases, chromium
from fixtures.pipeline import assert_counters_match_ledger
from pdfbatch import pdf
from plugins.services import add_users

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class User:
    id: int
    email: str


@pytest.fixture(scope="session")
def printed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Every résumé of fixtures/chromium.py, printed once per session."""
    directory: Path = tmp_path_factory.mktemp("chromium")
    return chromium.print_pdfs({r.name: r.body for r in chromium.resumes()}, directory)


def _text(data: bytes) -> str:
    doc = pdfium.PdfDocument(data)
    try:
        return str(doc[0].get_textpage().get_text_range())
    finally:
        doc.close()


@pytest.mark.parametrize("resume", chromium.resumes(), ids=lambda r: r.name)
def test_a_chromium_resume_is_linked_to_the_one_user_it_visibly_names(
    printed: dict[str, bytes], resume: chromium.Resume
) -> None:
    # GIVEN a résumé Chromium printed, and users for its address and the fragments a wrong reading gives
    data = printed[resume.name]
    users = [User(i, email) for i, email in enumerate(resume.users, start=1)]

    def lookup(candidates: Sequence[str]) -> list[User]:
        return [u for u in users if u.email in candidates]

    # WHEN scanned
    result = pdf.scan(data, lookup, max_pages=5, budget_seconds=30)
    # THEN it ends as the document says, linked to its owner or to nobody
    assert (result.reason, result.email) == (resume.reason, resume.linked)


def test_the_chromium_resumes_really_break_the_address_the_ways_they_claim(printed: dict[str, bytes]) -> None:
    # The canaries: without them the test above could pass on documents that hide nothing.
    assert re.search(r"\r\n", _text(printed["narrow_column"]).split("Maria Lopez")[0].split("CONTACT")[-1])
    assert " @ " in _text(printed["letter_spaced"])  # pdfium's generated spaces between tracked glyphs
    assert _text(printed["hidden_victim"]).count("victim@") >= 2  # hidden, yet in the text layer
    assert "@" not in _text(printed["mailto_only"])
    doc = pdfium.PdfDocument(printed["mailto_only"])
    try:
        assert any("mailto:" in (link.get("uri") or "") for link in _links(doc))
    finally:
        doc.close()


def _links(doc: pdfium.PdfDocument) -> list[dict[str, str]]:
    import ctypes

    import pypdfium2.raw as pdfium_c

    page = doc[0]
    out = []
    pos, link = ctypes.c_int(0), pdfium_c.FPDF_LINK()
    while pdfium_c.FPDFLink_Enumerate(page.raw, ctypes.byref(pos), ctypes.byref(link)):
        action = pdfium_c.FPDFLink_GetAction(link)
        if action:
            size = pdfium_c.FPDFAction_GetURIPath(doc.raw, action, None, 0)
            buffer = ctypes.create_string_buffer(size)
            pdfium_c.FPDFAction_GetURIPath(doc.raw, action, buffer, size)
            out.append({"uri": buffer.value.decode("latin-1")})
    return out


def test_the_chromium_resumes_through_the_pipeline_end_as_the_rule_says(
    deps: Any, db: Any, printed: dict[str, bytes]
) -> None:
    # GIVEN one ZIP of every printed résumé and the users each names (fragments and decoys included)
    entry_cases = [
        cases.EntryCase(
            name=r.name,
            title=r.name,
            rule="issue 16",
            entries=(
                cases.Entry(
                    f"{r.name}.pdf",
                    lambda data=printed[r.name]: data,
                    outcome="linked" if r.linked else "skipped_no_match",
                    reason=r.reason,
                    user=r.linked or r.users[0],
                ),
            ),
            proof="",
            users=r.users,
        )
        for r in chromium.resumes()
    ]
    # WHEN staged and processed over the real MySQL and Redis
    observed, statuses, _ = cases.run_entry_cases(
        deps, entry_cases, lambda _deps, _shape: lambda e: add_users(db, e)[e]
    )
    # THEN each ends with its outcome and link, and the batch completed with counters equal to the ledger
    assert [p for case in entry_cases for p in cases.mismatches(case, observed[case.name])] == []
    for status in statuses:
        assert status["status"] == "COMPLETED"
        assert_counters_match_ledger(deps, status["batchId"])
