"""bytes -> validated document -> page texts -> candidate emails -> scan(lookup). Pure: no I/O.

Two libraries, each for what it does best: pypdf checks structure and encryption (it reads the xref and
the page tree without touching page content), pypdfium2 extracts text (faster, and it orders glyphs by
position on the page, where pypdf follows the content stream and can read an address backwards).

pdfium is not thread-safe: call this module from one thread per process (one Lambda invocation is).
"""

from __future__ import annotations

import ctypes
import io
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import unquote

import pypdf
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from pypdf.generic import DictionaryObject

from pdfbatch.errors import EncryptedPdf, MalformedPdf, PdfTimeout
from pdfbatch.model import Reason

T = TypeVar("T")

logger = logging.getLogger(__name__)

# At most this many new candidates per page go to one lookup (a page listing thousands of addresses
# must not become a giant SQL IN list); the rest of that page's candidates are dropped.
MAX_CANDIDATES_PER_PAGE = 200
# At most this many link annotations are read per page.
_MAX_LINKS_PER_PAGE = 500

# ---------------------------------------------------------------------------------------------
# Emails
# ---------------------------------------------------------------------------------------------

# Characters text extraction leaves inside words: NUL, soft hyphen, zero-width space/joiners, word
# joiner, BOM. They are never part of an address and may split one, so they are deleted. Typographic
# ligatures (a font mapping "fi" to U+FB01) are spelled out. Nothing else is rewritten: a line break,
# a hyphen at a line end or a fullwidth @ is left as is, since guessing there invents addresses.
_ARTEFACTS = str.maketrans(
    {
        "\x00": None,
        "\u00ad": None,
        "\u200b": None,
        "\u200c": None,
        "\u200d": None,
        "\u2060": None,
        "\ufeff": None,
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
    }
)

# Linear by construction: the local part starts only where a run of local-part characters starts (the
# lookbehind) and is at most 64 long, and the domain's labels are separated by dots that no label
# contains, so no position is tried more than a bounded number of times. Checks that would need
# backtracking (label edges, TLD, lengths) are done in Python on each match.
_EMAIL = re.compile(r"(?<![\w.+'-])([\w.+'-]{1,64})@([\w-]+(?:\.[\w-]+)+)")
_LABEL = re.compile(r"[^\W_](?:[\w-]*[^\W_])?")


def find_emails(text: str) -> list[str]:
    """Email addresses in ``text``, lowercased, in order of first appearance, without duplicates."""
    seen: dict[str, None] = {}
    for m in _EMAIL.finditer(text.translate(_ARTEFACTS)):
        email = _clean(m.group(1), m.group(2))
        if email is not None:
            seen.setdefault(email, None)
    return list(seen)


def _clean(local: str, domain: str) -> str | None:
    # Quotes, dots and dashes glued in front ("'alice@..", "...alice@..", "--alice@..") are punctuation.
    local = local.lstrip(".'-")
    if not local or local.endswith(".") or ".." in local:
        return None
    if len(domain) > 253:
        return None
    labels = domain.split(".")
    if any(len(label) > 63 or not _LABEL.fullmatch(label) or "_" in label for label in labels):
        return None
    tld = labels[-1]
    if not ((tld.isalpha() and len(tld) >= 2) or (tld.lower().startswith("xn--") and len(tld) > 4)):
        return None
    return f"{local}@{domain}".lower()


# ---------------------------------------------------------------------------------------------
# Structure: what counts as a PDF
# ---------------------------------------------------------------------------------------------

_EOF_WINDOW = 1024  # %%EOF must sit in the last KiB, as PDF readers such as Acrobat require
_HEADER = re.compile(rb"%PDF-(\d\.\d)")
_STARTXREF = re.compile(rb"startxref\s+(\d{1,15})\s+%%EOF")
_XREF_TABLE = re.compile(rb"\s*xref\b")
_XREF_STREAM = re.compile(rb"\s*\d{1,10}\s+\d{1,5}\s+obj\s*<<")
# After the last %%EOF only padding may follow, never the start of another revision: a file cut inside
# an incremental update ends with the update's objects after the previous revision's %%EOF.
_REVISION_SYNTAX = re.compile(rb"\d\s+\d+\s+obj\b|\bxref\b|\btrailer\b|\bstartxref\b|\bendobj\b|\bstream\b")


@dataclass(frozen=True)
class PdfInfo:
    """What validation learnt about a document."""

    page_count: int
    encrypted: bool
    version: str


