"""The pipeline's steps: stage a ZIP, process one PDF, answer status. Pure orchestration over ports."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pdfbatch import archive, metrics
from pdfbatch.config import Settings
from pdfbatch.errors import (
    ArchiveRejected,
    DependencyUnavailable,
    EntryRejected,
    InvalidInput,
    NotFound,
    PdfRejected,
    ProgressMissing,
)
from pdfbatch.logs import logger
from pdfbatch.model import (
    COUNTED_OUTCOMES,
    FINAL_STATUSES,
    IGNORED,
    UNSTAGED_REASONS,
    BatchReason,
    BatchStatus,
    FileResult,
    FileTask,
    Outcome,
    Reason,
    describe,
    final_key,
    is_batch_id,
    staging_key,
)
from pdfbatch.ports import (
    DeadLetter,
    DeadLetters,
    FileRow,
    Ledger,
    LiveProgress,
    NewEntry,
    ObjectStore,
    Progress,
    Users,
    WorkQueue,
)

# An upload that started just before its link expired may still be arriving: wait this long after.
UPLOAD_GRACE_SECONDS = 3600
UPLOAD_KEY_RE = re.compile(r"^uploads/([0-9a-f]{32})\.zip$")
# Staging uploads in flight are capped by bytes too, so memory stays flat whatever the entry sizes.
STAGE_INFLIGHT_BYTES = 32 * 1024 * 1024


@dataclass
class Deps:
    """Everything the services touch, built once per execution environment by bootstrap."""

    settings: Settings
    store: ObjectStore
    ledger: Ledger
    users: Users
    progress: Progress
    queue: WorkQueue | None = None
    clock: Callable[[], float] = time.time


def fingerprint(value: str) -> str:
    """A short, stable hash for correlating personal data (names, emails) in logs without logging it."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]


# ---------------------------------------------------------------------------------------------
# Batch identity and creation
# ---------------------------------------------------------------------------------------------


def new_batch_id() -> str:
    """128 random bits as 32 hex characters: unguessable."""
    return secrets.token_hex(16)


def upload_token(upload: Upload) -> str:
    """What makes two S3 notifications the same upload: bucket, key and sequencer (or version).

    A duplicated notification carries the same sequencer, so it resolves to the same batch.
    """
    token = upload.sequencer or upload.version_id or ""
    raw = f"{upload.bucket}\x00{upload.key}\x00{token}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def resolve_batch(deps: Deps, upload: Upload) -> tuple[str, str]:
    """(batch id, source) of an uploaded object: the API's id, or a random one claimed for the upload.

    A ZIP dropped straight into uploads/ gets a fresh 128-bit id the first time its notification is
    seen; the ledger maps the upload's token to it, so every duplicate finds the same batch, and the
    id cannot be worked out from the bucket, key or sequencer.
    """
    match = UPLOAD_KEY_RE.fullmatch(upload.key)
    if match:
        return match.group(1), "api"
    return deps.ledger.batch_for_upload(upload_token(upload), new_batch_id()), "s3"


def create_batch(deps: Deps) -> dict[str, Any]:
    """POST /batches: a new batch id and a presigned POST that uploads its ZIP."""
    s = deps.settings
    batch_id = new_batch_id()
    key = f"uploads/{batch_id}.zip"
    now = deps.clock()
    deps.ledger.create_batch(batch_id, s.bucket, key, "api", BatchStatus.PENDING)
    deps.progress.init_batch(batch_id, BatchStatus.PENDING, None, now)
    upload = deps.store.presigned_post(s.bucket, key, s.upload_max_bytes, s.upload_url_expires_seconds)
    logger.info("batch created", extra={"batch_id": batch_id})
    return {
        "batchId": batch_id,
        "key": key,
        "upload": {"url": upload["url"], "fields": upload["fields"]},
        "maxBytes": s.upload_max_bytes,
        "expiresAt": _iso(now + s.upload_url_expires_seconds),
    }


# ---------------------------------------------------------------------------------------------
# unzip: stage every PDF entry and send one message per file
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Upload:
    """One S3 ObjectCreated record."""

    bucket: str
    key: str
    size: int | None
    sequencer: str | None = None
    version_id: str | None = None


@dataclass
class StageReport:
    """What one unzip run did (for logs and tests)."""

    batch_id: str
    status: str
    total_files: int = 0
    ignored: int = 0
    staged: int = 0
    rejected: int = 0
    skipped_done: int = 0
    duplicate: bool = False
    reason: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)


