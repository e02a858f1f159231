"""Annotations as a viewer draws them (issue 26, class 4): a free-text annotation or form field flagged
NoView or Hidden is never drawn, so never read, even on a page whose form fields are flattened into its
content; a free-text annotation a viewer shows is read like the page's text.

The PDFs are written by hand here (the annotation's flags and appearance stream are the point).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from fixtures.pdfs import assemble
from pdfbatch import pdf
from pdfbatch.model import Reason

PRINT, HIDDEN, NO_VIEW = 4, 2, 32
FONT = b"<< /Font << /F1 3 0 R >> >>"


@dataclass(frozen=True)
class User:
    id: int
    email: str


def users(*emails: str) -> pdf.Lookup[User]:
    rows = [User(i, e) for i, e in enumerate(emails, start=1)]
    return lambda candidates: [r for r in rows if r.email in candidates]


def _stream(dictionary: bytes, data: bytes) -> bytes:
    return b"<< %s /Length %d >>\nstream\n%s\nendstream" % (dictionary, len(data), data)


def annotated(
    freetext: tuple[str, int] | None = None,
    fields: Sequence[tuple[str, int]] = (),
    body: str = "Ada Lovelace",
) -> bytes:
    """One A4 page showing ``body``, with a free-text annotation (text, flags) and text form fields
    ((value, flags), each with an appearance stream that draws its text)."""
    objects: list[bytes] = [b"", b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>"]
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>")
    objects.append(b"")  # the page, 4
    content = b"BT /F1 11 Tf 50 780 Td (%s) Tj ET" % body.encode()
    objects.append(_stream(b"", content))  # 5
    annots: list[int] = []
    widgets: list[int] = []

    def add(body: bytes) -> int:
        objects.append(body)
        return len(objects)

    def appearance(text: str) -> int:
        return add(
            _stream(
                b"/Type /XObject /Subtype /Form /BBox [0 0 300 20] /Resources " + FONT,
                b"BT /F1 11 Tf 0 g 2 5 Td (%s) Tj ET" % text.encode(),
            )
        )

    y = 700
    if freetext is not None:
        text, flags = freetext
        ap = appearance(text)
        annots.append(
            add(
                b"<< /Type /Annot /Subtype /FreeText /Rect [50 %d 350 %d] /F %d /Contents (%s)"
                b" /DA (/F1 11 Tf 0 g) /AP << /N %d 0 R >> >>" % (y, y + 20, flags, text.encode(), ap)
            )
        )
    for n, (value, flags) in enumerate(fields):
        y -= 60
        ap = appearance(value)
        widget = add(
            b"<< /Type /Annot /Subtype /Widget /FT /Tx /T (field%d) /V (%s) /F %d /P 4 0 R"
            b" /Rect [50 %d 350 %d] /DA (/F1 11 Tf 0 g) /AP << /N %d 0 R >> >>"
            % (n, value.encode(), flags, y, y + 20, ap)
        )
        annots.append(widget)
        widgets.append(widget)
    refs = b" ".join(b"%d 0 R" % a for a in annots)
    objects[3] = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 5 0 R /Resources %s /Annots [%s] >>"
        % (FONT, refs)
    )
    form = b""
    if widgets:
        form = b" /AcroForm << /Fields [%s] /DA (/F1 0 Tf 0 g) /DR %s >>" % (
            b" ".join(b"%d 0 R" % w for w in widgets),
            FONT,
        )
    objects[0] = b"<< /Type /Catalog /Pages 2 0 R%s >>" % form
    return assemble(objects)


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
