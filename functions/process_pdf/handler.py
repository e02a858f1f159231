"""process_pdf: SQS work messages -> one outcome per file; only failed records go back to the queue."""

from __future__ import annotations

import functools
import json
import time
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch.bootstrap import get_file_deps
from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.metrics import metrics, queue_age
from pdfbatch.model import FileTask
from pdfbatch.services import overlap, processing

# Every record failing is still a partial response (all ids listed), not an invocation error: SQS
# treats both alike, and the function's error metric then means a crash, not a bad batch.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class OutOfTime(Exception):
    """Too little of the invocation is left to start a file: its message goes back untried."""


def record_handler(
    record: SQSRecord,
    lambda_context: LambdaContext | None = None,
    work: overlap.Invocation | None = None,
) -> None:
    """Process one message; a failure is backed off, or on the last delivery recorded `failed`/`gave_up`.

    A message that arrives when less than one file budget (plus margin) of the invocation is left is
    released at once, untried: no attempt counted, nothing for the timeout to kill half-way. ``work``:
    the invocation's messages, whose S3 waits overlap (services/overlap.py); None, one file at a time.
    """
    deps = get_file_deps()
    try:
        task = FileTask.from_message(json.loads(record.body))
    except (InvalidInput, ValueError):
        logger.error("malformed work message dropped", extra={"message_id": record.message_id})
        return
    begun = work is not None and work.begun(record.message_id)  # read ahead: its time was checked then
    if (
        not begun
        and lambda_context is not None
        and not processing.has_time_for_a_file(deps.settings, lambda_context.get_remaining_time_in_millis())
    ):
        processing.release_unstarted(deps, record.receipt_handle)
        logger.info("too little time left for a file; message released", extra={"index": task.index})
        raise OutOfTime(record.message_id)  # reported as a failure: SQS keeps the message
    logger.append_keys(batch_id=task.batch_id, file_index=task.index)  # on every line, the handler's too
    attrs = record.attributes  # .get: a test or replayed event may lack some attributes
    queue_age(time.time(), attrs.get("SentTimestamp"), attrs.get("ApproximateFirstReceiveTimestamp"))
    receive_count = int(record.attributes.approximate_receive_count or 1)
    try:
        if work is None:
            processing.process_file(deps, task)
        else:
            work.process(deps, record.message_id, task)
    except Exception:
        # The message fails either way (SQS redelivers it, or moves it to the DLQ after the last try).
        processing.on_failed_attempt(deps, task, record.receipt_handle, receive_count)
        raise
    finally:
        logger.remove_keys(["batch_id", "file_index"])


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    remaining = context.get_remaining_time_in_millis if context is not None else None
    with overlap.Invocation.of_records(event.get("Records") or [], remaining) as work:
        return process_partial_response(
            event=event,
            record_handler=functools.partial(record_handler, work=work),
            processor=processor,
            context=context,
        )
