"""What counts as a PDF: every check that can reject a document before a page's text is read.

pypdf reads the header, the %%EOF and startxref at the end, the cross-reference they point at, the
catalog, the page tree root and the encryption dictionary, never a page (validate). pdfium, opening the
document for reading, turns a password it needs into EncryptedPdf and checks that every page the tree
promises is there (_open_pdfium, _check_page_tree: the page reader, _read, calls them under PDFIUM_LOCK).

Importing this module routes pypdf's logger through _collector (below): validation counts pypdf's
repairs from it, and no pypdf message, which can quote bytes of the file, is ever printed. A module runs
once per process, and every module of the package that parses imports this one (the package's
__init__ does too), so the collector is installed exactly once, before pypdf parses anything.

No I/O: the document is bytes in memory; the only output is a debug count of pypdf's warnings.
"""

from __future__ import annotations

import ctypes
import io
import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pypdf
import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c
from pypdf.generic import DictionaryObject

from pdfbatch.errors import EncryptedPdf, MalformedPdf

# The package's one logger, named "pdfbatch.pdf" as before the split: the forked reader silences it.
logger = logging.getLogger(__package__)

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

    Reads the header, trailer, cross-reference, catalog and page tree root only, never a page: the
    pages themselves are checked by pdfium when the document is opened for reading (_check_page_tree).
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
            # The page tree root's /Count, not len(reader.pages): that walks every page object (~13 ms
            # on a 100-page manual, most of a scan). _read checks it against the pages pdfium finds.
            tree = catalog["/Pages"].get_object()
            count = tree.get("/Count") if isinstance(tree, DictionaryObject) else None
            if not isinstance(count, int) or isinstance(count, bool):
                raise MalformedPdf("page tree without a page count")
            page_count = int(count)
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
# pdfium: opening the document for reading, and its page tree (callers hold PDFIUM_LOCK)
# ---------------------------------------------------------------------------------------------


def _open_pdfium(data: bytes) -> pdfium.PdfDocument:
    try:
        # None opens a document without a user password (owner password only) as well as a plain one.
        return pdfium.PdfDocument(data, password=None)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise EncryptedPdf("pdfium needs a password") from exc
        raise MalformedPdf("pdfium cannot open the document") from exc


def _check_page_tree(doc: pdfium.PdfDocument, count: int) -> None:
    """Every page the tree's /Count promises resolves to a page dictionary (a tree that lists itself or
    points at non-pages fails here). pdfium walks the tree in C without parsing any content: ~0.7 ms for
    100 pages, where pypdf's walk took ~13 ms."""
    if len(doc) != count:
        raise MalformedPdf("the page tree's /Count disagrees with its pages")
    size = pdfium_c.FS_SIZEF()
    for index in range(count):
        if not pdfium_c.FPDF_GetPageSizeByIndexF(doc, index, ctypes.byref(size)):
            raise MalformedPdf(f"page {index + 1} is not in the page tree")


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
