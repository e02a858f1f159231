"""pdfbatch.ocr: the reading order (header band first, early stop, page limit, budget) with a fake engine,
the OCR text rules, the killable worker, and the real engine on a few generated scans."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import pytest

from fixtures import pdfs, scans
from pdfbatch import ocr
from pdfbatch.errors import MalformedPdf, PdfTimeout
from pdfbatch.model import Reason
from pdfbatch.ocr.engine import Raster
from pdfbatch.ocr.read import (
    HEADER_BAND,
    MAX_PIXELS,
    MAX_SCAN_DPI,
    Region,
    open_document,
    render,
    render_dpi,
    scan_dpi,
)

A4_HEIGHT_PT = 841.89


class FakeEngine:
    """Answers each read with the next text of ``script`` (or what ``answer`` says); remembers sizes."""

    name = "fake"
    dpi = 36  # renders are cheap; the fake never looks at the pixels

    def __init__(self, script: Sequence[str] = (), answer: Callable[[int], str] | None = None) -> None:
        self.script = list(script)
        self.answer = answer
        self.heights: list[int] = []
        self.loaded = 0

    def load(self) -> None:
        self.loaded += 1

    def read(self, raster: Raster) -> str:
        self.heights.append(raster.height)
        call = len(self.heights) - 1
        if self.answer is not None:
            return self.answer(call)
        return self.script[call] if call < len(self.script) else ""


class Users:
    """A users table: the lookup scan() calls, recording what it was asked."""

    def __init__(self, *emails: str) -> None:
        self.ids = {e: i + 1 for i, e in enumerate(emails)}
        self.calls: list[list[str]] = []

    def __call__(self, candidates: Sequence[str]) -> Mapping[str, int]:
        self.calls.append(list(candidates))
        return {c: self.ids[c] for c in candidates if c in self.ids}


class SteppingClock:
    """A clock that advances only when told to."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def inked(pages: int) -> bytes:
    """A text PDF with ``pages`` pages of ink (the reader skips regions without any)."""
    return pdfs.text_pdf([[f"Page {n} " + "lorem ipsum dolor " * 5] * 50 for n in range(1, pages + 1)])


def read(data: bytes, engine: FakeEngine, users: Users, **kw: object) -> ocr.OcrScan[int]:
    return ocr.scan(data, users, engine=engine, isolate=False, **kw)  # type: ignore[arg-type]


# --- the reading order ---------------------------------------------------------------------------------


def test_header_band_is_read_first_and_the_rest_of_its_page_before_deciding() -> None:
    # GIVEN a one-page scan whose header names a user
    engine = FakeEngine(["Ada Lovelace  ada@example.com  |  +44 1234", "Experience"])
    users = Users("ada@example.com")
    # WHEN scanned
    result = read(inked(1), engine, users)
    # THEN the header band (a fifth of the page high) was read first, then the rest of page 1: the page
    # that decides is read whole
    assert (result.reason, result.email, result.match) == (Reason.MATCHED, "ada@example.com", 1)
    assert engine.heights[0] == pytest.approx(HEADER_BAND * A4_HEIGHT_PT * engine.dpi / 72, abs=2)
    assert [(r.page, r.part) for r in result.regions] == [(1, "header"), (1, "rest")]


def test_a_letterhead_naming_one_user_and_a_body_naming_another_names_both() -> None:
    # GIVEN a scanned page: an agency letterhead naming its recruiter (a user), the candidate (a user)
    # lower down
    engine = FakeEngine(["Northwind Talent  recruiter@agency.example.org", "Candidate: jane@example.com"])
    users = Users("recruiter@agency.example.org", "jane@example.com")
    # WHEN scanned
    result = read(inked(1), engine, users)
    # THEN both are named by the deciding page (the caller's rule makes it ambiguous), in reading order
    assert result.named == ("recruiter@agency.example.org", "jane@example.com")
    assert [r.part for r in result.regions] == ["header", "rest"]


