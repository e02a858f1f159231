"""The bench's latency mode (issue 15): PDFBATCH_INJECT_LATENCY makes the functions' S3 and SQS clients
wait what AWS typically takes before each request, and nothing waits unless it is set."""

from __future__ import annotations

from typing import Any

import pytest

from pdfbatch import bootstrap
from pdfbatch.adapters import latency
from pdfbatch.config import Settings


def _waits(client: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    # The hook sleeps through time.sleep of its module: recorded instead of slept.
    slept: list[float] = []
    monkeypatch.setattr(latency.time, "sleep", slept.append)
    return slept


def test_latency_mode_waits_per_request_what_aws_typically_takes(
    moto_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the functions' S3 and SQS clients built with PDFBATCH_INJECT_LATENCY=1
    settings = Settings.from_env({"PDFBATCH_INJECT_LATENCY": "1"})
    s3, sqs = bootstrap.boto3_client("s3", settings), bootstrap.boto3_client("sqs", settings)
    slept = _waits(s3, monkeypatch)
    s3.create_bucket(Bucket="latency-bucket")
    # WHEN each call the pipeline makes is sent once
    slept.clear()
    s3.put_object(Bucket="latency-bucket", Key="k", Body=b"x")
    s3.get_object(Bucket="latency-bucket", Key="k")
    s3.copy_object(Bucket="latency-bucket", Key="k2", CopySource={"Bucket": "latency-bucket", "Key": "k"})
    s3.delete_object(Bucket="latency-bucket", Key="k")
    url = sqs.create_queue(QueueName="q")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="m")
    # THEN each request waited its operation's figure: PUT 30, GET 25, COPY 40, other S3 25, SQS 10 ms
    assert slept == [0.030, 0.025, 0.040, 0.025, 0.010, 0.010]


def test_without_the_variable_no_client_waits(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # GIVEN clients built from an environment without PDFBATCH_INJECT_LATENCY (and one set to 0)
    for env in ({}, {"PDFBATCH_INJECT_LATENCY": "0"}):
        settings = Settings.from_env(env)
        assert settings.inject_latency is False
        s3 = bootstrap.boto3_client("s3", settings)
        slept = _waits(s3, monkeypatch)
        # WHEN requests are sent
        s3.create_bucket(Bucket="latency-bucket")
        s3.put_object(Bucket="latency-bucket", Key="k", Body=b"x")
        s3.get_object(Bucket="latency-bucket", Key="k")
        # THEN nothing waited
        assert slept == []


def test_installing_twice_still_waits_once_per_request(
    moto_aws: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a client the hook was installed on twice (a rebuilt Deps reusing it, say)
    s3 = bootstrap.boto3_client("s3", Settings(inject_latency=True))
    latency.install(s3)
    slept = _waits(s3, monkeypatch)
    # WHEN one request is sent
    s3.create_bucket(Bucket="latency-bucket")
    # THEN it waited once
    assert slept == [0.025]