def stage_zip(deps: Deps, upload: Upload) -> StageReport:
    """Inspect the ZIP, register every entry, stage each PDF and queue it; idempotent per batch."""
    s = deps.settings
    batch_id, source = resolve_batch(deps, upload)
    logger.append_keys(batch_id=batch_id)
    t0 = time.monotonic()
    batch = deps.ledger.create_batch(batch_id, upload.bucket, upload.key, source, BatchStatus.PROCESSING)
    if batch.status in FINAL_STATUSES:
        logger.info("batch already final; duplicate notification ignored", extra={"status": batch.status})
        return StageReport(batch_id, batch.status, duplicate=True)
    if batch.unpacked_at is not None and batch.total_files is not None:
        # An earlier run staged and queued every entry: a duplicate (even one arriving after the ZIP
        # was deleted) changes nothing. It only re-marks Redis, in case that run died just before.
        status = _mark_unpacked(deps, batch_id, batch.total_files)
        logger.info("batch already unpacked; duplicate notification ignored", extra={"status": status})
        return StageReport(batch_id, status, total_files=batch.total_files, duplicate=True)

    try:
        size = upload.size if upload.size is not None else deps.store.head_size(upload.bucket, upload.key)
        if size > s.limits.max_zip_bytes:
            raise ArchiveRejected(BatchReason.ZIP_TOO_LARGE)
        reader = deps.store.open_reader(upload.bucket, upload.key, size)
        opened = archive.open_archive(reader, s.limits, size=size)
    except ArchiveRejected as exc:
        fail_batch(deps, batch_id, exc.reason)
        logger.warning("zip rejected", extra={"reason": exc.reason})
        return StageReport(batch_id, BatchStatus.FAILED, reason=exc.reason)
    except NotFound:
        fail_batch(deps, batch_id, BatchReason.ZIP_MISSING)
        logger.warning("zip rejected", extra={"reason": BatchReason.ZIP_MISSING})
        return StageReport(batch_id, BatchStatus.FAILED, reason=BatchReason.ZIP_MISSING)

    plan = opened.plan
    report = StageReport(
        batch_id, BatchStatus.PROCESSING, total_files=plan.total_files, ignored=len(plan.ignored)
    )
    report.seconds["inspect"] = time.monotonic() - t0
    now = deps.clock()
    if batch.total_files is not None and deps.progress.get(batch_id) is None:
        # A re-run whose hash expired: init_batch would recreate it at zero while the ledger already
        # holds outcomes that are never re-sent (so never counted again); rebuild it from the ledger.
        _rebuild_progress(deps, batch_id)
    # totalFiles is recorded before any message is sent: no worker can finish a half-unpacked batch.
    deps.progress.init_batch(
        batch_id, BatchStatus.PROCESSING, plan.total_files, now, ignored=len(plan.ignored)
    )
    deps.ledger.start_batch(batch_id, plan.total_files, len(plan.ignored))
    deps.ledger.add_entries(
        batch_id,
        (
            NewEntry(
                index=e.index,
                name=e.name,
                kind=e.kind,
                size=e.file_size,
                outcome=IGNORED if e.kind != "pdf" else None,
                reason=str(e.reason) if e.kind != "pdf" and e.reason else None,
            )
            for e in plan.entries
        ),
    )
    done = set(deps.ledger.done_indices(batch_id))
    report.skipped_done = len(done)
    with opened:
        for entry in plan.pdf_entries:
            if entry.reason is not None and entry.index not in done:
                # Refused at inspection (too large, encrypted, ...): never inflated.
                _record_and_count(deps, batch_id, entry.index, _failed(str(entry.reason)))
                report.rejected += 1
        todo = [e for e in plan.pdf_entries if e.reason is None and e.index not in done]
        t1 = time.monotonic()
        with _Stager(deps, batch_id, upload.bucket) as stager:
            for entry in todo:
                try:
                    data = opened.read(entry)
                except EntryRejected as exc:
                    _record_and_count(deps, batch_id, entry.index, _failed(exc.reason))
                    report.rejected += 1
                    continue
                stager.submit(entry.index, data)
                report.staged += 1
        report.seconds["stage"] = time.monotonic() - t1

    # MySQL first: unpacked_at is what makes a later duplicate a no-op, and that no-op re-marks Redis.
    deps.ledger.mark_unpacked(batch_id)
    report.status = _mark_unpacked(deps, batch_id, plan.total_files)
    report.seconds["total"] = time.monotonic() - t0
    metrics.zip_unpacked(report.staged, report.rejected, report.seconds)
    logger.info(
        "zip unpacked",
        extra={
            "total_files": report.total_files,
            "ignored": report.ignored,
            "staged": report.staged,
            "rejected": report.rejected,
            "already_done": report.skipped_done,
            "seconds": {k: round(v, 3) for k, v in report.seconds.items()},
        },
    )
    return report


class _Stager:
    """Parallel staging uploads with bounded bytes in flight; messages go out ten at a time."""

    def __init__(self, deps: Deps, batch_id: str, bucket: str) -> None:
        if deps.queue is None:
            raise InvalidInput("unzip needs a work queue (PDFBATCH_QUEUE_URL)")
        self.deps = deps
        self.queue = deps.queue
        self.batch_id = batch_id
        self.bucket = bucket
        self.pool = ThreadPoolExecutor(max_workers=max(1, deps.settings.stage_workers))
        self.cond = threading.Condition()
        self.inflight = 0
        self.ready: list[FileTask] = []
        self.futures: list[Future[None]] = []
        self.error: BaseException | None = None

    def __enter__(self) -> _Stager:
        return self

    def submit(self, index: int, data: bytes) -> None:
        """Queue one staging upload, waiting while too many bytes are in flight."""
        size = len(data)
        with self.cond:
            while self.inflight > 0 and self.inflight + size > STAGE_INFLIGHT_BYTES and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise self.error
            self.inflight += size
        self.futures.append(self.pool.submit(self._put, index, data))

    def _put(self, index: int, data: bytes) -> None:
        key = staging_key(self.batch_id, index)
        try:
            self.deps.store.put_bytes(self.bucket, key, data, "application/pdf")
            task = FileTask(self.batch_id, index, key, self.bucket)
            batch: list[FileTask] = []
            with self.cond:
                self.ready.append(task)
                if len(self.ready) >= 10:
                    batch, self.ready = self.ready[:10], self.ready[10:]
            if batch:
                self.queue.send_tasks(batch)
        except BaseException as exc:
            with self.cond:
                self.error = self.error or exc
            raise
        finally:
            with self.cond:
                self.inflight -= len(data)
                self.cond.notify_all()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.pool.shutdown(wait=True)
        if exc is None and self.error is None:
            if self.ready:
                self.queue.send_tasks(self.ready)
                self.ready = []
        if exc is None and self.error is not None:
            raise self.error