def test_rest_of_page_one_overlaps_the_band_then_whole_pages_follow_in_order() -> None:
    # GIVEN a three-page scan whose only address is on page 3
    engine = FakeEngine(["Name", "body", "more body", "Contact: late@example.com"])
    users = Users("late@example.com")
    # WHEN scanned
    result = read(inked(3), engine, users)
    # THEN band, rest of page 1 (overlapping the band), page 2, page 3: then it stops
    assert [(r.page, r.part) for r in result.regions] == [
        (1, "header"),
        (1, "rest"),
        (2, "page"),
        (3, "page"),
    ]
    band, rest, whole = engine.heights[0], engine.heights[1], engine.heights[2]
    assert band + rest > whole  # the overlap
    assert (result.email, result.pages_read, result.page_count) == ("late@example.com", 3, 3)


def test_reading_stops_at_the_end_of_the_first_page_naming_a_user() -> None:
    # GIVEN a 10-page scan naming a user on page 2
    engine = FakeEngine(["", "", "Email: found@example.com", "never@example.com"])
    users = Users("found@example.com", "never@example.com")
    # WHEN scanned
    result = read(inked(10), engine, users)
    # THEN nothing after page 2 was read
    assert (result.email, result.pages_read, len(engine.heights)) == ("found@example.com", 2, 3)
    assert users.calls == [["found@example.com"]]


def test_unknown_addresses_are_looked_up_once_and_reading_goes_on() -> None:
    # GIVEN a recruiter's address in the header, the candidate's (a user) lower on page 1
    engine = FakeEngine(
        ["Sent by talent@agency.example.org", "Jane: jane@example.com talent@agency.example.org"]
    )
    users = Users("jane@example.com")
    # WHEN scanned
    result = read(inked(1), engine, users)
    # THEN the user wins, and each address was looked up once
    assert result.email == "jane@example.com"
    assert users.calls == [["talent@agency.example.org"], ["jane@example.com"]]


def test_page_limit_ends_a_long_scan_with_its_own_reason() -> None:
    # GIVEN a 12-page scan naming nobody
    engine = FakeEngine(answer=lambda call: f"clause {call}")
    # WHEN scanned with the default limit (5 pages)
    result = read(inked(12), engine, Users())
    # THEN five pages were read (band + rest of page 1, pages 2-5) and the reason says why it stopped
    assert (result.reason, result.pages_read, result.page_count) == (ocr.OCR_PAGE_LIMIT, 5, 12)
    assert len(engine.heights) == 6


@pytest.mark.parametrize(
    ("texts", "reason"),
    [
        (["no address here", "none here either"], Reason.NO_EMAIL),
        (["x", "stranger@example.net"], Reason.NO_USER),
    ],
)
def test_a_scan_read_to_its_end_names_nobody(texts: list[str], reason: str) -> None:
    # GIVEN a one-page scan (within the page limit)  WHEN nobody is named  THEN no_email / no_user
    result = read(inked(1), FakeEngine(texts), Users("someone@example.com"))
    assert (result.reason, result.email, result.match, result.pages_read) == (reason, None, None, 1)


def test_a_misread_address_matches_nobody() -> None:
    # GIVEN OCR that read "rn" for "m" in a user's address
    engine = FakeEngine(["ada.lovelace@exarnple.com"])
    # WHEN scanned  THEN nobody is linked: matching stays exact
    result = read(inked(1), engine, Users("ada.lovelace@example.com"))
    assert (result.reason, result.email) == (Reason.NO_USER, None)


def test_matching_is_case_insensitive_like_text_pdfs() -> None:
    result = read(inked(1), FakeEngine(["ADA@Example.COM"]), Users("ada@example.com"))
    assert result.email == "ada@example.com"


