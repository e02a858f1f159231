"""The pipeline's rules as invariants, proven after any run: tests, the chaos soak, e2e and `pdfbatch check`.

    report = check(Sources.from_deps(deps, S3Keys(s3_client)), batch_ids, oracle)

Everything is read first (the ledger's rows, its counts, the live counters, the users' links, the linked
objects' bytes, the staged keys), then each invariant is a pure function of that evidence. Run it once the
batches should be done: rows still changing under it can look like a broken counter.

The report names batches, entry indices, user ids and object keys derived from ids and hashes only, never
an entry name, an address or a ZIP's key (those may hold personal data: keys are given as a short hash).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pdfbatch import announcement
from pdfbatch.errors import NotFound
from pdfbatch.model import (
    COUNTED_OUTCOMES,
    FINAL_STATUSES,
    IGNORED,
    REASON_OUTCOME,
    BatchReason,
    BatchStatus,
    Lane,
    Outcome,
    Reason,
)
from pdfbatch.ports import (
    BatchRow,
    CallbackAttempt,
    CallbackLog,
    FileRow,
    Ledger,
    LiveProgress,
    ObjectStore,
    Progress,
    Users,
    every_file,
)
from pdfbatch.services.batches import UPLOAD_KEY_RE
from pdfbatch.services.settle import SETTLE_WINDOW_SECONDS
from pdfbatch.tenants import drop_tenant, valid_tenant

MAX_EXAMPLES = 10
_PAGE = 1000

# (name, the rule it proves). The order is the report's.
RULES: tuple[tuple[str, str], ...] = (
    ("batches_final", "every batch is final (COMPLETED or FAILED), in the ledger and in the live counters"),
    (
        "one_outcome",
        "every PDF entry has exactly one outcome with a reason valid for it (a batch FAILED as a whole may "
        "leave entries without one); every other entry is ignored",
    ),
    ("totals_match_entries", "a batch's totalFiles and ignored count equal the entries in its ledger"),
    (
        "counters_match_ledger",
        "the live counters (when present) and the MySQL summary equal the ledger's outcomes and reasons",
    ),
    (
        "users_linked_once",
        "each user is linked at most once, by the one linked ledger row naming them, to that row's final "
        "key; a row saying already_linked names a user who is linked",
    ),
    (
        "final_objects_exist",
        "every linked row's final key exists in S3 and holds the PDF that row recorded (same sha256)",
    ),
    (
        "links_match_oracle",
        "a PDF is linked only to the user it visibly and uniquely names, and one naming a user is never "
        "recorded as no match (needs the oracle's owners)",
    ),
    (
        "no_staged_leftovers",
        "no staged copy of a linked file (or of an entry with no outcome) outlives its batch; the others "
        "stay under staging/{batchId}/ for `pdfbatch retry` until the lifecycle rule expires them",
    ),
    (
        "reports_match_ledger",
        "every final batch is announced, and its reports/{batchId}/results.csv and summary.json equal what "
        "the ledger holds now, byte for byte",
    ),
    (
        "lanes_consistent",
        "every entry's lane is text or ocr (or none before any lane read it); OCR's own reason "
        "(ocr_page_limit) only on an OCR row, and no OCR row ends no_text_layer (the lane read it)",
    ),
    (
        "uploads_accounted",
        "every accepted upload is its own batch (or a batch FAILED as a whole), holding that upload's "
        "entries and contents (needs the oracle's uploads)",
    ),
    (
        "drops_recorded",
        "every object under uploads/ has a batch of its key that `pdfbatch find` lists, whatever its name "
        "or bytes (a ZIP is processed, anything else FAILED with a reason; checked with the oracle, once "
        "the run is over, on a bucket whose uploads/ is the run's own: the soak's)",
    ),
    (
        "evidence_stored",
        "every file whose ledger row says it kept evidence (the deciding region's PNG) has that object under "
        "reports/{batchId}/evidence/, so every evidence link the API gives opens",
    ),
    (
        "owners_match_origin",
        "every batch has one owner that fits how it began: the admin (none) or a tenant name; a ZIP dropped "
        "under uploads/{tenant}/ is that tenant's or the admin's, any other drop the admin's, and a later "
        "upload through a batch's link has that batch's owner",
    ),
    (
        "callbacks_recorded",
        "every callback attempt that started has a recorded outcome (an HTTP status or an error such as "
        "timeout), once it is older than any attempt can run (needs the callback log)",
    ),
    (
        "settled_in_time",
        "every due batch is settled within two schedule periods: none in settle's window is left unannounced "
        "with its settle_at more than two periods past (each run ends, completes or announces a due batch, "
        "or puts it off to a later time; needs the schedule's period)",
    ),
)
# An attempt started less than this long ago may still be running (deliver_callbacks' timeout, 30 s).
CALLBACK_SETTLE_SECONDS = 60.0
_BATCH_REASONS = frozenset(str(r) for r in BatchReason)


# --- inputs ----------------------------------------------------------------------------------------------


class ObjectIndex(Protocol):
    """Listing keys under a prefix: the one S3 read the pipeline's ObjectStore does not need."""

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        """Every key under ``prefix``."""
        ...


