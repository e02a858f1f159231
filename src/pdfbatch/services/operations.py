"""The operator's repairs: run a batch's files again (``pdfbatch retry``), list and redrive the work
queue's dead letters (``pdfbatch dlq``). Every reopened file is un-counted once, through tally.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pdfbatch.errors import InvalidInput, NotFound
from pdfbatch.logs import logger
from pdfbatch.model import UNSTAGED_REASONS, BatchStatus, FileTask, Outcome, Reason, is_batch_id, staging_key
from pdfbatch.ports import DeadLetter, DeadLetters, FileRow
from pdfbatch.services import tally, views
from pdfbatch.services.deps import Deps, iso


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
        raise InvalidInput("retry needs the work queue (PDFBATCH_WORK_QUEUE_URL)")
    logger.append_keys(batch_id=batch_id)
    report = RetryReport(batch_id)
    recorded: list[FileRow] = []
    pending: list[FileRow] = []
    for row in views.iter_all_files(deps, batch_id):
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
        tally.uncount(deps, batch_id, row)
        reopened.append(row)
    logger.info("files reopened", extra={"reopened": len(reopened)})
    return reopened


def _dead_letter_task(letter: DeadLetter) -> FileTask | None:
    try:
        return FileTask.from_body(letter.body)
    except InvalidInput:
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
                "sentAt": iso(letter.sent_at),
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
        raise InvalidInput("redrive needs the work queue (PDFBATCH_WORK_QUEUE_URL)")
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
                tally.count(deps, row)
                finished.append(letter)
                report.already_done += 1
        deps.queue.send_tasks([task for _, task in resend])
        dlq.delete([letter for letter, _ in resend] + finished)
        report.resent += len(resend)
        if on_progress:
            on_progress(report)
    logger.info("dead letters redriven", extra=report.as_dict())
    return report
