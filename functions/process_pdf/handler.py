"""process_pdf: SQS work messages -> one outcome per file; only failed records go back to the queue."""

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
from pdfbatch.model import FileTask, Lane
from pdfbatch.services import file_messages, invocation, processing
from pdfbatch.services.file_messages import FileMessage
from pdfbatch.services.redelivery import OutOfTime

__all__ = ["OutOfTime", "handler", "record_handler"]

# Every record failing is still a partial response (all ids listed), not an invocation error: SQS
# treats both alike, and the function's error metric then means a crash, not a bad batch.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def record_handler(
    record: SQSRecord,
    lambda_context: LambdaContext | None = None,
    work: invocation.Invocation | None = None,
) -> None:
    """Process one message (services/file_messages.py: budget, metrics, failure path). ``work``: the
    invocation's messages, whose S3 waits overlap (services/invocation.py); None, one file at a time."""
    deps = get_file_deps()

    def run(task: FileTask) -> None:
        if work is None:
            processing.process_file(deps, task)
        else:
            work.process(deps, record.message_id, task)

    file_messages.handle(
        deps,
        FileMessage.of(record),
        Lane.TEXT,
        run,
        remaining_ms=lambda_context.get_remaining_time_in_millis() if lambda_context is not None else None,
        begun=work is not None and work.begun(record.message_id),  # read ahead: its time was checked then
    )


@metrics.log_metrics(capture_cold_start_metric=True)
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> PartialItemFailureResponse:
    """Entry point: Powertools reports the failed message ids as batchItemFailures."""
    remaining = context.get_remaining_time_in_millis if context is not None else None
    with invocation.Invocation.of_records(event.get("Records") or [], remaining) as work:
        return process_partial_response(
            event=event,
            record_handler=functools.partial(record_handler, work=work),
            processor=processor,
            context=context,
        )
