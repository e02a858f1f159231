"""unzip's use case: inspect an uploaded ZIP, register every entry, stage each PDF and queue it.

Idempotent per batch: a duplicate notification, or S3's retry after a crash, re-stages only the
entries without an outcome, and a batch already unpacked (or final) is left as it is.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pdfbatch import archive, metrics
from pdfbatch.errors import ArchiveRejected, EntryRejected, InvalidInput, NotFound, ObjectChanged
from pdfbatch.logs import logger
from pdfbatch.model import (
    FINAL_STATUSES,
    IGNORED,
    UNSTAGED_REASONS,
    BatchReason,
    BatchStatus,
    FileResult,
    FileTask,
    Outcome,
    Reason,
    staging_key,
)
from pdfbatch.ports import NewEntry, every_file
from pdfbatch.services import batches, tally
from pdfbatch.services.batches import Upload
from pdfbatch.services.deps import Deps

# Staging uploads in flight are capped by bytes too, so memory stays flat whatever the entry sizes.
STAGE_INFLIGHT_BYTES = 32 * 1024 * 1024
# SendMessageBatch calls in flight: one per ten PUTs, so a few keep up with any number of PUT workers.
SEND_WORKERS = 4


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
    t0 = time.monotonic()
    batch = batches.claim_batch(deps, upload)
    batch_id = batch.batch_id
    if batch.status in FINAL_STATUSES:
        logger.info("batch already final; duplicate notification ignored", extra={"status": batch.status})
        return StageReport(batch_id, batch.status, duplicate=True)
    if batch.unpacked_at is not None and batch.total_files is not None:
        # An earlier run staged and queued every entry: a duplicate (even one arriving after the ZIP
        # was deleted) changes nothing. It only re-marks Redis, in case that run died just before.
        status = tally.mark_unpacked(deps, batch_id, batch.total_files)
        logger.info("batch already unpacked; duplicate notification ignored", extra={"status": status})
        return StageReport(batch_id, status, total_files=batch.total_files, duplicate=True)

    # Every read is of the object this notification announced: its version, or (no versions) its ETag.
    pin = {"version_id": upload.version_id, "etag": upload.etag}
    try:
        size = upload.size
        if size is None:
            size = deps.store.head_size(upload.bucket, upload.key, **pin)
        reader = deps.store.open_reader(upload.bucket, upload.key, size, **pin)  # reads nothing yet
        opened = archive.open_archive(reader, s.limits, size=size)  # the one ZIP size check
    except ObjectChanged:
        return _replaced(deps, batch_id, batch.total_files)
    except ArchiveRejected as exc:
        return _rejected(deps, batch_id, exc)
    except NotFound:
        tally.fail_batch(deps, batch_id, BatchReason.ZIP_MISSING)
        logger.warning("zip rejected", extra={"reason": BatchReason.ZIP_MISSING})
        return StageReport(batch_id, BatchStatus.FAILED, reason=BatchReason.ZIP_MISSING)

    plan = opened.plan
    report = StageReport(
        batch_id, BatchStatus.PROCESSING, total_files=plan.total_files, ignored=len(plan.ignored)
    )
    report.seconds["inspect"] = time.monotonic() - t0
    _register(deps, batch_id, plan, rerun=batch.total_files is not None, version=upload.version_id)
    report.seconds["register"] = time.monotonic() - t0 - report.seconds["inspect"]
    done = set(deps.ledger.done_indices(batch_id))
    report.skipped_done = len(done)
    with opened:
        for entry in plan.pdf_entries:
            if entry.reason is not None and entry.index not in done:
                # Refused at inspection (too large, encrypted, ...): never inflated.
                tally.record_and_count(
                    deps, batch_id, entry.index, FileResult(Outcome.FAILED, str(entry.reason))
                )
                report.rejected += 1
        todo = [e for e in plan.pdf_entries if e.reason is None and e.index not in done]
        t1 = time.monotonic()
        unread: list[int] = []
        with _Stager(deps, batch_id, upload.bucket) as stager:
            for i, entry in enumerate(todo):
                try:
                    data = opened.read(entry)
                except EntryRejected as exc:
                    tally.record_and_count(
                        deps, batch_id, entry.index, FileResult(Outcome.FAILED, exc.reason)
                    )
                    report.rejected += 1
                    continue
                except ObjectChanged:
                    # Overwritten mid-read (no versions to pin): what is staged is this ZIP's, the
                    # rest can never be read. Those staged are still sent; the rest fail, explained.
                    unread = [e.index for e in todo[i:]]
                    break
                stager.submit(entry.index, data)
                report.staged += 1
        report.seconds["stage"] = time.monotonic() - t1
        if unread:
            report.rejected += _fail_unread(deps, batch_id, unread)

    # MySQL first: unpacked_at is what makes a later duplicate a no-op, and that no-op re-marks Redis.
    deps.ledger.mark_unpacked(batch_id)
    report.status = tally.mark_unpacked(deps, batch_id, plan.total_files)
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


def _rejected(deps: Deps, batch_id: str, exc: ArchiveRejected) -> StageReport:
    """The upload as a whole cannot be read: its batch ends FAILED with the reason."""
    tally.fail_batch(deps, batch_id, BatchReason(exc.reason))
    extra: dict[str, str] = {"reason": exc.reason}
    if exc.reason == BatchReason.NOT_A_ZIP:
        extra["looks_like"] = str(exc)  # "a PDF", "gzip", "empty", ...: never the name or content
    logger.warning("zip rejected", extra=extra)
    return StageReport(batch_id, BatchStatus.FAILED, reason=exc.reason)


def _register(
    deps: Deps, batch_id: str, plan: archive.Plan, *, rerun: bool, version: str | None = None
) -> None:
    """Record the batch's totals and every entry before any message is sent (no worker can finish a
    half-unpacked batch); on a re-run, first re-sync the live counters with the ledger."""
    if rerun:
        # Rebuilt from the ledger only if they expired: never replaced while live, because workers may be
        # counting this batch's files right now (the run before sent their messages), and a snapshot of
        # the ledger written over the counters would drop every file counted between its read and write.
        tally.restore_if_expired(deps, batch_id)
        # The run before may have recorded an entry it refused (too large, damaged, ...) and died before
        # counting it (Redis down): nothing else would ever count it, since its message is never sent.
        # Counting is set-guarded, so an entry counted already is not counted again.
        for done in deps.ledger.done_files(batch_id):
            if done.reason in UNSTAGED_REASONS and (row := deps.ledger.get_file(batch_id, done.index)):
                tally.count(deps, row)
    deps.progress.init_batch(
        batch_id, BatchStatus.PROCESSING, plan.total_files, deps.clock(), ignored=len(plan.ignored)
    )
    deps.ledger.start_batch(batch_id, plan.total_files, len(plan.ignored), version)
    deps.ledger.add_entries(
        batch_id,
        (
            NewEntry(
                index=e.index,
                name=e.name,
                name_hex=e.raw_name.hex(),
                kind=e.kind,
                size=e.file_size,
                outcome=IGNORED if e.kind != "pdf" else None,
                reason=str(e.reason) if e.kind != "pdf" and e.reason else None,
            )
            for e in plan.entries
        ),
    )


def _replaced(deps: Deps, batch_id: str, total_files: int | None) -> StageReport:
    """The ZIP was overwritten before unzip could read it (a bucket without versions): never mix.

    A batch with nothing registered yet ends FAILED zip_replaced; one an earlier run registered keeps
    what it has, and its entries without an outcome end failed/zip_replaced, so it still completes.
    The later upload is a batch of its own either way.
    """
    logger.warning("zip replaced by another upload before it was read", extra={"reason": "zip_replaced"})
    if total_files is None:
        tally.fail_batch(deps, batch_id, BatchReason.ZIP_REPLACED)
        return StageReport(batch_id, BatchStatus.FAILED, reason=BatchReason.ZIP_REPLACED)
    pending = [r.index for r in every_file(deps.ledger, batch_id, "pending") if r.kind == "pdf"]
    _fail_unread(deps, batch_id, pending)
    deps.ledger.mark_unpacked(batch_id)
    status = tally.mark_unpacked(deps, batch_id, total_files)
    return StageReport(batch_id, status, total_files=total_files, rejected=len(pending))


def _fail_unread(deps: Deps, batch_id: str, indices: list[int]) -> int:
    """Record each entry failed/zip_replaced (unless it has an outcome already); return how many."""
    for index in indices:
        tally.record_and_count(deps, batch_id, index, FileResult(Outcome.FAILED, Reason.ZIP_REPLACED))
    return len(indices)


class _Stager:
    """Staging, pipelined: the caller inflates entries one at a time and hands each over; ``workers``
    threads PUT them, and each staged entry joins the next message of ten, which goes out on a small
    pool of its own, so a PUT slot never waits on SQS and reading, PUTs and sends all overlap.

    Bounded: at most ``2 x workers`` entries and ``STAGE_INFLIGHT_BYTES`` (or one entry, if larger)
    are read and not yet staged, whatever the ZIP. Only S3 and SQS calls run on the pools (boto3
    clients are thread-safe); every SQL statement stays on the caller's thread, and every entry's ledger
    row was written before the stager exists. A message goes out only after its object is staged.

    The first error stops new work; ``__exit__`` waits for what is in flight and raises it, so the
    batch is not marked unpacked and S3's retry re-stages and re-sends every entry without an outcome
    (the same keys, the same messages: idempotent). ``workers`` 1 is the sequential path, with no
    threads: read, PUT, and send every tenth (what a one-thread pool amounted to, kept as the baseline).
    """

    def __init__(self, deps: Deps, batch_id: str, bucket: str) -> None:
        if deps.queue is None:
            raise InvalidInput("unzip needs a work queue (PDFBATCH_WORK_QUEUE_URL)")
        self.store = deps.store
        self.queue = deps.queue
        self.batch_id = batch_id
        self.bucket = bucket
        self.workers = max(1, deps.settings.stage_workers)
        self.max_entries = 2 * self.workers
        self.puts: ThreadPoolExecutor | None = None
        self.sends: ThreadPoolExecutor | None = None
        if self.workers > 1:
            self.puts = ThreadPoolExecutor(self.workers, thread_name_prefix="stage-put")
            self.sends = ThreadPoolExecutor(SEND_WORKERS, thread_name_prefix="stage-send")
        self.cond = threading.Condition()
        self.inflight_bytes = 0
        self.inflight = 0  # entries handed over and not yet staged (or failed)
        self.ready: list[FileTask] = []  # staged, not yet in a message
        self.error: BaseException | None = None

    def __enter__(self) -> _Stager:
        return self

    def submit(self, index: int, data: bytes) -> None:
        """Stage one entry (on the pool, waiting while too much is in flight); raise the first error."""
        if self.puts is None:
            self._stage(index, data)
            return
        size = len(data)
        with self.cond:
            while (
                self.error is None
                and self.inflight > 0
                and (self.inflight >= self.max_entries or self.inflight_bytes + size > STAGE_INFLIGHT_BYTES)
            ):
                self.cond.wait()
            if self.error is not None:
                raise self.error
            self.inflight += 1
            self.inflight_bytes += size
        self.puts.submit(self._put, index, data)

    def _put(self, index: int, data: bytes) -> None:
        try:
            if self.error is None:  # after a failure, nothing new is staged (the retry will)
                self._stage(index, data)
        except BaseException as exc:
            self._fail(exc)
            raise  # into the future nobody reads: _fail keeps it for submit and __exit__
        finally:
            with self.cond:
                self.inflight -= 1
                self.inflight_bytes -= len(data)
                self.cond.notify_all()

    def _stage(self, index: int, data: bytes) -> None:
        """PUT one entry; once ten are staged, send them (on the send pool, or here when sequential)."""
        key = staging_key(self.batch_id, index)
        self.store.put_bytes(self.bucket, key, data, "application/pdf")
        ten: list[FileTask] = []
        with self.cond:
            self.ready.append(FileTask(self.batch_id, index, key, self.bucket))
            if len(self.ready) >= 10:
                ten, self.ready = self.ready[:10], self.ready[10:]
        if ten:
            self._send(ten)

    def _send(self, tasks: list[FileTask]) -> None:
        if self.sends is None:
            self.queue.send_tasks(tasks)
            return
        future = self.sends.submit(self.queue.send_tasks, tasks)
        future.add_done_callback(self._sent)

    def _sent(self, future: Future[None]) -> None:
        exc = future.exception()
        if exc is not None:
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        with self.cond:
            self.error = self.error or exc
            self.cond.notify_all()

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.puts is not None:
            self.puts.shutdown(wait=True)
        if exc is None and self.error is None and self.ready:
            rest, self.ready = self.ready, []
            for start in range(0, len(rest), 10):
                self._send(rest[start : start + 10])
        if self.sends is not None:
            self.sends.shutdown(wait=True)
        if exc is None and self.error is not None:
            raise self.error