class S3Keys:
    """ObjectIndex over a boto3 S3 client (list_objects_v2, paginated)."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def list_keys(self, bucket: str, prefix: str) -> list[str]:
        """Every key under ``prefix``."""
        keys: list[str] = []
        for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            keys += [str(o["Key"]) for o in page.get("Contents", [])]
        return keys


@dataclass(frozen=True)
class Sources:
    """Where the evidence is read: the ledger and users (MySQL), the live counters (Redis), S3."""

    ledger: Ledger
    users: Users
    store: ObjectStore
    objects: ObjectIndex
    bucket: str
    pdf_url: Callable[[str], str]  # users.pdf_url of a final key (Settings.pdf_url)
    progress: Progress | None = None
    callbacks: CallbackLog | None = None  # the callback attempts (None: callbacks_recorded not checked)
    clock: Callable[[], float] = time.time
    # The bucket's uploads/ holds this run's uploads alone (the soak empties it first): every object
    # there must then have a batch in this ledger (drops_recorded). A shared bucket: not checked.
    own_uploads: bool = False
    # How often the settle schedule runs (SettleSchedule, settle.schedule_seconds); None: settled_in_time
    # not checked (no schedule runs where the evidence comes from, as in unit and integration tests).
    settle_period: float | None = None

    @classmethod
    def from_deps(
        cls, deps: Any, objects: ObjectIndex, *, own_uploads: bool = False, settle_period: float | None = None
    ) -> Sources:
        """The sources of a pipeline's Deps (services.deps.Deps), plus a way to list keys."""
        return cls(
            ledger=deps.ledger,
            users=deps.users,
            store=deps.store,
            objects=objects,
            bucket=deps.settings.bucket,
            pdf_url=deps.settings.pdf_url,
            progress=deps.progress,
            callbacks=getattr(deps, "callbacks", None),
            clock=getattr(deps, "clock", time.time),
            own_uploads=own_uploads,
            settle_period=settle_period,
        )


@dataclass(frozen=True)
class ExpectedUpload:
    """One upload S3 accepted: its key and its entries as (name, sha256 of a PDF entry's bytes or None)."""

    key: str
    entries: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Oracle:
    """What the run should have produced, known by whoever made the input (the soak's generator).

    ``owners``: for each PDF's sha256, the id of the user whose address it visibly and uniquely shows, or
    None when it shows none (decoys, damaged or locked files: never to be linked).
    ``uploads``: every upload S3 accepted, in order.
    """

    owners: Mapping[str, str | None] = field(default_factory=dict)
    uploads: Sequence[ExpectedUpload] = ()

    def as_json(self) -> dict[str, Any]:
        """The oracle as a JSON document (what `pdfbatch check --oracle` reads)."""
        return {
            "owners": dict(self.owners),
            "uploads": [{"key": u.key, "entries": [list(e) for e in u.entries]} for u in self.uploads],
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Oracle:
        """Parse ``as_json``'s document."""
        owners = {str(k): (str(v) if v is not None else None) for k, v in (doc.get("owners") or {}).items()}
        uploads = [
            ExpectedUpload(str(u["key"]), tuple((str(n), str(s) if s else None) for n, s in u["entries"]))
            for u in doc.get("uploads") or []
        ]
        return cls(owners, uploads)

    @classmethod
    def load(cls, path: Path) -> Oracle:
        """Read an oracle file."""
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))


