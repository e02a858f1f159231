"""Redelivery, in one place: how long a failed message waits before SQS shows it again, and making a
received message visible now. process_pdf and ocr_pdf (services/file_messages.py, processing.py) and
deliver_callbacks (services/callback_delivery.py) all back off and release through here.

- ``backoff_seconds``: doubling per attempt from a base, capped; with ``rng``, equal jitter (half fixed,
  half random), so messages that failed together come back spread out, never sooner than half the step.
  File messages are jittered (``file_retry_delay``); callbacks are not (``callback_retry_delay``: a
  receiver's retries keep their documented schedule).
- ``change_visibility``: one ChangeMessageVisibility (0: visible now) that never raises for SQS being
  down: the message still comes back, after the queue's visibility timeout instead.
- ``OutOfTime``: a file message that arrived too late in its invocation, released untried.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from pdfbatch.config import Settings
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.logs import logger
from pdfbatch.model import Lane
from pdfbatch.ports import MessageQueue, WorkQueue
from pdfbatch.services.deps import Deps

Queue = WorkQueue | MessageQueue


class OutOfTime(Exception):
    """Too little of the invocation is left to start a file: its message goes back untried."""


def backoff_seconds(base: int, most: int, attempt: int, rng: Callable[[], float] | None = None) -> int:
    """Seconds before attempt ``attempt + 1``: base * 2^(attempt-1), capped at ``most``; jittered with
    ``rng`` into the upper half of that step."""
    ceiling = min(most, base * 2 ** min(max(attempt - 1, 0), 30))
    if rng is None:
        return int(ceiling)
    return int(ceiling / 2 + rng() * ceiling / 2)


def file_retry_delay(settings: Settings, receive_count: int, rng: Callable[[], float] = random.random) -> int:
    """A failed file message's backoff (PDFBATCH_RETRY_BASE_SECONDS doubling to _MAX_SECONDS), jittered."""
    return backoff_seconds(settings.retry_base_seconds, settings.retry_max_seconds, receive_count, rng)


def callback_retry_delay(settings: Settings, attempt: int) -> int:
    """A failed callback's backoff (PDFBATCH_CALLBACK_RETRY_BASE_SECONDS doubling to _MAX_SECONDS)."""
    return backoff_seconds(settings.callback_retry_base_seconds, settings.callback_retry_max_seconds, attempt)


def change_visibility(queue: Queue, receipt_handle: str, delay_seconds: int) -> bool:
    """Show a received message again after ``delay_seconds`` (0: now); False when SQS did not take it
    (logged: the message then comes back after the queue's visibility timeout)."""
    try:
        queue.change_visibility(receipt_handle, delay_seconds)
    except DependencyUnavailable as exc:
        logger.warning(
            "visibility not changed; the message comes back after the visibility timeout",
            extra={"dependency": exc.dependency, "error": str(exc), "delay_seconds": delay_seconds},
        )
        return False
    return True


# --- file messages: each lane is backed off and released on its own queue ---------------------------


def lane_queue(deps: Deps, lane: Lane) -> WorkQueue | None:
    """The queue a lane's messages arrive on: the work queue (text lane) or the OCR queue."""
    return deps.ocr_queue if lane == Lane.OCR else deps.queue


def retry_later(
    deps: Deps,
    receipt_handle: str,
    receive_count: int,
    rng: Callable[[], float] = random.random,
    lane: Lane = Lane.TEXT,
) -> int | None:
    """Back off a failed file message; return the delay, None if not applied."""
    queue = lane_queue(deps, lane)
    if queue is None:
        logger.warning("no queue configured; retry without backoff", extra={"setting": _setting(lane)})
        return None
    delay = file_retry_delay(deps.settings, receive_count, rng)
    if not change_visibility(queue, receipt_handle, delay):
        return None
    logger.info("message will be retried", extra={"delay_seconds": delay, "receive_count": receive_count})
    return delay


def release_now(deps: Deps, receipt_handle: str, lane: Lane = Lane.TEXT) -> None:
    """Make a file message visible at once: handed back untried (OutOfTime), or after its last receive
    failed, so SQS moves it to the DLQ at its next receive instead of after the visibility timeout."""
    queue = lane_queue(deps, lane)
    if queue is None:
        logger.warning("no queue configured; released after the timeout", extra={"setting": _setting(lane)})
        return
    change_visibility(queue, receipt_handle, 0)


def _setting(lane: Lane) -> str:
    return "PDFBATCH_OCR_QUEUE_URL" if lane == Lane.OCR else "PDFBATCH_WORK_QUEUE_URL"
