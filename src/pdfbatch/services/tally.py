"""Counted once, completes once, the ledger wins: the one place those rules live.

- A file's outcome is recorded in the ledger first (``Ledger.record`` keeps the first outcome), then
  counted in the live counters; counting is guarded by a set of counted indices (the Lua scripts of
  adapters/redis.py), so a redelivery, a re-run or a redrive counts a file at most once.
- A batch completes once: the counters say when every file is counted, ``complete`` checks that
  against the ledger before the summary is written, and the ledger keeps the first final status.
- The ledger wins: counters that expired or disagree with it are rebuilt from one consistent read
  of it, never from what the counters said before.
- A final batch is announced once (``announce``): its report written from the ledger, then one
  completion event put, then ``announced_at`` set; every path that finishes a batch calls it, so a
  duplicate completion repairs an announcement whose announcer died (see ``announce``).

Every use case (staging, processing, views, operations) changes counters and batch endings through
here; this module imports no sibling use case.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from pdfbatch import announcement
from pdfbatch.errors import NotFound, ProgressMissing
from pdfbatch.logs import logger
from pdfbatch.model import COUNTED_OUTCOMES, FINAL_STATUSES, BatchReason, BatchStatus, FileResult, upload_key
from pdfbatch.ports import BatchRow, FileRow, LiveProgress, every_file
from pdfbatch.services.deps import Deps


def record_and_count(deps: Deps, batch_id: str, index: int, result: FileResult) -> FileRow:
    """Record an outcome unless one is recorded already, then count what the ledger holds."""
    stored = deps.ledger.record(batch_id, index, result)
    count(deps, stored)
    return stored


def count(deps: Deps, row: FileRow) -> None:
    """Count a recorded outcome once; finish the batch when it was the last one."""
    assert row.outcome is not None and row.reason is not None
    try:
        _, status = deps.progress.count(row.batch_id, row.index, row.outcome, row.reason, deps.clock())
    except ProgressMissing:
        # The hash expired mid-batch: rebuild it from the ledger (which already holds this row).
        rebuild_progress(deps, row.batch_id)
        _, status = deps.progress.count(row.batch_id, row.index, row.outcome, row.reason, deps.clock())
    if status == BatchStatus.COMPLETED:
        complete(deps, row.batch_id)


def complete(deps: Deps, batch_id: str) -> str:
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
        rebuild_progress(deps, batch_id, replace=True)
        if not done:
            return BatchStatus.PROCESSING
    deps.ledger.finish_batch(batch_id, BatchStatus.COMPLETED, counts, None)
    logger.info("batch finished", extra={"status": BatchStatus.COMPLETED, "counts": counts})
    announce(deps, batch_id)
    return BatchStatus.COMPLETED


def rebuild_progress(deps: Deps, batch_id: str, replace: bool = False) -> None:
    """Recreate the live counters from one consistent read of the ledger (``replace``: even if live)."""
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
        later_uploads=later_uploads(deps, batch_id),
    )
    indices = {f.index for f in done}
    rebuilt = deps.progress.rebuild(batch_id, live, sorted(indices), replace=replace)
    logger.warning("progress rebuilt from the ledger", extra={"rebuilt": rebuilt})
    if replace:
        # A worker may have recorded and counted a file between the read above and the write over the
        # live counters: the write dropped that count. Read the ledger again and count what it holds
        # beyond the first read (set-guarded); a file recorded after this read counts itself after it.
        for late in deps.ledger.done_files(batch_id):
            if late.index not in indices and (row := deps.ledger.get_file(batch_id, late.index)):
                count(deps, row)


def later_uploads(deps: Deps, batch_id: str) -> tuple[str, ...]:
    """Batches of later uploads through this batch's upload link (uploads/{id}.zip), oldest first.

    The ledger's answer (what the live counters' ``laterUploads`` are rebuilt from): every other
    batch of that key was created by an upload that found the key's batch claimed already.
    """
    found = deps.ledger.find_batches(upload_key(batch_id))
    return tuple(b.batch_id for b in reversed(found) if b.batch_id != batch_id)


def restore_if_expired(deps: Deps, batch_id: str) -> None:
    """Rebuild the live counters from the ledger if they have expired (they never go back to zero)."""
    if deps.progress.get(batch_id) is None:
        rebuild_progress(deps, batch_id)


def mark_unpacked(deps: Deps, batch_id: str, total_files: int) -> str:
    """Every entry is staged or recorded: the batch may complete (returns its status)."""
    try:
        status = deps.progress.mark_unpacked(batch_id, total_files, deps.clock())
    except ProgressMissing:
        rebuild_progress(deps, batch_id)
        status = deps.progress.mark_unpacked(batch_id, total_files, deps.clock())
    if status == BatchStatus.COMPLETED:
        status = complete(deps, batch_id)
    return status


def uncount(deps: Deps, batch_id: str, row: FileRow) -> None:
    """Take a reopened file's outcome back out of the live counters (once: the done set guards it)."""
    assert row.outcome is not None and row.reason is not None
    try:
        deps.progress.uncount(batch_id, row.index, row.outcome, row.reason, deps.clock())
    except ProgressMissing:
        # Expired: rebuilt from the ledger, where the row is already open, so only the status moves.
        rebuild_progress(deps, batch_id)
        deps.progress.uncount(batch_id, row.index, row.outcome, row.reason, deps.clock())


