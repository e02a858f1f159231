"""deliver_callbacks: the callback queues -> one signed POST of a final batch's summary per message.

Messages are completion events (an EventBridge rule targets the queue) and replays (`pdfbatch callbacks
BATCH --replay`). A failed POST hides its message for a backoff and reports it failed; after
PDFBATCH_CALLBACK_ATTEMPTS receives SQS moves it to the callback DLQ (services/callback_delivery.py).

Two queues feed it, one per lane (services/callback_delivery.py): the callback queue (fast lane) and the slow
callback queue, told apart by the record's source ARN. The records of one invocation are delivered at
the same time (Powertools' AsyncBatchProcessor, each POST on a thread of its own), so a receiver that
uses its whole deadline delays nobody else's delivery in the batch; the deps are built before, once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    AsyncBatchProcessor,
    EventType,
    async_process_partial_response,
)
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch.bootstrap import get_deps
from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.services import callback_delivery

processor = AsyncBatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(record: SQSRecord) -> None:
    """One delivery attempt; a failure raises, so Powertools reports the message as failed."""
    try:
        message = callback_delivery.parse_message(record.body)
    except InvalidInput:
        logger.error("malformed callback message dropped", extra={"message_id": record.message_id})
        return
    logger.thread_safe_append_keys(batch_id=message.batch_id)  # this record's thread only
    attempt = int(record.attributes.approximate_receive_count or 1)
    deps = get_deps(need_queue="callback_queue_url")
    slow = deps.settings.callback_slow_queue_arn
    lane = callback_delivery.SLOW if slow and record.event_source_arn == slow else callback_delivery.FAST
    try:
        outcome = callback_delivery.deliver(deps, message, attempt, record.receipt_handle, lane=lane)
        logger.info("callback message done", extra={"outcome": outcome, "delivery_id": message.delivery_id})
    finally:
        logger.thread_safe_remove_keys(["batch_id"])


async def async_record_handler(record: SQSRecord) -> None:
    """``record_handler`` on a thread of its own: the invocation's records are delivered side by side."""
    await asyncio.to_thread(record_handler, record)


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    get_deps(
        need_queue="callback_queue_url"
    )  # built here, once, not by the records' threads at the same time
    return async_process_partial_response(
        event=event, record_handler=async_record_handler, processor=processor, context=context
    )