# --- the report ------------------------------------------------------------------------------------------


@dataclass
class Result:
    """One invariant: held, broken (with examples), or not checked (None: its input was not given)."""

    name: str
    rule: str
    held: bool | None = True
    checked: int = 0  # how many things it looked at (rows, users, keys, uploads)
    broken: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""

    def fail(self, **example: Any) -> None:
        """Record one breach (the first MAX_EXAMPLES are kept as examples)."""
        self.held = False
        self.broken += 1
        if len(self.examples) < MAX_EXAMPLES:
            self.examples.append(example)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape."""
        return {
            "name": self.name,
            "rule": self.rule,
            "held": self.held,
            "checked": self.checked,
            "broken": self.broken,
            "examples": self.examples,
            "note": self.note,
        }


@dataclass
class Report:
    """Every invariant's result over a set of batches."""

    batch_ids: list[str]
    results: list[Result]

    @property
    def ok(self) -> bool:
        """True when no invariant is broken (one not checked is not broken)."""
        return all(r.held is not False for r in self.results)

    def result(self, name: str) -> Result:
        """One invariant's result by name."""
        return next(r for r in self.results if r.name == name)

    def broken(self) -> list[str]:
        """Names of the invariants that broke."""
        return [r.name for r in self.results if r.held is False]

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape (`pdfbatch check --json`, the soak's report)."""
        return {"ok": self.ok, "batches": self.batch_ids, "invariants": [r.as_dict() for r in self.results]}

    def lines(self) -> list[str]:
        """One line per invariant, then up to three examples under each broken one."""
        out = []
        for r in self.results:
            state = {True: "held", False: "BROKEN", None: "not checked"}[r.held]
            extra = f", {r.broken} broken" if r.broken else ""
            note = f" ({r.note})" if r.note else ""
            out.append(f"{state:>11}  {r.name}: {r.checked} checked{extra}{note}")
            out += [f"{'':>13}e.g. {json.dumps(e, sort_keys=True)}" for e in r.examples[:3]]
        return out


# --- evidence --------------------------------------------------------------------------------------------


@dataclass
class BatchEvidence:
    """One batch as the stores hold it."""

    batch_id: str
    row: BatchRow | None
    files: list[FileRow]
    counts: dict[str, int]
    live: LiveProgress | None
    staged: list[str]
    # report_keys' names -> the bytes S3 holds (None: missing); read for final batches only
    report: dict[str, bytes | None] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)  # keys under reports/{batchId}/evidence/
    attempts: list[CallbackAttempt] | None = None  # its callback attempts (None: no callback log read)


@dataclass
class Evidence:
    """Everything the invariants look at, read once."""

    batches: dict[str, BatchEvidence]
    pdf_urls: dict[str, str | None]  # users named by any row (or by the oracle) -> their pdf_url now
    objects: dict[str, str | None]  # final keys of linked rows -> sha256 of what S3 holds (None: missing)
    pdf_url: Callable[[str], str]
    linked_prefix: str  # pdf_url of "pdfs/": a pdf_url starting with it points into this bucket
    # batches whose link (uploads/{id}.zip) a later upload reused -> their owner (absent: no such batch)
    link_owners: dict[str, str | None] = field(default_factory=dict)
    # every key under uploads/ -> how many batches `find` lists for it (None: not read, no oracle given)
    drops: dict[str, int] | None = None
    read_at: float = 0.0  # when the evidence was read (callback attempts younger may still be running)
    settle_period: float | None = None  # Sources.settle_period


def _files(ledger: Ledger, batch_id: str) -> list[FileRow]:
    return list(every_file(ledger, batch_id, page=_PAGE))


def _bytes_or_none(store: ObjectStore, bucket: str, key: str) -> bytes | None:
    try:
        return store.get_bytes(bucket, key)
    except NotFound:
        return None


