"""What the status API (and the CLI) shows: a batch's status, its files, the batches of an object key.

Reads, shaped as JSON. A read that must end a batch does it through a named call into batches or
tally (see ``batch_status``), never as a write of its own.

Every read takes the ``Caller`` (tenants.py): a tenant sees only its own batches, and another
tenant's batch is NotFound("no such batch") exactly as an unknown id is (``_check_access``: the same one
ledger read either way, before anything else is read).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from pdfbatch import announcement
from pdfbatch.errors import InvalidInput, NotFound
from pdfbatch.model import (
    COUNTED_OUTCOMES,
    FINAL_STATUSES,
    IGNORED,
    BatchStatus,
    Lane,
    describe,
    is_batch_id,
)
from pdfbatch.ports import BatchRow, FileRow, LiveProgress, TracedFile, every_file
from pdfbatch.services import batches, tally
from pdfbatch.services.deps import Deps, iso
from pdfbatch.tenants import Caller, NoAccess, valid_tenant

_CURSOR = re.compile(r"[0-9]{1,18}")
_SHA256 = re.compile(r"[0-9a-fA-F]{64}")
TRACE_LIMIT = 100  # entries a trace shows, newest first


def _check_access(deps: Deps, batch_id: str, caller: Caller, *, known: bool = False) -> None:
    """NotFound unless ``caller`` may read the batch (``Caller.may_access``, the one rule).

    For a tenant: one ledger read, the same for an unknown id and another tenant's batch, and the
    same exception (the handler turns it into the one 404 body), so neither is told from the other.
    For the admin nothing to check, so no read, unless ``known`` asks that the batch exist.
    """
    if caller.is_admin and not known:
        return
    batch = deps.ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None or not caller.may_access(batch.tenant):
        raise NotFound("no such batch")


def batch_status(deps: Deps, batch_id: str, *, caller: Caller) -> dict[str, Any]:
    """GET /batches/{id}: live counters from Redis, or the MySQL summary once the hash expired.

    A read may end a batch, through named calls only: one nobody uploaded to expires
    (``batches.expire_if_abandoned``), one whose every file is recorded but whose summary was lost
    completes (``tally.complete_from_ledger``). A final batch links its report (presigned GETs) once it
    is announced; one whose announcer died is announced here, through ``tally.announce``.
    """
    _check_access(deps, batch_id, caller)
    body = _batch_status(deps, batch_id)
    body["lanes"] = lane_progress(deps, batch_id, int(body["processed"]))
    callback = callback_state(deps, batch_id)
    if callback is not None:
        body["callback"] = callback
    if body["status"] in FINAL_STATUSES:
        report = report_links(deps, batch_id)
        if report is not None:
            body["report"] = report
    return body


def lane_progress(deps: Deps, batch_id: str, processed: int) -> dict[str, dict[str, int]]:
    """Progress per lane: scans handed to the OCR lane (waiting for it, done by it, from the ledger's
    by_lane index: a batch's OCR rows only), and the files the text lane recorded (the rest)."""
    ocr = deps.ledger.lane_counts(batch_id, Lane.OCR)
    return {"text": {"done": max(processed - ocr["done"], 0)}, "ocr": ocr}


def callback_state(deps: Deps, batch_id: str) -> dict[str, Any] | None:
    """Where the batch's summary goes (the host only: never the URL's path or query) and how its
    delivery stands; None for a batch without a callback (one primary key read, and then the
    attempts by their by_batch index). The module that knows URLs is loaded only for such a batch."""
    if deps.callbacks is None:
        return None
    url = deps.callbacks.url_of(batch_id)
    if url is None:
        return None
    from pdfbatch.services.callback_delivery import state_of

    return state_of(url, deps.callbacks.attempts(batch_id))


def report_links(deps: Deps, batch_id: str) -> dict[str, Any] | None:
    """Presigned GETs of a final batch's report, or None while it has none.

    A final batch not announced yet is announced first (``tally.announce``: a no-op while another
    announcer's claim holds), so a report whose announcer died is written by the next read.
    """
    if not _announced(deps, batch_id):
        return None
    keys = announcement.report_keys(batch_id)
    expires = announcement.REPORT_URL_EXPIRES_SECONDS
    return {
        "csv": deps.store.presigned_get(deps.settings.bucket, keys["csv"], expires),
        "summary": deps.store.presigned_get(deps.settings.bucket, keys["summary"], expires),
        "expiresIn": expires,
    }


def report_files(deps: Deps, batch_id: str) -> dict[str, bytes]:
    """`pdfbatch report --download`: the report's files by name (results.csv, summary.json).

    NotFound for an unknown batch, InvalidInput while it is not final or its announcement is claimed
    by an announcer still at work (``tally.announce`` is called first, as ``report_links`` does).
    """
    batch = deps.ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    if not _announced(deps, batch_id):
        raise InvalidInput(f"batch {batch_id} has no report yet (it is {batch.status})")
    return {
        key.rsplit("/", 1)[1]: deps.store.get_bytes(deps.settings.bucket, key)
        for key in announcement.report_keys(batch_id).values()
    }


def _announced(deps: Deps, batch_id: str) -> bool:
    """Whether a final batch's report is written, announcing it first (the named call) if not yet."""
    batch = deps.ledger.get_batch(batch_id)
    if batch is None or batch.status not in FINAL_STATUSES:
        return False
    if batch.announced_at is None:
        tally.announce(deps, batch_id)
        batch = deps.ledger.get_batch(batch_id)
    return batch is not None and batch.announced_at is not None


def _batch_status(deps: Deps, batch_id: str) -> dict[str, Any]:
    if not is_batch_id(batch_id):
        raise NotFound("no such batch")
    live = deps.progress.get(batch_id)
    if live is not None and live.status != BatchStatus.PENDING:
        return _shape(batch_id, live, "live")
    batch = deps.ledger.get_batch(batch_id)
    if batch is None:
        raise NotFound("no such batch")
    if batches.expire_if_abandoned(deps, batch):
        live = deps.progress.get(batch_id)
        batch = deps.ledger.get_batch(batch_id) or batch
    if live is not None and not (live.status == BatchStatus.PENDING and batch.status in FINAL_STATUSES):
        return _shape(batch_id, live, "live")
    # (A PENDING hash of a batch the ledger has ended is stale: the expiry died between its two writes.)
    counts = dict(batch.counts) if batch.status in FINAL_STATUSES and batch.counts else None
    if counts is None:
        counts = deps.ledger.outcome_counts(batch_id)
        if tally.complete_from_ledger(deps, batch, counts):
            batch = deps.ledger.get_batch(batch_id) or batch
    return _shape(batch_id, _from_ledger(batch, counts, tally.later_uploads(deps, batch_id)), "ledger")


def _from_ledger(batch: BatchRow, counts: Mapping[str, int], later: tuple[str, ...]) -> LiveProgress:
    """The batch's progress as the ledger tells it: its row, its summary or outcome counts, later uploads."""
    return LiveProgress(
        status=batch.status,
        total_files=batch.total_files,
        processed=int(counts.get("processed", sum(int(counts.get(o, 0)) for o in COUNTED_OUTCOMES))),
        outcomes={o: int(counts.get(o, 0)) for o in COUNTED_OUTCOMES},
        reasons={k.split(":", 1)[1]: int(v) for k, v in counts.items() if k.startswith("reason:")},
        ignored=batch.ignored_files,
        reason=batch.reason,
        created_at=batch.created_at,
        updated_at=batch.updated_at,
        started_at=batch.started_at,
        unpacked_at=batch.unpacked_at,
        completed_at=batch.completed_at,
        later_uploads=later,
    )


def _shape(batch_id: str, progress: LiveProgress, source: str) -> dict[str, Any]:
    """The status body of GET /batches/{id}; ``source`` says where it was read (live or ledger)."""
    status = progress.status or BatchStatus.PENDING
    total, processed = progress.total_files, progress.processed
    created, started, unpacked = progress.created_at, progress.started_at, progress.unpacked_at
    completed = progress.completed_at
    if total:
        percent = round(100.0 * min(processed, total) / total, 1)
    else:
        percent = 100.0 if status == BatchStatus.COMPLETED else 0.0
    body: dict[str, Any] = {
        "batchId": batch_id,
        "status": status,
        "totalFiles": total,
        "processed": processed,
        "percent": percent,
        **{o: int(progress.outcomes.get(o, 0)) for o in COUNTED_OUTCOMES},
        "ignored": progress.ignored,
        "reasons": {r: int(n) for r, n in sorted(progress.reasons.items()) if n},
        "filesPerSecond": None,
        "etaSeconds": None,
        "createdAt": iso(created),
        "startedAt": iso(started),
        "unpackedAt": iso(unpacked),
        "updatedAt": iso(progress.updated_at),
        "completedAt": iso(completed),
        # Stage timings: the wait for the upload (and S3's notification), unzip, and the whole pipeline.
        "durations": {
            "queuedSeconds": _span(created, started),
            "unzipSeconds": _span(started, unpacked),
            "processingSeconds": _span(started, completed),
            "totalSeconds": _span(created, completed),
        },
    }
    if status == BatchStatus.FAILED:
        body["reason"] = progress.reason or "unknown"
        body["reasonText"] = describe(body["reason"], batch=True)
    if progress.later_uploads:
        # The upload link was used again: each later upload is a batch of its own, this one is unchanged.
        body["laterUploads"] = list(progress.later_uploads)
    body["source"] = source
    first, updated = progress.first_done_at, progress.updated_at  # the ledger keeps no first_done_at
    if status == BatchStatus.PROCESSING and total and first and updated and processed > 1:
        rate = (processed - 1) / max(updated - first, 1e-3)
        body["filesPerSecond"] = round(rate, 2)
        body["etaSeconds"] = round((total - processed) / rate, 1) if rate > 0 else None
    return body


def _span(start: float | None, end: float | None) -> float | None:
    """Seconds from ``start`` to ``end``, or None until both happened."""
    if not start or not end or end < start:
        return None
    return round(end - start, 3)


def list_files(
    deps: Deps,
    batch_id: str,
    cursor: str | None = None,
    limit: int = 100,
    outcome: str | None = None,
    *,
    caller: Caller,
) -> dict[str, Any]:
    """GET /batches/{id}/files: per-file results in entry order, paginated by an opaque cursor."""
    _check_access(deps, batch_id, caller, known=True)
    allowed = {*COUNTED_OUTCOMES, IGNORED, "not_linked", "pending"}
    if outcome is not None and outcome not in allowed:
        raise InvalidInput(f"outcome must be one of {', '.join(sorted(allowed))}")
    limit = max(1, min(int(limit), 1000))
    after = -1
    if cursor is not None:
        # Only what nextCursor gives out: an entry index in ASCII digits (int() would also take
        # "1_000", " 7" or "٣", and raise past 4,300 digits).
        if not _CURSOR.fullmatch(cursor):
            raise InvalidInput("bad cursor")
        after = int(cursor)
    rows = deps.ledger.list_files(batch_id, after, limit + 1, outcome)
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "batchId": batch_id,
        "items": [file_item(r, evidence_link(deps, r)) for r in rows],
        "nextCursor": str(rows[-1].index) if more and rows else None,
    }


