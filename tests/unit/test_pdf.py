"""pdfbatch.pdf: what counts as a PDF, how text becomes candidate emails, and how scan() picks the match."""

from __future__ import annotations

import io
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import pypdf
import pypdfium2 as pdfium
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fixtures import pdfs
from fixtures.apigw import ROOT
from fixtures.examples import examples
from pdfbatch import pdf
from pdfbatch.errors import EncryptedPdf, MalformedPdf, PdfTimeout
from pdfbatch.matching import MatchPolicy
from pdfbatch.model import Reason
from pdfbatch.pdf import emails as pdf_emails
from pdfbatch.pdf import pages as pdf_pages
from pdfbatch.pdf import reader as pdf_reader
from pdfbatch.pdf import structure as pdf_structure


@dataclass(frozen=True)
class User:
    """A users row as the lookup returns it."""

    id: int
    email: str


class FakeUsers:
    """The users table as a list of rows; records every lookup the scan makes."""

    def __init__(self, *emails: str) -> None:
        self.rows = [User(i, email) for i, email in enumerate(emails, start=1)]
        self.calls: list[list[str]] = []

    def __call__(self, candidates: Sequence[str]) -> list[User]:
        self.calls.append(list(candidates))
        return [row for row in self.rows if row.email.lower() in candidates]


def run_scan(
    data: bytes, users: FakeUsers, *, max_pages: int = 500, budget: float = 20.0, **kw: object
) -> pdf.Scan[User]:
    return pdf.scan(data, users, max_pages=max_pages, budget_seconds=budget, **kw)  # type: ignore[arg-type]


def lenient_text(data: bytes) -> str:
    """Page 1's text as pdfium or pypdf (non-strict) read it without validation, or "" if neither can."""
    texts = []
    try:
        doc = pdfium.PdfDocument(data)
        try:
            texts.append(doc[0].get_textpage().get_text_bounded())
        finally:
            doc.close()
    except pdfium.PdfiumError as exc:
        texts.append(f"<pdfium could not read it: {type(exc).__name__}>")
    try:
        texts.append(pypdf.PdfReader(io.BytesIO(data), strict=False).pages[0].extract_text())
    except pypdf.errors.PyPdfError as exc:
        texts.append(f"<pypdf could not read it: {type(exc).__name__}>")
    return " ".join(texts)


# ---------------------------------------------------------------------------------------------
# find_emails
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Email: alice@example.com.", ["alice@example.com"]),
        ("(bob@x.org)", ["bob@x.org"]),
        ("carol@y.io; next", ["carol@y.io"]),
        ("<d@e.fr>", ["d@e.fr"]),
        ("mailto:Eve.Smith+cv@Mail.Example.co.uk", ["eve.smith+cv@mail.example.co.uk"]),
        ("first.last@dept.uni-example.edu", ["first.last@dept.uni-example.edu"]),
        ("a,b: x@a.io,y@b.io", ["x@a.io", "y@b.io"]),
        ("'quoted@x.com'", ["quoted@x.com"]),
        ("see ...dots@x.com", ["dots@x.com"]),
        ("o'brien@example.ie", ["o'brien@example.ie"]),
        ("josé.garcía@exämple.de", ["josé.garcía@exämple.de"]),
        ("foo@xn--bcher-kva.ch", ["foo@xn--bcher-kva.ch"]),
        ("{jane@example.com}", ["jane@example.com"]),
        ("«jane@example.com»", ["jane@example.com"]),
    ],
)
def test_find_emails_strips_surrounding_punctuation_and_prefixes(text: str, expected: list[str]) -> None:
    # GIVEN text where an address is glued to punctuation or a mailto: prefix
    # WHEN candidates are extracted
    # THEN only the address remains, lowercased
    assert pdf.find_emails(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a@b",
        "x@y.z",
        "user@localhost",
        "ip@10.0.0.1",
        "n@host.123",
        "y@bad-.com",
        "z@-bad.com",
        "a@b.c-",
        "alice@example.com-based",
        "u@sub_dom.com",
        "a..b@x.com",
        "a.@x.com",
        "@example.com",
        "alice@",
        "alice at example dot com",
    ],
)
def test_find_emails_rejects_junk(text: str) -> None:
    # GIVEN something that looks a bit like an address but is not one
    # WHEN candidates are extracted
    # THEN nothing is returned
    assert pdf.find_emails(text) == []


def test_find_emails_keeps_document_order_and_first_occurrence_case_insensitively() -> None:
    # GIVEN the same address in several cases, around a second one
    text = "Recruiter: HR@Agency.com\nCandidate: jane@doe.dev\ncc hr@agency.com JANE@DOE.DEV"
    # WHEN candidates are extracted
    # THEN each appears once, lowercased, where it first appeared
    assert pdf.find_emails(text) == ["hr@agency.com", "jane@doe.dev"]


@pytest.mark.parametrize("artefact", ["\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"])
def test_find_emails_joins_address_split_by_invisible_extraction_artefacts(artefact: str) -> None:
    # GIVEN an address with an invisible character inside, as text extraction sometimes leaves
    text = f"Contact: ali{artefact}ce@exa{artefact}mple.com"
    # WHEN candidates are extracted
    # THEN the artefact is ignored
    assert pdf.find_emails(text) == ["alice@example.com"]