def _mark_unpacked(deps: Deps, batch_id: str, total_files: int) -> str:
    try:
        status = deps.progress.mark_unpacked(batch_id, total_files, deps.clock())
    except ProgressMissing:
        _rebuild_progress(deps, batch_id)
        status = deps.progress.mark_unpacked(batch_id, total_files, deps.clock())
    if status == BatchStatus.COMPLETED:
        status = _complete(deps, batch_id)
    return status


def fail_batch(deps: Deps, batch_id: str, reason: BatchReason) -> None:
    """The ZIP as a whole cannot be processed: FAILED with a reason, in Redis and MySQL."""
    deps.progress.fail(batch_id, reason, deps.clock())
    _write_summary(deps, batch_id, BatchStatus.FAILED, reason)


def _write_summary(deps: Deps, batch_id: str, status: str, reason: str | None) -> None:
    counts = deps.ledger.outcome_counts(batch_id)
    deps.ledger.finish_batch(batch_id, status, counts, reason)
    logger.info("batch finished", extra={"status": status, "reason": reason, "counts": counts})


# ---------------------------------------------------------------------------------------------
# process_pdf: one staged file to exactly one outcome
# ---------------------------------------------------------------------------------------------


def _failed(reason: str) -> FileResult:
    return FileResult(outcome=Outcome.FAILED, reason=reason)


def process_file(deps: Deps, task: FileTask) -> FileRow | None:
    """Read, match and link one staged PDF; record and count its outcome exactly once.

    Safe to run twice, concurrently, or after a crash at any point: the link and its ledger record
    are one MySQL transaction, the final key is derived from user and content, and counting is a
    set-guarded Lua script.
    """
    s = deps.settings
    logger.append_keys(batch_id=task.batch_id, file_index=task.index)
    row = deps.ledger.get_file(task.batch_id, task.index)
    if row is None:
        logger.warning("no ledger row for this message; dropped")
        return None
    if row.outcome is not None:
        # Redelivery (or a crash after recording): make sure it is counted, change nothing else.
        _count(deps, row)
        logger.info("already recorded; redelivery counted once", extra={"outcome": row.outcome})
        return row
    started = time.monotonic()
    attempt = deps.ledger.begin_attempt(task.batch_id, task.index)
    timings: dict[str, float] = {}

    t = time.monotonic()
    try:
        data = deps.store.get_bytes(task.bucket, task.staging_key)
    except NotFound:
        return _finish(deps, task, FileResult(Outcome.FAILED, Reason.MISSING_OBJECT), started)
    timings["download"] = time.monotonic() - t
    sha = hashlib.sha256(data).hexdigest()

    # Imported here, not at the top: unzip and status never parse a PDF, and pypdf, pypdfium2 and
    # cryptography cost ~20 MB of resident memory in every execution environment that loads them.
    from pdfbatch import pdf

    try:
        scan = pdf.scan(
            data,
            deps.users.find_by_emails,
            max_pages=s.limits.max_pages,
            budget_seconds=s.limits.file_budget_seconds,
        )
    except PdfRejected as exc:
        timings["extract"] = time.monotonic() - t - timings["download"]
        return _finish(
            deps, task, FileResult(Outcome.FAILED, exc.reason, sha256=sha, detail=timings), started
        )
    timings["validate"] = getattr(scan, "validate_seconds", 0.0)
    timings["extract"] = scan.extract_seconds
    timings["match"] = scan.lookup_seconds
    timings["pages"] = float(scan.pages_read)

    if scan.reason != Reason.MATCHED or scan.match is None:
        result = FileResult(Outcome.SKIPPED_NO_MATCH, str(scan.reason), sha256=sha, detail=timings)
        return _finish(deps, task, result, started)

    user = scan.match
    if user.pdf_url:
        if attempt > 1:
            # An earlier delivery may have copied and died before linking, and another file linked
            # this user meanwhile: that copy is ours to remove (its key is derived from user and content).
            _drop_copy_unless_linked(deps, task.bucket, final_key(user.id, sha), user.pdf_url)
        result = FileResult(
            Outcome.SKIPPED_ALREADY_EXISTS, Reason.ALREADY_LINKED, user_id=user.id, sha256=sha, detail=timings
        )
        return _finish(deps, task, result, started)

    key = final_key(user.id, sha)
    url = s.pdf_url(key)
    t = time.monotonic()
    deps.store.copy(task.bucket, task.staging_key, key)
    timings["copy"] = time.monotonic() - t
    t = time.monotonic()
    linked = FileResult(
        Outcome.LINKED, Reason.MATCHED, user_id=user.id, final_key=key, sha256=sha, detail=timings
    )
    won = deps.ledger.link(task.batch_id, task.index, user.id, url, linked)
    timings["update"] = time.monotonic() - t
    if won:
        # The row as link() wrote it, without reading it back (a linked row is never reopened);
        # finished_at is this process's clock, the ledger's differs by the write's duration.
        stored = dataclasses.replace(
            row,
            outcome=str(linked.outcome),
            reason=str(linked.reason),
            user_id=user.id,
            final_key=key,
            sha256=sha,
            attempts=attempt,
            finished_at=deps.clock(),
            timings=dict(timings),
        )
        t = time.monotonic()
        _count(deps, stored)
        timings["count"] = time.monotonic() - t
        timings["total"] = time.monotonic() - started
        _keep_timings(deps, stored, timings)
        logger.info(
            "file processed",
            extra={
                "outcome": stored.outcome,
                "reason": stored.reason,
                "attempt": attempt,
                "timings_ms": _ms(timings),
            },
        )
        return stored
    # Someone else linked this user (another file, or another delivery of this one). Remove our
    # copy unless it is the very object the user now points at (identical PDFs share a key).
    _drop_copy_unless_linked(deps, task.bucket, key, deps.users.pdf_url_of(user.id))
    result = FileResult(
        Outcome.SKIPPED_ALREADY_EXISTS, Reason.ALREADY_LINKED, user_id=user.id, sha256=sha, detail=timings
    )
    return _finish(deps, task, result, started)


