"""Faults injected into the real pipeline, and the batch still ends right (issue 4, "Faults").

Real MariaDB and Redis throughout. Duplicates race in threads with their own MySQL connections;
crashes are real child processes killed at a hook (tests/fixtures/faults.py) over LocalStack S3/SQS;
outages are the same adapters pointed at closed ports; expiry is a real short Redis TTL.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import UNZIP_DLQ_ARN, s3_event, sqs_event_of
from fixtures.faults import KILLED, Outage, run_killed_worker
from fixtures.pipeline import (
    assert_counters_match_ledger,
    ledger_rows,
    pdf_urls,
    process_all,
    receive_all,
    sweep_orphans,
    upload,
)
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import bootstrap
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.redis import RedisProgress, done_key, progress_key
from pdfbatch.adapters.sqs import SqsDeadLetters, SqsQueue
from pdfbatch.model import FileTask, staging_key
from pdfbatch.services import batches, operations, processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN
from plugins.services import add_users

pytestmark = pytest.mark.integration
RANK = {"PENDING": 0, "PROCESSING": 1, "COMPLETED": 2, "FAILED": 2}


# --- fixtures and helpers -----------------------------------------------------------------------


def keys(deps: Deps, prefix: str) -> list[str]:
    s3: Any = deps.store.client  # type: ignore[attr-defined]
    out: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=deps.settings.bucket, Prefix=prefix):
        out.extend(o["Key"] for o in page.get("Contents", []))
    return sorted(out)


def own_connection(deps: Deps, mysql_url: str) -> Deps:
    """The same deps with a MySQL connection of its own (one worker = one Lambda environment)."""
    ledger = MysqlLedger(MysqlClient.from_url(mysql_url), deps.settings.users)
    return replace(deps, ledger=ledger, users=ledger.user_rows)


def run_together(*jobs: Callable[[], Any]) -> list[Any]:
    """Run each job in its own thread, started together; re-raise the first error."""
    barrier = threading.Barrier(len(jobs))
    results: list[Any] = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i: int, job: Callable[[], Any]) -> None:
        barrier.wait()
        try:
            results[i] = job()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results


def assert_linked_means_linked(deps: Deps, db: Any, batch_id: str) -> None:
    """Every ledger row that says linked has its user's pdf_url on its object, and that object exists."""
    with db.cursor() as cur:
        cur.execute("SELECT id, pdf_url FROM users")
        urls = {str(user_id): url for user_id, url in cur.fetchall()}  # the ledger holds ids as text
    for row in ledger_rows(db, batch_id):
        if row["outcome"] == "linked":
            assert urls[row["user_id"]] == deps.settings.pdf_url(row["final_key"])
            assert deps.store.get_bytes(deps.settings.bucket, row["final_key"]).startswith(b"%PDF-")


def receive(deps: Deps, visibility: int | None = None) -> list[dict[str, Any]]:
    """Messages visible now (not deleted), with their attributes: one receive of up to ten."""
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    kwargs: dict[str, Any] = {"VisibilityTimeout": visibility} if visibility is not None else {}
    got = sqs.receive_message(
        QueueUrl=deps.settings.work_queue_url, MaxNumberOfMessages=10, AttributeNames=["All"], **kwargs
    )
    return list(got.get("Messages", []))


def resume_zip(n: int, users: list[str]) -> bytes:
    """``n`` PDFs: one résumé per user first, then PDFs without a user's address."""
    entries = [(f"cv/{i:04d}.pdf", pdfs.resume_pdf(f"U{i}", email)) for i, email in enumerate(users)]
    entries += [
        (f"other/{i:04d}.pdf", pdfs.text_pdf([f"document {i}, no address"])) for i in range(n - len(users))
    ]
    return make_zip(entries)


# --- duplicates ---------------------------------------------------------------------------------