def test_find_emails_spells_out_typographic_ligatures() -> None:
    # GIVEN "fi" rendered as the U+FB01 ligature, as some fonts map it
    # WHEN candidates are extracted
    # THEN the address reads as typed
    assert pdf.find_emails("\ufb01ona@example.com") == ["fiona@example.com"]


def test_find_emails_never_returns_the_tail_of_an_address_broken_by_a_line_break() -> None:
    # GIVEN an address split across lines in plain text (only the page layout can tell a wrap from
    # a label on its own line; pdf/glyphs.py decides with the glyphs' positions)
    # WHEN candidates are extracted
    # THEN neither a guess nor the tail is returned: "name@example.com" is someone else's address
    assert pdf.find_emails("alice.long-\nname@example.com") == []
    assert pdf.find_emails("maria.\r\nlopez@gmail.com") == []
    # AND a line ending in an address, or in punctuation, does not hide the next line's address
    assert pdf.find_emails("a@b.com\nc@d.com") == ["a@b.com", "c@d.com"]
    assert pdf.find_emails("Email:\njane@x.com") == ["jane@x.com"]


def test_a_glyph_without_unicode_mapping_is_an_unreadable_letter_not_a_gap() -> None:
    # GIVEN an address with a glyph pdfium maps to no character (NUL) inside it
    # WHEN candidates are extracted
    # THEN nothing is returned: dropping the glyph ("alce") or cutting there ("ce@") names someone else
    assert pdf.find_emails("ali\x00ce@example.com") == []
    assert pdf.find_emails("alice@example.co\x00") == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("jane=doe@example.com", ["jane=doe@example.com"]),
        ("Contact: jane=doe@example.com.", ["jane=doe@example.com"]),
        ("x!#$%&*+/=?^_`{|}~-y@example.com", ["x!#$%&*+/=?^_`{|}~-y@example.com"]),
        ("a/b@example.com", ["a/b@example.com"]),
        ("--alice@example.com", ["--alice@example.com"]),
        ("連絡先jane@example.jpです", ["jane@example.jp"]),
        ("メール：taro.yamada@example.co.jp（東京）", ["taro.yamada@example.co.jp"]),
        ("电子邮件zhang.wei@example.cn谢谢", ["zhang.wei@example.cn"]),
        ("이메일kim@example.kr입니다", ["kim@example.kr"]),
        ("иван.петров@почта.рф", ["иван.петров@почта.рф"]),
        ("δοκιμή@παράδειγμα.δοκιμή", ["δοκιμή@παράδειγμα.δοκιμή"]),
        ("Ñandú@example.es", ["ñandú@example.es"]),
        ("e\u0301lise@example.fr", ["\u00e9lise@example.fr"]),
    ],
)
def test_find_emails_reads_rfc_5322_local_parts_whole_and_stops_at_cjk(
    text: str, expected: list[str]
) -> None:
    # GIVEN dot-atom local parts with RFC 5322's special characters, Latin/Greek/Cyrillic letters, or
    # CJK text glued to an address without a space
    # WHEN candidates are extracted
    # THEN the local part is whole (never a tail after "=" or "/"), CJK never joins it, and it is NFC
    assert pdf.find_emails(text) == expected


@settings(max_examples=examples(300), deadline=None)
@given(st.text())
def test_find_emails_never_crashes_and_returns_normalised_unique_addresses(text: str) -> None:
    # GIVEN any string at all
    # WHEN candidates are extracted
    found = pdf.find_emails(text)
    # THEN every result is a lowercase, unique address present in the (cleaned, lowercased) text
    haystack = text.translate(pdf_emails._ARTEFACTS).lower()
    assert len(found) == len(set(found))
    for email in found:
        assert email == email.lower()
        assert email.count("@") == 1
        assert email in haystack