def validate(data: bytes) -> PdfInfo:
    """Check that ``data`` is a complete, readable PDF; raise MalformedPdf or EncryptedPdf otherwise.

    Reads the header, trailer, cross-reference and page tree only, never page content.
    """
    version = _check_bytes(data)
    with _pypdf_warnings() as warnings:
        try:
            reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
            encrypted = reader.is_encrypted
            if encrypted and reader.decrypt("") == pypdf.PasswordType.NOT_DECRYPTED:
                raise EncryptedPdf("a user password is required")
            root = reader.trailer.get("/Root")
            catalog = root.get_object() if root is not None else None
            if not isinstance(catalog, DictionaryObject) or "/Pages" not in catalog:
                raise MalformedPdf("catalog missing or without a page tree")
            page_count = len(reader.pages)
        except (EncryptedPdf, MalformedPdf):
            raise
        except pypdf.errors.FileNotDecryptedError as exc:
            raise EncryptedPdf("a user password is required") from exc
        except (pypdf.errors.DependencyError, NotImplementedError) as exc:
            # A security handler pypdf cannot run (public-key, unknown /Filter): unreadable without a key.
            raise EncryptedPdf("unsupported encryption") from exc
        except MemoryError:
            raise
        except Exception as exc:
            # pypdf raises a wide, version-dependent set of types on hostile input (PdfReadError,
            # ValueError, KeyError, RecursionError, zlib.error, ...): all mean "not a readable PDF".
            raise MalformedPdf(f"unreadable structure ({type(exc).__name__})") from exc
    repairs = [w for w in warnings if _is_repair(w)]
    if repairs:
        raise MalformedPdf(f"damaged structure ({len(repairs)} repairs needed)")
    if page_count < 1:
        raise MalformedPdf("no pages")
    return PdfInfo(page_count=page_count, encrypted=encrypted, version=version)


def _check_bytes(data: bytes) -> str:
    """Header, %%EOF, startxref and the section it points at; returns the header's version."""
    if not data:
        raise MalformedPdf("empty file")
    header = _HEADER.match(data)
    if header is None:
        raise MalformedPdf("no %PDF- header")
    tail_start = max(0, len(data) - _EOF_WINDOW)
    eof = data.rfind(b"%%EOF", tail_start)
    if eof < 0:
        raise MalformedPdf("no %%EOF near the end (truncated?)")
    if _REVISION_SYNTAX.search(data, eof + 5):
        raise MalformedPdf("PDF syntax after the last %%EOF (truncated update?)")
    pointers = list(_STARTXREF.finditer(data, max(0, tail_start - 64), eof + 5))
    if not pointers:
        raise MalformedPdf("no startxref before %%EOF")
    pointer = pointers[-1]
    offset = int(pointer.group(1))
    if offset >= pointer.start() or not (_XREF_TABLE.match(data, offset) or _XREF_STREAM.match(data, offset)):
        raise MalformedPdf("startxref does not point at a cross-reference section")
    return header.group(1).decode("ascii")


# ---------------------------------------------------------------------------------------------
# pypdf logging: observed for repairs, never printed (messages may quote bytes of the file)
# ---------------------------------------------------------------------------------------------

# Message templates (not formatted messages) pypdf emits when it had to guess: a rebuilt or repaired
# cross-reference, a missing %%EOF, an object found by scanning, a /Prev loop, a catalog searched for.
_REPAIR_MARKERS = (
    *("xref", "eof", "repair", "rebuild", "wrong pointing", "not defined", " found"),
    *("catalog", "root", "circular", "truncated"),
)


def _is_repair(template: str) -> bool:
    lowered = template.lower()
    return any(marker in lowered for marker in _REPAIR_MARKERS)


class _Collector(logging.Handler):
    """The one route out of pypdf's loggers: keeps each warning's template for the validation running
    on this thread and strips the record's arguments, which can quote the file (a dictionary key, a
    header, a name), before any other handler can format them."""

    def __init__(self) -> None:
        super().__init__(level=logging.NOTSET)
        self.local = threading.local()

    def emit(self, record: logging.LogRecord) -> None:
        sink: list[str] | None = getattr(self.local, "sink", None)
        if sink is not None:
            sink.append(str(record.msg))
        record.args = None  # later handlers see the template only, e.g. "... for key %(key)s"
        record.exc_info = record.exc_text = None


