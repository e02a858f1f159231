"""scan(): validate a document, then read it page by page until the rule (pdfbatch.matching) decides who
it names, or say why nobody: the first page on which a user's address is visible decides (early exit:
no page after it is read). A page whose text is not what it shows (pages._Page.scan_like) ends the
reading with NO_TEXT_LAYER, which hands the document to the OCR lane: an invisible layer never decides.

Per page: the reader sends the page's candidates (visible by the cheap checks, whole); the caller's
lookup returns the users rows for the new ones; the reader renders just the addresses that belong to
users and says which a person sees (the ink check), then what their pixels spell (pixels.py: the text
layer proposes, the pixels decide); matching.decide says whether that page decides.

The parsing runs in this thread's forked reader (reader.py), or with isolate=False in this process
(_InProcess drives pages._Document); either way the lookups, the budget and the verdict stay here. No
I/O of its own: the lookup is the caller's (the users table), and the reader is reached through its
pipe.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol

from pdfbatch.errors import PdfTimeout
from pdfbatch.matching import Decision, MatchPolicy, R, Readings, Unread, decide, normalise
from pdfbatch.model import Reason
from pdfbatch.pdf.pages import _Document, _Page
from pdfbatch.pdf.pixels import Check, Seen, alike
from pdfbatch.pdf.reader import _Remote, confirmed
from pdfbatch.pdf.structure import PdfInfo


@dataclass(frozen=True)
class Scan(Generic[R]):
    """What scanning one PDF found; ``match`` is the users row it names (MATCHED only)."""

    reason: Reason  # MATCHED | AMBIGUOUS | AMBIGUOUS_WRAP | NOT_SHOWN | NO_TEXT_LAYER | NO_EMAIL | NO_USER
    email: str | None  # the address that linked (MATCHED only)
    match: R | None
    pages_read: int
    page_count: int
    extract_seconds: float  # validation + text extraction + visibility checks (the time the budget bounds)
    lookup_seconds: float
    validate_seconds: float = 0.0
    users_named: int = 0  # distinct users named on the deciding page (AMBIGUOUS: 2 or more)
    page: int | None = None  # the page (1-based) that decided, MATCHED or AMBIGUOUS
    visibility_seconds: float = 0.0  # rendering the addresses of users to see they show (in extract)
    named: tuple[R, ...] = ()  # AMBIGUOUS: the users the deciding page named (matching.Decision.named)
    # The deciding page's region around ``addresses`` as a PNG (pdf.region) when the reader rendered it
    # there, b"" when it looked and found none to render; None when it did not look (then
    # pdfbatch.evidence.render renders it from the bytes).
    evidence: bytes | None = None
    evidence_seconds: float = 0.0  # rendering it in the reader (after the decision: not in extract)

    @property
    def addresses(self) -> tuple[str, ...]:
        """The deciding page's addresses of users: what its evidence shows (the linked user's, or those
        of the users an ambiguous page named)."""
        if self.email:
            return (self.email,)
        return tuple(dict.fromkeys(u.email for u in self.named))


# The users table: every row whose email is one of the candidates (any order, two rows may share an
# email): Users.find_by_emails.
Lookup = Callable[[Sequence[str]], Iterable[R]]


def scan(
    data: bytes,
    lookup: Lookup[R],
    *,
    max_pages: int,
    budget_seconds: float,
    policy: MatchPolicy = MatchPolicy.UNIQUE,
    clock: Callable[[], float] = time.monotonic,
    isolate: bool = True,
) -> Scan[R]:
    """Validate ``data``, then read pages until ``policy`` decides which user the document names.

    ``lookup`` is called once per page that brings candidates not looked up before, with those in
    document order (lowercased); rows are matched to candidates by their ``email``, compared exactly
    after trimming and lowercasing, and told apart by their ``id``. Raises MalformedPdf, EncryptedPdf,
    or PdfTimeout when validation, extraction and visibility checks (lookups excluded) exceed
    ``budget_seconds``.

    With ``isolate`` (the default, where ``os.fork`` exists) the parsing runs in this thread's reader,
    a long-lived forked child (``reader._Reader``) that sends back each page's candidates and waits for
    the verdict, so the budget holds even inside one page that pdfium or pypdf never finishes (the reader
    is killed and replaced), and a parser crash or memory blow-up costs the reader, not this process.
    The lookups stay here: the reader touches no connection. Without it, the budget is checked
    between pages only.
    """
    started = clock()
    lookup_seconds = 0.0
    validate_seconds = 0.0
    visibility_seconds = 0.0
    pages_read = 0
    any_text = False
    refused = False  # a user's address was in the text layer where the pixels spell something else
    looked_up: set[str] = set()
    rows: list[R] = []
    users: set[str] = set()  # candidates that belong to at least one row
    pages: list[list[str | Readings]] = []  # per page read: its visible candidates

    def left() -> float:
        return budget_seconds - (clock() - started - lookup_seconds)

    def result(decision: Decision[R]) -> Scan[R]:
        return Scan(
            reason=decision.reason,
            email=decision.email,
            match=decision.user,
            pages_read=pages_read,
            page_count=info.page_count,
            extract_seconds=clock() - started - lookup_seconds,
            lookup_seconds=lookup_seconds,
            validate_seconds=validate_seconds,
            users_named=decision.users_named,
            page=decision.page,
            visibility_seconds=visibility_seconds,
            named=decision.named,
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
            if page.scan_like:
                # Its text is not what it shows: the pixels decide (the OCR lane reads the document).
                return result(Decision(Reason.NO_TEXT_LAYER))
            pages.extend([] for _ in range(pages_read - 1 - len(pages)))
            read_two_ways = [e for group in page.readings for e in group if e is not None]
            page_emails = list(dict.fromkeys((*page.candidates, *read_two_ways)))
            lookup_seconds += _look_up(page_emails, lookup, rows, users, looked_up, clock)
            named = list(dict.fromkeys(e for e in (*page.candidates, *read_two_ways) if e in users))
            checks: list[Check] = []
            if named:
                t = clock()
                checks = source.visible(named, left())  # those that show first, in page order
                visibility_seconds += clock() - t
            said, spent = _as_counted(checks, rows, users, looked_up, lookup, clock)
            lookup_seconds += spent
            refused = refused or None in said.values()
            clear = {*page.candidates, *(e for e in said if e not in read_two_ways)}  # with twins
            # The order that matters (PDFBATCH_MATCH_POLICY=first) is the users' order on the page; a
            # place read two ways comes after (a reading of a user nobody sees names nobody).
            shown = [e for e in said.values() if e is not None]
            places = [Readings(said.get(e) if e in users else e for e in g) for g in page.readings]
            pages.append(
                [*(e for e in page.candidates if e not in users), *(e for e in shown if e in clear), *places]
            )
            decision = decide(pages, rows, policy)
            if decision is not None:
                found = result(decision)
                if found.page == pages_read and found.addresses:  # the reader still holds that page
                    t = clock()
                    png = source.evidence(found.addresses, max(left(), _EVIDENCE_SECONDS))
                    found = dataclasses.replace(found, evidence=png, evidence_seconds=clock() - t)
                return found
    finally:
        source.close()
    return result(decide(pages, rows, policy, complete=True, any_text=any_text, refused=refused))


def _look_up(
    emails: Sequence[str],
    lookup: Lookup[R],
    rows: list[R],
    users: set[str],
    looked_up: set[str],
    clock: Callable[[], float],
) -> float:
    """Look up those of ``emails`` not looked up before (one call), adding their rows to ``rows`` and
    their addresses to ``users``; the seconds the lookup took."""
    fresh = [e for e in emails if e not in looked_up]
    if not fresh:
        return 0.0
    looked_up.update(fresh)
    t = clock()
    found = list(lookup(fresh))
    spent = clock() - t
    rows.extend(found)
    users.update(normalise(row.email) for row in found)
    return spent


def _as_counted(
    checks: Sequence[Check],
    rows: list[R],
    users: set[str],
    looked_up: set[str],
    lookup: Lookup[R],
    clock: Callable[[], float],
) -> tuple[dict[str, str | None], float]:
    """Each checked user's address as the page counts it: itself (READ), Unread (it names its users but
    never links), None (REFUSED); and the seconds spent looking up. A LIKE reading (up to OCR's
    look-alikes) counts as read only when no other user's address reads the same that way; else it and
    that other address are Unread (the page is ambiguous). What was read is looked up for that (added to
    ``rows``, ``users`` and ``looked_up``)."""
    said: dict[str, str | None] = {}
    spent = 0.0
    for check in checks:
        if check.seen is Seen.LIKE:
            if check.read:
                spent += _look_up([check.read], lookup, rows, users, looked_up, clock)
            twins = {normalise(r.email) for r in rows if alike(r.email, check.email)} - {check.email}
            said[check.email] = Unread(check.email) if twins else check.email
            for twin in sorted(twins):  # the other user's address, as a person may read it too
                said.setdefault(twin, Unread(twin))
        elif check.seen is Seen.READ:
            said[check.email] = check.email
        elif check.seen is Seen.UNREAD:
            said[check.email] = Unread(check.email)
        else:
            said[check.email] = None
    return said, spent


class _Source(Protocol):
    """Where scan() gets the document and then its pages from; None after the last page."""

    def next(self, timeout: float) -> PdfInfo | _Page | None: ...

    def visible(self, emails: Sequence[str], timeout: float) -> list[Check]: ...

    def evidence(self, addresses: Sequence[str], timeout: float) -> bytes | None: ...

    def close(self) -> None: ...


class _InProcess:
    """The pages read in this process: ``timeout`` cannot interrupt a page."""

    def __init__(self, data: bytes, max_pages: int) -> None:
        self._document: _Document | None = None
        self._data, self._max_pages = data, max_pages
        self._pages: Iterator[_Page] = iter(())

    def next(self, timeout: float) -> PdfInfo | _Page | None:
        if self._document is None:
            self._document = _Document(self._data, self._max_pages)
            self._pages = self._document.pages()
            return self._document.info
        return next(self._pages, None)

    def visible(self, emails: Sequence[str], timeout: float) -> list[Check]:
        assert self._document is not None
        return confirmed(self._document, emails)

    def evidence(self, addresses: Sequence[str], timeout: float) -> bytes | None:
        assert self._document is not None
        return self._document.evidence(addresses) or b""

    def close(self) -> None:
        if self._document is not None:
            self._document.close()  # closes the pdfium document


# The least time the reader is given to render the evidence, even when the file's budget is nearly spent
# (a region of a page it has already rendered for the pixel check: milliseconds).
_EVIDENCE_SECONDS = 2.0

_CAN_FORK = hasattr(os, "fork")  # where it does not, scan() reads in this process