def gather(
    sources: Sources, batch_ids: Iterable[str], oracle: Oracle | None = None, workers: int = 8
) -> Evidence:
    """Read what the invariants need about ``batch_ids`` (and the batches of the oracle's upload keys)."""
    ids = list(dict.fromkeys(batch_ids))
    for upload in oracle.uploads if oracle else ():
        ids += [b.batch_id for b in sources.ledger.find_batches(upload.key) if b.batch_id not in ids]
    batches: dict[str, BatchEvidence] = {}
    for batch_id in ids:
        row = sources.ledger.get_batch(batch_id)
        batches[batch_id] = BatchEvidence(
            batch_id=batch_id,
            row=row,
            files=_files(sources.ledger, batch_id) if row else [],
            counts=sources.ledger.outcome_counts(batch_id) if row else {},
            live=sources.progress.get(batch_id) if sources.progress else None,
            staged=sources.objects.list_keys(sources.bucket, f"staging/{batch_id}/"),
            evidence=sources.objects.list_keys(sources.bucket, f"reports/{batch_id}/evidence/"),
            attempts=list(sources.callbacks.attempts(batch_id)) if sources.callbacks else None,
        )
        if row is not None and row.status in FINAL_STATUSES:
            batches[batch_id].report = {
                name: _bytes_or_none(sources.store, sources.bucket, key)
                for name, key in announcement.report_keys(batch_id).items()
            }
    named = {f.user_id for b in batches.values() for f in b.files if f.user_id is not None}
    named |= {u for u in (oracle.owners.values() if oracle else ()) if u is not None}
    keys = sorted({f.final_key for b in batches.values() for f in b.files if f.final_key})

    def digest(key: str) -> str | None:
        try:
            return hashlib.sha256(sources.store.get_bytes(sources.bucket, key)).hexdigest()
        except NotFound:
            return None

    with ThreadPoolExecutor(max_workers=workers) as pool:
        shas = dict(zip(keys, pool.map(digest, keys), strict=True))
        users = sorted(named)
        urls = dict(zip(users, pool.map(sources.users.pdf_url_of, users), strict=True))
    link_owners: dict[str, str | None] = {}
    for b in batches.values():
        link = UPLOAD_KEY_RE.fullmatch(b.row.object_key) if b.row else None
        if link is not None and link.group(1) != b.batch_id and link.group(1) not in link_owners:
            first = sources.ledger.get_batch(link.group(1))
            if first is not None:
                link_owners[first.batch_id] = first.tenant
    drops = None
    if sources.own_uploads and oracle is not None:  # the run is over: every upload has been notified
        drops = {
            k: len(sources.ledger.find_batches(k))
            for k in sources.objects.list_keys(sources.bucket, "uploads/")
        }
    return Evidence(
        batches,
        urls,
        shas,
        sources.pdf_url,
        sources.pdf_url("pdfs/"),
        link_owners,
        drops,
        sources.clock(),
        sources.settle_period,
    )


# --- the invariants --------------------------------------------------------------------------------------


def _failed_as_whole(row: BatchRow | None) -> bool:
    return row is not None and row.status == BatchStatus.FAILED and (row.reason or "") in _BATCH_REASONS


def batches_final(ev: Evidence, r: Result) -> None:
    """Every batch is COMPLETED or FAILED in MySQL, and the live hash (if any) says the same."""
    for b in ev.batches.values():
        r.checked += 1
        if b.row is None:
            r.fail(batchId=b.batch_id, problem="no batch row")
        elif b.row.status not in FINAL_STATUSES:
            pending = sum(1 for f in b.files if f.kind == "pdf" and f.outcome is None)
            r.fail(batchId=b.batch_id, problem="not final", status=b.row.status, pendingEntries=pending)
        elif b.live is not None and b.live.status != b.row.status:
            r.fail(batchId=b.batch_id, problem="live status differs", ledger=b.row.status, live=b.live.status)


def one_outcome(ev: Evidence, r: Result) -> None:
    """Each entry's one outcome and its reason agree; linked rows carry user, key and content."""
    left_open = 0
    for b in ev.batches.values():
        for f in b.files:
            r.checked += 1
            where = {"batchId": b.batch_id, "index": f.index}
            expected = REASON_OUTCOME.get(f.reason or "")
            if f.kind != "pdf":
                if f.outcome != IGNORED or expected != IGNORED:
                    r.fail(**where, problem="not-PDF entry not ignored", outcome=f.outcome, reason=f.reason)
            elif f.outcome is None:
                if _failed_as_whole(b.row):
                    left_open += 1  # the batch failed loudly as a whole: its entries are not retried
                else:
                    r.fail(**where, problem="no outcome", status=b.row.status if b.row else None)
            elif f.outcome not in COUNTED_OUTCOMES or expected != f.outcome:
                r.fail(**where, problem="reason not valid for outcome", outcome=f.outcome, reason=f.reason)
            elif f.outcome == Outcome.LINKED and not (f.user_id and f.final_key and f.sha256):
                r.fail(**where, problem="linked row lacks user, final key or sha256")
            elif f.outcome != Outcome.LINKED and f.final_key:
                r.fail(**where, problem="final key on a row that is not linked", outcome=f.outcome)
    if left_open:
        r.note = f"{left_open} entries without an outcome in batches FAILED as a whole"


