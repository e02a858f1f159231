"""OCR line breaks carry the layout's verdict (ocr/layout.py): whole addresses, never fragments."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdfbatch.ocr.layout import Line, layout_text
from pdfbatch.pdf import find_emails

H = 20  # line height in pixels


def lines(*rows: tuple[str, int, int]) -> list[Line]:
    """(text, right edge, paragraph) per row, stacked from the top, all starting at x=100."""
    return [
        Line(text, 100, 100 + 30 * i, right, 100 + 30 * i + H, para)
        for i, (text, right, para) in enumerate(rows)
    ]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        # a title above the address, as wide as the block: a word of letters after other words
        ((("Software Engineer", 500, 0), ("jane@example.com", 420, 0)), ["jane@example.com"]),
        # a label on a short line of its own
        ((("Email", 160, 0), ("jane@example.com", 420, 0)), ["jane@example.com"]),
        # a paragraph ends above the address
        ((("Contact: maria.", 500, 0), ("jane@example.com", 420, 1)), ["jane@example.com"]),
        # a word too long for the column, broken by the layout: the whole address
        ((("maria.", 300, 0), ("lopez@gmail.com", 290, 0)), ["maria.lopez@gmail.com"]),
        # other words before a head that looks like part of an address: neither reading
        ((("Contact: maria.", 500, 0), ("lopez@gmail.com", 420, 0)), []),
        # the domain broken after a dot
        ((("maria@gmail.", 300, 0), ("com", 160, 0)), ["maria@gmail.com"]),
        # a complete address ending a line, a word below
        ((("maria@gmail.com", 300, 0), ("Phone", 180, 0)), ["maria@gmail.com"]),
    ],
)
def test_a_break_is_read_as_the_layout_says(
    rows: tuple[tuple[str, int, int], ...], expected: list[str]
) -> None:
    assert find_emails(layout_text(lines(*rows))) == expected


_WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=8)
_HEAD = st.builds(lambda a, sep, b: a + sep + b, _WORD, st.sampled_from([".", "_", "-", "1", ""]), _WORD)


@given(
    words=st.lists(_WORD, max_size=3),
    head=_HEAD,
    tail=_WORD,
    top_right=st.integers(110, 600),
    bottom_right=st.integers(110, 600),
    same_paragraph=st.booleans(),
)
def test_a_wrapped_address_yields_the_whole_address_or_nothing_never_the_tail_of_a_fragment(
    words: list[str], head: str, tail: str, top_right: int, bottom_right: int, same_paragraph: bool
) -> None:
    # GIVEN a line ending in a head fragment above a line starting with "tail@example.org"
    top = " ".join([*words, head])
    found = find_emails(
        layout_text(
            lines((top, top_right, 0), (f"{tail}@example.org", bottom_right, int(not same_paragraph)))
        )
    )
    # THEN the candidates are the whole address, the tail's own address, or nothing
    whole, own = f"{head}{tail}@example.org", f"{tail}@example.org"
    assert set(found) <= {whole, own}
    full = top_right + H // 2 >= max(top_right, bottom_right)
    if same_paragraph and full and not (words and head.isalpha()):
        # AND where the top line is full and its last word could be the head of the address, the tail
        # alone is never a candidate (it may be someone else's address)
        assert own not in found
