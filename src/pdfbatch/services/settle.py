"""Settle on a schedule what a status read would settle, so that nothing waits for a reader.

Each path that ends or announces a batch is at-least-once, but a few of them finish only when somebody
reads the batch (services/views.py) or redelivers the right message. A batch nobody polls (an `aws s3
cp` drop, a batch whose results go to a callback) must still end and be announced. The status
function runs ``settle`` on a schedule (template parameter SettleSchedule, every minute by default)
over the batches not announced yet, created in the last SETTLE_WINDOW_SECONDS, that are due:

Each batch row carries ``settle_at``, when settle next has something to do with it: a POST /batches
batch when its link and grace are over, any other batch at once (a batch unzip started, one that ended,
revived or reopened). A run reads only batches due by now, by when each is due, page after page with a
cursor, until none is left or its time budget is spent; one it looked at and could not settle yet is
looked at again RECHECK_SECONDS later (behind every batch due before then). So no backlog can starve a
due batch: 505 batches created and never uploaded to are not due for hours and are not read (issue 24
found the 500 oldest unannounced batches, all empty, read every run while a batch whose announcer died
waited), and a batch that fails every run goes to the back instead of holding its place.

- a final batch whose announcement did not go out is announced (``tally.announce``) once the claim of
  the announcer that died is past its lease: its report, its completion event and, through the event,
  its callback. (The chaos soak found it: MySQL cut between the claim and its reply; the redelivered
  message found the claim held and was done, and no event was ever put.)
- a POST /batches batch nobody uploaded to ends FAILED ``upload_expired`` once its link and grace are
  over (``batches.expire_if_abandoned``);
- a PROCESSING batch whose every file has an outcome, the last one at least QUIET_SECONDS old, is
  completed from the ledger (``tally.complete``, or ``tally.complete_from_ledger`` when its live
  counters are gone): its last count or its summary write was lost.

Older unannounced batches (ended before announcements existed) are announced when read, never in bulk.
One batch that fails to settle is logged and left to the next run; the others go on.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

from pdfbatch.errors import DependencyUnavailable
from pdfbatch.logs import logger
from pdfbatch.model import FINAL_STATUSES, BatchStatus
from pdfbatch.ports import BatchRow
from pdfbatch.services import batches, tally
from pdfbatch.services.deps import Deps

SETTLE_WINDOW_SECONDS = 3 * 86_400.0
QUIET_SECONDS = 60.0
LIMIT = 500  # one page of due batches
RECHECK_SECONDS = 60.0  # a batch not settled yet (still running, claim held, failed) is due again then
# The status function has 10 s; a run stops reading pages after this and the next run goes on.
RUN_BUDGET_SECONDS = 6.0
DEFAULT_SCHEDULE = "rate(1 minute)"  # the template's SettleSchedule default
_UNITS = {"minute": 60.0, "minutes": 60.0, "hour": 3600.0, "hours": 3600.0, "day": 86_400.0, "days": 86_400.0}


def schedule_seconds(schedule: str) -> float | None:
    """The period of a SettleSchedule ``rate(N unit)`` expression in seconds; None for a cron expression
    (no one period) or anything else. The invariant checker's settled_in_time allows two of them."""
    inner = schedule.strip().removeprefix("rate(").removesuffix(")")
    if inner == schedule.strip():
        return None
    number, _, unit = inner.strip().partition(" ")
    if not number.isdigit() or unit.strip() not in _UNITS:
        return None
    return int(number) * _UNITS[unit.strip()]


@dataclass
class Settled:
    """What one run found and did (batch ids per action; counts in the log)."""

    checked: int = 0
    announced: list[str] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many of each, for the run's log line."""
        return {
            "checked": self.checked,
            "announced": len(self.announced),
            "expired": len(self.expired),
            "completed": len(self.completed),
            "failed": len(self.failed),
        }


def settle(deps: Deps, budget: float = RUN_BUDGET_SECONDS, page: int = LIMIT) -> Settled:
    """One run over the due batches not announced yet, by when each is due, page by page (a cursor)."""
    began = time.monotonic()
    now = deps.clock()
    created_after = now - SETTLE_WINDOW_SECONDS
    done = Settled()
    cursor: tuple[float, str] | None = None
    while time.monotonic() - began < budget:
        found = deps.ledger.due_batches(now, created_after, cursor, page)
        done.checked += len(found)
        for batch in found:
            action = _settle_one(deps, batch, done)
            if action is None:
                # Behind everything due before then; MySQL down: the batch stays due, the next run finds it.
                with contextlib.suppress(DependencyUnavailable):
                    deps.ledger.defer_settle(batch.batch_id, batch.settle_at, deps.clock() + RECHECK_SECONDS)
            else:
                getattr(done, action).append(batch.batch_id)
        if len(found) < page:
            break
        last = found[-1]
        cursor = (last.settle_at or 0.0, last.batch_id)
    logger.info("settle run", extra=done.counts())
    return done


def _settle_one(deps: Deps, batch: BatchRow, done: Settled) -> str | None:
    logger.append_keys(batch_id=batch.batch_id)
    try:
        return settle_batch(deps, batch)
    except Exception as exc:  # noqa: BLE001 - one batch that cannot settle must not starve the rest
        level = logger.warning if isinstance(exc, DependencyUnavailable) else logger.error
        level("batch not settled; the next run tries again", extra={"error": type(exc).__name__})
        done.failed.append(batch.batch_id)
        return None
    finally:
        logger.remove_keys(["batch_id"])


def settle_batch(deps: Deps, batch: BatchRow) -> str | None:
    """Settle one batch if it is due: "announced", "expired", "completed", or None (nothing due)."""
    if batch.status == BatchStatus.PENDING:
        return "expired" if batches.expire_if_abandoned(deps, batch) else None
    if batch.status in FINAL_STATUSES:
        if tally.announce(deps, batch.batch_id):
            logger.warning(
                "a final batch's announcement was due; announced now", extra={"status": batch.status}
            )
            return "announced"
        return None
    if batch.unpacked_at is None or batch.total_files is None:
        return None  # still unpacking, or unzip's own retries and DLQ end it
    counts = deps.ledger.outcome_counts(batch.batch_id)  # one aggregate read for a batch still running
    if counts["processed"] < batch.total_files:
        return None  # files still running; each one's count ends the batch
    last = max((f.finished_at or 0.0 for f in deps.ledger.done_files(batch.batch_id)), default=0.0)
    if deps.clock() - last < QUIET_SECONDS:
        return None  # its last file may be counting right now
    if deps.progress.get(batch.batch_id) is None:
        tally.complete_from_ledger(deps, batch, counts)
    else:
        tally.complete(deps, batch.batch_id)
    ended = deps.ledger.get_batch(batch.batch_id)
    if ended is None or ended.status not in FINAL_STATUSES:
        return None
    logger.warning("every file had an outcome but the batch was still running; completed now")
    return "completed"