_label = st.from_regex(r"[a-z0-9]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
_local = st.from_regex(r"[a-z0-9_+]{1,10}(\.[a-z0-9_+]{1,10}){0,2}", fullmatch=True)
_tld = st.from_regex(r"[a-z]{2,6}", fullmatch=True)
_separator = st.sampled_from([" ", "\n", ", ", "; ", " (", ") ", " <", "> ", ": ", "\t", " mailto:"])


@settings(max_examples=examples(200), deadline=None)
@given(_local, st.lists(_label, min_size=1, max_size=3), _tld, _separator, _separator, st.text(max_size=30))
def test_find_emails_finds_any_valid_address_between_separators(
    local: str, labels: list[str], tld: str, before: str, after: str, noise: str
) -> None:
    # GIVEN a valid address between ordinary separators, after arbitrary noise
    email = f"{local}@{'.'.join([*labels, tld])}"
    text = f"{noise} {before}{email.upper()}{after}."
    # WHEN candidates are extracted
    # THEN the address is among them, lowercased
    assert email in pdf.find_emails(text)


@pytest.mark.parametrize(
    "adversarial",
    [
        "a" * 1_000_000,
        "@" * 1_000_000,
        "a@" * 500_000,
        "a." * 500_000,
        "a@a." * 250_000,
        "a@" + "a." * 500_000,
        "a@" + "-" * 1_000_000,
        ("a" * 63 + "@") * 15_000,
        "." * 1_000_000 + "@x.com",
        "x" * 1_000_000 + "@example.com",
        "\u00ad" * 1_000_000,
    ],
    ids=lambda s: f"{s[:6]!r}x{len(s)}",
)
@pytest.mark.timeout(10)  # a hang guard: a backtracking regex would take hours on these
def test_find_emails_is_linear_on_adversarial_megabyte(adversarial: str) -> None:
    # GIVEN a 1 MB string built to make a backtracking regex explode
    # WHEN candidates are extracted THEN it returns (no address in any of them but the valid tail)
    found = pdf.find_emails(adversarial)
    assert all("@" in e for e in found)


# ---------------------------------------------------------------------------------------------
# validate: what counts as a PDF
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [b"", pdfs.png_bytes(), b"%PDF-1.7\n", b"hello world" * 100, b"\x00" * 4096],
    ids=["zero-byte", "png-renamed", "header-only", "text", "nul-bytes"],
)
def test_not_a_pdf_is_malformed(data: bytes) -> None:
    # GIVEN bytes that are not a PDF
    # WHEN validated  THEN MalformedPdf
    with pytest.raises(MalformedPdf):
        pdf.validate(data)


def test_truncated_pdf_with_email_is_rejected() -> None:
    # GIVEN a file cut inside an incremental update: page 1 with the email is still readable by
    # lenient readers (the canary below proves it), but the file is incomplete
    data = pdfs.truncated_pdf("truncated@example.com")
    assert "truncated@example.com" in pypdf.PdfReader(io.BytesIO(data), strict=True).pages[0].extract_text()
    assert "truncated@example.com" in lenient_text(data)
    users = FakeUsers("truncated@example.com")
    # WHEN scanned
    # THEN it is rejected and never linked, and no lookup happened
    with pytest.raises(MalformedPdf):
        run_scan(data, users)
    assert users.calls == []


def test_complete_file_with_incremental_update_is_accepted() -> None:
    # GIVEN the same two-revision file, uncut
    users = FakeUsers("updated@example.com")
    # WHEN scanned
    result = run_scan(pdfs.updated_pdf("updated@example.com"), users)
    # THEN it is read normally (all 12 pages known)
    assert (result.reason, result.page_count) == (Reason.MATCHED, 12)


@pytest.mark.parametrize("keep", [0.25, 0.5, 0.9, 0.99])
def test_fpdf_document_cut_anywhere_is_rejected(keep: float) -> None:
    # GIVEN an ordinary résumé cut at some point
    whole = pdfs.resume_pdf("Bob", "bob@example.com", *["filler line"] * 30)
    # WHEN validated  THEN MalformedPdf
    with pytest.raises(MalformedPdf):
        pdf.validate(whole[: int(len(whole) * keep)])


@pytest.mark.parametrize("kind", pdfs.DAMAGE_KINDS)
def test_damaged_structure_is_rejected_even_when_text_is_recoverable(kind: str) -> None:
    # GIVEN a complete-looking file with one structural defect (wrong xref entry or startxref,
    # shifted offsets, no catalog, no page tree): pdfium alone would often still read page 1
    data = pdfs.damaged_pdf(kind, "damaged@example.com")
    users = FakeUsers("damaged@example.com")
    # WHEN scanned
    # THEN MalformedPdf, before any lookup
    with pytest.raises(MalformedPdf):
        run_scan(data, users)
    assert users.calls == []


@pytest.mark.parametrize("kind", ["xref_entry", "shifted", "startxref", "no_root", "root_not_catalog"])
def test_a_lenient_reader_would_recover_text_from_damaged_file(kind: str) -> None:
    # GIVEN a damaged file (the canary for the test above)
    data = pdfs.damaged_pdf(kind, "damaged@example.com")
    # WHEN pdfium or pypdf read it without validation
    # THEN one of them recovers the address: only validation keeps this file from being linked
    assert "damaged@example.com" in lenient_text(data)


def test_trailing_whitespace_after_eof_is_accepted() -> None:
    # GIVEN a valid file padded with newlines and NULs after %%EOF (some producers and transfers do)
    data = pdfs.handmade_pdf([["pad@example.com"]]) + b"\r\n" + b"\x00" * 200
    # WHEN validated  THEN it is a PDF
    assert pdf.validate(data).page_count == 1


def test_object_streams_and_xref_stream_are_accepted() -> None:
    # GIVEN a PDF 1.5 file whose catalog and pages live in an object stream, indexed by an xref stream
    data = pdfs.object_stream_pdf(["Contact: objstm@example.com"])
    assert b"/Type /ObjStm" in data and b"/Type /XRef" in data and b"trailer" not in data
    # WHEN validated and scanned
    info = pdf.validate(data)
    result = run_scan(data, FakeUsers("objstm@example.com"))
    # THEN it is accepted and its text read
    assert (info.page_count, info.version) == (1, "1.5")
    assert result.email == "objstm@example.com"