def test_a_region_showing_an_address_of_nobody_is_read_again_at_another_resolution() -> None:
    # GIVEN a header band where the first reading garbles the owner's address, the second does not
    engine = FakeEngine(["ada.perl man47@example-corp.fr", "ada.perlman47@example-corp.fr"])
    users = Users("ada.perlman47@example-corp.fr")
    # WHEN scanned
    result = read(inked(1), engine, users)
    # THEN the band was read twice, the second time 1.5x larger, and the owner found (the rest of the
    # page read too)
    assert [r.part for r in result.regions] == ["header", "header again", "rest"]
    assert engine.heights[1] == pytest.approx(engine.heights[0] * 1.5, abs=2)
    assert result.email == "ada.perlman47@example-corp.fr"


def test_a_region_without_an_at_sign_is_read_once() -> None:
    engine = FakeEngine(["Ada Lovelace, engineer", "Email: ada@example.com"])
    result = read(inked(1), engine, Users("ada@example.com"))
    assert [r.part for r in result.regions] == ["header", "rest"]


def test_second_looks_can_be_turned_off() -> None:
    engine = FakeEngine(["stranger@example.net", "x"])
    result = read(inked(1), engine, Users(), second_look=False)
    assert [r.part for r in result.regions] == ["header", "rest"]


def test_budget_is_checked_between_regions_in_process() -> None:
    # GIVEN an engine that takes 4 s a region (on a fake clock) and a 10-second budget
    clock = SteppingClock()

    def slow(call: int) -> str:
        clock.now += 4
        return ""

    engine = FakeEngine(answer=slow)
    # WHEN a long scan is read  THEN PdfTimeout after the third region
    with pytest.raises(PdfTimeout):
        read(inked(8), engine, Users(), budget_seconds=10, clock=clock)
    assert len(engine.heights) == 3


def test_lookup_time_does_not_count_against_the_budget() -> None:
    # GIVEN a users table that takes 60 s per lookup (fake clock) and a 10-second budget
    clock = SteppingClock()
    users = Users("late@example.com")

    def slow_lookup(candidates: Sequence[str]) -> Mapping[str, int]:
        clock.now += 60
        return users(candidates)

    engine = FakeEngine(["a@example.com", "b@example.com", "late@example.com"])
    # WHEN scanned  THEN the scan completes and the figures keep lookups apart
    result = ocr.scan(inked(2), slow_lookup, engine=engine, isolate=False, budget_seconds=10, clock=clock)
    assert result.email == "late@example.com"
    assert result.lookup_seconds == 180
    assert result.ocr_seconds < 10


def test_regions_without_ink_are_not_given_to_the_engine() -> None:
    # GIVEN a scanned blank sheet (paper grain, no text)
    engine = FakeEngine(answer=lambda call: "garbage")
    # WHEN scanned  THEN the engine never sees it (its thresholding would read the grain as text)
    result = read(scans.blank_scan(dpi=150), engine, Users())
    assert (result.reason, engine.heights) == (Reason.NO_EMAIL, [])


def test_a_huge_page_is_rendered_within_the_pixel_cap() -> None:
    # GIVEN a page of 200 x 200 inches (14,400 pt square)
    data = pdfs.assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 14400 14400] >>",
        ]
    )
    # WHEN rendered for a 300-dpi engine  THEN at a lower resolution, within MAX_PIXELS
    raster = render(open_document(data), Region(0, "page", 0.0, 1.0), 300)
    assert raster.width * raster.height <= MAX_PIXELS
    assert raster.dpi < 300


@pytest.mark.parametrize(
    ("scanned_at", "expected"),
    [(None, 200), (150.1, 300), (200.05, 200), (300.08, 300), (96, 288), (600, MAX_SCAN_DPI)],
)
def test_scans_are_rendered_at_a_whole_multiple_of_their_own_resolution(
    scanned_at: float | None, expected: float
) -> None:
    # GIVEN an engine wanting at least 200 dpi  THEN no scan is resampled by an odd factor
    assert render_dpi(200, scanned_at) == expected