EVIDENCE_URL_EXPIRES_SECONDS = 300


def evidence_link(deps: Deps, row: FileRow) -> str | None:
    """A presigned GET (300 s) of the file's evidence (pdfbatch.evidence), or None when it has none."""
    if not row.timings.get("evidence_bytes"):
        return None
    from pdfbatch import evidence

    key = evidence.key(row.batch_id, row.index)
    return deps.store.presigned_get(deps.settings.bucket, key, EVIDENCE_URL_EXPIRES_SECONDS)


def file_item(row: FileRow, evidence: str | None = None) -> dict[str, Any]:
    """One file as the API shows it (``evidence``: the presigned link of its evidence, if any)."""
    return {
        "index": row.index,
        "name": row.name,
        "kind": row.kind,
        "outcome": row.outcome,
        "reason": row.reason,
        "reasonText": describe(row.reason) or None,
        "userId": row.user_id,  # text: an integer id as its decimal digits
        "usersNamed": row.users_named,  # ambiguous: how many users it named (never who)
        "finalKey": row.final_key,
        "sha256": row.sha256,
        "size": row.size,
        "attempts": row.attempts,
        "finishedAt": iso(row.finished_at),
        "timings": {k: round(v, 4) for k, v in row.timings.items()} if row.timings else {},
        "source": announcement.source_of(row),
        "page": row.page,
        "evidence": evidence,
    }