def _drop_copy_unless_linked(deps: Deps, bucket: str, key: str, current_url: str | None) -> None:
    """Delete our copy at ``key`` unless the user's pdf_url points at it.

    Safe against a concurrent link: only called once the user has a pdf_url, and pdfbatch only links
    users whose pdf_url is empty, so no one can link ``key`` afterwards.
    """
    if current_url != deps.settings.pdf_url(key):
        deps.store.delete(bucket, key)
        logger.info("unlinked copy removed")


def _finish(deps: Deps, task: FileTask, result: FileResult, started: float) -> FileRow:
    timings = dict(result.detail)
    t = time.monotonic()
    stored = deps.ledger.record(task.batch_id, task.index, result)
    timings["update"] = time.monotonic() - t
    _count(deps, stored)
    timings["count"] = time.monotonic() - t - timings["update"]
    timings["total"] = time.monotonic() - started
    if (stored.outcome, stored.reason) == (result.outcome, result.reason):
        _keep_timings(deps, stored, timings)
    logger.info(
        "file processed",
        extra={"outcome": stored.outcome, "reason": stored.reason, "timings_ms": _ms(timings)},
    )
    return stored


def _keep_timings(deps: Deps, stored: FileRow, timings: Mapping[str, float]) -> None:
    # The ledger row was written before its own write could be timed: store the full timings now
    # (what `pdfbatch report` reads), and emit them as metrics once, for the invocation that recorded it.
    metrics.file_recorded(stored.outcome or "", stored.reason or "", timings)
    try:
        deps.ledger.set_timings(stored.batch_id, stored.index, timings)
    except DependencyUnavailable as exc:
        # The outcome is recorded and counted already: a redelivery for timings would be waste.
        logger.warning("stage timings not stored", extra={"dependency": exc.dependency})


def _ms(timings: Mapping[str, float]) -> dict[str, float]:
    # Per-file stage timings for the log line (the ledger's copy is written before counting).
    return {k: round(v * 1000, 2) if k != "pages" else v for k, v in timings.items()}


def give_up(deps: Deps, task: FileTask, reason: str = Reason.GAVE_UP) -> FileRow | None:
    """Last delivery failed too: record the file failed so its batch still finishes."""
    row = deps.ledger.get_file(task.batch_id, task.index)
    if row is None:
        return None
    stored = deps.ledger.record(task.batch_id, task.index, _failed(reason))
    _count(deps, stored)
    if stored.reason == reason:
        metrics.file_recorded(stored.outcome or "", stored.reason, {})
    logger.error("file given up after repeated failures", extra={"outcome": stored.outcome})
    return stored


def retry_delay(settings: Settings, receive_count: int, rng: Callable[[], float] = random.random) -> int:
    """Seconds before a failed message is seen again: doubling per receive from the base, capped.

    Equal jitter (half fixed, half random): messages that failed together (MySQL down) come back
    spread out, and never sooner than half the step, so an outage is waited out rather than hammered.
    """
    doublings = min(max(receive_count - 1, 0), 30)
    ceiling = min(settings.retry_max_seconds, settings.retry_base_seconds * 2**doublings)
    return int(ceiling / 2 + rng() * ceiling / 2)


def retry_later(
    deps: Deps, receipt_handle: str, receive_count: int, rng: Callable[[], float] = random.random
) -> int | None:
    """Back off a failed work message (ChangeMessageVisibility); return the delay, None if not applied."""
    if deps.queue is None:
        logger.warning("no work queue configured (PDFBATCH_QUEUE_URL); retry without backoff")
        return None
    delay = retry_delay(deps.settings, receive_count, rng)
    try:
        deps.queue.retry_later(receipt_handle, delay)
    except DependencyUnavailable as exc:
        # The message still comes back, after the queue's visibility timeout instead.
        logger.warning("backoff not applied", extra={"dependency": exc.dependency, "error": str(exc)})
        return None
    logger.info("message will be retried", extra={"delay_seconds": delay, "receive_count": receive_count})
    return delay


def abandon_upload(deps: Deps, upload: Upload, reason: BatchReason = BatchReason.UNZIP_FAILED) -> str:
    """unzip gave up on an upload (its event reached the unzip DLQ): the batch ends FAILED with ``reason``.

    The batch row is created if unzip died before creating it. A batch already final, or one an
    earlier run unpacked completely (its workers finish it), is left as it is. Returns the status.
    """
    batch_id, source = resolve_batch(deps, upload)
    logger.append_keys(batch_id=batch_id)
    batch = deps.ledger.create_batch(batch_id, upload.bucket, upload.key, source, BatchStatus.PROCESSING)
    if batch.status in FINAL_STATUSES:
        logger.info("failed unzip event for a finished batch ignored", extra={"status": batch.status})
        return batch.status
    if batch.unpacked_at is not None and batch.total_files is not None:
        status = _mark_unpacked(deps, batch_id, batch.total_files)
        logger.info("failed unzip event for an unpacked batch ignored", extra={"status": status})
        return status
    if deps.progress.get(batch_id) is None:
        _rebuild_progress(deps, batch_id)  # so the live counters show what workers already did
    fail_batch(deps, batch_id, reason)
    logger.error("unzip gave up on this upload; batch failed", extra={"reason": reason})
    return BatchStatus.FAILED