@pytest.mark.parametrize("kind", ["kids", "parent", "prev"])
@pytest.mark.timeout(30)  # a hang guard: a parser following the loop would never return
def test_looping_structure_ends_as_malformed_without_hanging(kind: str) -> None:
    # GIVEN a page tree that contains itself, or an xref chain whose /Prev loops
    data = pdfs.looping_pdf(kind)
    # WHEN scanned THEN it is rejected as malformed
    with pytest.raises(MalformedPdf):
        run_scan(data, FakeUsers("loop@example.com"))


def test_validation_reads_structure_not_page_content() -> None:
    # GIVEN a structurally valid file whose page content stream is undecodable garbage
    data = pdfs.handmade_pdf([["garbage@example.com"]])
    start = data.index(b"stream\n", data.index(b"5 0 obj")) + len(b"stream\n")
    end = data.index(b"\nendstream", start)
    garbage = data[:start] + b"\xff" * (end - start) + data[end:]
    # WHEN validated
    info = pdf.validate(garbage)
    # THEN validation passes: it never decoded the content (text extraction simply finds nothing)
    assert info.page_count == 1
    assert run_scan(garbage, FakeUsers()).reason == Reason.NO_TEXT_LAYER


# ---------------------------------------------------------------------------------------------
# Encryption
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("aes", [True, False], ids=["aes256", "rc4"])
def test_owner_password_only_pdf_is_decrypted_and_matched(aes: bool) -> None:
    # GIVEN a PDF encrypted with an owner password and an empty user password
    data = pdfs.owner_only_encrypted_pdf("Contact: owner.only@example.com", aes=aes)
    # WHEN validated and scanned
    info = pdf.validate(data)
    result = run_scan(data, FakeUsers("owner.only@example.com"))
    # THEN it opens like any PDF and its text is read
    assert info.encrypted
    assert (result.reason, result.email) == (Reason.MATCHED, "owner.only@example.com")


@pytest.mark.parametrize("aes", [True, False], ids=["aes256", "rc4"])
def test_pdf_needing_a_user_password_is_encrypted(aes: bool) -> None:
    # GIVEN a PDF that needs a user password
    users = FakeUsers("locked@example.com")
    # WHEN scanned  THEN EncryptedPdf, and nothing was looked up
    with pytest.raises(EncryptedPdf):
        run_scan(pdfs.password_pdf("Contact: locked@example.com", aes=aes), users)
    assert users.calls == []


# ---------------------------------------------------------------------------------------------
# scan
# ---------------------------------------------------------------------------------------------


def test_resume_email_is_matched_on_first_page() -> None:
    # GIVEN a résumé whose author is a user
    users = FakeUsers("alice.martin@example.com")
    # WHEN scanned
    result = run_scan(pdfs.cached("resume"), users)
    # THEN the user is matched after one page and one lookup
    assert result == pdf.Scan(
        reason=Reason.MATCHED,
        email="alice.martin@example.com",
        match=User(1, "alice.martin@example.com"),
        pages_read=1,
        page_count=1,
        extract_seconds=result.extract_seconds,
        lookup_seconds=result.lookup_seconds,
        validate_seconds=result.validate_seconds,
        users_named=1,
        page=1,
        visibility_seconds=result.visibility_seconds,
        evidence=result.evidence,
        evidence_seconds=result.evidence_seconds,
    )
    assert users.calls == [["alice.martin@example.com"]]


def test_first_matching_candidate_wins_over_earlier_non_user() -> None:
    # GIVEN a recruiter's address (not a user) before the candidate's (a user)
    data = pdfs.text_pdf([["Sent by jobs@recruiter.example", "Candidate: jane@doe.dev"]])
    # WHEN scanned
    result = run_scan(data, FakeUsers("jane@doe.dev"))
    # THEN the candidate is matched
    assert (result.reason, result.email, result.match) == (
        Reason.MATCHED,
        "jane@doe.dev",
        User(1, "jane@doe.dev"),
    )


def test_a_page_naming_two_users_is_ambiguous_and_links_nobody() -> None:
    # GIVEN a cover letter to a recruiter who is a user, from a candidate who is one too
    data = pdfs.text_pdf([["To: jobs@recruiter.example", "From: jane@doe.dev"]])
    # WHEN scanned
    result = run_scan(data, FakeUsers("jane@doe.dev", "jobs@recruiter.example"))
    # THEN nobody is linked, and the result says how many users the page named, never who
    assert (result.reason, result.match, result.email) == (Reason.AMBIGUOUS, None, None)
    assert (result.users_named, result.page) == (2, 1)


def test_policy_first_links_the_first_user_in_document_order() -> None:
    # GIVEN the same page, scanned with PDFBATCH_MATCH_POLICY=first
    data = pdfs.text_pdf([["To: jobs@recruiter.example", "From: jane@doe.dev"]])
    # WHEN scanned
    result = run_scan(data, FakeUsers("jane@doe.dev", "jobs@recruiter.example"), policy=MatchPolicy.FIRST)
    # THEN the address that comes first in the document wins (ids given in the opposite order)
    assert (result.email, result.match) == ("jobs@recruiter.example", User(2, "jobs@recruiter.example"))


