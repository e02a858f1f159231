"""Who a PDF is linked to: the rule, as one pure function over what the scan saw and what the lookup said.

The scan (pdfbatch.pdf) reads a document page by page and gives, for every page read so far, the
addresses a person can see there, whole, in document order (lowercased). The users table answers with
every row whose email is one of them (two rows may share an email). ``decide`` turns that into a
Decision, or None while the pages read so far decide nothing and the scan should read on:

  UNIQUE (the default): the first page, in page order, on which any user's address is visible decides.
    Exactly one distinct user there -> MATCHED with that user. Two or more (two addresses of two users,
    or one address that two rows share) -> AMBIGUOUS: nobody is linked, and the result says how many
    users were named, never who. Pages after the deciding page are never read.
  FIRST (PDFBATCH_MATCH_POLICY=first): the first address in document order that belongs to a user
    wins; if two rows share that address it is AMBIGUOUS all the same (never an arbitrary pick).

A line break next to an address may join or separate it (``Readings``: what each plausible reading names,
None for no address). The page's outcome is decided over every combination of the readings on it: when
all combinations give the same outcome, that is the outcome; when they do not (two readings naming two
users, or one naming a user and another nobody) -> AMBIGUOUS_WRAP: nobody is linked, and the page decides.

The text layer proposes, the pixels decide (pdfbatch.pdf.pixels): a user's address whose pixels spell
something else is no candidate; one whose ink reads close to it but not as it is ``Unread``: it counts
among the users named, never links. A page whose only user is Unread decides NOT_SHOWN.

At the end of the document without a decision: NOT_SHOWN when a user's address was in the text layer
but its pixels spelled something else (``refused``), NO_USER when any address was seen, NO_EMAIL when the
document had text but no address, NO_TEXT_LAYER when it had no text at all.

No I/O, no PDF library: it knows nothing of how the addresses were found or looked up.
"""

from __future__ import annotations

import enum
import itertools
import unicodedata
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, Protocol, TypeVar, overload

from pdfbatch.model import Reason


class Row(Protocol):
    """What the rule needs from a users row: who it is (``id``) and its stored ``email``."""

    @property
    def id(self) -> Hashable: ...

    @property
    def email(self) -> str: ...


R = TypeVar("R", bound=Row)


class MatchPolicy(enum.StrEnum):
    """Which user a document names (``PDFBATCH_MATCH_POLICY``)."""

    UNIQUE = "unique"  # the only user named on the first page that names one; else ambiguous
    FIRST = "first"  # the first user's address in document order


class Unread(str):
    """A user's address whose ink a person sees but whose pixels OCR did not read back as it (close to
    it, so perhaps a misreading): it names its users, so another user on the page makes it AMBIGUOUS,
    but it never links. Alone, the page decides NOT_SHOWN."""

    __slots__ = ()


class Readings(tuple[str | None, ...]):
    """One place on a page read two or more plausible ways across a line break: the address each reading
    names (``normalise``d), None where a reading names no address."""

    __slots__ = ()


# Combinations of readings decided one by one on a page; a page with more is AMBIGUOUS_WRAP unseen (a
# page has one or two such places; 2**6 is far beyond any résumé).
MAX_COMBINATIONS = 64


@dataclass(frozen=True)
class Decision(Generic[R]):
    """The verdict on one document: ``user`` only when MATCHED; ``page`` (1-based) that decided."""

    reason: Reason  # MATCHED | AMBIGUOUS | AMBIGUOUS_WRAP | NOT_SHOWN | NO_USER | NO_EMAIL | NO_TEXT_LAYER
    user: R | None = None
    users_named: int = 0  # distinct users named on the deciding page (AMBIGUOUS: 2 or more)
    page: int | None = None
    email: str | None = None  # the address that linked (MATCHED only: an ambiguous result names nobody)
    # AMBIGUOUS: the users the deciding page named, for the ledger's keyed hashes (issue 25: a trace by
    # user finds the file; the ledger never lists who). Left out of equality: a decision is its verdict.
    named: tuple[R, ...] = field(default=(), compare=False)


@overload
def decide(
    pages: Sequence[Sequence[str | Readings]],
    rows: Iterable[R],
    policy: MatchPolicy = ...,
    *,
    complete: Literal[True],
    any_text: bool = ...,
    refused: bool = ...,
) -> Decision[R]: ...