def test_a_scans_resolution_is_read_from_its_page_image() -> None:
    doc = open_document(scans.scan_doc(4, 150).data)
    assert scan_dpi(doc[0]) == pytest.approx(150, abs=1)
    assert scan_dpi(open_document(inked(1))[0]) is None


def test_what_pdfium_cannot_open_is_malformed() -> None:
    with pytest.raises(MalformedPdf):
        read(b"%PDF-1.4\nnot really", FakeEngine(), Users())


def test_results_carry_figures_never_addresses() -> None:
    result = read(inked(1), FakeEngine(["x", "someone@example.com"]), Users())
    assert "someone" not in repr(result.detail)
    assert [r.part for r in result.regions] == ["header", "rest", "rest again"]
    assert all(r.candidates in (0, 1) for r in result.regions)


# --- OCR text -> candidates --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # tesseract's gaps around "@" and dots in wide-bearing fonts are not spaces on paper
        ("ghamilton @ mail.example.co.uk", ["ghamilton@mail.example.co.uk"]),
        ("Write to sophie .wirth@students.example.edu or", ["sophie.wirth@students.example.edu"]),
        ("jane. doe@example.com", ["jane.doe@example.com"]),
        ("ada.perlman47 @example-corp. fr", ["ada.perlman47@example-corp.fr"]),
        # a domain that already has its dot is left alone: the sentence goes on after it
        ("ada@example.com. Then", ["ada@example.com"]),
        # the tail of a gapped address is never a candidate on its own
        ("Lyon. ada@example.com", ["lyon.ada@example.com"]),
        # a line break is never joined, and a handle is not an address
        ("Twitter @bob  mail: bob@x.io", ["bob@x.io"]),
        ("Email: Ada.Lovelace@Example.com", ["ada.lovelace@example.com"]),
        ("nothing to see", []),
    ],
)
def test_ocr_text_yields_whole_addresses(text: str, expected: list[str]) -> None:
    assert ocr.candidates(text) == expected


def test_two_spaces_around_at_are_a_real_gap() -> None:
    assert ocr.candidates("name  @  example.com") == []


# --- the worker: the budget holds inside a region -----------------------------------------------------


class HangingEngine(FakeEngine):
    """Never finishes reading the first region of a document that asks it to hang."""

    def read(self, raster: Raster) -> str:
        if raster.height > 0 and self.answer is None:
            time.sleep(600)
        return super().read(raster)


@pytest.mark.timeout(60)  # a hang guard: the worker must be killed at the budget
def test_a_region_that_never_finishes_is_killed_at_the_budget() -> None:
    # GIVEN an engine that hangs inside the first region, and a 1-second budget
    engine = HangingEngine()
    # WHEN scanned in the worker  THEN PdfTimeout, the worker killed mid-region
    with pytest.raises(PdfTimeout):
        ocr.scan(inked(1), Users(), engine=engine, budget_seconds=1.0)
    # AND the next document gets a fresh worker that works
    engine.answer = lambda call: "ok@example.com"
    result = ocr.scan(inked(1), Users("ok@example.com"), engine=engine, budget_seconds=30)
    assert result.email == "ok@example.com"


def test_the_worker_stops_at_a_match_and_serves_the_next_document() -> None:
    # GIVEN one engine (the worker inherits it) naming a user in every header band
    engine = FakeEngine(answer=lambda call: "Email: first@example.com")
    users = Users("first@example.com")
    # WHEN two documents are scanned through the worker
    one = ocr.scan(inked(3), users, engine=engine)
    two = ocr.scan(inked(3), users, engine=engine)
    # THEN each stops at the end of page 1 (whose rest, showing an "@" that named nobody new, is read
    # twice: a second user misread there would make the page ambiguous); the model was loaded here,
    # before the fork, once
    parts = ["header", "rest", "rest again"]
    assert [r.part for r in one.regions] == [r.part for r in two.regions] == parts
    assert (one.email, two.email, engine.loaded) == ("first@example.com", "first@example.com", 1)