def test_match_on_earlier_page_wins_over_later_pages() -> None:
    # GIVEN a user on page 2 and another on page 3
    data = pdfs.text_pdf(["no address here", "a@users.example", "b@users.example"])
    users = FakeUsers("b@users.example", "a@users.example")
    # WHEN scanned
    result = run_scan(data, users)
    # THEN page 2's user wins and page 3 is never read
    assert (result.email, result.pages_read) == ("a@users.example", 2)


def test_lookup_is_called_once_per_page_with_only_new_candidates() -> None:
    # GIVEN addresses repeated across pages, and a page with no address
    data = pdfs.text_pdf(
        [
            ["hr@agency.example HR@AGENCY.EXAMPLE", "x@y.example"],
            ["hr@agency.example again"],
            ["nothing"],
            ["x@y.example and new@z.example"],
        ]
    )
    users = FakeUsers()
    # WHEN scanned
    result = run_scan(data, users)
    # THEN each page with new candidates causes one lookup with just those, in order
    assert users.calls == [["hr@agency.example", "x@y.example"], ["new@z.example"]]
    assert (result.reason, result.pages_read) == (Reason.NO_USER, 4)


def test_lookup_keys_are_compared_case_insensitively() -> None:
    # GIVEN a lookup that answers with the address as stored (mixed case, a stray space)
    stored = User(7, " Alice.Martin@Example.com")

    def lookup(candidates: Sequence[str]) -> list[User]:
        return [stored] if "alice.martin@example.com" in candidates else []

    # WHEN scanned
    result = pdf.scan(pdfs.cached("resume"), lookup, max_pages=5, budget_seconds=5)
    # THEN it still matches
    assert (result.reason, result.match) == (Reason.MATCHED, stored)


def test_a_row_the_collation_matched_but_the_address_differs_is_not_a_match() -> None:
    # GIVEN a users table whose accent-insensitive collation returns "alice.martín" for "alice.martin"
    def lookup(candidates: Sequence[str]) -> list[User]:
        return [User(7, "alice.martín@example.com")]

    # WHEN scanned
    result = pdf.scan(pdfs.cached("resume"), lookup, max_pages=5, budget_seconds=5)
    # THEN nothing fuzzy: the stored address is not the one on the page
    assert result.reason == Reason.NO_USER


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (pdfs.image_only_pdf(), Reason.NO_TEXT_LAYER),
        (pdfs.whitespace_only_pdf(), Reason.NO_TEXT_LAYER),
        (pdfs.text_pdf(["Quarterly report", "no contact details"]), Reason.NO_EMAIL),
        (pdfs.resume_pdf("Carl", "carl@nowhere.example"), Reason.NO_USER),
    ],
    ids=["image-only", "whitespace-only", "text-no-email", "email-no-user"],
)
def test_unmatched_pdf_says_why(data: bytes, reason: Reason) -> None:
    # GIVEN a PDF without a usable address
    # WHEN scanned
    result = run_scan(data, FakeUsers("someone@else.example"))
    # THEN the reason says what was missing
    assert (result.reason, result.email, result.match) == (reason, None, None)


def test_scan_stops_at_max_pages() -> None:
    # GIVEN a manual whose only address is on page 30
    data = pdfs.manual_pdf(30, 30)
    users = FakeUsers("support@example.com")
    # WHEN scanned with max_pages=10
    result = run_scan(data, users, max_pages=10)
    # THEN only ten pages are read and the reason reflects what was seen
    assert (result.reason, result.pages_read, result.page_count) == (Reason.NO_EMAIL, 10, 30)
    assert users.calls == []


