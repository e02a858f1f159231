"""A validated document's pages, one at a time: the text pdfium extracts from each (ordered by position
on the page) and the addresses of its mailto: links, turned into the page's new candidate emails.

_read is every step that parses untrusted bytes, validation included. It runs where scan() puts it: in
the forked reader (reader.py) by default, or in this process (scan._InProcess). It has a module of its
own because both of those drive it and scan.py imports reader.py: in scan.py it would make the two
import each other.

No I/O: the document is bytes in memory. pdfium is not thread-safe: every call into it goes through
PDFIUM_LOCK.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Generator
from dataclasses import dataclass
from urllib.parse import unquote

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pdfbatch.errors import MalformedPdf
from pdfbatch.pdf.emails import find_emails
from pdfbatch.pdf.structure import PdfInfo, _check_page_tree, _open_pdfium, validate

# At most this many new candidates per page go to one lookup (a page listing thousands of addresses
# must not become a giant SQL IN list); the rest of that page's candidates are dropped.
MAX_CANDIDATES_PER_PAGE = 200
# At most this many link annotations are read per page.
_MAX_LINKS_PER_PAGE = 500

# PDFium is not thread-safe: every call into it from this process goes through this lock. A Lambda
# execution environment runs one invocation at a time, so it only matters for threaded callers
# (tests, benchmarks); lookups run outside it. Forks happen under it too (see reader._Reader).
PDFIUM_LOCK = threading.RLock()


@dataclass(frozen=True)
class _Page:
    """What a page offers the matcher: its candidate emails not seen on earlier pages, with how many
    pages have been read so far and whether any of them held text."""

    candidates: list[str]
    any_text: bool
    pages_read: int


def _read(data: bytes, max_pages: int) -> Generator[PdfInfo | _Page, None, None]:
    """Validate ``data``, then yield each page's candidates: every step that parses untrusted bytes."""
    info = validate(data)
    yield info
    seen: set[str] = set()
    any_text = False
    with PDFIUM_LOCK:
        doc = _open_pdfium(data)
    try:
        with PDFIUM_LOCK:
            _check_page_tree(doc, info.page_count)
        n_pages = min(info.page_count, max_pages)
        for index in range(n_pages):
            with PDFIUM_LOCK:
                text, links = _page_text(doc, index)
            fresh = [e for e in dict.fromkeys(find_emails(text) + links) if e not in seen]
            fresh = fresh[:MAX_CANDIDATES_PER_PAGE]
            seen.update(fresh)
            any_text = any_text or bool(text.strip())
            yield _Page(fresh, any_text, index + 1)
    finally:
        with PDFIUM_LOCK:
            doc.close()


def _page_text(doc: pdfium.PdfDocument, index: int) -> tuple[str, list[str]]:
    """The text of page ``index`` and the addresses of its mailto: links."""
    try:
        page = doc[index]
    except pdfium.PdfiumError as exc:
        raise MalformedPdf(f"page {index + 1} cannot be loaded") from exc
    try:
        textpage = page.get_textpage()
        try:
            # get_text_bounded orders characters by position; get_text_range follows pdfium's char list,
            # which breaks glyphs drawn out of order into one line each.
            text: str = textpage.get_text_bounded()
        finally:
            textpage.close()
        return text, _mailto_links(doc, page)
    except pdfium.PdfiumError as exc:
        raise MalformedPdf(f"page {index + 1} text cannot be read") from exc
    finally:
        page.close()


def _mailto_links(doc: pdfium.PdfDocument, page: pdfium.PdfPage) -> list[str]:
    """Addresses of the page's ``mailto:`` link annotations (a clickable "Email me" hides the address)."""
    emails: list[str] = []
    pos = ctypes.c_int(0)
    link = pdfium_c.FPDF_LINK()
    for _ in range(_MAX_LINKS_PER_PAGE):
        if not pdfium_c.FPDFLink_Enumerate(page, ctypes.byref(pos), ctypes.byref(link)):
            break
        action = pdfium_c.FPDFLink_GetAction(link)
        if not action or pdfium_c.FPDFAction_GetType(action) != pdfium_c.PDFACTION_URI:
            continue
        size = pdfium_c.FPDFAction_GetURIPath(doc, action, None, 0)
        if size <= 0 or size > 4096:
            continue
        buf = ctypes.create_string_buffer(size)
        pdfium_c.FPDFAction_GetURIPath(doc, action, buf, size)
        uri = buf.value.decode("latin-1")
        if uri[:7].lower() == "mailto:":
            emails.extend(find_emails(unquote(uri[7:].split("?", 1)[0])))
    return emails