_collector = _Collector()
_pypdf_logger = logging.getLogger("pypdf")
_pypdf_logger.handlers.insert(0, _collector)  # first, so it scrubs before anyone else formats
_pypdf_logger.setLevel(logging.WARNING)
_pypdf_logger.propagate = False  # nothing from pypdf reaches the root logger (Lambda, Powertools)


@contextmanager
def _pypdf_warnings() -> Iterator[list[str]]:
    sink: list[str] = []
    _collector.local.sink = sink
    try:
        yield sink
    finally:
        _collector.local.sink = None
        if sink:
            logger.debug("pypdf warnings during validation", extra={"pypdf_warnings": len(sink)})


# ---------------------------------------------------------------------------------------------
# Scan
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scan(Generic[T]):
    """What scanning one PDF found; ``match`` is the lookup's value for ``email``."""

    reason: Reason  # MATCHED | NO_TEXT_LAYER | NO_EMAIL | NO_USER
    email: str | None
    match: T | None
    pages_read: int
    page_count: int
    extract_seconds: float  # validation + text extraction (the time the budget bounds)
    lookup_seconds: float
    validate_seconds: float = 0.0


Lookup = Callable[[Sequence[str]], Mapping[str, T]]

# PDFium is not thread-safe: every call into it from this process goes through this lock. A Lambda
# execution environment runs one invocation at a time, so it only matters for threaded callers
# (tests, benchmarks); lookups run outside it.
PDFIUM_LOCK = threading.RLock()


def scan(
    data: bytes,
    lookup: Lookup[T],
    *,
    max_pages: int,
    budget_seconds: float,
    clock: Callable[[], float] = time.monotonic,
) -> Scan[T]:
    """Validate ``data``, then read pages until the first candidate email that ``lookup`` knows.

    ``lookup`` is called once per page that brings new candidates, with those candidates in document
    order; it returns the known ones (keys compared lowercased). The first known candidate in document
    order wins. Raises MalformedPdf, EncryptedPdf, or PdfTimeout when extraction (lookups excluded)
    exceeds ``budget_seconds`` between two pages.
    """
    started = clock()
    info = validate(data)
    validate_seconds = clock() - started
    lookup_seconds = 0.0
    seen: set[str] = set()
    any_text = False
    pages_read = 0

    def result(reason: Reason, email: str | None = None, match: T | None = None) -> Scan[T]:
        return Scan(
            reason=reason,
            email=email,
            match=match,
            pages_read=pages_read,
            page_count=info.page_count,
            extract_seconds=clock() - started - lookup_seconds,
            lookup_seconds=lookup_seconds,
            validate_seconds=validate_seconds,
        )

    with PDFIUM_LOCK:
        doc = _open_pdfium(data)
    try:
        with PDFIUM_LOCK:
            n_pages = min(len(doc), max_pages)
        for index in range(n_pages):
            # A single pathological page (a huge content stream, a deep form XObject nest) cannot be
            # interrupted here: only the Lambda timeout, or a subprocess, bounds one page's extraction.
            if clock() - started - lookup_seconds > budget_seconds:
                raise PdfTimeout(f"budget of {budget_seconds}s spent after {pages_read} pages")
            with PDFIUM_LOCK:
                text, links = _page_text(doc, index)
            pages_read += 1
            any_text = any_text or bool(text.strip())
            fresh = [e for e in find_emails(text) + links if e not in seen]
            fresh = list(dict.fromkeys(fresh))[:MAX_CANDIDATES_PER_PAGE]
            if not fresh:
                continue
            seen.update(fresh)
            t = clock()
            found = lookup(fresh)
            lookup_seconds += clock() - t
            known = {k.lower() for k in found}
            for email in fresh:
                if email in known:
                    return result(Reason.MATCHED, email, _get_lower(found, email))
    finally:
        with PDFIUM_LOCK:
            doc.close()
    if seen:
        return result(Reason.NO_USER)
    return result(Reason.NO_EMAIL if any_text else Reason.NO_TEXT_LAYER)


def _get_lower(found: Mapping[str, T], email: str) -> T:
    if email in found:
        return found[email]
    return next(v for k, v in found.items() if k.lower() == email)


def _open_pdfium(data: bytes) -> pdfium.PdfDocument:
    try:
        # None opens a document without a user password (owner password only) as well as a plain one.
        return pdfium.PdfDocument(data, password=None)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise EncryptedPdf("pdfium needs a password") from exc
        raise MalformedPdf("pdfium cannot open the document") from exc


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
