"""Issue 16's rule attacked one case at a time: an address counts only if a person sees it, whole, and a
page naming two users links nobody. Documents come from fixtures/layouts.py (raw PDF) and fpdf2."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from fixtures import layouts, pdfs
from pdfbatch import pdf
from pdfbatch.model import Reason
from pdfbatch.pdf import glyphs

LIBREOFFICE = Path(__file__).parents[2] / "bench" / "corpus" / "libreoffice"


@dataclass(frozen=True)
class User:
    id: int
    email: str


class Users:
    """The users table; records every lookup."""

    def __init__(self, *emails: str) -> None:
        self.rows = [User(i, e) for i, e in enumerate(emails, start=1)]
        self.calls: list[list[str]] = []

    def __call__(self, candidates: Sequence[str]) -> list[User]:
        self.calls.append(list(candidates))
        return [r for r in self.rows if r.email in candidates]


def linked(data: bytes, *emails: str) -> str | None:
    """The address of the user ``data`` is linked to, when ``emails`` are the users."""
    result = pdf.scan(data, Users(*emails), max_pages=10, budget_seconds=20)
    return result.email if result.reason == Reason.MATCHED else None


def scanned(data: bytes, *emails: str) -> pdf.Scan[User]:
    return pdf.scan(data, Users(*emails), max_pages=10, budget_seconds=20)


# --- visible -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", layouts.HIDING)
def test_a_hidden_address_is_never_a_candidate(how: str) -> None:
    # GIVEN a victim's address drawn so nobody sees it, above the owner's visible one (both users)
    data = layouts.hidden_above("victim@example.com", "owner@example.com", how)
    # WHEN scanned  THEN the owner is linked: the hidden address did not even make the page ambiguous
    assert linked(data, "victim@example.com", "owner@example.com") == "owner@example.com"
    # AND with the victim alone a user, nobody is linked
    assert linked(data, "victim@example.com") is None


@pytest.mark.parametrize("how", ["white_on_white", "covered", "clipped", "background", "transparent"])
def test_what_only_rendering_can_tell_is_checked_only_for_addresses_of_users(how: str) -> None:
    # GIVEN a page whose hidden address passes the cheap checks (render mode, size, crop box)
    data = layouts.hidden_above("victim@example.com", "owner@example.com", how)
    # WHEN nobody on it is a user  THEN nothing is rendered (the render check costs nothing)
    result = scanned(data)
    assert (result.reason, result.visibility_seconds) == (Reason.NO_USER, 0.0)
    # AND when the victim is a user, rendering finds the address shows no ink: the text layer named a
    # user the pixels do not show (issue 26: not_shown, where it was no_user); a fill alpha of zero is
    # seen by the cheap checks (never a candidate), so that one stays no_user
    expected = Reason.NO_USER if how == "transparent" else Reason.NOT_SHOWN
    assert scanned(data, "victim@example.com").reason == expected


def test_a_user_hidden_on_page_one_and_visible_on_page_two_is_found_on_page_two() -> None:
    # GIVEN the user's address invisible (render mode 3) on page 1 and visible on page 2
    pages = [
        layouts.Page(tuple(layouts.hide(layouts.line(50, 700, "jane@example.com"), "white_on_white"))),
        layouts.Page((layouts.line(50, 700, "Contact: jane@example.com"),)),
    ]
    users = Users("jane@example.com")
    # WHEN scanned
    result = pdf.scan(layouts.document(pages), users, max_pages=10, budget_seconds=20)
    # THEN page 2 decided, and the address was looked up once
    assert (result.reason, result.page, result.pages_read) == (Reason.MATCHED, 2, 2)
    assert users.calls == [["jane@example.com"]]


def test_a_partly_hidden_address_is_not_a_candidate() -> None:
    # GIVEN "maria.lopez@…" whose "maria." is under a white rectangle: a person reads "lopez@…"
    full = layouts.line(50, 650, "maria.lopez@example.com")
    cover = layouts.Rect(48, 645, layouts.width("maria.") + 1, 14)
    data = layouts.resume(full, cover)
    # WHEN scanned THEN neither is linked: not every glyph of the address shows
    assert linked(data, "maria.lopez@example.com", "lopez@example.com") is None


def test_a_filled_form_field_counts_as_text_unless_hidden() -> None:
    # GIVEN the address only as a form field's value: with its appearance stream, without one (the form
    # asks viewers to draw it: NeedAppearances), and in a field flagged hidden
    shown = layouts.form("applicant@example.com")
    drawn_by_viewer = layouts.form("applicant@example.com", appearance=False)
    hidden = layouts.form("applicant@example.com", hidden=True)
    # THEN a field a viewer shows is text, a hidden one is not
    assert linked(shown, "applicant@example.com") == "applicant@example.com"
    assert linked(drawn_by_viewer, "applicant@example.com") == "applicant@example.com"
    assert linked(hidden, "applicant@example.com") is None


def test_text_at_four_points_is_read_and_below_is_not() -> None:
    for size, expected in ((4.0, "small@example.com"), (3.5, None)):
        data = layouts.resume(layouts.line(50, 650, "small@example.com", size))
        assert linked(data, "small@example.com") == expected


# --- whole -------------------------------------------------------------------------------------------


def test_an_address_wrapped_after_a_dot_is_read_whole_never_its_tail() -> None:
    # GIVEN "maria." / "lopez@gmail.com" (a box too narrow for the address), both users
    data = layouts.wrapped("maria.lopez@gmail.com", len("maria."))
    # WHEN scanned  THEN the whole address; with only the tail a user, nobody
    assert linked(data, "lopez@gmail.com", "maria.lopez@gmail.com") == "maria.lopez@gmail.com"
    assert linked(data, "lopez@gmail.com") is None


@pytest.mark.parametrize("after", range(1, len("maria.lopez@gmail.com")))
def test_an_address_broken_anywhere_by_a_narrow_box_is_read_whole(after: int) -> None:
    data = layouts.wrapped("maria.lopez@gmail.com", after)
    assert linked(data, "maria.lopez@gmail.com", "lopez@gmail.com", "maria.lopez@gmail.co") == (
        "maria.lopez@gmail.com"
    )


def test_a_domain_cut_at_the_line_end_is_joined_when_the_joined_label_is_a_tld() -> None:
    data = layouts.wrapped("maria.lopez@gmail.com", len("maria.lopez@gmail.co"))
    assert linked(data, "maria.lopez@gmail.co", "maria.lopez@gmail.com") == "maria.lopez@gmail.com"
    assert linked(data, "maria.lopez@gmail.co") is None


def test_an_address_ending_a_line_is_not_joined_to_the_next_line() -> None:
    # GIVEN contact lines: the address line is the widest, the next starts with a word or a domain
    for following in ("Phone: +33 6 12 34 56 78", "linkedin.com/in/maria", "Paris, France"):
        data = layouts.resume(
            layouts.line(50, 650, "maria.lopez@gmail.com"), layouts.line(50, 636, following, 11)
        )
        assert linked(data, "maria.lopez@gmail.com") == "maria.lopez@gmail.com", following


@pytest.mark.parametrize(
    ("head", "tail", "whole"),
    [
        ("jane@sd.wf", "tkge.info", "jane@sd.wftkge.info"),  # .wf is a TLD: a domain broken after it
        ("Reach me at jane@x.ar", "0.com.", "jane@x.ar0.com"),  # digits, and a sentence's full stop
    ],
)
def test_a_complete_domain_ending_a_full_line_above_more_labels_links_nobody(
    head: str, tail: str, whole: str
) -> None:
    # GIVEN a full line ending in a complete domain, the next line going on in lower case or digits to
    # a real TLD: a layout breaking "jane@sd.wftkge.info" after "sd.wf" draws exactly this (the wrap
    # invariance property, every head and tail a user, found both shapes linking the head)
    data = layouts.resume(layouts.line(50, 650, head), layouts.line(50, 636.8, tail))
    # WHEN scanned with either reading a user, or both  THEN nobody, and the reason says why
    separate = head.rsplit(" ", 1)[-1]
    for users in ([separate], [separate, whole], [whole]):
        result = scanned(data, *users)
        assert (result.reason, result.match) == (Reason.AMBIGUOUS_WRAP, None), users


@pytest.mark.parametrize("web", ["www.jane.info", "linkedin.com/in/jane"])
def test_an_address_ending_a_full_line_above_a_web_address_is_read(web: str) -> None:
    # GIVEN a contact block whose widest line is the address, a web address below it
    data = layouts.resume(layouts.line(50, 650, "jane@gmail.com"), layouts.line(50, 636.8, web))
    # THEN the address: no domain goes on with "www." or a path
    assert linked(data, "jane@gmail.com", "jane@gmail.comwww.jane.info") == "jane@gmail.com"


def test_a_label_on_the_line_above_an_address_is_not_part_of_it() -> None:
    # GIVEN "Email" (no colon) on its own line above the address, in a block of wider lines
    data = layouts.resume(
        layouts.line(50, 650, "Email"),
        layouts.line(50, 636, "jane@example.com"),
        layouts.line(50, 622, "Phone: +33 6 12 34 56 78 (mobile)"),
    )
    assert linked(data, "jane@example.com", "emailjane@example.com") == "jane@example.com"


def test_a_wrapped_head_after_other_words_gives_no_candidate_rather_than_a_tail() -> None:
    # GIVEN "Please contact: maria." filling its box and "lopez@gmail.com" below (CSS word-break:
    # break-all breaks anywhere, so a head can follow other words)
    head, tail = "Please contact: maria.", "lopez@gmail.com"
    box = layouts.width(head) + 2
    assert layouts.width(head + tail[0]) > box >= layouts.width(tail)
    data = layouts.resume(layouts.line(50, 650, head), layouts.line(50, 636, tail))
    # THEN the tail is never linked
    assert linked(data, "lopez@gmail.com") is None


@pytest.mark.parametrize(
    "following",
    [
        "I look forward to hearing from you.",
        "+1 555 0100",
        "Phone: +33 6 12 34 56 78",
        "Regards,",
        "Me",
    ],
)
def test_an_address_ending_a_sentence_on_its_own_line_is_read(following: str) -> None:
    # GIVEN the commonest sentence of a cover letter on its own line, any line after it (issue 22)
    data = layouts.resume(
        layouts.line(50, 650, "Reach me at oscar.wu@example.org."), layouts.line(50, 636, following)
    )
    # WHEN scanned  THEN the full stop ends the address: oscar is linked
    assert scanned(data, "oscar.wu@example.org").reason == Reason.MATCHED
    assert linked(data, "oscar.wu@example.org") == "oscar.wu@example.org"


def test_a_full_stop_that_may_also_be_a_wrap_links_nobody_and_says_so() -> None:
    # GIVEN the address ending a full line, a lone lower-case TLD below ("...example.org." / "com")
    data = layouts.resume(
        layouts.line(50, 650, "Reach me at oscar.wu@example.org."), layouts.line(50, 636, "com")
    )
    # WHEN scanned with one reading a user  THEN nobody, and the reason says why
    for users in (
        ["oscar.wu@example.org"],
        ["oscar.wu@example.org.com"],
        ["oscar.wu@example.org", "oscar.wu@example.org.com"],
    ):
        result = scanned(data, *users)
        assert (result.reason, result.match) == (Reason.AMBIGUOUS_WRAP, None), users
    # AND with neither a user: no_user
    assert scanned(data, "someone@example.org").reason == Reason.NO_USER


def test_the_tail_of_a_head_in_a_narrow_sidebar_is_never_linked() -> None:
    # GIVEN a narrow sidebar: "Email: firstname." (a short line) above "lastname@domain.com" (issue 22)
    head, tail = "Email: firstname.", "lastname@domain.com"
    assert layouts.width(head + tail[0]) < layouts.width(tail)  # the head's line ended early
    data = layouts.resume(
        layouts.line(50, 650, "Profile"),
        layouts.line(50, 636, head),
        layouts.line(50, 622, tail),
        layouts.line(50, 608, "+1 555 0100"),
    )
    # WHEN scanned with the tail a user  THEN nobody is linked (the head could start the address)
    assert linked(data, "lastname@domain.com") is None
    # AND the whole address is the owner's
    assert (
        linked(data, "lastname@domain.com", "firstname.lastname@domain.com")
        == "firstname.lastname@domain.com"
    )


@pytest.mark.parametrize(
    ("head", "tail"),
    [
        ("Email: a", "0.a@example.com"),  # after words (CSS word-break: break-all)
        ("at mgc-vhzhh8", "0yf.vswx429@example.com"),
        ("(a00", "0.a@example.com"),  # glued to an opening parenthesis (fpdf2 in a 30 pt cell)
    ],
)
def test_a_head_that_fills_its_line_after_other_words_never_leaves_its_tail_alone(
    head: str, tail: str
) -> None:
    # GIVEN a layout that breaks anywhere: the head's line is full (the tail's first glyph and the
    # full stop after it would not have fitted), the tail below broken as many glyphs as fit
    box = layouts.width(head) + 2
    assert layouts.width(head + tail[:2]) > box
    data = layouts.resume(layouts.line(50, 650, head), *layouts.wrap(50, 636.8, tail, box))
    whole = head.rsplit(" ", 1)[-1].lstrip("(") + tail
    # WHEN scanned with the tail a user  THEN nobody: the head could start the address
    assert linked(data, tail) is None
    # AND with the whole address a user too: the whole
    assert linked(data, tail, whole) == whole


@pytest.mark.parametrize(
    "head",
    ["I look forward to it; please write to", "Mobile: +1 555 0100 0100", "Contact me any time by E-mail"],
)
def test_a_word_filling_its_line_before_an_address_ends_its_line(head: str) -> None:
    # GIVEN a full line ending in a word, a number or a label, the address below (justified text)
    data = layouts.resume(
        layouts.line(50, 650, head), layouts.line(50, 636.8, "jane@example.com"), layouts.line(50, 623.6, "x")
    )
    assert layouts.width(head) > layouts.width("jane@example.com")
    # THEN the address alone: a word is no head of an address
    assert linked(data, "jane@example.com") == "jane@example.com"


def test_a_domain_broken_before_a_hyphen_that_ended_a_line_links_nobody() -> None:
    # GIVEN Chromium's hyphens: auto breaking "c@z.su.xvj-b7u.io" as "c@z.su." / "xvj-" / "b7u.io:"
    # (pdfium reads the hyphen ending a line as U+FFFE and joins the lines itself)
    lines = ["c@z.su.", "xvj-", "b7u.io: to"]
    data = layouts.resume(*(layouts.line(50, 650 - 13.2 * i, t) for i, t in enumerate(lines)))
    # THEN the head whose last label is a TLD (.su) is never linked
    assert linked(data, "c@z.su") is None
    assert scanned(data, "c@z.su", "c@z.su.xvj-b7u.io").reason == Reason.AMBIGUOUS_WRAP


def _across_columns(address: str, box: float, foot: int) -> bytes:
    """Two columns ``box`` points wide: ``address`` broken into lines as many glyphs as fit (as
    overflow-wrap: anywhere breaks it), its first ``foot`` lines at the foot of the left column, the
    rest at the top of the right one (Chromium's ``columns: 2``)."""
    lines = layouts.wrap(50, 500, address, box)
    left = [layouts.line(50, 528, "E-mail"), layouts.line(50, 514, "me at"), *lines[:foot]]
    top = lines[foot].y
    right = [layouts.line(250, r.y - top + 700, r.text) for r in lines[foot:]]
    return layouts.resume(*left, *right, layouts.line(250, right[-1].y - 14, "Best regards"))


_OWNER = "a00000000.a0.a@axxxxxxxxxx.a.com"


# Seconds each (one pixel check per foot): one box width in `make fast`, all of them in `make unit`.
@pytest.mark.parametrize("box", [*(pytest.param(b, marks=pytest.mark.slow) for b in (30, 40, 48, 62)), 75])
def test_an_address_broken_at_a_column_foot_never_links_its_tail_or_head(box: float) -> None:
    # GIVEN the owner's address broken by the layout anywhere, the break at the foot of a column and
    # the rest at the top of the next (CI found "000.a0." / [next column] "a@axxxxxxxxxx.a.com," linked)
    local, domain = _OWNER.split("@")
    decoys = [f"{local[i:]}@{domain}" for i in range(1, len(local))]
    decoys += [f"{local}@{domain[:i]}" for i in range(1, len(domain))]
    lines = len(layouts.wrap(50, 500, _OWNER, box))
    for foot in range(1, lines):
        data = _across_columns(_OWNER, box, foot)
        # WHEN scanned with the owner and every head and tail of the address as users
        # THEN the owner or nobody, never a fragment's user
        assert linked(data, _OWNER, *decoys) in (None, _OWNER), (box, foot)
        # AND with only the fragments as users, nobody
        assert linked(data, *decoys) is None, (box, foot)


def test_a_domain_broken_before_its_last_glyph_and_a_full_stop_is_read_joined() -> None:
    # GIVEN "Reach me at jane@gmail.co" filling its line and "m." below (the sentence's full stop)
    data = layouts.resume(layouts.line(50, 650, "Reach me at jane@gmail.co"), layouts.line(50, 636, "m."))
    # THEN the domain's head alone is never linked; the whole address is
    assert linked(data, "jane@gmail.co") is None
    assert linked(data, "jane@gmail.co", "jane@gmail.com") == "jane@gmail.com"


def test_a_line_is_full_when_the_next_glyph_and_its_full_stop_would_not_have_fitted() -> None:
    # GIVEN "...jane@gmail.co" / "m." in a block whose right edge leaves room for "m" but not for "m."
    # (Chromium's break-all found it: a line never starts with ".", so "m." moves down together)
    head = "Reach me at jane@gmail.co"
    edge = 50 + layouts.width(head + "m") + layouts.width(".") * 0.8
    widest = "Reach me at janeWgmail.com"  # the block's widest line, ending at ``edge``
    data = layouts.resume(
        layouts.line(edge - layouts.width(widest), 664, widest),
        layouts.line(50, 650, head),
        layouts.line(50, 636, "m."),
    )
    # THEN the domain's head alone is never linked; the whole address is
    assert linked(data, "jane@gmail.co") is None
    assert linked(data, "jane@gmail.co", "jane@gmail.com") == "jane@gmail.com"


@pytest.mark.parametrize(
    ("head", "tail", "whole"),
    [
        ("jane@mail.co", "m.au", "jane@mail.com.au"),
        ("jane@cs.ac", "-bonn.de", "jane@cs.ac-bonn.de"),
    ],
)
def test_a_domain_broken_after_a_label_that_is_a_tld_links_nobody(head: str, tail: str, whole: str) -> None:
    # GIVEN a full line ending in a domain whose last label is a real TLD, and the next line going on
    # as a domain ("mail.co" / "m.au", "cs.ac" / "-bonn.de": fpdf2 and Chromium break there)
    data = layouts.resume(layouts.line(50, 650, "Reach me at " + head), layouts.line(50, 636, tail + "."))
    # THEN the head alone is never linked: both readings are plausible, so nobody, and it says why
    for users in ([head], [head, whole], [whole]):
        result = scanned(data, *users)
        assert (result.reason, result.match) == (Reason.AMBIGUOUS_WRAP, None), users


def test_a_domain_broken_after_a_tld_label_and_again_links_nobody() -> None:
    # GIVEN fpdf2 breaking "a.a.a@axxxxxxxxxx.ar-a.com" in a 30 pt cell: "...xx.ar" / "-a.c" / "om."
    doc = pdfs._new_pdf()
    doc.add_page()
    doc.set_xy(50, 50)
    doc.multi_cell(30, 14, "Reach me at a.a.a@axxxxxxxxxx.ar-a.com. I")
    data = bytes(doc.output())
    # THEN the head that ends in a TLD (.ar) is never linked
    assert linked(data, "a.a.a@axxxxxxxxxx.ar") is None
    assert scanned(data, "a.a.a@axxxxxxxxxx.ar", "a.a.a@axxxxxxxxxx.ar-a.com").reason == Reason.AMBIGUOUS_WRAP


def test_an_address_starting_the_next_column_after_a_word_is_read() -> None:
    # GIVEN a column ending with a word ("E-mail") and the next column starting with the address
    data = layouts.resume(
        layouts.line(50, 528, "Please write to me by"),
        layouts.line(50, 514, "E-mail"),
        layouts.line(250, 700, "jane@example.com, I"),
        layouts.line(250, 686, "look forward to it."),
    )
    # THEN the address is read: a word is no head of an address
    assert linked(data, "jane@example.com", "e-mailjane@example.com") == "jane@example.com"


@pytest.mark.parametrize("width", [60, 80, 100, 140])
def test_fpdf2_multi_cell_wraps_are_read_whole(width: int) -> None:
    # GIVEN fpdf2's own multi_cell breaking two addresses in a narrow column (the issue's producer)
    doc = pdfs._new_pdf()
    doc.add_page()
    doc.set_xy(50, 50)
    doc.multi_cell(width, 14, "Contact: maria.lopez@gmail.com or jackson@outlook.com today")
    data = bytes(doc.output())
    users = ("maria.lopez@gmail.com", "lopez@gmail.com", "maria.lopez@gmail.co", "son@outlook.co")
    # WHEN scanned with the whole addresses and their fragments as users
    result = scanned(data, *users, "jackson@outlook.com")
    # THEN the page names exactly the two whole addresses: ambiguous, never a fragment's user
    assert (result.reason, result.users_named) == (Reason.AMBIGUOUS, 2)
    assert linked(data, *users) == "maria.lopez@gmail.com"


def test_a_letter_spaced_address_is_read_without_its_generated_spaces() -> None:
    data = layouts.letter_spaced("jane@example.com")
    assert linked(data, "jane@example.com", "emailjane@example.com") == "jane@example.com"


def test_cjk_text_against_an_address_is_not_part_of_it() -> None:
    data = layouts.cjk_glued("連絡先", "jane@example.jp", "です")
    assert linked(data, "jane@example.jp") == "jane@example.jp"


@pytest.mark.parametrize(
    ("shown", "expected"),
    [
        ("anna [at] example [dot] org", "anna@example.org"),
        ("anna (at) example.org", "anna@example.org"),
        ("anna{at}example{dot}org", "anna@example.org"),
        ("ANNA AT EXAMPLE DOT ORG", "anna@example.org"),
        ("anna at example dot org", None),
        ("I worked at Example dot org", None),
    ],
)
def test_obfuscated_addresses_are_decoded_only_in_unmistakable_forms(
    shown: str, expected: str | None
) -> None:
    assert linked(layouts.text("Email: " + shown), "anna@example.org", "worked@example.org") == expected


def test_a_glyph_nobody_can_read_ends_no_address_into_a_tail() -> None:
    # GIVEN pdfium's characters for "ali?ce@example.com" with an unmapped glyph (NUL)
    page = FakeGlyphs("ali\x00ce@example.com")
    # WHEN read THEN nothing: not "ce@example.com", not "alice@example.com"
    assert glyphs.occurrences(page) == []


# --- unambiguous, no caps ----------------------------------------------------------------------------


def test_every_candidate_of_a_crowded_page_is_looked_up() -> None:
    addresses = [f"person{i:03d}@directory.example" for i in range(300)]
    users = Users(addresses[289])
    result = pdf.scan(layouts.address_book(addresses), users, max_pages=5, budget_seconds=20)
    assert (result.reason, result.email) == (Reason.MATCHED, addresses[289])
    assert sorted(users.calls[0]) == sorted(addresses)


@pytest.mark.slow
def test_a_page_of_12000_addresses_crosses_the_pipe_in_chunks() -> None:
    # GIVEN a page listing 12,000 addresses (4.5 pt, on a page made big enough), the last a user's
    addresses = [f"p{i}@x.example" for i in range(12_000)]
    data = layouts.address_book(addresses, per_line=100)
    users = Users(addresses[-1])
    # WHEN scanned (the reader sends them in messages of 10,000)
    result = pdf.scan(data, users, max_pages=5, budget_seconds=120)
    # THEN every one was looked up in one call (the adapter chunks its SQL) and the user was found
    assert len(users.calls) == 1 and len(users.calls[0]) == 12_000
    assert result.email == addresses[-1]


# --- helpers -----------------------------------------------------------------------------------------


class FakeGlyphs:
    """glyphs.Glyphs over a string on one line: no generated characters, 6 pt per glyph."""

    def __init__(self, text: str) -> None:
        self.text = text

    def generated(self, index: int) -> bool:
        return False

    def box(self, index: int) -> glyphs.Box:
        return (index * 6.0, 0.0, index * 6.0 + 6.0, 12.0)


def test_an_underscore_libreoffice_draws_under_half_a_point_counts_as_visible() -> None:
    # GIVEN LibreOffice's PDF of "Mail zoe_kim@example.org" (its underscore 0.4 pt high: committed with
    # the labelled corpus, bench/corpus/), and a referee's address that is not a user
    data = (LIBREOFFICE / "libreoffice-015-odt_one_column.pdf").read_bytes()
    # THEN the address is read whole and visible: its owner is linked, not its tail
    assert linked(data, "zoe_kim@example.org", "kim@example.org") == "zoe_kim@example.org"
