"""Annotations as a viewer draws them (issue 26, class 4): a free-text annotation or form field flagged
NoView or Hidden is never drawn, so never read, even on a page whose form fields are flattened into its
content; a free-text annotation a viewer shows is read like the page's text.

The PDFs are written by hand (tests/fixtures/annots.py): the flags and appearance streams are the point.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from fixtures.annots import HIDDEN, NO_VIEW, PRINT, annotated
from pdfbatch import pdf
from pdfbatch.model import Reason


@dataclass(frozen=True)
class User:
    id: int
    email: str


def users(*emails: str) -> pdf.Lookup[User]:
    rows = [User(i, e) for i, e in enumerate(emails, start=1)]
    return lambda candidates: [r for r in rows if r.email in candidates]


def linked(data: bytes, *emails: str) -> str | None:
    found = pdf.scan(data, users(*emails), max_pages=5, budget_seconds=20)
    return found.email if found.reason == Reason.MATCHED else None


@pytest.mark.parametrize("flag", [NO_VIEW, HIDDEN, NO_VIEW | PRINT], ids=["noview", "hidden", "noview-print"])
@pytest.mark.parametrize("where", ["freetext", "field"])
def test_an_annotation_a_viewer_never_draws_is_not_read_on_a_page_with_form_fields(
    flag: int, where: str
) -> None:
    # GIVEN a page with a visible form field (so its fields are flattened into the page), and the victim's
    # address in a free-text annotation or a second field that a viewer never draws
    victim = "victim@example.com"
    shown = ("Reference 4711", PRINT)
    data = (
        annotated(freetext=(victim, flag), fields=[shown])
        if where == "freetext"
        else annotated(fields=[shown, (victim, flag)])
    )
    # WHEN the text lane reads it  THEN the victim is never linked
    assert linked(data, victim) is None


@pytest.mark.parametrize("fields", [[], [("Reference 4711", PRINT)]], ids=["alone", "with-a-field"])
def test_a_free_text_annotation_a_viewer_shows_is_read(fields: list[tuple[str, int]]) -> None:
    # GIVEN a page whose only address is in a free-text annotation a viewer shows
    owner = "ada@example.com"
    data = annotated(freetext=(f"Email: {owner}", PRINT), fields=fields)
    # WHEN the text lane reads it  THEN its address is a candidate, and the owner is linked
    assert linked(data, owner) == owner


def test_a_field_a_viewer_shows_is_still_read() -> None:
    owner = "ada@example.com"
    assert linked(annotated(fields=[(owner, PRINT)]), owner) == owner
