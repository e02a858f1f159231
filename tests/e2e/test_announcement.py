"""Results delivered (issue 13) on the local stack: the report file through status, and one event per batch.

An EventBridge rule on the default bus (created here) targets an SQS queue (created here); the batch is
uploaded with `pdfbatch upload --wait`, its report fetched through the presigned GET the status API
answers, compared with the MySQL ledger row for row, and saved with `pdfbatch report --download`.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures.events import completions_queue
from fixtures.stack import MYSQL_URL, local_client, run_cli
from pdfbatch import announcement
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.config import Settings

pytestmark = pytest.mark.e2e


@pytest.fixture()
def completion_queue(stack: dict[str, Any]) -> Iterator[tuple[Any, str]]:
    """A rule on the default bus for source pdfbatch, targeting a fresh SQS queue: (sqs client, queue url)."""
    run = uuid.uuid4().hex[:8]
    events, sqs = local_client("events", stack["endpoint"]), local_client("sqs", stack["endpoint"])
    with completions_queue(events, sqs, f"pdfbatch-completions-{run}") as url:
        yield sqs, url


def _events_for(
    sqs: Any, url: str, batch_id: str | set[str], quiet_seconds: float, timeout: float
) -> list[dict[str, Any]]:
    """Every event for ``batch_id`` (or any of a set) the queue receives, until none came for
    ``quiet_seconds`` after one. Events of other batches are received and dropped."""
    wanted = {batch_id} if isinstance(batch_id, str) else batch_id
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline and (last is None or time.monotonic() - last < quiet_seconds):
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            body = json.loads(m["Body"])
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            if body.get("detail", {}).get("batchId") in wanted:
                found.append(body)
                last = time.monotonic()
    return found


def test_a_completed_batch_is_reported_and_announced_once_on_the_local_stack(
    stack: dict[str, Any], completion_queue: tuple[Any, str], tmp_path: Path
) -> None:
    env, conn = stack["env"], stack["db"]
    sqs, url = completion_queue
    run = uuid.uuid4().hex[:8]
    person = f"deliver.{run}@example.com"
    with conn.cursor() as cur:
        cur.execute("INSERT INTO users (email) VALUES (%s)", (person,))
    # GIVEN a batch of a résumé, a PDF naming nobody, one whose name is a formula, a broken one, a text file
    corpus = samples.Corpus()
    corpus.add("cv.pdf", samples.resume("Deliver Person", person))
    corpus.add("=HYPERLINK(1).pdf", samples.resume("Nobody", f"nobody.{run}@example.com"))
    corpus.add("broken.pdf", b"%PDF-1.4\nnot really\n")
    corpus.add("notes.txt", b"ignored")
    path = tmp_path / "deliver.zip"
    corpus.write_zip(path)
    # WHEN it is uploaded and completes
    done = run_cli(env, "upload", str(path), "--wait", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    batch_id = json.loads(done.stdout)["batchId"]
    _, _, status = stack["api"].request("GET", f"/batches/{batch_id}")
    # THEN status links the report, and the CSV behind the presigned GET equals the ledger row for row
    assert status["status"] == "COMPLETED"
    report = status["report"]
    assert report["expiresIn"] == announcement.REPORT_URL_EXPIRES_SECONDS
    with urllib.request.urlopen(report["csv"], timeout=30) as resp:
        csv_bytes = resp.read()
    with urllib.request.urlopen(report["summary"], timeout=30) as resp:
        summary_bytes = resp.read()
    ledger = MysqlLedger(MysqlClient.from_url(MYSQL_URL), Settings().users)
    try:
        rows = ledger.list_files(batch_id, -1, 100_000)
        batch = ledger.get_batch(batch_id)
    finally:
        ledger.client.close()
    assert len(rows) == 4
    assert announcement.read_results_csv(csv_bytes) == [announcement.csv_row(r) for r in rows]
    assert b"'=HYPERLINK(1).pdf" in csv_bytes
    summary = json.loads(summary_bytes)
    assert batch is not None and batch.announced_at is not None
    assert summary["counts"]["processed"] == 3 and summary["upload"]["key"] == batch.object_key
    assert summary["upload"]["versionId"] == batch.object_version
    # and the rule's queue receives exactly one event for it, with counts and no names or addresses
    events = _events_for(sqs, url, batch_id, quiet_seconds=8, timeout=60)
    assert len(events) == 1, events
    (event,) = events
    assert (event["source"], event["detail-type"]) == ("pdfbatch", "Batch Completed")
    assert event["detail"]["counts"] == summary["counts"]
    text = json.dumps(event)
    assert "@" not in text and "cv.pdf" not in text and "HYPERLINK" not in text
    # WHEN status is read again THEN no second event
    stack["api"].request("GET", f"/batches/{batch_id}")
    assert _events_for(sqs, url, batch_id, quiet_seconds=3, timeout=5) == []
    # WHEN the operator downloads the report THEN both files are saved, as served
    saved = run_cli(env, "report", batch_id, "--download", str(tmp_path / "reports"))
    assert saved.returncode == 0, saved.stderr[-3000:]
    folder = tmp_path / "reports" / batch_id
    assert (folder / "results.csv").read_bytes() == csv_bytes
    assert (folder / "summary.json").read_bytes() == summary_bytes


def test_the_settle_schedule_ends_and_announces_batches_nobody_reads(
    stack: dict[str, Any], completion_queue: tuple[Any, str], tmp_path: Path
) -> None:
    env, conn = stack["env"], stack["db"]
    sqs, url = completion_queue
    s3, bucket = local_client("s3", stack["endpoint"]), stack["outputs"]["BucketName"]
    run = uuid.uuid4().hex[:8]
    # GIVEN a completed batch whose announcer died after its claim (its report gone, the claim's lease
    # over: what a MySQL connection cut between the claim and its reply leaves behind)
    corpus = samples.Corpus()
    corpus.add("nobody.pdf", samples.resume("Nobody", f"nobody.{run}@example.com"))
    path = tmp_path / "settle.zip"
    corpus.write_zip(path)
    done = run_cli(env, "upload", str(path), "--wait", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    final = json.loads(done.stdout)["batchId"]
    assert len(_events_for(sqs, url, final, quiet_seconds=3, timeout=30)) == 1  # its first announcement
    keys = announcement.report_keys(final)
    for key in keys.values():
        s3.delete_object(Bucket=bucket, Key=key)
    now = time.time()
    with conn.cursor() as cur:
        cur.execute(
            "UPDATE pdfbatch_batches SET announced_at = NULL, announce_started_at = %s WHERE batch_id = %s",
            (now - 600, final),
        )
        # and a POST /batches batch nobody uploaded to, whose link and grace are over
        pending = stack["api"].create_batch()["batchId"]
        # (three hours ago: when it was created and when its link and grace ran out move back together)
        cur.execute(
            "UPDATE pdfbatch_batches SET created_at = created_at - %s, settle_at = settle_at - %s "
            "WHERE batch_id = %s",
            (3 * 3600, 3 * 3600, pending),
        )
    # WHEN nobody reads either, and the schedule (every minute) runs the status function's settle
    deadline = time.monotonic() + 150
    rows: dict[str, Any] = {}
    while time.monotonic() < deadline:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT batch_id, status, reason, announced_at FROM pdfbatch_batches "
                "WHERE batch_id IN (%s, %s)",
                (final, pending),
            )
            rows = {r[0]: r[1:] for r in cur.fetchall()}
        if all(r[2] is not None for r in rows.values()):
            break
        time.sleep(3)
    # THEN the completed batch is announced again: its report is back and one more event is put
    assert rows[final][0] == "COMPLETED" and rows[final][2] is not None, rows
    for key in keys.values():
        assert s3.head_object(Bucket=bucket, Key=key)["ContentLength"] > 0
    events = _events_for(sqs, url, {final, pending}, quiet_seconds=5, timeout=30)
    assert [e["detail-type"] for e in events if e["detail"]["batchId"] == final] == ["Batch Completed"]
    # and the abandoned one ended FAILED upload_expired, announced with its own event
    assert rows[pending][:2] == ("FAILED", "upload_expired") and rows[pending][2] is not None, rows
    assert [e["detail-type"] for e in events if e["detail"]["batchId"] == pending] == ["Batch Failed"]