class SteppingClock:
    """A clock that advances ``step`` seconds each time it is read, plus whatever ``advance`` adds."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_deadline_passing_between_pages_raises_timeout() -> None:
    # GIVEN a clock where every read costs a second, and a 5-second budget
    data = pdfs.manual_pdf(20, None)
    # WHEN scanned in this process  THEN PdfTimeout before all pages are read
    with pytest.raises(PdfTimeout):
        pdf.scan(data, FakeUsers(), max_pages=500, budget_seconds=5, clock=SteppingClock(1.0), isolate=False)


def test_lookup_time_does_not_count_against_the_extraction_budget() -> None:
    # GIVEN a slow users table (30 s per lookup) and a 5-second extraction budget
    clock = SteppingClock(0.001)
    users = FakeUsers("late@example.com")

    def slow_lookup(candidates: Sequence[str]) -> list[User]:
        clock.advance(30)
        return users(candidates)

    data = pdfs.text_pdf([f"p{i}@example.com" for i in range(5)] + ["late@example.com"])
    # WHEN scanned
    result = pdf.scan(data, slow_lookup, max_pages=50, budget_seconds=5, clock=clock)
    # THEN the scan completes, and the timings split lookup from extraction
    assert result.email == "late@example.com"
    assert result.lookup_seconds >= 180
    assert result.extract_seconds < 1


def test_reversed_glyph_order_is_read_in_visual_order() -> None:
    # GIVEN a line drawn glyph by glyph from last to first (pypdf reads it backwards: the canary)
    data = pdfs.reversed_draw_pdf("rev.erse@example.com")
    assert "moc.elpmaxe@esre.ver" in pypdf.PdfReader(io.BytesIO(data)).pages[0].extract_text()
    # WHEN scanned
    result = run_scan(data, FakeUsers("rev.erse@example.com"))
    # THEN the address is read as displayed
    assert result.email == "rev.erse@example.com"


def test_visible_mailto_text_is_matched() -> None:
    # GIVEN a page showing "mailto:<address>" as a link
    result = run_scan(pdfs.mailto_link_pdf("m@example.com"), FakeUsers("m@example.com"))
    # THEN the address is matched without its prefix
    assert result.email == "m@example.com"


def test_address_only_in_a_mailto_link_is_not_a_candidate() -> None:
    # GIVEN a page whose text says "Email me", linked to mailto:hidden@example.com
    data = pdfs.mailto_link_pdf("hidden@example.com", visible_text="Email me")
    users = FakeUsers("hidden@example.com")
    # WHEN scanned
    result = run_scan(data, users)
    # THEN the link's address is not a candidate: nobody reading the page sees it
    assert (result.reason, result.match) == (Reason.NO_EMAIL, None)
    assert users.calls == []


def test_pdfium_document_and_pages_are_closed_when_lookup_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a users table that is down, and spies on the documents and pages pdfium opens
    docs: list[pdfium.PdfDocument] = []
    pages: list[pdfium.PdfPage] = []
    real_open, real_get_page = pdf_structure._open_pdfium, pdfium.PdfDocument.get_page

    def spy_open(data: bytes) -> pdfium.PdfDocument:
        docs.append(real_open(data))
        return docs[-1]

    def spy_get_page(self: pdfium.PdfDocument, index: int) -> pdfium.PdfPage:
        pages.append(real_get_page(self, index))
        return pages[-1]

    def down(candidates: Sequence[str]) -> list[User]:
        raise ConnectionError("users table unreachable")

    monkeypatch.setattr(pdf_pages, "_open_pdfium", spy_open)
    monkeypatch.setattr(pdfium.PdfDocument, "get_page", spy_get_page)
    # WHEN scanned in this process  THEN the error propagates
    with pytest.raises(ConnectionError):
        pdf.scan(pdfs.cached("resume"), down, max_pages=5, budget_seconds=5, isolate=False)
    # AND the document and every page handle were closed
    assert len(docs) == 1 and docs[0].raw is None
    assert len(pages) == 1 and pages[0].raw is None


def test_pypdf_and_pdfium_never_log_pdf_text(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # GIVEN a malformed-ish PDF that makes pypdf warn about a key named after an address
    # (a duplicated catalog key), plus one that pypdf must repair
    leaky = pdfs.assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R /secret.person@example.com 1 /secret.person@example.com 2 >>",
            *pdfs._page_objects([["Contact: secret.person@example.com"]])[1:],
        ]
    )
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="pypdf")
    # WHEN both are scanned
    result = run_scan(leaky, FakeUsers("secret.person@example.com"))
    with pytest.raises(MalformedPdf):
        run_scan(pdfs.truncated_pdf("secret.person@example.com"), FakeUsers())
    # THEN pypdf did warn (so the test is meaningful), but no address reached any log or the terminal
    assert result.reason == Reason.MATCHED
    out, err = capfd.readouterr()
    assert "secret.person" not in caplog.text + out + err
    assert all("secret.person" not in r.getMessage() for r in caplog.records)


def test_pypdf_warning_on_duplicate_key_is_observed_not_propagated() -> None:
    # GIVEN a catalog with a duplicated key: pypdf warns but nothing needs repairing
    data = pdfs.assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R /Lang (en) /Lang (fr) >>",
            *pdfs._page_objects([["dup@example.com"]])[1:],
        ]
    )
    # WHEN validated
    with pdf_structure._pypdf_warnings() as seen:
        pypdf.PdfReader(io.BytesIO(data)).trailer["/Root"].get_object()
    # THEN the warning was collected (as a template, without the key), and validation still accepts it
    assert seen and all("%(" in t for t in seen)
    assert pdf.validate(data).page_count == 1


# ---------------------------------------------------------------------------------------------
# The budget and the forked reader
# ---------------------------------------------------------------------------------------------


def _children_gone(seconds: float = 10.0) -> bool:
    """True once every child the scans left behind has exited and been reaped."""
    deadline = time.monotonic() + seconds
    while True:
        pdf_reader._reap()
        if not pdf_reader._unreaped or time.monotonic() > deadline:
            return not pdf_reader._unreaped
        time.sleep(0.01)


def test_page_that_never_finishes_is_stopped_at_the_budget_and_the_next_file_is_read() -> None:
    # GIVEN a page pdfium needs hours for (one form drawn 100,000 times), showing a user's address
    slow = pdfs.slow_page_pdf("alice.martin@example.com")
    users = FakeUsers("alice.martin@example.com")
    # WHEN scanned with a half-second budget
    with pytest.raises(PdfTimeout):
        pdf.scan(slow, users, max_pages=5, budget_seconds=0.5)
    # THEN nothing was looked up, the reader inside that page was killed,
    assert users.calls == []
    assert _children_gone()
    # AND the next file in the same process is read and matched as usual
    result = pdf.scan(pdfs.cached("resume"), users, max_pages=5, budget_seconds=20)
    assert (result.reason, result.email) == (Reason.MATCHED, "alice.martin@example.com")


@pytest.mark.slow
def test_page_that_eats_memory_fails_malformed_before_the_process_runs_out() -> None:
    # GIVEN a 2 KB page of nested form XObjects that expands to 10**9 lines of text
    bomb = pdfs.form_bomb_pdf("alice.martin@example.com")
    # WHEN scanned with a budget far longer than the memory lasts
    with pytest.raises(MalformedPdf, match="died"):
        pdf.scan(bomb, FakeUsers("alice.martin@example.com"), max_pages=5, budget_seconds=120)
    # THEN the reader hit its memory cap and died alone; this process reads the next file
    result = pdf.scan(
        pdfs.cached("resume"), FakeUsers("alice.martin@example.com"), max_pages=5, budget_seconds=20
    )
    assert result.reason == Reason.MATCHED


def _retire_reader() -> None:
    reader = getattr(pdf_reader._readers, "reader", None)
    if reader is not None:
        reader.retire(kill=True)


def test_reader_crash_is_a_malformed_pdf_not_a_dead_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN a reader, forked from here, that segfaults on the first page (as pdfium could on hostile input)
    def crash(self: object, textpage: pdfium.PdfTextPage) -> None:
        os.kill(os.getpid(), signal.SIGSEGV)
        raise AssertionError("unreachable")

    _retire_reader()
    monkeypatch.setattr(pdf_pages._PdfiumGlyphs, "__init__", crash)
    # WHEN scanned  THEN the file is malformed and the signal is named
    try:
        with pytest.raises(MalformedPdf, match="signal 11"):
            pdf.scan(pdfs.cached("resume"), FakeUsers(), max_pages=5, budget_seconds=20)
    finally:
        monkeypatch.undo()
        _retire_reader()  # a reader forked with the crashing page must not serve later tests
    # AND the next document gets a healthy reader
    assert (
        pdf.scan(pdfs.cached("resume"), FakeUsers(), max_pages=5, budget_seconds=20).reason == Reason.NO_USER
    )


def _reader_pid() -> int | None:
    reader = getattr(pdf_reader._readers, "reader", None)
    return reader.pid if reader is not None and reader.alive else None


def test_one_reader_serves_every_document_and_survives_a_failed_lookup() -> None:
    # GIVEN a 100-page document with an address on every page, and a users table that goes down
    data = pdfs.text_pdf([f"Contact: p{i}@example.com" for i in range(100)])

    def down(candidates: Sequence[str]) -> list[User]:
        raise ConnectionError("users table unreachable")

    pdf.scan(pdfs.cached("resume"), FakeUsers(), max_pages=5, budget_seconds=20)
    reader = _reader_pid()
    # WHEN the lookup fails on its first page  THEN the error propagates
    with pytest.raises(ConnectionError):
        pdf.scan(data, down, max_pages=500, budget_seconds=20)
    # AND the same reader, told to stop there, reads the next documents from their first page
    users = FakeUsers("p1@example.com")
    result = pdf.scan(data, users, max_pages=500, budget_seconds=20)
    assert (result.email, result.pages_read, users.calls[0]) == ("p1@example.com", 2, ["p0@example.com"])
    assert _reader_pid() == reader


def test_reader_killed_at_the_budget_is_replaced_by_a_new_one() -> None:
    pdf.scan(pdfs.cached("resume"), FakeUsers(), max_pages=5, budget_seconds=20)
    before = _reader_pid()
    with pytest.raises(PdfTimeout):
        pdf.scan(pdfs.slow_page_pdf(), FakeUsers(), max_pages=5, budget_seconds=0.3)
    assert _reader_pid() is None and _children_gone()
    pdf.scan(pdfs.cached("resume"), FakeUsers(), max_pages=5, budget_seconds=20)
    assert _reader_pid() not in (None, before)


@pytest.mark.parametrize("isolate", [True, False], ids=["forked", "in-process"])
def test_forked_and_in_process_readers_agree(isolate: bool) -> None:
    # GIVEN documents covering every scan result
    cases = {
        "resume": (pdfs.cached("resume"), Reason.MATCHED),
        "no_user": (pdfs.resume_pdf("C", "carl@nowhere.example"), Reason.NO_USER),
        "no_email": (pdfs.text_pdf(["nothing here"]), Reason.NO_EMAIL),
        "scan": (pdfs.image_only_pdf(), Reason.NO_TEXT_LAYER),
    }
    for data, reason in cases.values():
        # WHEN scanned either way  THEN the reason and the pages read are the same
        result = pdf.scan(
            data, FakeUsers("alice.martin@example.com"), max_pages=5, budget_seconds=20, isolate=isolate
        )
        assert (result.reason, result.pages_read) == (reason, 1)
    with pytest.raises(EncryptedPdf):
        pdf.scan(pdfs.password_pdf(), FakeUsers(), max_pages=5, budget_seconds=20, isolate=isolate)
    with pytest.raises(MalformedPdf):
        pdf.scan(pdfs.truncated_pdf(), FakeUsers(), max_pages=5, budget_seconds=20, isolate=isolate)


# ---------------------------------------------------------------------------------------------
# Early exit (how fast it is lives in `make bench`, never in a timed test)
# ---------------------------------------------------------------------------------------------


def test_scan_of_100_page_manual_with_email_on_page_1_reads_one_page() -> None:
    # GIVEN a 100-page manual with the address on page 1
    data = pdfs.cached("manual_p1")
    users = FakeUsers("support@example.com")
    # WHEN scanned
    result = run_scan(data, users)
    # THEN it matched after reading page 1 only: pages 2-100 are never extracted
    assert (result.email, result.pages_read) == ("support@example.com", 1)


# ---------------------------------------------------------------------------------------------
# Who loads the parsers
# ---------------------------------------------------------------------------------------------

_IMPORTED_PARSERS = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("handler", sys.argv[1])
spec.loader.exec_module(importlib.util.module_from_spec(spec))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("pypdf"))))  # pypdf, pypdfium2, pypdfium2_raw
"""