def dead_letter_now(deps: Deps, receipt_handle: str) -> None:
    """After a failed last receive: visible again now, so SQS moves it to the DLQ at its next receive.

    Without this it would wait out the queue's visibility timeout first (the file is already recorded).
    """
    if deps.queue is None:
        logger.warning("no work queue configured (PDFBATCH_QUEUE_URL); the DLQ gets it after the timeout")
        return
    try:
        deps.queue.retry_later(receipt_handle, 0)
    except DependencyUnavailable as exc:
        logger.warning("message not released to the DLQ early", extra={"dependency": exc.dependency})


def _record_and_count(deps: Deps, batch_id: str, index: int, result: FileResult) -> FileRow:
    stored = deps.ledger.record(batch_id, index, result)
    _count(deps, stored)
    return stored


def _count(deps: Deps, row: FileRow) -> None:
    """Count a recorded outcome once; finish the batch when it was the last one."""
    assert row.outcome is not None and row.reason is not None
    try:
        _, status = deps.progress.count(row.batch_id, row.index, row.outcome, row.reason, deps.clock())
    except ProgressMissing:
        # The hash expired mid-batch: rebuild it from the ledger (which already holds this row).
        _rebuild_progress(deps, row.batch_id)
        _, status = deps.progress.count(row.batch_id, row.index, row.outcome, row.reason, deps.clock())
    if status == BatchStatus.COMPLETED:
        _complete(deps, row.batch_id)


def _complete(deps: Deps, batch_id: str) -> str:
    """Redis has counted every file: write the summary, unless the ledger disagrees with the counters.

    They can only disagree after a crash in a narrow window (a retry that reopened a file in MySQL but
    died before un-counting it in Redis). The ledger is the truth: Redis is rebuilt from it, and if a
    file is still without an outcome the batch stays PROCESSING until that file's own count ends it.
    """
    counts = deps.ledger.outcome_counts(batch_id)
    batch = deps.ledger.get_batch(batch_id)
    total = batch.total_files if batch is not None else None
    live = deps.progress.get(batch_id)
    seen = {**live.outcomes, "processed": live.processed} if live is not None else {}
    drifted = [k for k in (*COUNTED_OUTCOMES, "processed") if seen.get(k, 0) != counts.get(k, 0)]
    done = total is not None and counts["processed"] >= total
    if drifted or not done:
        logger.error("live counters disagreed with the ledger; rebuilt from it", extra={"drifted": drifted})
        _rebuild_progress(deps, batch_id, replace=True)
        if not done:
            return BatchStatus.PROCESSING
    deps.ledger.finish_batch(batch_id, BatchStatus.COMPLETED, counts, None)
    logger.info("batch finished", extra={"status": BatchStatus.COMPLETED, "counts": counts})
    return BatchStatus.COMPLETED


def _rebuild_progress(deps: Deps, batch_id: str, replace: bool = False) -> None:
    batch = deps.ledger.get_batch(batch_id)
    if batch is None:
        raise NotFound(batch_id)
    # One read for counts and indices: two reads would let a file recorded in between be in the done
    # set but not in the counts, and its own count() would then never add it (the batch never ends).
    done = deps.ledger.done_files(batch_id)
    outcomes: dict[str, int] = {o: 0 for o in COUNTED_OUTCOMES}
    reasons: dict[str, int] = {}
    for f in done:
        outcomes[f.outcome] = outcomes.get(f.outcome, 0) + 1
        reasons[f.reason] = reasons.get(f.reason, 0) + 1
    status = batch.status if batch.status != BatchStatus.PENDING else BatchStatus.PROCESSING
    if replace:  # re-syncing live counters the ledger disagreed with: the ledger says whether it is done
        done_all = batch.total_files is not None and len(done) >= batch.total_files
        status = BatchStatus.COMPLETED if done_all else BatchStatus.PROCESSING
    finished = [f.finished_at for f in done if f.finished_at]
    now = deps.clock()
    live = LiveProgress(
        status=status,
        total_files=batch.total_files,
        processed=len(done),
        outcomes=outcomes,
        reasons=reasons,
        ignored=batch.ignored_files,
        unpacked=bool(batch.unpacked_at),
        reason=batch.reason or None,
        created_at=batch.created_at,
        updated_at=now,
        started_at=batch.started_at or None,
        unpacked_at=batch.unpacked_at or None,
        completed_at=batch.completed_at if batch.status in FINAL_STATUSES else None,
        # The rate (and ETA) stays an average over the whole batch, not over the files since the rebuild.
        first_done_at=min(finished) if finished else None,
        rebuilt_at=now,
    )
    rebuilt = deps.progress.rebuild(batch_id, live, [f.index for f in done], replace=replace)
    logger.warning("progress rebuilt from the ledger", extra={"rebuilt": rebuilt})


# ---------------------------------------------------------------------------------------------
# status
# ---------------------------------------------------------------------------------------------