def fail_batch(deps: Deps, batch_id: str, reason: BatchReason) -> None:
    """The ZIP as a whole cannot be processed: FAILED with a reason, in Redis and MySQL."""
    deps.progress.fail(batch_id, reason, deps.clock())
    write_summary(deps, batch_id, BatchStatus.FAILED, reason)


def complete_from_ledger(deps: Deps, batch: BatchRow, counts: Mapping[str, int]) -> bool:
    """With no live counters left, the ledger alone ends a batch whose every file has an outcome.

    That happens when the summary write of the last count was lost (MySQL failed on every delivery of
    that message, and Redis then expired). Returns True when it wrote the summary.
    """
    if not (batch.unpacked_at and batch.total_files is not None and counts["processed"] >= batch.total_files):
        return False
    write_summary(deps, batch.batch_id, BatchStatus.COMPLETED, None)
    return True


def write_summary(deps: Deps, batch_id: str, status: str, reason: str | None) -> None:
    """The batch's final status and its counts as the ledger holds them (written once)."""
    counts = deps.ledger.outcome_counts(batch_id)
    deps.ledger.finish_batch(batch_id, status, counts, reason)
    logger.info("batch finished", extra={"status": status, "reason": reason, "counts": counts})
    announce(deps, batch_id)


# An announcer's claim: long enough for a report of the largest batch and one PutEvents, short enough
# that a claim whose announcer died is retried by the next caller soon after.
ANNOUNCE_LEASE_SECONDS = 120.0


def announce(deps: Deps, batch_id: str) -> bool:
    """Deliver a final batch's results once: write its report, put its completion event, mark it.

    At-least-once, made once in the normal case by a ledger claim (``announce_started_at``, a lease):
    1. claim: only a final, unannounced batch whose last claim is older than the lease is claimed, so
       a duplicate completion (a redelivered last message, two workers at once) announces nothing more;
    2. write reports/{id}/results.csv and summary.json from the ledger (the same rows write the same
       bytes: rewriting is idempotent);
    3. put one event on the default bus (source ``pdfbatch``, ``Batch Completed``/``Batch Failed``);
    4. ``announced_at`` (only if this claim still holds).
    An announcer that dies before 4 leaves the claim to expire: the next call after the lease (the
    redelivery of the message that finished the batch, a status read, ``pdfbatch report --download``)
    writes the report again and puts the event again. So an event can be put twice, only after such a
    death; EventBridge delivers at least once anyway: consumers dedupe on (batchId, completedAt).
    A batch reopened meanwhile (``pdfbatch retry``) loses the claim (reopen clears it): the mark fails,
    and its next completion is announced with the report as it then is.
    Returns True when this call announced the batch.
    """
    batch = deps.ledger.claim_announcement(batch_id, ANNOUNCE_LEASE_SECONDS)
    if batch is None:
        return False
    assert batch.announce_started_at is not None
    keys = announcement.report_keys(batch_id)
    bucket = deps.settings.bucket
    # Rows are read page by page into the CSV text: only the CSV is held whole, never every FileRow.
    csv_bytes = announcement.results_csv(_all_files(deps, batch_id))
    deps.store.put_bytes(bucket, keys["csv"], csv_bytes, "text/csv; charset=utf-8")
    deps.store.put_bytes(bucket, keys["summary"], announcement.summary_json(batch), "application/json")
    if deps.events is None:
        # Nothing to put the event on (a CLI without EventBridge): the claim lapses, a later call puts it.
        logger.warning("report written; no event bus to announce on")
        return False
    deps.events.put_event(
        announcement.EVENT_SOURCE,
        announcement.DETAIL_TYPES[BatchStatus(batch.status)],
        announcement.event_detail(batch),
    )
    marked = deps.ledger.mark_announced(batch_id, batch.announce_started_at)
    logger.info("batch announced", extra={"status": batch.status, "marked": marked, "bytes": len(csv_bytes)})
    return True


def _all_files(deps: Deps, batch_id: str) -> Iterator[FileRow]:
    return every_file(deps.ledger, batch_id)