@pytest.mark.parametrize("function", ["unzip", "status"])
def test_unzip_and_status_never_load_the_pdf_parsers(function: str) -> None:
    # GIVEN a fresh interpreter, as at a cold start of that function
    handler = ROOT / "functions" / function / "handler.py"
    # WHEN it imports the function's handler (and with it services, bootstrap and the adapters)
    out = subprocess.run(
        [sys.executable, "-c", _IMPORTED_PARSERS, str(handler)], capture_output=True, text=True, check=True
    )
    # THEN neither PDF parser was loaded: only process_pdf pays their memory, when it scans
    assert out.stdout.split() == ["[]"]


@pytest.mark.parametrize("isolate", [True, False], ids=["reader", "in-process"])
def test_the_reader_renders_the_deciding_pages_evidence_as_evidence_render_would(isolate: bool) -> None:
    from pdfbatch import evidence

    # GIVEN a manual whose address is on page 3 of 5, and a two-user letter (ambiguous on page 1)
    manual = pdfs.manual_pdf(5, 3, "page.three@example.com")
    letter = pdfs.text_pdf([["To: ann@example.com", "Cc: bob@example.com"]])
    # WHEN each is scanned
    linked = run_scan(manual, FakeUsers("page.three@example.com"), isolate=isolate)
    ambiguous = run_scan(letter, FakeUsers("ann@example.com", "bob@example.com"), isolate=isolate)
    # THEN the scan carries the region of the deciding page, the very PNG evidence.render makes from the
    # bytes (so process_pdf parses nothing twice), and a file that names nobody carries none
    assert (linked.reason, linked.page, linked.addresses) == (Reason.MATCHED, 3, ("page.three@example.com",))
    assert linked.evidence is not None
    assert linked.evidence == evidence.render(manual, 3, linked.addresses)
    assert ambiguous.reason == Reason.AMBIGUOUS
    assert ambiguous.addresses == ("ann@example.com", "bob@example.com")
    assert ambiguous.evidence is not None
    assert ambiguous.evidence == evidence.render(letter, 1, ambiguous.addresses)
    nobody = run_scan(manual, FakeUsers(), isolate=isolate)
    assert (nobody.reason, nobody.evidence) == (Reason.NO_USER, None)