def find_batches(deps: Deps, key: str, *, caller: Caller) -> dict[str, Any]:
    """GET /batches?key=uploads/...: the batches created from an object dropped with the AWS CLI.

    A tenant finds only its own batches (the filter is in the query, so the newest 100 are its own).
    """
    if not key.startswith("uploads/"):
        raise InvalidInput("key must start with uploads/")
    batches = deps.ledger.find_batches(key, caller.tenant)
    return {
        "key": key,
        "batches": [
            {"batchId": b.batch_id, "status": b.status, "createdAt": iso(b.created_at), "source": b.source}
            for b in batches
        ],
    }


# A recent-batches cursor: the last row's created_at (as repr writes a float) and batch id.
_BATCH_CURSOR = re.compile(r"([0-9]{1,12}(?:\.[0-9]{1,20})?)~([0-9a-f]{32})")
_STATUSES = frozenset(s.value for s in BatchStatus)


def recent_batches(
    deps: Deps,
    *,
    caller: Caller,
    tenant: str | None = None,
    status: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
    limit: int = 20,
) -> dict[str, Any]:
    """GET /batches without ``key``: the caller's batches newest first, each with its counts and upload.

    A tenant sees its own (``tenant`` naming another one finds nothing, as if it had none); the admin
    every batch, or one tenant's with ``tenant``. ``since``/``until``: ISO dates or times (UTC), a date
    ``until`` taking in that whole day. Counts are the summary of a final batch, the live counters of a
    running one (null once they expired: ``pdfbatch status`` rebuilds them).
    """
    before, window = list_query(tenant=tenant, status=status, since=since, until=until, cursor=cursor)
    limit = max(1, min(int(limit), 100))
    try:
        owner = caller.listing_owner(tenant)
    except NoAccess:
        rows: list[BatchRow] = []  # another tenant's batches: none, whether it has any or not
    else:
        rows = deps.ledger.recent_batches(
            owner,
            limit=limit + 1,
            before=before,
            status=status,
            since=window[0],
            until=window[1],
        )
    more = len(rows) > limit
    rows = rows[:limit]
    last = rows[-1] if rows else None
    return {
        "batches": [batch_item(deps, b, admin=caller.is_admin) for b in rows],
        "nextCursor": f"{last.created_at!r}~{last.batch_id}" if more and last else None,
    }