def test_same_s3_notification_twice_and_at_once_is_one_batch_with_the_effects_of_one(
    deps: Deps, db: Any, mysql_url: str
) -> None:
    # GIVEN a ZIP dropped with the AWS CLI
    users = ["a@example.com", "b@example.com"]
    add_users(db, *users)
    up = upload(deps, resume_zip(8, users))
    # WHEN its notification reaches two unzip environments at once, and once more later
    first, second = run_together(
        lambda: staging.stage_zip(own_connection(deps, mysql_url), up),
        lambda: staging.stage_zip(own_connection(deps, mysql_url), up),
    )
    msgs = receive_all(deps)
    third = staging.stage_zip(deps, up)
    # THEN it is one batch with one ledger row and one staged object per entry
    assert first.batch_id == second.batch_id == third.batch_id and third.duplicate
    with db.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM pdfbatch_batches")
        assert cur.fetchone()[0] == 1
    assert len(ledger_rows(db, first.batch_id)) == 8
    assert len(keys(deps, "staging/")) == 8
    assert {m["index"] for m in msgs} == set(range(8))  # both runs may send; every file is sent
    # and processing every message (twice) has the effect of one delivery
    process_all(deps, msgs + receive_all(deps), times=2)
    status = assert_counters_match_ledger(deps, first.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 8, 2)
    assert all(pdf_urls(db)[u] for u in users)
    assert len(keys(deps, "pdfs/")) == 2
    assert_linked_means_linked(deps, db, first.batch_id)


def test_same_sqs_message_to_two_workers_at_once_has_the_effect_of_one(
    deps: Deps, db: Any, mysql_url: str
) -> None:
    # GIVEN a staged batch: one résumé of a user and one other PDF
    add_users(db, "race@example.com")
    report = staging.stage_zip(deps, upload(deps, resume_zip(2, ["race@example.com"])))
    match, other = sorted(receive_all(deps), key=lambda m: m["index"])
    # and two workers that both pass the ledger check, both copy, and reach the link together
    at_start, at_link = threading.Barrier(2, timeout=30), threading.Barrier(2, timeout=30)

    def worker() -> Any:
        mine = own_connection(deps, mysql_url)
        ledger: Any = mine.ledger
        begin, link = ledger.begin_attempt, ledger.link
        ledger.begin_attempt = lambda *a: (at_start.wait(), begin(*a))[1]
        ledger.link = lambda *a: (at_link.wait(), link(*a))[1]
        return processing.process_file(mine, FileTask.from_message(match))

    # WHEN the same message is delivered to both at once
    rows = run_together(worker, worker)
    process_all(deps, [other])
    # THEN it is linked once: one ledger outcome, one object, one pdf_url, counted once
    assert {r.outcome for r in rows} == {"linked"}
    (row,) = [r for r in ledger_rows(db, report.batch_id) if r["entry_index"] == match["index"]]
    assert (row["outcome"], row["attempts"]) == ("linked", 2)
    assert keys(deps, "pdfs/") == [row["final_key"]]
    assert pdf_urls(db)["race@example.com"] == deps.settings.pdf_url(row["final_key"])
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)


# --- crashes: a worker process killed at a hook ----------------------------------------------------


@pytest.mark.parametrize("another_file_links_first", [False, True], ids=["alone", "another-links-first"])
def test_worker_killed_between_copy_and_link_ends_with_one_outcome_and_no_orphan_after_gc(
    ls_deps: Deps, db: Any, another_file_links_first: bool
) -> None:
    # GIVEN two different résumés of one user, staged
    deps = ls_deps
    add_users(db, "kill@example.com")
    data = make_zip(
        [
            ("v1.pdf", pdfs.resume_pdf("V1", "kill@example.com")),
            ("v2.pdf", pdfs.resume_pdf("V2", "kill@example.com", "second version")),
        ]
    )
    report = staging.stage_zip(deps, upload(deps, data))
    v1, v2 = sorted(receive_all(deps), key=lambda m: m["index"])
    # WHEN the worker of v1 is killed right after its S3 copy, before the MySQL link
    hook = {"port": "store", "method": "copy"}
    assert (
        run_killed_worker(deps.settings, {"run": "process_file", "message": v1, "die_after": hook}) == KILLED
    )
    assert len(keys(deps, "pdfs/")) == 1 and pdf_urls(db)["kill@example.com"] is None
    assert ledger_rows(db, report.batch_id)[0]["outcome"] is None
    # (and, in one case, v2 links the user before v1 comes back)
    if another_file_links_first:
        process_all(deps, [v2])
    # and v1 is redelivered (twice), then v2 arrives
    process_all(deps, [v1, v1, v2])
    # THEN each file has one outcome, and once gc swept what nothing points at (the dead worker's copy,
    # when the other file won), the only object under pdfs/ is the one the user points at
    rows = {r["entry_name"]: r for r in ledger_rows(db, report.batch_id)}
    winner = "v2.pdf" if another_file_links_first else "v1.pdf"
    loser = "v1.pdf" if another_file_links_first else "v2.pdf"
    assert (rows[winner]["outcome"], rows[loser]["outcome"]) == ("linked", "skipped_already_exists")
    assert len(sweep_orphans(deps).orphans) == (1 if another_file_links_first else 0)
    assert keys(deps, "pdfs/") == [rows[winner]["final_key"]]
    assert_linked_means_linked(deps, db, report.batch_id)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)


