"""`pdfbatch gc`: final objects nothing points at (copies whose link was lost), found and removed by a
sweep that checks references; `pdfbatch report` counts a batch's.

process_pdf never deletes a final object. The same PDF of the same user has the same key,
``pdfs/{userId}/{sha256}.pdf``, in every batch, so a delivery that loses its link cannot know whether
another batch copied the same key and is about to link it. Such copies stay until this sweep, which
removes an object only when all of these hold:

- it is older than the grace (``older_than_seconds``, at least ``MIN_GRACE_SECONDS``): a copy is
  linked within the invocation that made it (process_pdf's timeout is 120 s), and a redelivery copies
  again, which makes the object new again;
- no linked entry in the ledger names it (looked up by content, ``Ledger.linked_keys``);
- the user its key belongs to does not point at it (``users.pdf_url``).

Objects under pdfs/ whose key pdfbatch would not have written are never touched. On a versioned
bucket the versions the listing saw are removed for good, so a copy made after the listing is a new
version and stays; without versions the object is re-checked right before it is deleted.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdfbatch.errors import InvalidInput, NotFound
from pdfbatch.logs import logger
from pdfbatch.model import Outcome, final_key, is_batch_id, user_id_of_segment
from pdfbatch.ports import StoredVersion
from pdfbatch.services import views
from pdfbatch.services.deps import Deps

PREFIX = "pdfs/"
MIN_GRACE_SECONDS = 15 * 60  # far above process_pdf's 120 s between a copy and its link
DEFAULT_GRACE_SECONDS = 24 * 3600
_CHUNK = 500  # keys judged per round of reference look-ups
_FINAL_KEY = re.compile(r"^pdfs/([A-Za-z0-9._!-]+)/([0-9a-f]{64})\.pdf$")


@dataclass(frozen=True)
class Orphan:
    """A final object nothing points at."""

    key: str
    size: int
    last_modified: float
    versions: tuple[str, ...]  # every version the listing saw (deleted together)


@dataclass
class GcReport:
    """What one sweep found (and, with ``delete``, removed)."""

    older_than_seconds: int
    delete: bool
    scanned: int = 0  # current objects under pdfs/
    young: int = 0  # inside the grace: not judged
    referenced: int = 0  # a linked ledger entry or the key's user points at it
    foreign: int = 0  # not a key pdfbatch writes: never touched
    orphans: list[Orphan] = field(default_factory=list)
    deleted: int = 0  # orphans removed (with ``delete``)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of the CLI."""
        return {
            "dryRun": not self.delete,
            "olderThanSeconds": self.older_than_seconds,
            "scanned": self.scanned,
            "young": self.young,
            "referenced": self.referenced,
            "foreign": self.foreign,
            "orphans": len(self.orphans),
            "orphanBytes": sum(o.size for o in self.orphans),
            "deleted": self.deleted,
            "keys": [o.key for o in self.orphans],
        }


def sweep(
    deps: Deps,
    *,
    older_than_seconds: int = DEFAULT_GRACE_SECONDS,
    delete: bool = False,
    on_progress: Callable[[GcReport], None] | None = None,
) -> GcReport:
    """Find the final objects nothing points at; remove them too when ``delete`` (dry run otherwise)."""
    if older_than_seconds < MIN_GRACE_SECONDS:
        raise InvalidInput(
            f"--older-than must be at least {MIN_GRACE_SECONDS} s, so copies being linked are never swept"
        )
    report = GcReport(older_than_seconds, delete)
    cutoff = deps.clock() - older_than_seconds
    listing = deps.store.list_versions(deps.settings.bucket, PREFIX)
    candidates: list[Orphan] = []
    for key, group in itertools.groupby(listing, key=lambda v: v.key):
        versions = list(group)
        latest = next((v for v in versions if v.is_latest), versions[0])
        if latest.is_delete_marker:
            continue  # deleted already; the lifecycle rule expires what is left of it
        report.scanned += 1
        if not _FINAL_KEY.fullmatch(key):
            report.foreign += 1
        elif latest.last_modified > cutoff:
            report.young += 1
        else:
            candidates.append(_orphan(key, latest, versions))
        if len(candidates) >= _CHUNK:
            _judge(deps, report, candidates)
            candidates = []
            if on_progress:
                on_progress(report)
    _judge(deps, report, candidates)
    logger.info("final objects swept", extra={k: v for k, v in report.as_dict().items() if k != "keys"})
    return report


