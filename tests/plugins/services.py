"""Fixtures over the real MariaDB and Redis of this machine (and moto for S3/SQS)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pymysql
import pytest
from tools.devdb import USERS_DDL as DEV_USERS_DDL

from fixtures.apigw import TEST_API_KEY
from fixtures.events import UNZIP_DLQ_ARN
from pdfbatch.config import Settings, parse_mysql_url

TEST_MYSQL_ROOT = os.environ.get("PDFBATCH_TEST_MYSQL_ROOT_URL", "mysql://root@127.0.0.1:3306/test")
TEST_REDIS_URL = os.environ.get("PDFBATCH_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

USERS_DDL = DEV_USERS_DDL.format(table="users")  # the table `pdfbatch stack up` creates


def _root_conn(database: str | None = None) -> Any:
    p = parse_mysql_url(TEST_MYSQL_ROOT)
    return pymysql.connect(
        host=p.host,
        port=p.port,
        user=p.user,
        password=p.password,
        database=database,
        autocommit=True,
        charset="utf8mb4",
    )


@pytest.fixture(scope="session")
def mysql_url() -> Iterator[str]:
    """A throw-away database on the real MariaDB, dropped at the end of the session."""
    name = f"pdfbatch_t_{uuid.uuid4().hex[:8]}"
    try:
        conn = _root_conn()
    except pymysql.err.OperationalError as exc:
        pytest.fail(f"MariaDB is not reachable at {TEST_MYSQL_ROOT}: {exc}")
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
    p = parse_mysql_url(TEST_MYSQL_ROOT)
    auth = p.user + (f":{p.password}" if p.password else "")
    yield f"mysql://{auth}@{p.host}:{p.port}/{name}"
    with conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
    conn.close()


@pytest.fixture()
def db(mysql_url: str) -> Iterator[Any]:
    """A root connection to the test database with an empty users table and ledger."""
    from pdfbatch.adapters.mysql import MysqlClient

    MysqlClient.from_url(mysql_url).ensure_schema()
    conn = _root_conn(parse_mysql_url(mysql_url).database)
    with conn.cursor() as cur:
        cur.execute(USERS_DDL)
        for table in (
            "users",
            "pdfbatch_files",
            "pdfbatch_batches",
            "pdfbatch_uploads",
            "pdfbatch_tenant_keys",
        ):
            cur.execute(f"DELETE FROM `{table}`")
    yield conn
    conn.close()


def add_users(conn: Any, *emails: str, pdf_url: str | None = None) -> dict[str, str]:
    """Insert users; return their ids by email (as text, as the domain has them)."""
    ids = {}
    with conn.cursor() as cur:
        for email in emails:
            cur.execute("INSERT INTO users (email, pdf_url) VALUES (%s, %s)", (email, pdf_url))
            ids[email] = str(cur.lastrowid)
    return ids


@pytest.fixture()
def settings(mysql_url: str, run_id: str) -> Settings:
    """Settings for one test: its own bucket name, the test database, Redis db 15, the test API key."""
    base = Settings.from_env({"PDFBATCH_MYSQL_URL": mysql_url, "PDFBATCH_REDIS_URL": TEST_REDIS_URL})
    return replace(
        base,
        bucket=f"pdfbatch-test-{run_id}",
        stage_workers=4,
        api_key=TEST_API_KEY,
        unzip_dlq_arn=UNZIP_DLQ_ARN,
    )


@pytest.fixture()
def deps(moto_aws: None, db: Any, settings: Settings) -> Iterator[Any]:
    """Real MysqlLedger + RedisProgress, moto S3 bucket, SQS queue and EventBridge (completions announced)."""
    import boto3

    from pdfbatch.adapters.events import EventBridgeEvents
    from pdfbatch.adapters.ledger import MysqlLedger
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.adapters.redis import RedisProgress
    from pdfbatch.adapters.s3 import S3Store
    from pdfbatch.adapters.sqs import SqsQueue
    from pdfbatch.adapters.tenant_keys import MysqlTenantKeys
    from pdfbatch.services.deps import Deps

    s3 = boto3.client("s3", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    s3.create_bucket(Bucket=settings.bucket)
    s3.put_bucket_versioning(Bucket=settings.bucket, VersioningConfiguration={"Status": "Enabled"})
    queue_url = sqs.create_queue(QueueName=f"work-{settings.bucket}")["QueueUrl"]
    settings = replace(settings, work_queue_url=queue_url)
    ledger = MysqlLedger(MysqlClient.from_url(settings.mysql_url), settings.users)
    progress = RedisProgress.from_url(settings.redis_url, settings.progress_ttl_seconds)
    d = Deps(
        settings=settings,
        store=S3Store(s3),
        ledger=ledger,
        users=ledger.user_rows,
        progress=progress,
        queue=SqsQueue(sqs, queue_url),
        events=EventBridgeEvents(boto3.client("events", region_name="us-east-1")),
        tenants=MysqlTenantKeys(ledger.client),
    )
    yield d
    ledger.client.close()