def list_query(
    *,
    tenant: str | None = None,
    status: str | None = None,
    since: str | None = None,
    until: str | None = None,
    cursor: str | None = None,
) -> tuple[tuple[float, str] | None, tuple[float | None, float | None]]:
    """The recent-batches parameters checked (InvalidInput on any bad one): (cursor, (since, until))."""
    if status is not None and status not in _STATUSES:
        raise InvalidInput(f"status must be one of {', '.join(sorted(_STATUSES))}")
    if tenant is not None and not valid_tenant(tenant):
        # Checked before any read: a tenant column holds ASCII slugs, and MariaDB refuses to compare it
        # with text it cannot hold (the API fuzzing sent 4-byte characters: that was a 503).
        raise InvalidInput("tenant must be a tenant name: lowercase letters, digits and '-', 3 to 32")
    before: tuple[float, str] | None = None
    if cursor is not None:
        match = _BATCH_CURSOR.fullmatch(cursor)
        if match is None:
            raise InvalidInput("bad cursor")
        before = (float(match.group(1)), match.group(2))
    return before, (_instant(since, "since"), _instant(until, "until", end_of_day=True))


def _instant(value: str | None, name: str, *, end_of_day: bool = False) -> float | None:
    """An ISO date (2026-12-01) or date-time (naive: UTC) as epoch seconds; InvalidInput otherwise."""
    if value is None:
        return None
    from datetime import UTC, datetime, timedelta

    try:
        parsed = datetime.fromisoformat(value)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an ISO date or date-time, e.g. 2026-12-01") from exc
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    if end_of_day and len(value) == 10:  # a date alone: the whole day
        parsed += timedelta(days=1)
    return parsed.timestamp()


def batch_item(deps: Deps, batch: BatchRow, *, admin: bool = False) -> dict[str, Any]:
    """One batch in a list: when, what was uploaded, how it stands (counts), and why it FAILED."""
    counts: dict[str, int] | None = None
    total = batch.total_files
    if batch.status in FINAL_STATUSES and batch.counts:
        counts = {o: int(batch.counts.get(o, 0)) for o in (*COUNTED_OUTCOMES, "processed")}
    else:
        live = deps.progress.get(batch.batch_id)
        if live is not None:
            counts = {o: int(live.outcomes.get(o, 0)) for o in COUNTED_OUTCOMES}
            counts["processed"] = live.processed
            total = live.total_files if live.total_files is not None else total
    failed = batch.status == BatchStatus.FAILED
    item: dict[str, Any] = {
        "batchId": batch.batch_id,
        "status": batch.status,
        "source": batch.source,
        "upload": batch.object_key,
        "createdAt": iso(batch.created_at),
        "completedAt": iso(batch.completed_at),
        "totalFiles": total,
        "ignored": batch.ignored_files,
        "counts": counts,
        "reason": (batch.reason or "unknown") if failed else None,
        "reasonText": describe(batch.reason or "unknown", batch=True) if failed else None,
    }
    if admin:
        item["tenant"] = batch.tenant
    return item