def batch_status(deps: Deps, batch_id: str) -> dict[str, Any]:
    """GET /batches/{id}: live counters from Redis, or the MySQL summary once the hash expired."""
    if not is_batch_id(batch_id):
        raise NotFound("no such batch")
    live = deps.progress.get(batch_id)
    if live is not None and live.status != BatchStatus.PENDING:
        return _shape_live(batch_id, live)
    batch = deps.ledger.get_batch(batch_id)
    if batch is None:
        raise NotFound("no such batch")
    if batch.status == BatchStatus.PENDING and _upload_expired(deps, batch.created_at):
        # Nobody uploaded to the presigned POST: the batch ends rather than waiting forever.
        fail_batch(deps, batch_id, BatchReason.UPLOAD_EXPIRED)
        logger.info("batch failed: no upload arrived", extra={"batch_id": batch_id})
        live = deps.progress.get(batch_id)
        batch = deps.ledger.get_batch(batch_id) or batch
    if live is not None:
        return _shape_live(batch_id, live)
    counts = dict(batch.counts) if batch.status in FINAL_STATUSES and batch.counts else None
    if counts is None:
        counts = deps.ledger.outcome_counts(batch_id)
        if batch.unpacked_at and batch.total_files is not None and counts["processed"] >= batch.total_files:
            # Every file has its outcome but the summary write of the last count was lost (MySQL
            # failed on every delivery of that message, and Redis then expired): finish it now.
            _write_summary(deps, batch_id, BatchStatus.COMPLETED, None)
            batch = deps.ledger.get_batch(batch_id) or batch
    body = _shape(
        batch_id,
        status=batch.status,
        total=batch.total_files,
        processed=int(counts.get("processed", sum(int(counts.get(o, 0)) for o in COUNTED_OUTCOMES))),
        outcomes=counts,
        reasons={k.split(":", 1)[1]: int(v) for k, v in counts.items() if k.startswith("reason:")},
        ignored=batch.ignored_files,
        created=batch.created_at,
        updated=batch.updated_at,
        completed=batch.completed_at,
        reason=batch.reason,
        started=batch.started_at,
        unpacked=batch.unpacked_at,
    )
    body["source"] = "ledger"
    return body


def _upload_expired(deps: Deps, created_at: float) -> bool:
    s = deps.settings
    return deps.clock() > created_at + s.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS


def _shape_live(batch_id: str, live: LiveProgress) -> dict[str, Any]:
    body = _shape(
        batch_id,
        status=live.status or BatchStatus.PENDING,
        total=live.total_files,
        processed=live.processed,
        outcomes=live.outcomes,
        reasons=live.reasons,
        ignored=live.ignored,
        created=live.created_at,
        updated=live.updated_at,
        completed=live.completed_at,
        reason=live.reason,
        started=live.started_at,
        unpacked=live.unpacked_at,
    )
    body["source"] = "live"
    first, updated, total, processed = live.first_done_at, live.updated_at, live.total_files, live.processed
    if body["status"] == BatchStatus.PROCESSING and total and first and updated and processed > 1:
        rate = (processed - 1) / max(updated - first, 1e-3)
        body["filesPerSecond"] = round(rate, 2)
        body["etaSeconds"] = round((total - processed) / rate, 1) if rate > 0 else None
    return body


def _shape(
    batch_id: str,
    *,
    status: str,
    total: int | None,
    processed: int,
    outcomes: Mapping[str, int],
    reasons: Mapping[str, int],
    ignored: int,
    created: float | None,
    updated: float | None,
    completed: float | None,
    reason: str | None,
    started: float | None = None,
    unpacked: float | None = None,
) -> dict[str, Any]:
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
        **{o: int(outcomes.get(o, 0)) for o in COUNTED_OUTCOMES},
        "ignored": ignored,
        "reasons": {r: int(n) for r, n in sorted(reasons.items()) if n},
        "filesPerSecond": None,
        "etaSeconds": None,
        "createdAt": _iso(created),
        "startedAt": _iso(started),
        "unpackedAt": _iso(unpacked),
        "updatedAt": _iso(updated),
        "completedAt": _iso(completed),
        # Stage timings: the wait for the upload (and S3's notification), unzip, and the whole pipeline.
        "durations": {
            "queuedSeconds": _span(created, started),
            "unzipSeconds": _span(started, unpacked),
            "processingSeconds": _span(started, completed),
            "totalSeconds": _span(created, completed),
        },
    }
    if status == BatchStatus.FAILED:
        body["reason"] = reason or "unknown"
        body["reasonText"] = describe(body["reason"])
    return body


def _span(start: float | None, end: float | None) -> float | None:
    """Seconds from ``start`` to ``end``, or None until both happened."""
    if not start or not end or end < start:
        return None
    return round(end - start, 3)


def list_files(
    deps: Deps, batch_id: str, cursor: str | None = None, limit: int = 100, outcome: str | None = None
) -> dict[str, Any]:
    """GET /batches/{id}/files: per-file results in entry order, paginated by an opaque cursor."""
    if not is_batch_id(batch_id) or deps.ledger.get_batch(batch_id) is None:
        raise NotFound("no such batch")
    allowed = {*COUNTED_OUTCOMES, IGNORED, "not_linked", "pending"}
    if outcome is not None and outcome not in allowed:
        raise InvalidInput(f"outcome must be one of {', '.join(sorted(allowed))}")
    limit = max(1, min(int(limit), 1000))
    after = -1
    if cursor:
        try:
            after = int(cursor)
        except ValueError as exc:
            raise InvalidInput("bad cursor") from exc
    rows = deps.ledger.list_files(batch_id, after, limit + 1, outcome)
    more = len(rows) > limit
    rows = rows[:limit]
    return {
        "batchId": batch_id,
        "items": [file_item(r) for r in rows],
        "nextCursor": str(rows[-1].index) if more and rows else None,
    }


def file_item(row: FileRow) -> dict[str, Any]:
    """One file as the API shows it."""
    return {
        "index": row.index,
        "name": row.name,
        "kind": row.kind,
        "outcome": row.outcome,
        "reason": row.reason,
        "reasonText": describe(row.reason) or None,
        "userId": row.user_id,
        "finalKey": row.final_key,
        "sha256": row.sha256,
        "size": row.size,
        "attempts": row.attempts,
        "finishedAt": _iso(row.finished_at),
        "timings": {k: round(v, 4) for k, v in row.timings.items()} if row.timings else {},
    }


