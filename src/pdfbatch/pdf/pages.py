"""A validated document's pages, one at a time: the addresses a person can see on each (rule "visible").

_Document is every step that parses untrusted bytes, validation included. It runs where scan() puts it:
in the forked reader (reader.py) by default, or in this process (scanning._InProcess). It has a module
of its own because both of those drive it and scanning.py imports reader.py.

Per page: pdfium's characters -> glyphs.occurrences (addresses whole, across wraps and letter
spacing) -> the cheap checks per glyph (visibility.py: render mode, colour alpha, size, crop box) ->
the page's candidates. The render check (visibility.shows) is done afterwards, and only for the
candidates the caller says belong to users (``visible``), while the page is still open.

Filled form fields and free-text annotations count as text: on a page with them, their appearances are
drawn into the page (FPDFPage_Flatten, on this in-memory copy only), so a value is read and checked like
any other text; annotations a viewer never draws (the hidden or no-view flag) are removed first.
mailto: links are not read: the address behind "Email me" is not something a person sees.

A page whose text is not what it shows (visibility.reads_as_scan: a searchable scan's invisible layer,
text under a page image, glyphs without Unicode, a page image with next to no text) is marked
``scan_like``: scan() hands the document to the OCR lane there, so its layer never decides on its own.

No I/O: the document is bytes in memory. pdfium is not thread-safe: every call into it goes through
PDFIUM_LOCK.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pdfbatch.errors import MalformedPdf
from pdfbatch.pdf import region, visibility
from pdfbatch.pdf.glyphs import Box, occurrences
from pdfbatch.pdf.structure import _check_page_tree, _open_pdfium, validate

# PDFium is not thread-safe: every call into it from this process goes through this lock. A Lambda
# execution environment runs one invocation at a time, so it only matters for threaded callers
# (tests, benchmarks); lookups run outside it. Forks happen under it too (see reader._Reader).
PDFIUM_LOCK = threading.RLock()
_MAX_VEILED = 20  # veiled addresses rendered per page to see whether ink shows through them


@dataclass(frozen=True)
class _Page:
    """What a page offers the matcher: its candidate addresses in document order, without those an
    earlier page already offered unless they belong to users (a user's address may be hidden on one
    page and visible on the next), with how many pages have been read and whether any held text."""

    candidates: list[str]
    any_text: bool
    pages_read: int
    readings: list[list[str | None]] = field(default_factory=list)  # places read two ways (glyphs.Occurrence)
    # Its text is not what it shows (visibility.reads_as_scan): only OCR of its pixels may decide it.
    scan_like: bool = False


class _Document:
    """One validated document open in pdfium, read a page at a time (``pages``); ``visible`` confirms,
    by rendering, which of the last page's candidates a person sees. ``close`` releases pdfium."""

    def __init__(self, data: bytes, max_pages: int) -> None:
        self.info = validate(data)
        self._max_pages = max_pages
        self._offered: set[str] = set()  # candidates offered on earlier pages
        self._users: set[str] = set()  # candidates the caller asked to confirm (they belong to users)
        self._page: _OpenPage | None = None
        with PDFIUM_LOCK:
            self._doc = _open_pdfium(data)
            try:
                _check_page_tree(self._doc, self.info.page_count)
                self._forms = pdfium_c.FPDF_GetFormType(self._doc) != pdfium_c.FORMTYPE_NONE
                if self._forms:
                    self._doc.init_forms()
            except BaseException:
                self._doc.close()
                raise

    def pages(self) -> Iterator[_Page]:
        """Each page's candidates, in page order, up to ``max_pages``."""
        any_text = False
        for index in range(min(self.info.page_count, self._max_pages)):
            with PDFIUM_LOCK:
                self._close_page()
                self._page = page = _OpenPage(self._doc, index)
            emails = list(dict.fromkeys(o.email for o in page.occurrences if not o.readings))
            fresh = [e for e in emails if e not in self._offered or e in self._users]
            self._offered.update(emails)
            readings = [list(o.readings) for o in page.occurrences if o.readings]
            any_text = any_text or page.any_text
            yield _Page(fresh, any_text, index + 1, readings, page.scan_like)

    def visible(self, emails: Sequence[str]) -> list[str]:
        """Those of ``emails`` that a person sees on the page read last (at least one occurrence of each
        shows ink against what is drawn under it), in the order their first visible occurrences come."""
        self._users.update(emails)
        page = self._page
        if page is None:
            return []
        with PDFIUM_LOCK:
            shown = [(position, email) for email in emails if (position := page.shows(email)) is not None]
        return [email for _, email in sorted(shown)]

    def evidence(self, addresses: Sequence[str]) -> bytes | None:
        """The region of the page read last around where ``addresses`` are drawn, as a PNG
        (region.png), or None; None too when pdfium cannot render it (evidence is best effort, never the
        file's outcome)."""
        page = self._page
        if page is None or page.textpage is None:
            return None
        with PDFIUM_LOCK:
            try:
                return region.png(page.page, page.textpage, addresses)
            except (pdfium.PdfiumError, ValueError):
                return None

    def close(self) -> None:
        """Release the page and the document."""
        with PDFIUM_LOCK:
            self._close_page()
            self._doc.close()

    def _close_page(self) -> None:
        if self._page is not None:
            self._page.close()
            self._page = None


