"""End to end on LocalStack: faults the deployed stack must absorb (issue 4, "Faults")."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import boto3
import pytest

pytestmark = pytest.mark.e2e


def client(stack: dict[str, Any], service: str) -> Any:
    make: Any = boto3.client
    return make(
        service,
        endpoint_url=stack["endpoint"],
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def test_an_upload_unzip_failed_on_every_attempt_ends_failed_not_processing(stack: dict[str, Any]) -> None:
    # GIVEN the record Lambda sends to unzip's OnFailure destination once S3's retries are exhausted
    bucket = stack["outputs"]["BucketName"]
    key, sequencer = f"uploads/never {uuid.uuid4().hex[:8]}.zip", "00DEADBEEF"
    record = {
        "version": "1.0",
        "requestContext": {"condition": "RetriesExhausted", "approximateInvokeCount": 3},
        "requestPayload": {
            "Records": [
                {
                    "eventSource": "aws:s3",
                    "eventName": "ObjectCreated:Put",
                    "s3": {
                        "bucket": {"name": bucket, "arn": f"arn:aws:s3:::{bucket}"},
                        "object": {"key": key.replace(" ", "+"), "size": 10, "sequencer": sequencer},
                    },
                }
            ]
        },
        "responsePayload": {"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out"},
    }
    # WHEN it lands in the deployed UnzipDeadLetterQueue
    sqs = client(stack, "sqs")
    sqs.send_message(QueueUrl=stack["outputs"]["UnzipDeadLetterQueueUrl"], MessageBody=json.dumps(record))
    # THEN unzip consumes it and the API reports the batch FAILED with a machine-readable reason
    # (found by its key, as an operator would: its id is random, not derived from the event)
    deadline = time.monotonic() + 90
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        found = stack["api"].find(key)
        if found and found[0]["status"] == "FAILED":
            body, _ = stack["api"].status(found[0]["batchId"])
            break
        time.sleep(0.5)
    assert (body.get("status"), body.get("reason")) == ("FAILED", "unzip_failed"), body
    # and the message is consumed (deleted by the event source mapping, not left to be retried)
    names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    url = stack["outputs"]["UnzipDeadLetterQueueUrl"]
    left = None
    while time.monotonic() < deadline and left != {"0"}:
        left = set(sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"].values())
        time.sleep(0.2)
    assert left == {"0"}


@pytest.mark.parametrize("lane", ["text", "ocr"])
def test_a_work_message_whose_last_delivery_died_is_recorded_by_the_dlq_consumer(
    stack: dict[str, Any], lane: str
) -> None:
    # GIVEN a batch of one staged PDF whose every delivery died before recording anything (written to the
    # e2e ledger and counters directly: its invocations were killed), so its message sits in its lane's
    # DLQ: the work queue's, or the OCR queue's for a scan process_pdf handed to the OCR lane
    from dataclasses import replace

    from fixtures.stack import MYSQL_URL, REDIS_URL
    from pdfbatch.adapters.ledger import MysqlLedger
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.adapters.redis import RedisProgress
    from pdfbatch.config import Settings
    from pdfbatch.model import FileTask, staging_key
    from pdfbatch.ports import NewEntry
    from pdfbatch.services import batches

    settings = replace(Settings(), mysql_url=MYSQL_URL, redis_url=REDIS_URL)
    ledger = MysqlLedger(MysqlClient.from_url(MYSQL_URL), settings.users)
    progress = RedisProgress.from_url(REDIS_URL, 3600)
    bucket = stack["outputs"]["BucketName"]
    batch_id = batches.new_batch_id()
    ledger.create_batch(batch_id, bucket, f"uploads/{batch_id}.zip", "api", "PROCESSING")
    ledger.start_batch(batch_id, 1, 0)
    ledger.add_entries(batch_id, [NewEntry(0, "died.pdf", "pdf", 10, name_hex=b"died.pdf".hex())])
    ledger.mark_unpacked(batch_id)
    if lane == "ocr":
        ledger.mark_lane(batch_id, 0, lane)
    progress.init_batch(batch_id, "PROCESSING", 1, time.time())
    progress.mark_unpacked(batch_id, 1, time.time())
    assert stack["api"].status(batch_id)[0]["status"] == "PROCESSING"
    task = FileTask(batch_id, 0, staging_key(batch_id, 0), bucket)
    # WHEN its message lands in the deployed work DLQ
    sqs = client(stack, "sqs")
    dlq = {"text": "DeadLetterQueueUrl", "ocr": "OcrDeadLetterQueueUrl"}[lane]
    sqs.send_message(QueueUrl=stack["outputs"][dlq], MessageBody=json.dumps(task.to_message()))
    # THEN the consumer records it failed/gave_up and the batch completes, with no operator
    deadline = time.monotonic() + 90
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        body, _ = stack["api"].status(batch_id)
        if body["status"] == "COMPLETED":
            break
        time.sleep(0.5)
    assert (body.get("status"), body.get("failed"), body.get("reasons")) == ("COMPLETED", 1, {"gave_up": 1})
    files = [(f["outcome"], f["reason"], f["source"]) for f in stack["api"].files(batch_id)]
    assert files == [("failed", "gave_up", lane)]
    # AND it is parked for `pdfbatch dlq --redrive`
    parked = stack["outputs"]["ParkedQueueUrl"]
    found: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not found:
        got = sqs.receive_message(QueueUrl=parked, MaxNumberOfMessages=10, VisibilityTimeout=0)
        found = [json.loads(m["Body"]) for m in got.get("Messages", [])]
        found = [m for m in found if m["batchId"] == batch_id]
    assert found == [task.to_message()]
    ledger.client.close()