def find_batches(deps: Deps, key: str) -> dict[str, Any]:
    """GET /batches?key=uploads/...: the batches created from an object dropped with the AWS CLI."""
    if not key.startswith("uploads/"):
        raise InvalidInput("key must start with uploads/")
    batches = deps.ledger.find_batches(key)
    return {
        "key": key,
        "batches": [
            {"batchId": b.batch_id, "status": b.status, "createdAt": _iso(b.created_at), "source": b.source}
            for b in batches
        ],
    }


def iter_all_files(deps: Deps, batch_id: str, outcome: str | None = None) -> Iterable[FileRow]:
    """Every file of a batch (for reports), page by page."""
    after = -1
    while True:
        rows = deps.ledger.list_files(batch_id, after, 1000, outcome)
        yield from rows
        if len(rows) < 1000:
            return
        after = rows[-1].index


def _iso(ts: float | None) -> str | None:
    if not ts:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# ---------------------------------------------------------------------------------------------
# operator commands: retry, dead letters, report
# ---------------------------------------------------------------------------------------------


@dataclass
class RetryReport:
    """What one `pdfbatch retry` did."""

    batch_id: str
    reopened: list[int] = field(default_factory=list)  # outcomes cleared and un-counted
    resent: list[int] = field(default_factory=list)  # messages sent (the reopened and the pending)
    kept: dict[str, int] = field(default_factory=dict)  # outcome/reason -> files left as they were

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of the CLI."""
        return {
            "batchId": self.batch_id,
            "reopened": len(self.reopened),
            "resent": len(self.resent),
            "kept": dict(sorted(self.kept.items())),
        }


def retry_batch(deps: Deps, batch_id: str, *, failed_only: bool = False) -> RetryReport:
    """Run a batch's files again from staging, counted correctly (e.g. after fixing a user's email).

    Re-runs every file that was not linked (``failed_only``: only the failed ones) and re-sends the
    pending ones. Linked files are never re-run: their user already points at them. Failures decided
    at unzip (too large, damaged entry, ...) were never staged and are kept. Safe to run again.
    """
    batch = deps.ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    if batch.status == BatchStatus.FAILED:
        raise InvalidInput(
            f"batch {batch_id} FAILED as a whole ({batch.reason}): no file was unpacked; upload the ZIP again"
        )
    if batch.total_files is None:
        raise InvalidInput(f"batch {batch_id} has not been unpacked yet")
    if deps.queue is None:
        raise InvalidInput("retry needs the work queue (PDFBATCH_QUEUE_URL)")
    logger.append_keys(batch_id=batch_id)
    report = RetryReport(batch_id)
    recorded: list[FileRow] = []
    pending: list[FileRow] = []
    for row in iter_all_files(deps, batch_id):
        if row.kind != "pdf":
            continue
        if row.outcome is None:
            if failed_only:
                report.kept["pending"] = report.kept.get("pending", 0) + 1
            else:
                pending.append(row)
        elif _retryable(row, failed_only):
            recorded.append(row)
        else:
            key = f"{row.outcome}/{row.reason}"
            report.kept[key] = report.kept.get(key, 0) + 1
    reopened = reopen_files(deps, batch_id, recorded)
    report.reopened = [r.index for r in reopened]
    tasks = [
        FileTask(batch_id, r.index, staging_key(batch_id, r.index), batch.bucket) for r in reopened + pending
    ]
    deps.queue.send_tasks(tasks)
    report.resent = [t.index for t in tasks]
    logger.info("batch retried", extra=report.as_dict())
    return report


def _retryable(row: FileRow, failed_only: bool) -> bool:
    if row.outcome == Outcome.LINKED or row.reason in UNSTAGED_REASONS:
        return False
    return not failed_only or row.outcome == Outcome.FAILED


def reopen_files(deps: Deps, batch_id: str, rows: Sequence[FileRow]) -> list[FileRow]:
    """Take recorded files back to "no outcome", un-counted, their batch PROCESSING; return those reopened.

    Ledger first, guarded by the outcome it clears, so of two concurrent reopeners only one un-counts
    (with the outcome it cleared); the Lua un-count is guarded by the done set. Linked rows never reopen.
    """
    if not rows:
        return []
    deps.ledger.reopen_batch(batch_id)
    reopened: list[FileRow] = []
    for row in rows:
        assert row.outcome is not None and row.reason is not None
        if not deps.ledger.reopen_file(batch_id, row.index, row.outcome, row.reason):
            continue  # changed meanwhile (another retry reopened it): theirs to un-count
        try:
            deps.progress.uncount(batch_id, row.index, row.outcome, row.reason, deps.clock())
        except ProgressMissing:
            # Expired: rebuilt from the ledger, where the row is already open, so only the status moves.
            _rebuild_progress(deps, batch_id)
            deps.progress.uncount(batch_id, row.index, row.outcome, row.reason, deps.clock())
        reopened.append(row)
    logger.info("files reopened", extra={"reopened": len(reopened)})
    return reopened


def _dead_letter_task(letter: DeadLetter) -> FileTask | None:
    try:
        return FileTask.from_message(json.loads(letter.body))
    except (InvalidInput, ValueError):
        return None


def list_dead_letters(deps: Deps, dlq: DeadLetters, limit: int = 1000) -> dict[str, Any]:
    """What the work queue's DLQ holds, each message with its file's ledger row (messages stay there)."""
    seen: dict[str, DeadLetter] = {}
    try:
        while len(seen) < limit:
            got = dlq.receive(min(10, limit - len(seen)), visibility_timeout=60)
            fresh = [letter for letter in got if letter.message_id not in seen]
            if not fresh:
                break
            seen.update((letter.message_id, letter) for letter in fresh)
    finally:
        dlq.release(list(seen.values()))
    items = []
    for letter in seen.values():
        task = _dead_letter_task(letter)
        row = deps.ledger.get_file(task.batch_id, task.index) if task else None
        items.append(
            {
                "messageId": letter.message_id,
                "batchId": task.batch_id if task else None,
                "index": task.index if task else None,
                "name": row.name if row else None,
                "outcome": row.outcome if row else None,
                "reason": row.reason if row else None,
                "attempts": row.attempts if row else None,
                "receiveCount": letter.receive_count,
                "sentAt": _iso(letter.sent_at),
            }
        )
    items.sort(key=lambda i: (i["batchId"] or "", i["index"] if i["index"] is not None else -1))
    return {"approximateCount": dlq.approximate_count(), "messages": items}


@dataclass
class RedriveReport:
    """What one `pdfbatch dlq --redrive` did."""

    resent: int = 0  # back on the work queue (gave_up rows reopened first)
    reopened: int = 0
    already_done: int = 0  # the file has another outcome: counted if it was not, message deleted
    left: int = 0  # malformed, or no ledger row: left in the DLQ for a person to look at
    batches: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape of the CLI."""
        return {
            "resent": self.resent,
            "reopened": self.reopened,
            "alreadyDone": self.already_done,
            "left": self.left,
            "batches": self.batches,
        }