@overload
def decide(
    pages: Sequence[Sequence[str | Readings]],
    rows: Iterable[R],
    policy: MatchPolicy = ...,
    *,
    complete: bool = ...,
    any_text: bool = ...,
    refused: bool = ...,
) -> Decision[R] | None: ...


def decide(
    pages: Sequence[Sequence[str | Readings]],
    rows: Iterable[R],
    policy: MatchPolicy = MatchPolicy.UNIQUE,
    *,
    complete: bool = False,
    any_text: bool = True,
    refused: bool = False,
) -> Decision[R] | None:
    """The decision the pages read so far support, or None to read on.

    ``pages``: each page's visible, whole candidate addresses in document order (``normalise``d), or
    the ``Readings`` of one place; every page read so far, in page order. ``rows``: what the lookup
    returned for them (any order, duplicates kept). ``complete``: no page follows (the document ended
    or the page limit was reached): then a decision is always returned, ``any_text`` telling NO_EMAIL
    from NO_TEXT_LAYER, and ``refused`` (a user's address the pixels refused) NOT_SHOWN from NO_USER.
    """
    by_email: dict[str, dict[Hashable, R]] = {}
    for row in rows:
        by_email.setdefault(normalise(row.email), {}).setdefault(row.id, row)
    for number, candidates in enumerate(pages, start=1):
        places = [c for c in candidates if isinstance(c, Readings) and any(e in by_email for e in c)]
        if not places:
            decision = _page(number, [c for c in candidates if isinstance(c, str)], by_email, policy)
        else:
            decision = _over_readings(number, candidates, by_email, policy)
        if decision is not None:
            return decision
    if not complete:
        return None
    if refused:
        return Decision(Reason.NOT_SHOWN)
    if any(pages):
        return Decision(Reason.NO_USER)
    return Decision(Reason.NO_EMAIL if any_text else Reason.NO_TEXT_LAYER)


def _page(
    number: int, candidates: Sequence[str], by_email: dict[str, dict[Hashable, R]], policy: MatchPolicy
) -> Decision[R] | None:
    """What one page with one reading decides (None: it names no user)."""
    named = [email for email in candidates if email in by_email]
    if not named:
        return None
    if policy is MatchPolicy.FIRST:
        named = named[:1]
    users: dict[Hashable, R] = {}
    for email in named:
        for key, row in by_email[email].items():
            users.setdefault(key, row)  # one user: the row of its first address on the page
    if len(users) == 1:
        (user,) = users.values()
        read = [email for email in named if not isinstance(email, Unread)]
        if not read:
            return Decision(Reason.NOT_SHOWN, page=number)  # ink that did not read as the address
        return Decision(Reason.MATCHED, user, 1, number, str(read[0]))
    return Decision(Reason.AMBIGUOUS, None, len(users), number, named=tuple(users.values()))


def _over_readings(
    number: int,
    candidates: Sequence[str | Readings],
    by_email: dict[str, dict[Hashable, R]],
    policy: MatchPolicy,
) -> Decision[R] | None:
    """The page's outcome when every combination of its readings gives the same; else AMBIGUOUS_WRAP."""
    choices = [c if isinstance(c, Readings) else (c,) for c in candidates]
    count = 1
    for options in choices:
        count *= len(options)
    if count > MAX_COMBINATIONS:
        return Decision(Reason.AMBIGUOUS_WRAP, page=number)
    outcomes: set[tuple[Reason, Hashable] | None] = set()
    first: Decision[R] | None = None
    for combination in itertools.product(*choices):
        decision = _page(number, [e for e in combination if e is not None], by_email, policy)
        if first is None:
            first = decision
        if decision is None:
            outcomes.add(None)
        elif decision.reason is Reason.MATCHED:
            assert decision.user is not None
            outcomes.add((Reason.MATCHED, decision.user.id))
        else:
            outcomes.add((decision.reason, None))
        if len(outcomes) > 1:
            return Decision(Reason.AMBIGUOUS_WRAP, page=number)
    return first


def normalise(email: str) -> str:
    """An address as candidates are written and compared: trimmed, NFC, lowercased (nothing fuzzy)."""
    return unicodedata.normalize("NFC", email.strip()).lower()