def totals_match_entries(ev: Evidence, r: Result) -> None:
    """totalFiles and ignored_files are the ledger's entry counts."""
    for b in ev.batches.values():
        if b.row is None:
            continue
        r.checked += 1
        pdfs = sum(1 for f in b.files if f.kind == "pdf")
        ignored = len(b.files) - pdfs
        if b.row.total_files is None:
            if b.files:
                r.fail(batchId=b.batch_id, problem="entries but no totalFiles", entries=len(b.files))
        elif (b.row.total_files, b.row.ignored_files) != (pdfs, ignored):
            r.fail(
                batchId=b.batch_id,
                totalFiles=b.row.total_files,
                pdfEntries=pdfs,
                ignoredFiles=b.row.ignored_files,
                ignoredEntries=ignored,
            )


def _nonzero(counts: Mapping[str, Any]) -> dict[str, int]:
    return {str(k): int(v) for k, v in counts.items() if int(v)}


def _live_counts(live: LiveProgress) -> dict[str, int]:
    return _nonzero(
        {
            **live.outcomes,
            **{f"reason:{k}": v for k, v in live.reasons.items()},
            "processed": live.processed,
            "ignored": live.ignored,
        }
    )


def _diff(want: Mapping[str, int], got: Mapping[str, int]) -> dict[str, list[int]]:
    return {
        k: [want.get(k, 0), got.get(k, 0)] for k in sorted({*want, *got}) if want.get(k, 0) != got.get(k, 0)
    }


def counters_match_ledger(ev: Evidence, r: Result) -> None:
    """Redis (while it lasts) and the MySQL summary of a final batch count what the ledger holds."""
    for b in ev.batches.values():
        if b.row is None:
            continue
        ledger = _nonzero(b.counts)
        if b.live is not None:
            r.checked += 1
            if diff := _diff(ledger, _live_counts(b.live)):
                r.fail(batchId=b.batch_id, where="live", ledgerVsLive=diff)
            elif b.live.total_files is not None and b.live.total_files != b.row.total_files:
                r.fail(batchId=b.batch_id, where="live", totalFiles=[b.row.total_files, b.live.total_files])
        if b.row.status in FINAL_STATUSES:
            r.checked += 1
            if diff := _diff(ledger, _nonzero(b.row.counts)):
                r.fail(batchId=b.batch_id, where="summary", ledgerVsSummary=diff)
        if b.row.status == BatchStatus.COMPLETED and ledger.get("processed", 0) != (b.row.total_files or 0):
            r.fail(
                batchId=b.batch_id,
                where="completed",
                processed=ledger.get("processed", 0),
                total=b.row.total_files,
            )


def users_linked_once(ev: Evidence, r: Result) -> None:
    """One linked row per user, the user's pdf_url is that row's key, and no link without a row."""
    linked: dict[str, list[tuple[str, FileRow]]] = {}
    for b in ev.batches.values():
        for f in b.files:
            if f.outcome == Outcome.LINKED and f.user_id is not None:
                linked.setdefault(f.user_id, []).append((b.batch_id, f))
            elif f.reason == Reason.ALREADY_LINKED and f.user_id is not None:
                r.checked += 1
                if not ev.pdf_urls.get(f.user_id):
                    r.fail(
                        batchId=b.batch_id,
                        index=f.index,
                        userId=f.user_id,
                        problem="already_linked, user unlinked",
                    )
    for user_id, url in ev.pdf_urls.items():
        r.checked += 1
        rows = linked.get(user_id, [])
        if len(rows) > 1:
            r.fail(userId=user_id, problem="linked by several rows", rows=[[b, f.index] for b, f in rows][:5])
        elif rows:
            batch_id, f = rows[0]
            if url != ev.pdf_url(f.final_key or ""):
                r.fail(batchId=batch_id, index=f.index, userId=user_id, problem="user points elsewhere")
        elif url and url.startswith(ev.linked_prefix):
            r.fail(userId=user_id, problem="linked with no linked row in these batches")


