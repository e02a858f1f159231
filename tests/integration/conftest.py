"""Fixtures shared by the integration tests that run over LocalStack."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from fixtures.pipeline import empty_and_delete_bucket
from pdfbatch import bootstrap
from pdfbatch.services.deps import Deps


@pytest.fixture()
def ls_deps(localstack: str, db: Any, settings: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Deps]:
    """Real adapters as the functions build them: LocalStack S3/SQS/EventBridge, the MariaDB, the Redis."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    s = replace(settings, endpoint_url=localstack)
    s3, sqs = bootstrap.boto3_client("s3", s), bootstrap.boto3_client("sqs", s)
    s3.create_bucket(Bucket=s.bucket)
    s3.put_bucket_versioning(Bucket=s.bucket, VersioningConfiguration={"Status": "Enabled"})  # as deployed
    queue_url = sqs.create_queue(QueueName=f"work-{s.bucket}")["QueueUrl"]
    deps = bootstrap.build_deps(replace(s, work_queue_url=queue_url), need_queue="work_queue_url")
    yield deps
    empty_and_delete_bucket(s3, s.bucket)
    sqs.delete_queue(QueueUrl=queue_url)
    deps.ledger.client.close()  # type: ignore[attr-defined]
