"""scan(): validate a document, then read it page by page until the caller's lookup knows one of a page's
candidate emails (early exit: no page after the match is read), or say why nothing matched.

The parsing runs in this thread's forked reader (reader.py), or with isolate=False in this process
(_InProcess drives pages._read); either way the lookups, the budget and the verdict stay here. No I/O of
its own: the lookup is the caller's (the users table), and the reader is reached through its pipe.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pdfbatch.errors import PdfTimeout
from pdfbatch.model import Reason
from pdfbatch.pdf.pages import _Page, _read
from pdfbatch.pdf.reader import _Remote
from pdfbatch.pdf.structure import PdfInfo

T = TypeVar("T")


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


def scan(
    data: bytes,
    lookup: Lookup[T],
    *,
    max_pages: int,
    budget_seconds: float,
    clock: Callable[[], float] = time.monotonic,
    isolate: bool = True,
) -> Scan[T]:
    """Validate ``data``, then read pages until the first candidate email that ``lookup`` knows.

    ``lookup`` is called once per page that brings new candidates, with those candidates in document
    order; it returns the known ones (keys compared lowercased). The first known candidate in document
    order wins. Raises MalformedPdf, EncryptedPdf, or PdfTimeout when validation and extraction
    (lookups excluded) exceed ``budget_seconds``.

    With ``isolate`` (the default, where ``os.fork`` exists) the parsing runs in this thread's reader,
    a long-lived forked child (``reader._Reader``) that sends back each page's candidates and waits for the
    verdict, so the budget holds even inside one page that pdfium or pypdf never finishes (the reader
    is killed and replaced), and a parser crash or memory blow-up costs the reader, not this process.
    The lookups stay here: the reader touches no connection. Without it, the budget is checked
    between pages only.
    """
    started = clock()
    lookup_seconds = 0.0
    validate_seconds = 0.0
    seen: set[str] = set()
    any_text = False
    pages_read = 0

    def left() -> float:
        return budget_seconds - (clock() - started - lookup_seconds)

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

    source: _Source = _Remote(data, max_pages) if isolate and _CAN_FORK else _InProcess(data, max_pages)
    try:
        first = source.next(left())
        if not isinstance(first, PdfInfo):
            raise RuntimeError("PDF reader sent a page before the document")
        info = first
        validate_seconds = clock() - started
        while True:
            remaining = left()
            if remaining <= 0:
                raise PdfTimeout(f"budget of {budget_seconds}s spent after {pages_read} pages")
            page = source.next(remaining)
            if page is None:
                break
            if not isinstance(page, _Page):
                raise RuntimeError("PDF reader sent the document twice")
            pages_read, any_text = page.pages_read, page.any_text
            fresh = [e for e in page.candidates if e not in seen]
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
        source.close()
    if seen:
        return result(Reason.NO_USER)
    return result(Reason.NO_EMAIL if any_text else Reason.NO_TEXT_LAYER)


class _Source(Protocol):
    """Where scan() gets the document and then its pages from; None after the last page."""

    def next(self, timeout: float) -> PdfInfo | _Page | None: ...

    def close(self) -> None: ...


class _InProcess:
    """The pages read in this process: ``timeout`` cannot interrupt a page."""

    def __init__(self, data: bytes, max_pages: int) -> None:
        self._events = _read(data, max_pages)

    def next(self, timeout: float) -> PdfInfo | _Page | None:
        return next(self._events, None)

    def close(self) -> None:
        self._events.close()  # closes the pdfium document


_CAN_FORK = hasattr(os, "fork")  # where it does not, scan() reads in this process


def _get_lower(found: Mapping[str, T], email: str) -> T:
    if email in found:
        return found[email]
    return next(v for k, v in found.items() if k.lower() == email)
