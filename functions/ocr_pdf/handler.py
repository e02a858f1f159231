"""ocr_pdf: OCR-queue messages (scans process_pdf found no text layer in) -> one outcome per file.

The OCR lane's own function: its own queue, reserved concurrency, DLQ and per-file budget, so a slow
scan never holds up the text lane. It reads the staged copy by OCR and links, records and counts it
through the same path as process_pdf (services/processing.process_scan); only failed records go back.
"""

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
from pdfbatch.model import FileTask, Lane
from pdfbatch.services import processing

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


class OutOfTime(Exception):
    """Too little of the invocation is left to start a scan: its message goes back untried."""


@functools.cache
def engine() -> Any:
    """The execution environment's OCR engine, its model loaded once (the OCR worker forks from it)."""
    from pdfbatch.ocr import Tesseract

    tesseract = Tesseract()
    tesseract.load()
    return tesseract


def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
    """Read one scan; a failure is backed off, or on the last delivery recorded `failed`/`gave_up`."""
    deps = get_file_deps()
    try:
        task = FileTask.from_message(json.loads(record.body))
    except (InvalidInput, ValueError):
        logger.error("malformed OCR message dropped", extra={"message_id": record.message_id})
        return
    if lambda_context is not None and not processing.has_time_for_a_file(
        deps.settings, lambda_context.get_remaining_time_in_millis(), Lane.OCR
    ):
        processing.release_unstarted(deps, record.receipt_handle)
        logger.info("too little time left for a scan; message released", extra={"index": task.index})
        raise OutOfTime(record.message_id)
    logger.append_keys(batch_id=task.batch_id, file_index=task.index, lane=str(Lane.OCR))
    attrs = record.attributes
    sent, first = attrs.get("SentTimestamp"), attrs.get("ApproximateFirstReceiveTimestamp")
    queue_age(time.time(), sent, first, Lane.OCR)
    receive_count = int(record.attributes.approximate_receive_count or 1)
    try:
        processing.process_scan(deps, task, engine())
    except Exception:
        # deps.queue is the OCR queue here (PDFBATCH_QUEUE_URL in the template): backoff and the last
        # receive's give_up work as in process_pdf, and SQS moves the message to the OCR DLQ.
        processing.on_failed_attempt(deps, task, record.receipt_handle, receive_count)
        raise
    finally:
        logger.remove_keys(["batch_id", "file_index", "lane"])


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