def trace_document(deps: Deps, sha256: str, *, caller: Caller) -> dict[str, Any]:
    """GET /files?sha256=: every entry that held exactly this PDF, newest batch first (at most 100).

    A tenant sees only its own batches' entries; a document none of them held is NotFound("no such
    document"), whether another tenant's batch held it or nobody's did (one query, filtered in it).
    """
    if not _SHA256.fullmatch(sha256):
        raise InvalidInput("sha256 must be 64 hexadecimal characters (the SHA-256 of the PDF)")
    sha256 = sha256.lower()
    found = deps.ledger.files_by_sha(sha256, caller.tenant, TRACE_LIMIT + 1)
    if not found:
        raise NotFound("no such document")
    return {
        "sha256": sha256,
        "files": [traced_item(deps, t) for t in found[:TRACE_LIMIT]],
        "more": len(found) > TRACE_LIMIT,
    }


def trace_user(deps: Deps, user: str, *, caller: Caller) -> dict[str, Any]:
    """GET /users/{id}/files: the PDF linked to a user and every file that named them without linking
    them (ambiguous: ``relation`` "named"; their PDF was on file already: "already_linked"), newest
    batch first, at most 100.

    ``user`` is a user id, or an email address (it has an "@"): the users with that address (two rows
    may share one), else the id as given. A tenant sees only its own batches' files; a user none of
    them names is NotFound("no such user"), whether the user exists or not.
    """
    from pdfbatch.errors import DependencyUnavailable, UsersTableError
    from pdfbatch.named import ring

    if not user or len(user) > 1024:
        raise InvalidInput("a user id is 1 to 1024 characters")
    ids = [user]
    if "@" in user:
        try:
            ids = sorted({row.id for row in deps.users.find_by_emails([user])}) or [user]
        except UsersTableError as exc:
            raise DependencyUnavailable("the users table", "UsersTableError") from exc
    keys = ring(deps.settings.named_keys)
    found: dict[tuple[str, int], tuple[str, TracedFile]] = {}
    for user_id in ids:
        named = keys.read_hashes(user_id) if keys else []
        for traced in deps.ledger.files_of_user(user_id, named, caller.tenant, TRACE_LIMIT + 1):
            found.setdefault((traced.file.batch_id, traced.file.index), (user_id, traced))
    if not found:
        raise NotFound("no such user")
    ordered = sorted(
        found.values(),
        key=lambda u: (-u[1].batch_created_at, _descending(u[1].file.batch_id), u[1].file.index),
    )
    return {
        "files": [
            {**traced_item(deps, t), "relation": _relation(t.file, user_id)}
            for user_id, t in ordered[:TRACE_LIMIT]
        ],
        "more": len(ordered) > TRACE_LIMIT,
    }


def _relation(row: FileRow, user_id: str) -> str:
    """How a traced file relates to the user: linked to them, their PDF already on file, or named them."""
    if row.user_id == user_id:
        return "linked" if row.outcome == "linked" else "already_linked"
    return "named"


def _descending(text: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in text)


def traced_item(deps: Deps, traced: TracedFile) -> dict[str, Any]:
    """One traced entry: the file as GET /batches/{id}/files shows it, and its batch."""
    row = traced.file
    return {
        "batchId": row.batch_id,
        "batchStatus": traced.batch_status,
        "batchCreatedAt": iso(traced.batch_created_at),
        "upload": traced.upload,
        **file_item(row, evidence_link(deps, row)),
        "createdAt": iso(row.created_at),
    }


def iter_all_files(deps: Deps, batch_id: str, outcome: str | None = None) -> Iterable[FileRow]:
    """Every file of a batch (for reports), page by page (``ports.every_file``)."""
    return every_file(deps.ledger, batch_id, outcome)