class _OpenPage:
    """A loaded page with its text page, and the occurrences of addresses that pass the cheap checks."""

    def __init__(self, doc: pdfium.PdfDocument, index: int) -> None:
        try:
            self.page = doc[index]
        except pdfium.PdfiumError as exc:
            raise MalformedPdf(f"page {index + 1} cannot be loaded") from exc
        self.textpage: pdfium.PdfTextPage | None = None
        try:
            if visibility.draw_form_fields(doc, self.page):
                self.page.close()
                self.page = doc[index]  # reloaded: the flattened field values are now page content
            self.textpage = self.page.get_textpage()
            glyphs = _PdfiumGlyphs(self.textpage)
            self.any_text = bool(glyphs.text.strip())
            self.checks = visibility.GlyphChecks(self.page, self.textpage)
            found = list(occurrences(glyphs))
            self.occurrences = [o for o in found if all(map(self.checks.visible, o.glyphs))]
            # An address whose glyphs paint no ink of their own over ink something else draws there (a
            # gradient through them: CSS background-clip: text) is read from the pixels, by OCR.
            veiled = [
                o for o in found if o not in self.occurrences and all(map(self.checks.veiled, o.glyphs))
            ]
            self.scan_like = visibility.reads_as_scan(self.page, self.checks, glyphs.text) or any(
                visibility.on_ink(self.page, self.checks, o.glyphs) for o in veiled[:_MAX_VEILED]
            )
        except pdfium.PdfiumError as exc:
            self.close()
            raise MalformedPdf(f"page {index + 1} text cannot be read") from exc
        except BaseException:
            self.close()
            raise
        self._shown: dict[str, int | None] = {}

    def shows(self, email: str) -> int | None:
        """Where (the first glyph of) the first occurrence of ``email`` on this page that shows ink against
        what is drawn under it starts; None when none does."""
        if email not in self._shown:
            assert self.textpage is not None
            self._shown[email] = next(
                (
                    min(o.glyphs)
                    for o in self.occurrences
                    if (o.email == email or email in o.readings)
                    and visibility.shows(self.page, self.textpage, self.checks, o.glyphs)
                ),
                None,
            )
        return self._shown[email]

    def close(self) -> None:
        if self.textpage is not None:
            self.textpage.close()
            self.textpage = None
        self.page.close()


class _PdfiumGlyphs:
    """glyphs.Glyphs over a pdfium text page."""

    def __init__(self, textpage: pdfium.PdfTextPage) -> None:
        self._raw = textpage.raw
        count = pdfium_c.FPDFText_CountChars(self._raw)
        self.text = _aligned_text(self._raw, 0, count) if count > 0 else ""
        self._box = pdfium_c.FS_RECTF()

    def generated(self, index: int) -> bool:
        return bool(pdfium_c.FPDFText_IsGenerated(self._raw, index) == 1)

    def box(self, index: int) -> Box:
        pdfium_c.FPDFText_GetLooseCharBox(self._raw, index, self._box)
        box = self._box
        return (box.left, box.bottom, box.right, box.top)


def _aligned_text(textpage: pdfium_c.FPDF_TEXTPAGE, start: int, count: int) -> str:
    """The characters ``start`` to ``start + count``, exactly one per index.

    FPDFText_GetText drops characters that map to no Unicode value (NUL), which would shift every
    index after them, so a range whose text comes back short is split until the gaps are found; a
    missing character becomes NUL (a glyph nobody can read, which ends any address).
    """
    text = _get_text(textpage, start, count)
    if len(text) == count:
        return text
    if count <= 16:
        return "".join(chr(pdfium_c.FPDFText_GetUnicode(textpage, i)) for i in range(start, start + count))
    half = count // 2
    return _aligned_text(textpage, start, half) + _aligned_text(textpage, start + half, count - half)


def _get_text(textpage: pdfium_c.FPDF_TEXTPAGE, start: int, count: int) -> str:
    buffer = ctypes.create_string_buffer((count + 1) * 2)
    written = pdfium_c.FPDFText_GetText(
        textpage, start, count, ctypes.cast(buffer, ctypes.POINTER(ctypes.c_ushort))
    )
    return buffer.raw[: max(written - 1, 0) * 2].decode("utf-16-le", errors="replace")
