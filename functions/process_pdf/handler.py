"""process_pdf: SQS work messages -> one outcome per file; only failed records go back to the queue."""

from __future__ import annotations

import json
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch import services
from pdfbatch.bootstrap import get_deps
from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.model import FileTask

processor = BatchProcessor(event_type=EventType.SQS)


def record_handler(record: SQSRecord) -> None:
    """Process one message; on its last delivery a persistent error is recorded as `failed`."""
    deps = get_deps()
    try:
        task = FileTask.from_message(json.loads(record.body))
    except (InvalidInput, ValueError):
        logger.error("malformed work message dropped", extra={"message_id": record.message_id})
        return
    receive_count = int(record.attributes.approximate_receive_count or 1)
    try:
        services.process_file(deps, task)
    except Exception:
        # Anything a retry may fix propagates, so SQS redelivers; on the last receive the file is
        # recorded failed instead, so its batch still finishes.
        if receive_count < deps.settings.max_receive_count:
            logger.exception("file attempt failed; will be retried", extra={"receive_count": receive_count})
            services.retry_later(deps, record.receipt_handle, receive_count)  # exponential backoff
            raise
        logger.exception("file failed on its last delivery", extra={"receive_count": receive_count})
        services.give_up(deps, task)
    finally:
        logger.remove_keys(["batch_id", "file_index"])


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