def final_objects_exist(ev: Evidence, r: Result) -> None:
    """A linked row's final key holds exactly the PDF it recorded."""
    for b in ev.batches.values():
        for f in b.files:
            if f.outcome != Outcome.LINKED or not f.final_key:
                continue
            r.checked += 1
            got = ev.objects.get(f.final_key)
            if got is None:
                r.fail(batchId=b.batch_id, index=f.index, finalKey=f.final_key, problem="missing")
            elif got != f.sha256:
                r.fail(batchId=b.batch_id, index=f.index, finalKey=f.final_key, problem="other content")


def links_match_oracle(ev: Evidence, r: Result, oracle: Oracle | None) -> None:
    """Linked to the named user only; a PDF naming a user is linked, already linked, or failed."""
    if oracle is None or not oracle.owners:
        r.held = None
        return
    for b in ev.batches.values():
        for f in b.files:
            if f.kind != "pdf" or f.outcome is None or not f.sha256:
                continue
            r.checked += 1
            where = {"batchId": b.batch_id, "index": f.index, "outcome": f.outcome}
            if f.sha256 not in oracle.owners:
                if f.outcome == Outcome.LINKED:
                    r.fail(**where, problem="linked content no upload held", userId=f.user_id)
                continue
            owner = oracle.owners[f.sha256]
            if f.outcome in (Outcome.LINKED, Outcome.SKIPPED_ALREADY_EXISTS) and f.user_id != owner:
                r.fail(**where, problem="wrong user", userId=f.user_id, owner=owner)
            elif f.outcome == Outcome.SKIPPED_NO_MATCH and owner is not None:
                r.fail(**where, problem="names a user, recorded no match", reason=f.reason, owner=owner)


def no_staged_leftovers(ev: Evidence, r: Result) -> None:
    """A final batch keeps under staging/{batchId}/ only copies of entries that `pdfbatch retry` may run
    again (recorded, not linked): a linked file's copy is deleted once it is linked."""
    left: Counter[str] = Counter()
    for b in ev.batches.values():
        if b.row is None or b.row.status not in FINAL_STATUSES:
            continue
        r.checked += 1
        outcomes = {f.index: f.outcome for f in b.files}
        for key in b.staged:
            stem = key.rsplit("/", 1)[-1].split(".", 1)[0]
            outcome = outcomes.get(int(stem)) if stem.isdigit() else None
            if outcome is not None and outcome != Outcome.LINKED:
                continue
            left[str(outcome or "no outcome")] += 1
            r.fail(batchId=b.batch_id, key=key, entryOutcome=outcome)
    if left:
        r.note = "staged objects left by entry outcome: " + ", ".join(
            f"{k} {n}" for k, n in sorted(left.items())
        )


def reports_match_ledger(ev: Evidence, r: Result) -> None:
    """A final batch is marked announced and its report files are what the ledger writes now.

    A batch finished before announcing existed is announced by the next status read of it (or
    ``pdfbatch report BATCH --download``). A difference names the entry and the columns, not the values.
    """
    for b in ev.batches.values():
        if b.row is None or b.row.status not in FINAL_STATUSES:
            continue
        r.checked += 1
        if b.row.announced_at is None:
            r.fail(batchId=b.batch_id, problem="final but not announced", status=b.row.status)
        csv_data, summary = b.report.get("csv"), b.report.get("summary")
        if csv_data is None or summary is None:
            missing = [name for name in ("csv", "summary") if b.report.get(name) is None]
            r.fail(batchId=b.batch_id, problem="report file missing", missing=missing)
            continue
        if csv_data != announcement.results_csv(b.files):
            r.fail(
                batchId=b.batch_id,
                problem="results.csv differs from the ledger",
                **_csv_diff(csv_data, b.files),
            )
        if summary != announcement.summary_json(b.row):
            written = json.loads(summary)
            now = announcement.summary(b.row)
            fields = sorted(k for k in written.keys() | now.keys() if written.get(k) != now.get(k))
            r.fail(batchId=b.batch_id, problem="summary.json differs from the ledger", fields=fields)


