"""The three Lambda handlers with AWS-shaped events, over real MariaDB/Redis and moto S3/SQS."""

from __future__ import annotations

import json
from typing import Any

import pytest

from fixtures import pdfs
from fixtures.apigw import Context, api_event, header, load_handler
from fixtures.events import s3_event, sqs_event
from fixtures.pipeline import ledger_rows
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import bootstrap
from plugins.services import add_users

pytestmark = pytest.mark.integration


@pytest.fixture()
def wired(deps: Any) -> Any:
    bootstrap.override(deps)
    yield deps
    bootstrap.override(None)


def test_handlers_run_a_batch_from_s3_event_to_status(wired: Any, db: Any) -> None:
    deps = wired
    add_users(db, "hand@example.com")
    data = make_zip(
        [
            ("dir/My CV (final).pdf", pdfs.resume_pdf("H", "hand@example.com")),
            ("other.pdf", pdfs.text_pdf(["nothing"])),
        ]
    )
    key = "uploads/ops drop+1.zip"
    deps.store.put_bytes(deps.settings.bucket, key, data, "application/zip")
    unzip, process, status = load_handler("unzip"), load_handler("process_pdf"), load_handler("status")

    # WHEN the S3 event reaches unzip (key URL-encoded as S3 sends it)
    out = unzip.handler(s3_event(deps.settings.bucket, key, len(data)), Context())
    batch_id = out["batches"][0]["batchId"]
    assert out["batches"][0]["totalFiles"] == 2

    # and the queued messages reach process_pdf
    sqs = deps.queue.client
    got = sqs.receive_message(QueueUrl=deps.queue.queue_url, MaxNumberOfMessages=10)
    bodies = [json.loads(m["Body"]) for m in got["Messages"]]
    result = process.handler(sqs_event(bodies), Context())
    assert result == {"batchItemFailures": []}

    # THEN status reports it COMPLETED, lists the files, and finds the batch by key
    resp = status.handler(api_event("GET", f"/batches/{batch_id}"), Context())
    assert resp["statusCode"] == 200
    body = json.loads(resp["body"])
    assert body["status"] == "COMPLETED" and body["linked"] == 1 and body["skipped_no_match"] == 1
    assert header(resp, "Retry-After") is None
    files = json.loads(status.handler(api_event("GET", f"/batches/{batch_id}/files"), Context())["body"])
    assert [f["name"] for f in files["items"]] == ["dir/My CV (final).pdf", "other.pdf"]
    found = json.loads(status.handler(api_event("GET", "/batches", {"key": key}), Context())["body"])
    assert [b["batchId"] for b in found["batches"]] == [batch_id]


def test_status_errors_are_json(wired: Any) -> None:
    status = load_handler("status")
    resp = status.handler(api_event("GET", f"/batches/{'f' * 32}"), Context())
    assert resp["statusCode"] == 404
    assert json.loads(resp["body"])["error"] == "not_found"
    resp = status.handler(api_event("GET", "/batches", {"status": "DONE"}), Context())
    assert resp["statusCode"] == 400
    assert json.loads(resp["body"])["error"] == "invalid_input"
    resp = status.handler(api_event("GET", "/batches", {"tenant": "\U00019a34x"}), Context())
    assert resp["statusCode"] == 400  # not a tenant name: refused before MariaDB is asked (it was a 503)
    assert json.loads(resp["body"])["error"] == "invalid_input"
    resp = status.handler(api_event("GET", "/nope"), Context())
    assert resp["statusCode"] == 404


def test_malformed_queries_are_400_over_the_real_ledger(wired: Any) -> None:
    # GIVEN queries a client can send that used to raise in the handler (API Gateway's 502)
    status = load_handler("status")
    for path, query in [
        ("/batches", {"key": "uploads/\ud800.zip"}),  # UnicodeEncodeError from the key's hash
        (f"/batches/{'f' * 32}/files", {"limit": "²"}),  # ValueError from int()
    ]:
        # WHEN they reach the handler THEN each is a 400 with a JSON error
        resp = status.handler(api_event("GET", path, query), Context())
        assert resp["statusCode"] == 400, (path, query)
        assert json.loads(resp["body"])["error"] == "invalid_input"


def test_post_batches_returns_a_presigned_post_and_pending_status(wired: Any) -> None:
    status = load_handler("status")
    resp = status.handler(api_event("POST", "/batches"), Context())
    assert resp["statusCode"] == 201
    body = json.loads(resp["body"])
    assert body["upload"]["fields"]["key"] == f"uploads/{body['batchId']}.zip"
    polled = status.handler(api_event("GET", f"/batches/{body['batchId']}"), Context())
    assert json.loads(polled["body"])["status"] == "PENDING"
    assert header(polled, "Retry-After") == "1"


def test_failing_record_is_reported_and_recorded_failed_on_its_last_delivery(
    wired: Any, db: Any, monkeypatch: Any
) -> None:
    deps = wired
    data = make_zip([("a.pdf", pdfs.text_pdf(["x"])), ("b.pdf", pdfs.text_pdf(["y"]))])
    key = "uploads/fail.zip"
    deps.store.put_bytes(deps.settings.bucket, key, data, "application/zip")
    unzip, process = load_handler("unzip"), load_handler("process_pdf")
    batch_id = unzip.handler(s3_event(deps.settings.bucket, key, len(data)), Context())["batches"][0][
        "batchId"
    ]
    got = deps.queue.client.receive_message(QueueUrl=deps.queue.queue_url, MaxNumberOfMessages=10)
    bodies = sorted((json.loads(m["Body"]) for m in got["Messages"]), key=lambda b: b["index"])

    # GIVEN a staged object that cannot be read because S3 keeps failing for one file
    from pdfbatch.errors import DependencyUnavailable

    real_get = deps.store.get_bytes

    def flaky(bucket: str, k: str) -> bytes:
        if k == bodies[0]["key"]:
            raise DependencyUnavailable("s3", "SlowDown")
        return real_get(bucket, k)

    monkeypatch.setattr(deps.store, "get_bytes", flaky)
    # WHEN the batch arrives on an early delivery: only the failing record is reported back
    event = sqs_event(bodies)
    result = process.handler(event, Context())
    assert [f["itemIdentifier"] for f in result["batchItemFailures"]] == [event["Records"][0]["messageId"]]
    rows = ledger_rows(db, batch_id)
    assert rows[0]["outcome"] is None and rows[1]["outcome"] == "skipped_no_match"
    # and on its last delivery the file is recorded failed, so the batch completes, while the message
    # still fails, so SQS moves it to the DLQ (from where `pdfbatch dlq --redrive` can run it again)
    last = sqs_event(bodies[:1], receive_count=deps.settings.max_receive_count)
    result = process.handler(last, Context())
    assert result == {"batchItemFailures": [{"itemIdentifier": last["Records"][0]["messageId"]}]}
    rows = ledger_rows(db, batch_id)
    assert (rows[0]["outcome"], rows[0]["reason"]) == ("failed", "gave_up")
    assert rows[0]["attempts"] == 2
    status = load_handler("status")
    body = json.loads(status.handler(api_event("GET", f"/batches/{batch_id}"), Context())["body"])
    assert body["status"] == "COMPLETED" and body["failed"] == 1
