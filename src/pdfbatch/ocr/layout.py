"""OCR lines with their boxes -> text whose line breaks say whether an address may run across them.

A text layer without glyph positions is read with pdf.emails' conservative rule: an address starting a
line right after a line that ends in local-part characters may be the tail of a wrapped one
(``maria.`` / ``lopez@gmail.com``), so it is no candidate. Tesseract's plain text is such a text, and a
résumé header is full of such lines ("Software Engineer" / "jane@example.com"), so that rule alone
refused most scanned addresses. But Tesseract knows where its lines are; this module applies the
layout half of the rule that pdf/glyphs.py applies to text pages, with line boxes instead of glyph
boxes, and writes each verdict into the break:

- END (the top line ends its word: it ends early in its paragraph, ends a paragraph, or its last word
  is a word of letters after other words, "please write to" / "jane@..."): a space before the line
  break, so no rule reads the two lines as one word;
- JOIN (a full line holding nothing but the head, a word too long for the column; or a domain ending in
  a dot, "maria@gmail." / "com"): the lines are joined, so the whole address is the candidate;
- UNSURE (any other head after other words on a full line, ``Contact: maria.`` / ``lopez@...``): a
  bare line break, which pdf.emails refuses, so neither fragment is a candidate.

Pure: the engine adapter (engine.Tesseract) lists the lines; the tests build them by hand.
"""

from __future__ import annotations

from dataclasses import dataclass

from pdfbatch.pdf.emails import is_domain_char, is_local_char

# The top line is full when one more character (about half the line's height wide) would not have fitted
# before its paragraph's right edge.
_NEXT_CHAR = 0.5


@dataclass(frozen=True)
class Line:
    """One line as the engine read it: its text (no newline) and box in pixels (y grows downwards)."""

    text: str
    left: int
    top: int
    right: int
    bottom: int
    paragraph: int  # lines of one paragraph share it


def layout_text(lines: list[Line]) -> str:
    """The text of ``lines`` in order, each break written as its verdict (see the module docstring)."""
    out: list[str] = []
    for i, line in enumerate(lines):
        out.append(line.text)
        if i + 1 < len(lines):
            out.append(_break(lines, i))
    return "".join(out) + ("\n" if lines else "")


END, JOIN, UNSURE = " \n", "", "\n"


def _break(lines: list[Line], i: int) -> str:
    top, bottom = lines[i], lines[i + 1]
    text = top.text.rstrip()
    if top.paragraph != bottom.paragraph:
        return END + "\n"
    if not text or not bottom.text:
        return END
    if "@" in text:
        return _domain_break(text, bottom)
    if not is_local_char(text[-1]):
        return END
    edge = max(line.right for line in lines if line.paragraph == top.paragraph)
    if top.right + _NEXT_CHAR * (top.bottom - top.top) < edge:
        return END  # a line that ends early ends its word: "Email" / "jane@..."
    return _local_break(text)


def _domain_break(text: str, bottom: Line) -> str:
    domain = text.rsplit("@", 1)[1]
    if domain.endswith(".") and all(is_domain_char(c) for c in domain) and is_domain_char(bottom.text[0]):
        return JOIN  # "maria@gmail." / "com": nothing else can follow a dot
    return END


def _local_break(text: str) -> str:
    """The break after a full line ending in local-part characters."""
    head = text.rsplit(None, 1)[-1]
    if head != text.lstrip():
        # a word wrapped before the address ("... write to" / "jane@..."), or "Contact: maria." /
        # "lopez@...", where neither reading is sure
        return END if head.isalpha() else UNSURE
    if all(is_local_char(c) for c in head):
        return JOIN  # the whole line is the head: a word too long for the column, broken by the layout
    return UNSURE