def test_worker_killed_between_link_and_count_is_counted_once_on_redelivery(ls_deps: Deps, db: Any) -> None:
    # GIVEN a staged batch of a user's résumé and another PDF
    deps = ls_deps
    add_users(db, "count@example.com")
    report = staging.stage_zip(deps, upload(deps, resume_zip(2, ["count@example.com"])))
    match, other = sorted(receive_all(deps), key=lambda m: m["index"])
    # WHEN the worker is killed right after the link committed, before Redis counted it
    hook = {"port": "ledger", "method": "link"}
    assert (
        run_killed_worker(deps.settings, {"run": "process_file", "message": match, "die_after": hook})
        == KILLED
    )
    assert ledger_rows(db, report.batch_id)[0]["outcome"] == "linked"
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == 0
    # and the message is redelivered twice, the other file once
    process_all(deps, [match, other, match])
    # THEN the file is linked once, counted once, with one object, and the batch completes
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)
    assert len(keys(deps, "pdfs/")) == 1
    assert_linked_means_linked(deps, db, report.batch_id)


def test_unzip_killed_half_way_through_a_large_zip_is_finished_by_the_retry(ls_deps: Deps, db: Any) -> None:
    # GIVEN a ZIP of 150 PDFs, five of them users' résumés
    deps = ls_deps
    users = [f"u{i}@example.com" for i in range(5)]
    add_users(db, *users)
    n = 150
    up = upload(deps, resume_zip(n, users))
    # WHEN unzip is killed after staging 40 entries (uploads in flight and unsent messages die with it)
    hook = {"port": "store", "method": "put_bytes", "calls": 40}
    upload_args = dataclasses.asdict(up)  # the whole S3 record: sequencer, version and ETag too
    assert (
        run_killed_worker(deps.settings, {"run": "stage_zip", "upload": upload_args, "die_after": hook})
        == KILLED
    )
    batch_id = batches.resolve_batch(deps, up)[0]
    assert 40 <= len(keys(deps, "staging/")) < n
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "PROCESSING"
    # and workers process what it had queued, while S3 retries the event
    early = receive_all(deps)
    assert len(early) < n
    process_all(deps, early)
    retry = staging.stage_zip(deps, up)
    # THEN the retry re-sends exactly the files without an outcome
    assert (retry.duplicate, retry.skipped_done) == (False, len({m["index"] for m in early}))
    late = receive_all(deps)
    assert {m["index"] for m in late} == set(range(n)) - {m["index"] for m in early}
    process_all(deps, late + early)  # with late duplicates of the first run
    # and every file is counted exactly once, none missing, and the batch completes
    rows = ledger_rows(db, batch_id)
    assert len(rows) == n and all(r["outcome"] for r in rows)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", n, len(users))
    redis = deps.progress.client  # type: ignore[attr-defined]
    assert redis.scard(done_key(batch_id)) == n
    linked = {r["entry_index"] for r in rows if r["outcome"] == "linked"}
    assert set(keys(deps, "staging/")) == {staging_key(batch_id, i) for i in range(n)} - {
        staging_key(batch_id, i) for i in linked
    }  # every entry was staged; a linked file's copy is deleted once linked
    assert all(pdf_urls(db)[u] for u in users)
    assert_linked_means_linked(deps, db, batch_id)