def test_a_reader_that_dies_rendering_evidence_costs_the_evidence_not_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a reader whose evidence render kills it (forked after the patch, so the child has it)
    _retire_reader()

    def die(self: object, addresses: Sequence[str]) -> bytes:
        os.kill(os.getpid(), signal.SIGKILL)
        raise AssertionError("unreachable")

    monkeypatch.setattr(pdf_pages._Document, "evidence", die)
    try:
        # WHEN a résumé is scanned  THEN it still links, without evidence (process_pdf renders it again)
        data = pdfs.resume_pdf("Ann", "ann@example.com")
        scan = run_scan(data, FakeUsers("ann@example.com"))
        assert (scan.reason, scan.email, scan.evidence) == (Reason.MATCHED, "ann@example.com", None)
    finally:
        monkeypatch.undo()
    # AND the next file gets a new reader, which renders it
    again = run_scan(data, FakeUsers("ann@example.com"))
    assert again.reason == Reason.MATCHED and again.evidence is not None


def test_evidence_of_an_address_drawn_off_the_page_is_none_not_an_error() -> None:
    from pdfbatch.pdf import region

    # GIVEN a page whose only address is set beyond its right edge (its text layer has it; no ink shows)
    data = pdf_reader._minimal_pdf("off.page@example.com").replace(b"50 780 Td", b"700 780 Td")
    doc = pdfium.PdfDocument(data)
    try:
        page = doc[0]
        textpage = page.get_textpage()
        # WHEN its evidence is rendered  THEN there is none (pdfium would refuse a crop outside the page)
        assert region.png(page, textpage, ["off.page@example.com"]) is None
        textpage.close()
    finally:
        doc.close()