def _csv_diff(data: bytes, files: Sequence[FileRow]) -> dict[str, Any]:
    """Where a written results.csv and the ledger first differ: entry index and column names only."""
    try:
        written = announcement.read_results_csv(data)
    except (AssertionError, UnicodeDecodeError, ValueError):
        return {"where": "not a pdfbatch results.csv"}
    ledger = [announcement.csv_row(f) for f in files]
    if len(written) != len(ledger):
        return {"rowsWritten": len(written), "rowsInLedger": len(ledger)}
    for want, got in zip(ledger, written, strict=True):
        if want != got:
            columns = [c for c, w, g in zip(announcement.CSV_COLUMNS, want, got, strict=False) if w != g]
            return {"index": want[0], "columns": columns}
    return {"where": "encoding"}


_LANES = frozenset(str(lane) for lane in Lane)


def lanes_consistent(ev: Evidence, r: Result) -> None:
    """A file's lane (source) agrees with its reason: each lane ends files only with reasons it can give."""
    for b in ev.batches.values():
        for f in b.files:
            if f.kind != "pdf":
                continue
            r.checked += 1
            where = {"batchId": b.batch_id, "index": f.index, "source": f.source, "reason": f.reason}
            if f.source is not None and f.source not in _LANES:
                r.fail(**where, problem="unknown lane")
            elif f.reason == Reason.OCR_PAGE_LIMIT and f.source != Lane.OCR:
                r.fail(**where, problem="an OCR reason on a file the OCR lane did not read")
            elif f.reason == Reason.NO_TEXT_LAYER and f.source == Lane.OCR:
                r.fail(**where, problem="handed to the OCR lane but recorded as unread")


def _matches(batch: BatchEvidence, upload: ExpectedUpload) -> bool:
    names = Counter(n for n, _ in upload.entries)
    if Counter(f.name for f in batch.files) != names:
        return False
    content = {n: s for n, s in upload.entries if names[n] == 1}
    return all(f.sha256 == content[f.name] for f in batch.files if f.sha256 and f.name in content)


def uploads_accounted(ev: Evidence, r: Result, oracle: Oracle | None) -> None:
    """Each accepted upload is matched by a batch of its key, one batch per upload."""
    if oracle is None or not oracle.uploads:
        r.held = None
        return
    by_key: dict[str, list[ExpectedUpload]] = {}
    for upload in oracle.uploads:
        by_key.setdefault(upload.key, []).append(upload)
    for key, uploads in by_key.items():
        batches = [b for b in ev.batches.values() if b.row is not None and b.row.object_key == key]
        free = list(batches)
        for n, upload in enumerate(uploads, 1):
            r.checked += 1
            found = next((b for b in free if _matches(b, upload)), None)
            found = found or next((b for b in free if _failed_as_whole(b.row) and not b.files), None)
            if found is not None:
                free.remove(found)
                continue
            r.fail(
                keyHash=hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12],
                upload=f"{n} of {len(uploads)}",
                batchesForKey=[b.batch_id for b in batches],
                problem="no batch holds this upload" if len(batches) < len(uploads) else "contents differ",
            )


def drops_recorded(ev: Evidence, r: Result) -> None:
    """Each object under uploads/ is a batch's: nothing dropped there vanishes without a record."""
    if ev.drops is None:
        r.held = None
        return
    for key, found in sorted(ev.drops.items()):
        r.checked += 1
        if not found:
            r.fail(
                keyHash=hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:12],
                problem="no batch",
            )


def owners_match_origin(ev: Evidence, r: Result) -> None:
    """A batch's owner (tenant) fits its key: a tenant prefix's tenant, its link's batch's owner, or none."""
    for b in ev.batches.values():
        if b.row is None:
            continue
        r.checked += 1
        owner, key = b.row.tenant, b.row.object_key
        link = UPLOAD_KEY_RE.fullmatch(key)
        if owner is not None and not valid_tenant(owner):
            r.fail(batchId=b.batch_id, problem="owner is not a tenant name")
        elif link is not None:
            first = link.group(1)
            if first != b.batch_id and first in ev.link_owners and ev.link_owners[first] != owner:
                r.fail(batchId=b.batch_id, firstBatch=first, problem="owner differs from its link's batch")
        elif owner is not None and owner != drop_tenant(key):
            r.fail(batchId=b.batch_id, problem="a drop owned by a tenant its key does not name")