# --- outages: MySQL and Redis on closed ports ------------------------------------------------------


def test_mysql_then_redis_outage_is_retried_with_backoff_and_the_batch_completes(
    ls_deps: Deps, db: Any, settings: Any
) -> None:
    # GIVEN a staged batch, and process_pdf wired to MySQL and Redis that can be switched off
    deps = ls_deps
    add_users(db, "out@example.com")
    report = staging.stage_zip(deps, upload(deps, resume_zip(3, ["out@example.com"])))
    broken_mysql = MysqlLedger(MysqlClient.from_url("mysql://root@127.0.0.1:1/pdfbatch"), settings.users)
    mysql = Outage(deps.ledger, broken_mysql)
    users = Outage(deps.users, broken_mysql.user_rows)
    redis = Outage(deps.progress, RedisProgress.from_url("redis://127.0.0.1:1/15"))
    # A short backoff (2-4 s, then 4-8 s) so the test waits it out; the queue hides a received
    # message for 600 s, so a message seen again within the wait came back through the backoff.
    fast = replace(deps.settings, retry_base_seconds=4, retry_max_seconds=8)
    wired = replace(deps, settings=fast, ledger=mysql, users=users, progress=redis)  # type: ignore[arg-type]
    bootstrap.override(wired)
    process = load_handler("process_pdf")
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    url = deps.settings.work_queue_url

    def deliver(msgs: list[dict[str, Any]], expect_failures: int) -> list[dict[str, Any]]:
        """Run the batch through process_pdf as the event source mapping does; return what comes back."""
        result = process.handler(sqs_event_of(msgs), Context())
        failed = {f["itemIdentifier"] for f in result["batchItemFailures"]}
        assert len(failed) == expect_failures
        for m in msgs:
            if m["MessageId"] not in failed:  # the mapping deletes the successful ones
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        # THEN nothing is marked linked that is not, the failed messages are hidden for the backoff,
        assert_linked_means_linked(deps, db, report.batch_id)
        assert receive(deps) == []
        # and they come back after it, well before their 600 s visibility timeout
        back: dict[str, dict[str, Any]] = {}
        deadline = time.monotonic() + 60
        while len(back) < len(failed) and time.monotonic() < deadline:
            for m in sqs.receive_message(
                QueueUrl=url,
                MaxNumberOfMessages=10,
                AttributeNames=["All"],
                VisibilityTimeout=600,
                WaitTimeSeconds=2,
            ).get("Messages", []):
                back[m["MessageId"]] = m
        assert set(back) == failed
        return list(back.values())

    try:
        msgs = receive(deps, visibility=600)
        assert len(msgs) == 3
        # WHEN MySQL is down: every message fails before anything is written
        mysql.down = users.down = True
        msgs = deliver(msgs, expect_failures=3)
        assert mysql.failures >= 3 and keys(deps, "pdfs/") == []
        assert all(r["outcome"] is None for r in ledger_rows(db, report.batch_id))
        # WHEN MySQL is back and Redis is down: outcomes are recorded (the link with its file), not counted
        mysql.down = users.down = False
        redis.down = True
        msgs = deliver(msgs, expect_failures=3)
        assert redis.failures >= 3
        assert Counter(r["outcome"] for r in ledger_rows(db, report.batch_id)) == {
            "linked": 1,
            "skipped_no_match": 2,
        }
        # WHEN both are back: the redeliveries count each file once and the batch completes
        redis.down = False
        assert deliver(msgs, expect_failures=0) == []
        assert {m["Attributes"]["ApproximateReceiveCount"] for m in msgs} == {"3"}
    finally:
        bootstrap.override(None)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 3, 1)
    assert len(keys(deps, "pdfs/")) == 1


# --- Redis progress expiring --------------------------------------------------------------------


