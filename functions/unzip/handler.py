"""unzip: S3 ObjectCreated on uploads/*.zip -> stage every PDF entry and queue one message per file.

Its other triggers are the two dead-letter queues (SQS), so no batch stays PROCESSING forever:
- the unzip DLQ: S3 events that failed every attempt arrive as async-invocation records, and their
  batches end FAILED (``abandon_upload``);
- the work DLQ: work messages whose every delivery failed, including the last one's invocation dying
  (timeout, out of memory) before it could record anything; each file is recorded failed/gave_up if it
  has no outcome, counted once, and parked for `pdfbatch dlq --redrive` (``settle_dead_letter``).
unzip rather than process_pdf: process_pdf's reserved concurrency is exactly its work mapping's, and a
second mapping there would take slots from the work queue (throttled messages burn their receives).
The two kinds of message are told apart by the queue they come from (the record's event source ARN:
PDFBATCH_UNZIP_DLQ_ARN is the unzip DLQ, any other is a file dead letter), never by their bodies.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_plus

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes import S3Event
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch.bootstrap import get_deps
from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.metrics import metrics
from pdfbatch.model import FileTask
from pdfbatch.services.batches import Upload, abandon_upload
from pdfbatch.services.processing import settle_dead_letter
from pdfbatch.services.staging import stage_zip

# As in process_pdf: every record failing (MySQL down) is still a partial response, not a crash.
processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)


def uploads(event: S3Event) -> list[Upload]:
    """The uploads an S3 notification names (keys arrive URL-encoded), each with the version (or ETag)
    its reads are pinned to."""
    out = []
    for record in event.records:
        obj = record.s3.get_object
        out.append(
            Upload(
                bucket=record.s3.bucket.name,
                key=unquote_plus(obj.key),
                size=obj.get("size"),
                sequencer=obj.get("sequencer"),
                version_id=obj.version_id or None,
                etag=obj.etag or None,
            )
        )
    return out


def stage(event: S3Event) -> dict[str, Any]:
    """Stage each uploaded ZIP; errors a retry can fix propagate so S3's async retry runs it again."""
    deps = get_deps(need_queue="work_queue_url")
    batches = []
    for upload in uploads(event):
        report = stage_zip(deps, upload)
        batches.append(
            {"batchId": report.batch_id, "status": report.status, "totalFiles": report.total_files}
        )
    return {"batches": batches}


def dead_letter(record: SQSRecord) -> None:
    """One dead letter, routed by the queue it came from (see the module's docstring)."""
    if record.event_source_arn == get_deps(need_queue="work_queue_url").settings.unzip_dlq_arn:
        failed_event(record)
    else:
        dead_file_message(record)


def dead_file_message(record: SQSRecord) -> None:
    """One work or OCR dead letter: its file gets an outcome, counted once, and is parked if gave_up."""
    try:
        task = FileTask.from_body(record.body)
    except InvalidInput:
        logger.error("malformed work dead letter dropped", extra={"message_id": record.message_id})
        return
    try:
        settle_dead_letter(get_deps(need_queue="work_queue_url"), task)
    finally:
        logger.remove_keys(["batch_id", "file_index"])


def failed_event(record: SQSRecord) -> None:
    """One unzip DLQ message (its requestPayload is the S3 event): the batch ends FAILED."""
    deps = get_deps(need_queue="work_queue_url")
    try:
        body = json.loads(record.body)
        payload = body.get("requestPayload", body)  # a destination record, or the bare event
        found = uploads(S3Event(payload)) if payload.get("Records") else []
    except (ValueError, AttributeError, KeyError, TypeError):
        found = []
    if not found:
        logger.error("unzip DLQ message with no S3 upload dropped", extra={"message_id": record.message_id})
        return
    error = (body.get("responsePayload") or {}).get("errorType") if isinstance(body, dict) else None
    logger.warning("unzip gave up on an upload", extra={"error_type": error})
    for upload in found:
        abandon_upload(deps, upload)
        logger.remove_keys(["batch_id"])


@metrics.log_metrics
@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """S3 events are staged; dead letters (SQS) end their batches, reporting partial failures."""
    records = event.get("Records") or []
    if records and records[0].get("eventSource") == "aws:sqs":
        # Without it every dead letter would look like a file's: fail now, naming the variable.
        get_deps(need_queue="work_queue_url").settings.require("unzip_dlq_arn")
        response: dict[str, Any] = dict(
            process_partial_response(
                event=event, record_handler=dead_letter, processor=processor, context=context
            )
        )
        return response
    return stage(S3Event(event))