def evidence_stored(ev: Evidence, r: Result) -> None:
    """A row that recorded evidence names an object that exists (it is written before the outcome)."""
    from pdfbatch import evidence

    without = 0
    for b in ev.batches.values():
        stored = set(b.evidence)
        for f in b.files:
            if f.timings.get("evidence_bytes"):
                r.checked += 1
                key = evidence.key(b.batch_id, f.index)
                if key not in stored:
                    r.fail(batchId=b.batch_id, index=f.index, key=key, problem="missing")
            elif f.outcome == Outcome.LINKED and f.source == Lane.TEXT:
                without += 1
    if without:
        r.note = f"linked text files without evidence (their address not found by a text search): {without}"


def callbacks_recorded(ev: Evidence, r: Result) -> None:
    """Every callback attempt that began has its outcome: one that ran out of time is a recorded timeout,
    never a row left without a status or an error (``in_flight_or_died``)."""
    logs = [b for b in ev.batches.values() if b.attempts is not None]
    if not logs:
        r.held, r.note = None, "no callback log given"
        return
    running = 0
    for b in logs:
        for a in b.attempts or ():
            if a.duration_ms is not None:
                r.checked += 1
            elif ev.read_at - a.started_at < CALLBACK_SETTLE_SECONDS:
                running += 1  # may still be running: neither proof nor breach yet
            else:
                r.checked += 1
                r.fail(batchId=b.batch_id, deliveryId=a.delivery_id, attempt=a.attempt, problem="no outcome")
    if running:
        r.note = f"attempts started in the last {CALLBACK_SETTLE_SECONDS:.0f} s, maybe running: {running}"


def settled_in_time(ev: Evidence, r: Result) -> None:
    """No batch settle reads is overdue: a run settles each due batch or moves its settle_at on
    (services/settle.py), so one still due two periods later was never reached (starved, or no schedule)."""
    if ev.settle_period is None:
        r.held, r.note = None, "no settle schedule period given"
        return
    overdue_after = 2 * ev.settle_period
    for b in ev.batches.values():
        if b.row is None or b.row.created_at <= ev.read_at - SETTLE_WINDOW_SECONDS:
            continue  # older ones are settle's no more: announced when read
        r.checked += 1
        if b.row.announced_at is not None:
            continue  # nothing left for settle to do
        due = b.row.settle_at if b.row.settle_at is not None else b.row.created_at
        if ev.read_at - due > overdue_after:
            r.fail(
                batchId=b.batch_id,
                status=b.row.status,
                dueSecondsAgo=round(ev.read_at - due),
                problem="due and not settled within two schedule periods",
            )


def check(sources: Sources, batch_ids: Iterable[str], oracle: Oracle | None = None) -> Report:
    """Gather the evidence of ``batch_ids`` and evaluate every invariant over it."""
    ev = gather(sources, batch_ids, oracle)
    return evaluate(ev, oracle)


def evaluate(ev: Evidence, oracle: Oracle | None = None) -> Report:
    """Every invariant over gathered evidence."""
    results = {name: Result(name, rule) for name, rule in RULES}
    batches_final(ev, results["batches_final"])
    one_outcome(ev, results["one_outcome"])
    totals_match_entries(ev, results["totals_match_entries"])
    counters_match_ledger(ev, results["counters_match_ledger"])
    users_linked_once(ev, results["users_linked_once"])
    final_objects_exist(ev, results["final_objects_exist"])
    links_match_oracle(ev, results["links_match_oracle"], oracle)
    no_staged_leftovers(ev, results["no_staged_leftovers"])
    reports_match_ledger(ev, results["reports_match_ledger"])
    lanes_consistent(ev, results["lanes_consistent"])
    uploads_accounted(ev, results["uploads_accounted"], oracle)
    drops_recorded(ev, results["drops_recorded"])
    evidence_stored(ev, results["evidence_stored"])
    owners_match_origin(ev, results["owners_match_origin"])
    callbacks_recorded(ev, results["callbacks_recorded"])
    settled_in_time(ev, results["settled_in_time"])
    return Report(list(ev.batches), list(results.values()))
