"""One work message, text lane or OCR lane, from its body to its file's outcome: the per-record path both
file functions share (process_pdf and ocr_pdf), so the time budget, the queue-age metrics and the
failure path are written once.

    file_messages.handle(deps, FileMessage.of(record), Lane.TEXT, run, remaining_ms=...)

- a body that is not a work message is logged by its message id and dropped (no retry can fix it);
- a message that arrives when less than one file budget (plus margin) of the invocation is left is
  released at once, untried (no attempt counted, nothing for the timeout to kill half-way), and
  ``OutOfTime`` reports it as a failure so SQS keeps it;
- a file whose work raises is backed off, or on its last delivery recorded failed/gave_up
  (``processing.on_failed_attempt``), and the error propagates so SQS redelivers it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.metrics import queue_age
from pdfbatch.model import FileTask, Lane
from pdfbatch.services import processing, redelivery
from pdfbatch.services.deps import Deps
from pdfbatch.services.redelivery import OutOfTime

__all__ = ["FileMessage", "OutOfTime", "handle"]


@dataclass(frozen=True)
class FileMessage:
    """What the per-record path reads of an SQS record (Powertools' SQSRecord, or a test's)."""

    message_id: str
    body: str
    receipt_handle: str
    attributes: Mapping[str, Any]

    @classmethod
    def of(cls, record: Any) -> FileMessage:
        """From a Powertools SQSRecord (``.attributes`` is a mapping of SQS's message attributes)."""
        return cls(record.message_id, record.body, record.receipt_handle, record.attributes)

    def task(self) -> FileTask | None:
        """The file this message names, or None when its body is not a work message."""
        try:
            return FileTask.from_body(self.body)
        except InvalidInput:
            return None

    @property
    def receive_count(self) -> int:
        """SQS's ApproximateReceiveCount (1 when a replayed or test event lacks it)."""
        return int(self.attributes.get("ApproximateReceiveCount") or 1)


def handle(
    deps: Deps,
    message: FileMessage,
    lane: Lane,
    work: Callable[[FileTask], object],
    *,
    remaining_ms: int | None = None,
    begun: bool = False,
) -> None:
    """Run ``work`` on the message's file with the shared budget, metrics and failure path.

    ``remaining_ms``: what is left of the invocation (None: no limit, as in a test). ``begun``: the file
    was started already (read ahead by services/invocation.py), so its time was checked then.
    """
    task = message.task()
    if task is None:
        logger.error("malformed work message dropped", extra={"message_id": message.message_id, "lane": lane})
        return
    if (
        not begun
        and remaining_ms is not None
        and not processing.has_time_for_a_file(deps.settings, remaining_ms, lane)
    ):
        redelivery.release_now(deps, message.receipt_handle, lane)
        logger.info(
            "too little time left for a file; message released", extra={"index": task.index, "lane": lane}
        )
        raise OutOfTime(message.message_id)  # reported as a failure: SQS keeps the message
    keys = {"batch_id": task.batch_id, "file_index": task.index}
    if lane != Lane.TEXT:
        keys["lane"] = str(lane)
    logger.append_keys(**keys)  # on every line of the file's work, the handler's too
    attrs = message.attributes  # .get: a test or replayed event may lack some attributes
    queue_age(time.time(), attrs.get("SentTimestamp"), attrs.get("ApproximateFirstReceiveTimestamp"), lane)
    try:
        work(task)
    except Exception:
        # The message fails either way (SQS redelivers it, or moves it to the lane's DLQ after the last
        # try); the backoff acts on the lane's own queue (redelivery.lane_queue).
        processing.on_failed_attempt(deps, task, message.receipt_handle, message.receive_count, lane)
        raise
    finally:
        logger.remove_keys(list(keys))
