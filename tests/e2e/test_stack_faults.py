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
