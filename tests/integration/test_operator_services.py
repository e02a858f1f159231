"""retry and DLQ redrive against the real MariaDB ledger and Redis counters (S3 and SQS from moto)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
import redis

from fixtures import pdfs
from fixtures.pipeline import assert_counters_match_ledger, drain, ledger_rows, pdf_urls, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.redis import progress_key
from pdfbatch.adapters.sqs import SqsDeadLetters
from pdfbatch.model import FileTask
from pdfbatch.services import operations, processing, staging
from pdfbatch.services.deps import Deps
from plugins.services import add_users

pytestmark = pytest.mark.integration


@pytest.fixture()
def dlq(deps: Any) -> Iterator[SqsDeadLetters]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    yield SqsDeadLetters(sqs, sqs.create_queue(QueueName=f"dlq-{deps.settings.bucket}")["QueueUrl"])


def by_name(db: Any, batch_id: str) -> dict[str, dict[str, Any]]:
    return {r["entry_name"]: r for r in ledger_rows(db, batch_id)}


def test_two_concurrent_retries_reopen_and_count_each_file_once(deps: Any, db: Any) -> None:
    # GIVEN a completed batch of four files, none linked (their users do not exist yet)
    emails = [f"late{i}@example.com" for i in range(4)]
    data = make_zip([(f"{i}.pdf", pdfs.resume_pdf(f"Late {i}", e)) for i, e in enumerate(emails)])
    batch_id = staging.stage_zip(deps, upload(deps, data)).batch_id
    drain(deps)
    assert assert_counters_match_ledger(deps, batch_id)["skipped_no_match"] == 4
    add_users(db, *emails)
    # WHEN two operators retry it at the same moment, each with its own MySQL connection
    second = Deps(**{**deps.__dict__})
    second.ledger = MysqlLedger(MysqlClient.from_url(deps.settings.mysql_url), deps.settings.users)
    second.users = second.ledger.user_rows
    reports: list[operations.RetryReport] = []
    start = threading.Barrier(2)

    def retry(d: Any) -> None:
        start.wait()
        reports.append(operations.retry_batch(d, batch_id))

    threads = [threading.Thread(target=retry, args=(d,)) for d in (deps, second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN each file was reopened by exactly one of them, and the counters never went below the ledger
    assert sorted(i for r in reports for i in r.reopened) == [0, 1, 2, 3]
    raw = redis.Redis.from_url(deps.settings.redis_url, decode_responses=True).hgetall(progress_key(batch_id))
    assert (raw["status"], raw["processed"], raw["skipped_no_match"], raw["reason:no_user"]) == (
        "PROCESSING",
        "0",
        "0",
        "0",
    )
    # and processing every message sent (some twice) links each user once, counted once
    drain(deps, times=2)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["linked"], status["processed"]) == ("COMPLETED", 4, 4)
    assert all(r["outcome"] == "linked" and r["attempts"] == 2 for r in ledger_rows(db, batch_id))
    assert all(pdf_urls(db)[e] for e in emails)
    second.ledger.client.close()  # type: ignore[attr-defined]


def test_gave_up_file_redriven_from_the_dlq_is_linked_and_the_summary_rewritten(
    deps: Any, db: Any, dlq: SqsDeadLetters
) -> None:
    # GIVEN a batch whose résumé gave up on its last delivery, its message in the DLQ
    add_users(db, "poison@example.com")
    data = make_zip(
        [("poison.pdf", pdfs.resume_pdf("P", "poison@example.com")), ("x.pdf", pdfs.text_pdf(["x"]))]
    )
    batch_id = staging.stage_zip(deps, upload(deps, data)).batch_id
    msgs = {m["index"]: m for m in receive_all(deps)}
    processing.process_file(deps, FileTask.from_message(msgs[1]))
    processing.give_up(deps, FileTask.from_message(msgs[0]))
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps(msgs[0]))
    with db.cursor() as cur:
        cur.execute("SELECT status, counts FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,))
        status, counts = cur.fetchone()
    assert (status, json.loads(counts)["failed"]) == ("COMPLETED", 1)
    listing = operations.list_dead_letters(deps, dlq)
    assert [(m["name"], m["reason"]) for m in listing["messages"]] == [("poison.pdf", "gave_up")]
    # WHEN it is redriven and processed
    report = operations.redrive_dead_letters(deps, dlq)
    assert (report.reopened, report.resent) == (1, 1)
    with db.cursor() as cur:
        cur.execute(
            "SELECT status, counts, completed_at FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,)
        )
        assert cur.fetchone() == ("PROCESSING", None, None)
    drain(deps)
    # THEN the file is linked, the batch COMPLETED again with a rewritten summary, the DLQ empty
    rows = by_name(db, batch_id)
    # (it was given up here without an attempt, so this run is its first)
    assert (rows["poison.pdf"]["outcome"], rows["poison.pdf"]["attempts"]) == ("linked", 1)
    with db.cursor() as cur:
        cur.execute("SELECT status, counts FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,))
        status, counts = cur.fetchone()
    assert (status, json.loads(counts)["linked"], json.loads(counts)["failed"]) == ("COMPLETED", 1, 0)
    assert assert_counters_match_ledger(deps, batch_id)["processed"] == 2
    assert dlq.approximate_count() == 0