def _orphan(key: str, latest: StoredVersion, versions: Sequence[StoredVersion]) -> Orphan:
    return Orphan(key, latest.size, latest.last_modified, tuple(v.version_id for v in versions))


def _judge(deps: Deps, report: GcReport, candidates: Sequence[Orphan]) -> None:
    """Keep what anything points at; record (and with ``report.delete`` remove) the rest."""
    referenced = 0
    kept = referenced_keys(deps, [c.key for c in candidates])
    for orphan in candidates:
        if orphan.key in kept:
            referenced += 1
            continue
        if report.delete:
            if referenced_keys(deps, [orphan.key]):  # linked meanwhile (a bucket without versions)
                referenced += 1
                continue
            for version in orphan.versions:
                deps.store.delete(deps.settings.bucket, orphan.key, version)
            report.deleted += 1
        report.orphans.append(orphan)
    report.referenced += referenced


def referenced_keys(deps: Deps, keys: Sequence[str]) -> set[str]:
    """The final keys among ``keys`` that a linked ledger entry names or their user's pdf_url points at."""
    # A key names its user by model.key_segment; a segment no id maps to (hashed, foreign) is never swept.
    parsed = {
        k: (user, sha)
        for k in keys
        if (m := _FINAL_KEY.fullmatch(k)) and (user := user_id_of_segment(m.group(1))) is not None
        for sha in [m.group(2)]
    }
    kept = deps.ledger.linked_keys(sorted({sha for _, sha in parsed.values()})) & set(keys)
    for key, (user, _) in parsed.items():
        if key not in kept and _points_at(deps.settings.pdf_url(key), key, deps.users.pdf_url_of(user)):
            kept.add(key)
    return kept | {k for k in keys if k not in parsed}  # what pdfbatch did not name is never swept


def _points_at(url: str, key: str, pdf_url: str | None) -> bool:
    # The configured URL of the key, or any URL ending in it (a prefix changed since it was linked).
    return bool(pdf_url) and (pdf_url == url or (pdf_url or "").endswith("/" + key))


def batch_orphans(deps: Deps, batch_id: str) -> list[str]:
    """A batch's copies nothing points at: entries that matched a user, were copied, and lost the link.

    (A copy made by a delivery whose entry then ended without a user, e.g. gave_up, is not attributed
    to its batch here; the sweep still finds it.)
    """
    if not is_batch_id(batch_id) or deps.ledger.get_batch(batch_id) is None:
        raise NotFound("no such batch")
    keys = sorted(
        {
            final_key(row.user_id, row.sha256)
            for row in views.iter_all_files(deps, batch_id)
            if row.kind == "pdf" and row.outcome != Outcome.LINKED and row.user_id is not None and row.sha256
        }
    )
    present = [k for k in keys if _exists(deps, k)]
    kept = referenced_keys(deps, present)
    return [k for k in present if k not in kept]


def _exists(deps: Deps, key: str) -> bool:
    try:
        deps.store.head_size(deps.settings.bucket, key)
    except NotFound:
        return False
    return True


def parse_duration(text: str) -> int:
    """Seconds in "900", "90s", "45m", "6h" or "2d" (what --older-than takes)."""
    match = re.fullmatch(r"\s*([0-9]+)\s*([smhd]?)\s*", text)
    if not match:
        raise InvalidInput(f"not a duration: {text!r} (e.g. 3600, 90m, 6h, 2d)")
    value, unit = int(match.group(1)), match.group(2) or "s"
    return value * {"s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
