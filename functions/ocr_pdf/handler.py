"""ocr_pdf: OCR-queue messages (scans process_pdf found no text layer in) -> one outcome per file.

The OCR lane's own function: its own queue, reserved concurrency, DLQ and per-file budget, so a slow
scan never holds up the text lane. It reads the staged copy by OCR and links, records and counts it
through the same path as process_pdf (services/processing.process_scan); only failed records go back.
"""

from __future__ import annotations

import functools
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.batch.types import PartialItemFailureResponse
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch.bootstrap import get_file_deps
from pdfbatch.logs import logger
from pdfbatch.metrics import metrics
from pdfbatch.model import Lane
from pdfbatch.services import file_messages, processing
from pdfbatch.services.file_messages import FileMessage
from pdfbatch.services.redelivery import OutOfTime

__all__ = ["OutOfTime", "handler", "record_handler"]

processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


@functools.cache
def engine() -> Any:
    """The execution environment's OCR engine, its model loaded once (the OCR worker forks from it)."""
    from pdfbatch.ocr import Tesseract

    tesseract = Tesseract()
    tesseract.load()
    return tesseract


def record_handler(record: SQSRecord, lambda_context: LambdaContext | None = None) -> None:
    """Read one scan (services/file_messages.py: budget, metrics, failure path on the OCR queue)."""
    deps = get_file_deps()
    file_messages.handle(
        deps,
        FileMessage.of(record),
        Lane.OCR,
        lambda task: processing.process_scan(deps, task, engine()),
        remaining_ms=lambda_context.get_remaining_time_in_millis() if lambda_context is not None else None,
    )


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    return process_partial_response(
        event=event, record_handler=record_handler, processor=processor, context=context
    )
