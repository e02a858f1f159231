"""scan(): read a scanned PDF region by region until a page names a known user, then finish that page.

One rule for text and scans: the page that decides is read whole before it decides. The header band of
page 1 is read first only as an order of work: when it names a user, the rest of page 1 is still read,
so a letterhead naming one user and a body naming another is ambiguous, as on a text page.

The same rule as text PDFs: candidates come from pdf.find_emails on what the engine read, and only an
exact (case-insensitive) match with a user counts, so a misread address matches nobody. OCR only ever
reads what is drawn, so every candidate was visible on the page.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pdfbatch.errors import PdfTimeout
from pdfbatch.model import Reason
from pdfbatch.ocr.engine import Engine
from pdfbatch.ocr.read import AGAIN, HEADER_BAND, Opened, RegionRead, read_regions
from pdfbatch.ocr.worker import Remote

T = TypeVar("T")

# The reason a scan ends with when its first ``max_pages`` pages named nobody and more pages were left
# unread (outcome skipped_no_match); a spent budget is PdfTimeout, whose reason is "timeout" (failed).
OCR_PAGE_LIMIT = Reason.OCR_PAGE_LIMIT
DEFAULT_MAX_PAGES = 5
DEFAULT_BUDGET_SECONDS = 30.0

Lookup = Callable[[Sequence[str]], Mapping[str, T]]


@dataclass(frozen=True)
class RegionStat:
    """One region read: where, what it cost, how many new candidates it brought (never which)."""

    page: int  # 1-based
    part: str
    candidates: int
    chars: int
    render_seconds: float
    ocr_seconds: float


@dataclass(frozen=True)
class OcrScan(Generic[T]):
    """What OCR found in one PDF; ``match`` is the lookup's value for ``email``."""

    reason: str  # Reason.MATCHED | NO_EMAIL | NO_USER, or OCR_PAGE_LIMIT
    email: str | None
    match: T | None
    pages_read: int  # pages read at least in part
    page_count: int
    regions: tuple[RegionStat, ...]
    ocr_seconds: float  # opening, rendering and reading: the time the budget bounds
    lookup_seconds: float
    # MATCHED: every known candidate of the deciding page, in reading order (``email`` first), so the
    # caller can apply the matching rule to the page as to a text page (two users named: ambiguous).
    named: tuple[str, ...] = ()

    @property
    def detail(self) -> dict[str, float]:
        """Per-file figures for the ledger's detail (no addresses, no text)."""
        return {
            "ocr_seconds": round(self.ocr_seconds, 3),
            "lookup_seconds": round(self.lookup_seconds, 3),
            "pages_read": self.pages_read,
            "page_count": self.page_count,
            "regions_read": len(self.regions),
            "ocr_chars": sum(r.chars for r in self.regions),
        }


class _Source(Protocol):
    def next(self, timeout: float, again: bool = False) -> Opened | RegionRead | None: ...

    def close(self) -> None: ...


class _InProcess:
    """Regions read in this process: the budget is checked between regions only."""

    def __init__(self, data: bytes, engine: Engine, max_pages: int, header: float) -> None:
        self._events = read_regions(data, engine, max_pages=max_pages, header=header)

    def next(self, timeout: float, again: bool = False) -> Opened | RegionRead | None:
        try:
            return self._events.send(AGAIN if again else None)
        except StopIteration:
            return None

    def close(self) -> None:
        self._events.close()


def scan(
    data: bytes,
    lookup: Lookup[T],
    *,
    engine: Engine,
    max_pages: int = DEFAULT_MAX_PAGES,
    budget_seconds: float = DEFAULT_BUDGET_SECONDS,
    header: float = HEADER_BAND,
    clock: Callable[[], float] = time.monotonic,
    isolate: bool = True,
    second_look: bool = True,
) -> OcrScan[T]:
    """Read ``data`` with ``engine``: page 1's header band, the rest of page 1, then whole pages up to
    ``max_pages``, calling ``lookup`` with each region's new candidates and stopping at the end of the
    first page where one is known: that page is read whole, and ``named`` holds every known candidate
    of it in reading order (the first is ``email``), so the matching rule sees the whole page. With
    ``second_look``, a region whose text held an "@" but named nobody is read once more at another
    resolution (read.second_look_dpi).

    Raises MalformedPdf / EncryptedPdf when pdfium cannot open or render it, and PdfTimeout when opening,
    rendering and reading (lookups excluded) pass ``budget_seconds``. With ``isolate`` (where ``os.fork``
    exists) the reading runs in this thread's OCR worker (worker.py), which is killed when the budget
    runs out, even inside one region; without it the budget is checked between regions.
    """
    started = clock()
    lookup_seconds = 0.0
    seen: set[str] = set()
    known: dict[str, T] = {}  # every candidate the lookup knew
    page_named: list[str] = []  # the known candidates of the page read so far, in reading order
    stats: list[RegionStat] = []
    page_count = 0

    def left() -> float:
        return budget_seconds - (clock() - started - lookup_seconds)

    def result(
        reason: str, email: str | None = None, match: T | None = None, named: tuple[str, ...] = ()
    ) -> OcrScan[T]:
        return OcrScan(
            reason=reason,
            email=email,
            match=match,
            pages_read=max((s.page for s in stats), default=0),
            page_count=page_count,
            regions=tuple(stats),
            ocr_seconds=clock() - started - lookup_seconds,
            lookup_seconds=lookup_seconds,
            named=named,
        )

    source: _Source = (
        Remote(data, engine, max_pages, header)
        if isolate and hasattr(os, "fork")
        else _InProcess(data, engine, max_pages, header)
    )
    try:
        opened = source.next(left())
        if not isinstance(opened, Opened):
            raise RuntimeError("OCR reader sent a region before opening the document")
        page_count = opened.page_count
        again = False
        while True:
            remaining = left()
            if remaining <= 0:
                raise PdfTimeout(f"OCR budget of {budget_seconds}s spent after {len(stats)} regions")
            event = source.next(remaining, again)
            again = False
            if event is None:
                break
            if not isinstance(event, RegionRead):
                raise RuntimeError("OCR reader opened the document twice")
            r = event.region
            stats.append(
                RegionStat(
                    r.page + 1,
                    r.part + (" again" if event.second_look else ""),
                    len(event.candidates),
                    event.chars,
                    event.render_seconds,
                    event.ocr_seconds,
                )
            )
            fresh = [e for e in event.candidates if e not in seen]
            named_here: list[str] = []
            if fresh:
                seen.update(fresh)
                t = clock()
                found = lookup(fresh)
                lookup_seconds += clock() - t
                known.update({k.lower(): v for k, v in found.items()})
                named_here = [e for e in fresh if e in known]
                page_named.extend(named_here)
            # An "@" was read but nobody named: read the region once more at another resolution.
            again = second_look and event.has_at and not named_here
            # The page that names a user decides, read whole: the header band is only the first part
            # of it read (a letterhead naming a recruiter, the body another user: ambiguous).
            if page_named and not again and r.part != "header":
                return result(Reason.MATCHED, page_named[0], known[page_named[0]], tuple(page_named))
        if page_named:  # the reader ended inside the deciding page
            return result(Reason.MATCHED, page_named[0], known[page_named[0]], tuple(page_named))
    finally:
        source.close()
    if page_count > max_pages:
        return result(OCR_PAGE_LIMIT)
    return result(Reason.NO_USER if seen else Reason.NO_EMAIL)