def test_progress_with_a_short_ttl_expiring_mid_batch_never_goes_backwards(deps: Deps, db: Any) -> None:
    # GIVEN progress kept in Redis for one second only
    short = replace(deps, progress=RedisProgress.from_url(deps.settings.redis_url, ttl_seconds=1))
    report = staging.stage_zip(short, upload(short, resume_zip(8, [])))
    msgs = sorted(receive_all(short), key=lambda m: m["index"])
    seen = [views.batch_status(short, report.batch_id, caller=ADMIN)]
    for body in msgs[:4]:
        process_all(short, [body])
        seen.append(views.batch_status(short, report.batch_id, caller=ADMIN))
    # WHEN the key expires mid-batch (for real: the TTL runs out)
    redis = short.progress.client  # type: ignore[attr-defined]
    deadline = time.monotonic() + 15
    while redis.exists(progress_key(report.batch_id)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not redis.exists(progress_key(report.batch_id))
    # THEN status answers from MySQL with the same progress
    from_ledger = views.batch_status(short, report.batch_id, caller=ADMIN)
    seen.append(from_ledger)
    assert (from_ledger["source"], from_ledger["processed"]) == ("ledger", 4)
    # and the rest (with late duplicates) rebuilds the hash and completes with exact counts
    for body in msgs[4:] + msgs[:2]:
        process_all(short, [body])
        seen.append(views.batch_status(short, report.batch_id, caller=ADMIN))
    status = assert_counters_match_ledger(short, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 8)
    assert [s["processed"] for s in seen] == sorted(s["processed"] for s in seen)
    assert [RANK[s["status"]] for s in seen] == sorted(RANK[s["status"]] for s in seen)


# --- the unzip DLQ --------------------------------------------------------------------------------


def destination_record(up: batches.Upload) -> dict[str, Any]:
    """What Lambda sends to an OnFailure SQS destination after the async retries of an S3 event."""
    return {
        "version": "1.0",
        "timestamp": "2026-11-29T10:03:00.000Z",
        "requestContext": {
            "requestId": str(uuid.uuid4()),
            "functionArn": "arn:aws:lambda:us-east-1:000000000000:function:pdfbatch-unzip:$LATEST",
            "condition": "RetriesExhausted",
            "approximateInvokeCount": 3,
        },
        "requestPayload": s3_event(up.bucket, up.key, 1234, up.sequencer or "", up.version_id, up.etag),
        "responseContext": {"statusCode": 200, "executedVersion": "$LATEST", "functionError": "Unhandled"},
        "responsePayload": {"errorType": "Sandbox.Timedout", "errorMessage": "Task timed out"},
    }


def test_unzip_dlq_message_fails_the_batch_unzip_never_finished(deps: Deps, db: Any) -> None:
    # GIVEN an upload unzip failed on at every attempt (here: before it even created the batch)
    up = upload(deps, resume_zip(3, []), key="uploads/big drop.zip", sequencer="00AA")
    bootstrap.override(deps)
    unzip = load_handler("unzip")
    try:
        messages = [
            {
                "MessageId": "m1",
                "ReceiptHandle": "r1",
                "Body": json.dumps(destination_record(up)),
            },
            {"MessageId": "m2", "ReceiptHandle": "r2", "Body": "not json"},
        ]
        for m in messages:
            m.update(Attributes={"ApproximateReceiveCount": "1", "SentTimestamp": "1"}, MD5OfBody="")
        # WHEN its failure record comes out of the unzip DLQ (with a malformed message beside it)
        result = unzip.handler(sqs_event_of(messages, arn=UNZIP_DLQ_ARN), Context())
    finally:
        bootstrap.override(None)
    # THEN the batch exists and is FAILED unzip_failed; the malformed message is dropped, not retried
    assert result == {"batchItemFailures": []}
    batch_id = batches.resolve_batch(deps, up)[0]
    status = views.batch_status(deps, batch_id, caller=ADMIN)
    assert (status["status"], status["reason"]) == ("FAILED", "unzip_failed")
    with db.cursor() as cur:
        cur.execute(
            "SELECT status, reason, object_key FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,)
        )
        assert cur.fetchone() == ("FAILED", "unzip_failed", up.key)


# --- death on the last delivery (issue 11, case 6) ---------------------------------------------------


def test_worker_killed_on_the_last_receive_still_finishes_its_batch_through_the_dlq(
    ls_deps: Deps, db: Any
) -> None:
    # GIVEN LocalStack queues as the stack has them: work -> DLQ after (here) 2 receives, and the parked
    # queue; and a staged batch of two PDFs
    sqs: Any = ls_deps.queue.client  # type: ignore[union-attr]
    name = ls_deps.settings.bucket
    dlq_url = sqs.create_queue(QueueName=f"dlq-{name}")["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    redrive = json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "2"})
    work_url = sqs.create_queue(
        QueueName=f"work2-{name}", Attributes={"RedrivePolicy": redrive, "VisibilityTimeout": "1"}
    )["QueueUrl"]
    parked_url = sqs.create_queue(QueueName=f"parked-{name}")["QueueUrl"]
    settings = replace(
        ls_deps.settings, work_queue_url=work_url, parked_queue_url=parked_url, max_receive_count=2
    )
    deps = replace(
        ls_deps, settings=settings, queue=SqsQueue(sqs, work_url), parked=SqsQueue(sqs, parked_url)
    )
    report = staging.stage_zip(deps, upload(deps, resume_zip(2, [])))

    def receive_work() -> list[dict[str, Any]]:
        time.sleep(1.5)  # the visibility timeout runs out
        got = sqs.receive_message(
            # Long polling: on a loaded machine the message may be made visible again a moment late.
            QueueUrl=work_url,
            MaxNumberOfMessages=10,
            AttributeNames=["All"],
            WaitTimeSeconds=10,
        )
        return list(got.get("Messages", []))

    # the second file is processed at once; the first one's first delivery fails (its invocation lost)
    first = receive_work()
    assert len(first) == 2
    by_index = {json.loads(m["Body"])["index"]: m for m in first}
    process_all(deps, [json.loads(by_index[1]["Body"])])
    sqs.delete_message(QueueUrl=work_url, ReceiptHandle=by_index[1]["ReceiptHandle"])
    # WHEN its last delivery's worker is killed mid-file (after counting the attempt, before any outcome)
    (last,) = receive_work()
    assert last["Attributes"]["ApproximateReceiveCount"] == "2"
    hook = {"port": "ledger", "method": "begin_attempt"}
    scenario = {"run": "process_file", "message": json.loads(last["Body"]), "die_after": hook}
    assert run_killed_worker(deps.settings, scenario) == KILLED
    row = ledger_rows(db, report.batch_id)[0]
    assert (row["attempts"], row["outcome"]) == (1, None)
    # THEN SQS moves the message to the DLQ (on the next receive), never to be delivered to a worker again
    assert receive_work() == []
    dead = sqs.receive_message(QueueUrl=dlq_url, MaxNumberOfMessages=10, AttributeNames=["All"])["Messages"]
    assert [json.loads(m["Body"])["index"] for m in dead] == [0]
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["status"] == "PROCESSING"
    # AND the DLQ's consumer (unzip's WorkDeadLetters event source) records it failed/gave_up, so the
    # batch finishes without an operator
    bootstrap.override(deps)
    try:
        result = load_handler("unzip").handler(sqs_event_of(dead, arn=dlq_arn), Context())
    finally:
        bootstrap.override(None)
    assert result == {"batchItemFailures": []}
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["reasons"].get("gave_up")) == ("COMPLETED", 2, 1)
    # AND the operator's workflow still holds: `pdfbatch dlq` lists the parked file, `--redrive` re-runs it
    parked = SqsDeadLetters(sqs, parked_url)
    listing = operations.list_dead_letters(deps, parked)
    assert [(m["index"], m["outcome"], m["reason"]) for m in listing["messages"]] == [
        (0, "failed", "gave_up")
    ]
    redriven = operations.redrive_dead_letters(deps, parked)
    assert (redriven.reopened, redriven.resent) == (1, 1)
    (again,) = receive_work()
    process_all(deps, [json.loads(again["Body"])])
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["skipped_no_match"]) == ("COMPLETED", 2, 2)
    for url in (dlq_url, work_url, parked_url):
        sqs.delete_queue(QueueUrl=url)