def redrive_dead_letters(
    deps: Deps,
    dlq: DeadLetters,
    limit: int | None = None,
    on_progress: Callable[[RedriveReport], None] | None = None,
) -> RedriveReport:
    """Send the DLQ's messages back to the work queue; a file recorded failed/gave_up is reopened first.

    Per message: reopen (ledger, then counters), send, then delete from the DLQ, so a crash at any
    point leaves the message in the DLQ or on the work queue, never nowhere.
    """
    if deps.queue is None:
        raise InvalidInput("redrive needs the work queue (PDFBATCH_QUEUE_URL)")
    report = RedriveReport()
    seen: set[str] = set()
    while limit is None or len(seen) < limit:
        want = 10 if limit is None else min(10, limit - len(seen))
        letters = [m for m in dlq.receive(want, visibility_timeout=300) if m.message_id not in seen]
        if not letters:
            break
        resend: list[tuple[DeadLetter, FileTask]] = []
        finished: list[DeadLetter] = []
        for letter in letters:
            seen.add(letter.message_id)
            task = _dead_letter_task(letter)
            row = deps.ledger.get_file(task.batch_id, task.index) if task else None
            if task is None or row is None:
                report.left += 1  # stays hidden for the visibility timeout, then visible again
                continue
            if row.outcome == Outcome.FAILED and row.reason == Reason.GAVE_UP:
                if reopen_files(deps, task.batch_id, [row]):
                    report.reopened += 1
                row = deps.ledger.get_file(task.batch_id, task.index) or row
            if row.outcome is None:
                resend.append((letter, task))
                if task.batch_id not in report.batches:
                    report.batches.append(task.batch_id)
            else:
                # Recorded with another outcome, but maybe never counted (Redis failed on every
                # delivery after the ledger write): count it now (once, whatever happened before).
                _count(deps, row)
                finished.append(letter)
                report.already_done += 1
        deps.queue.send_tasks([task for _, task in resend])
        dlq.delete([letter for letter, _ in resend] + finished)
        report.resent += len(resend)
        if on_progress:
            on_progress(report)
    logger.info("dead letters redriven", extra=report.as_dict())
    return report


REPORT_STAGES: tuple[str, ...] = (*metrics.STAGES, "total")
PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def batch_report(ledger: Ledger, batch_id: str) -> dict[str, Any]:
    """`pdfbatch report`: outcomes, reasons and per-stage p50/p95/p99 (ms), all read from the ledger."""
    batch = ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    outcomes: dict[str, int] = {o: 0 for o in COUNTED_OUTCOMES}
    reasons: dict[tuple[str, str], int] = {}
    stage_values: dict[str, list[float]] = {s: [] for s in REPORT_STAGES}
    pending = retried = pdfs = 0
    after = -1
    while True:
        rows = ledger.list_files(batch_id, after, 1000)
        for row in rows:
            if row.kind != "pdf":
                continue
            pdfs += 1
            retried += row.attempts > 1
            if row.outcome is None:
                pending += 1
                continue
            outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
            key = (row.outcome, row.reason or "")
            reasons[key] = reasons.get(key, 0) + 1
            for stage in REPORT_STAGES:
                if stage in row.timings:
                    stage_values[stage].append(float(row.timings[stage]) * 1000)
        if len(rows) < 1000:
            break
        after = rows[-1].index
    stages = {
        stage: {
            "files": len(values),
            **{f"p{p}": round(percentile(values, p), 2) for p in PERCENTILES},
            "max": round(max(values), 2),
        }
        for stage, values in stage_values.items()
        if values
    }
    return {
        "batchId": batch_id,
        "status": batch.status,
        "reason": batch.reason,
        "totalFiles": batch.total_files,
        "ignored": batch.ignored_files,
        "pdfs": pdfs,
        "pending": pending,
        "retriedFiles": retried,
        "outcomes": outcomes,
        "reasons": [
            {"outcome": o, "reason": r, "files": n, "meaning": describe(r)}
            for (o, r), n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "stagesMs": stages,
        "createdAt": _iso(batch.created_at),
        "completedAt": _iso(batch.completed_at),
        "elapsedSeconds": round(batch.completed_at - batch.created_at, 3) if batch.completed_at else None,
    }