def test_the_worker_reads_a_region_again_when_asked() -> None:
    # GIVEN an engine whose first reading of the band names nobody, its second the owner
    engine = FakeEngine(answer=lambda call: "owner@example.com" if call % 2 else "0wner@example.com")
    # WHEN scanned through the worker  THEN the band is read twice there and the owner found
    result = ocr.scan(inked(1), Users("owner@example.com"), engine=engine)
    assert [r.part for r in result.regions][:2] == ["header", "header again"]
    assert result.email == "owner@example.com"


def test_the_worker_reports_what_pdfium_cannot_open() -> None:
    with pytest.raises(MalformedPdf):
        ocr.scan(b"%PDF-1.4\nnot really", Users(), engine=FakeEngine())


# --- the real engine on generated scans ----------------------------------------------------------------

ENGINE = ocr.Tesseract()
# The budget is wall time; these tests are about reading, and share the CPU with whatever else runs.
ROOMY = 600.0


@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.slow)])  # seconds each
def test_tesseract_reads_a_header_address_from_the_band_alone(seed: int) -> None:
    # GIVEN a scanned résumé (200 dpi, skewed, noisy, JPEG) whose address is in the header
    doc = next(
        d
        for d in (scans.scan_doc(s, 200) for s in range(seed * 1000, seed * 1000 + 50))
        if d.where == "header"
    )
    # WHEN scanned with Tesseract
    result = ocr.scan(doc.data, Users(doc.email), engine=ENGINE, budget_seconds=ROOMY)
    # THEN the owner is found in the header band (and the rest of page 1 read before deciding)
    assert (result.email, [r.part for r in result.regions]) == (doc.email, ["header", "rest"])
    assert result.regions[0].candidates == 1


def test_tesseract_reads_a_page_of_shapes_as_no_text() -> None:
    # GIVEN an image-only page of filled shapes (tesserocr finds "lines" there with no text at all)
    from tools import samples

    # WHEN Tesseract reads it THEN it names nobody, without failing the worker (it raised before)
    result = ocr.scan(samples.image_only(), Users(), engine=ocr.Tesseract())
    assert result.reason == Reason.NO_EMAIL


class _Line:
    """A text line of tesserocr's iterator whose text cannot be read: GetUTF8Text raises ``error``."""

    def __init__(self, error: RuntimeError) -> None:
        self.error = error

    def IsAtBeginningOf(self, level: int) -> bool:
        return True

    def GetUTF8Text(self, level: int) -> str:
        raise self.error

    def BoundingBox(self, level: int) -> tuple[int, int, int, int]:
        return (0, 0, 10, 10)


@pytest.mark.parametrize(
    ("error", "skipped"),
    [(RuntimeError(ocr.engine.NO_TEXT_RETURNED), True), (RuntimeError("engine state broken"), False)],
)
def test_only_a_line_without_glyphs_is_skipped_any_other_engine_error_fails_the_read(
    error: RuntimeError, skipped: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN Tesseract's line iterator yielding a line whose text cannot be read
    import tesserocr

    engine = ocr.Tesseract()
    monkeypatch.setattr(engine, "_api", type("Api", (), {"GetIterator": lambda self: object()})())
    monkeypatch.setattr(tesserocr, "iterate_level", lambda iterator, level: iter([_Line(error)]))
    # WHEN the lines are listed
    # THEN only tesserocr's "No text returned" reads as a line without text; anything else propagates
    # (the worker fails, the file is retried and recorded failed: never read as "names nobody")
    if skipped:
        assert list(engine._lines()) == []
    else:
        with pytest.raises(RuntimeError, match="engine state broken"):
            list(engine._lines())


@pytest.mark.slow
def test_tesseract_reads_an_address_on_page_two() -> None:
    doc = next(d for d in (scans.scan_doc(s, 300) for s in range(500, 600)) if d.where == "page2")
    result = ocr.scan(doc.data, Users(doc.email), engine=ENGINE, budget_seconds=ROOMY)
    assert (result.email, result.pages_read) == (doc.email, 2)
