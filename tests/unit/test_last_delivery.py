"""Death on the last delivery (issue 11, case 6): a batch finishes even when the invocation handling a
file's last delivery dies, and no invocation starts a file its timeout would kill.

Over the fakes and moto's SQS, through the handlers as Lambda calls them. The same with a real killed
worker process and LocalStack's redrive: tests/integration/test_faults.py.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from fakes import FakeLedger
from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import UNZIP_DLQ_ARN, s3_event, sqs_event_of
from fixtures.pipeline import assert_counters_match_ledger, process_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.sqs import SqsQueue
from pdfbatch.errors import ConfigError, DependencyUnavailable
from pdfbatch.services import processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.services.processing import FILE_MARGIN_SECONDS
from pdfbatch.tenants import ADMIN

DLQ_ARN = "arn:aws:sqs:us-east-1:000000000000:work-dlq"


class ShortContext(Context):
    """An invocation with ``seconds`` left."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def get_remaining_time_in_millis(self) -> int:
        return int(self.seconds * 1000)


@pytest.fixture()
def parked(deps: Deps) -> SqsQueue:
    """The parked queue, wired into ``deps``."""
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    queue = SqsQueue(sqs, sqs.create_queue(QueueName="parked")["QueueUrl"])
    deps.parked = queue
    return queue


def staged(deps: Deps, n: int = 2) -> tuple[str, list[dict[str, Any]]]:
    """A staged batch of ``n`` PDFs without an address, and its messages as ReceiveMessage returns them."""
    entries = [(f"f{i}.pdf", pdfs.text_pdf([f"document {i}"])) for i in range(n)]
    report = staging.stage_zip(deps, upload(deps, make_zip(entries)))
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    got = sqs.receive_message(
        QueueUrl=deps.settings.work_queue_url,
        MaxNumberOfMessages=10,
        AttributeNames=["All"],
        VisibilityTimeout=600,
    )
    return report.batch_id, sorted(got["Messages"], key=lambda m: json.loads(m["Body"])["index"])


def parked_bodies(queue: SqsQueue) -> list[dict[str, Any]]:
    got = queue.client.receive_message(QueueUrl=queue.queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


# --- (b) no file is started that the timeout would kill ------------------------------------------


@pytest.mark.parametrize("receive_count", ["1", "5"], ids=["first-receive", "last-receive"])
def test_a_message_arriving_with_less_than_a_file_budget_left_is_released_untried(
    deps: Deps, receive_count: str
) -> None:
    # GIVEN two work messages, and an invocation with a second less than one file's budget and margin
    batch_id, msgs = staged(deps)
    for m in msgs:
        m["Attributes"]["ApproximateReceiveCount"] = receive_count
    left = deps.settings.limits.file_budget_seconds + FILE_MARGIN_SECONDS - 1
    # WHEN process_pdf gets them
    result = load_handler("process_pdf").handler(sqs_event_of(msgs), ShortContext(left))
    # THEN neither is tried: both are reported failed (SQS keeps them) and visible again at once,
    assert {f["itemIdentifier"] for f in result["batchItemFailures"]} == {m["MessageId"] for m in msgs}
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    back = sqs.receive_message(
        QueueUrl=deps.settings.work_queue_url, MaxNumberOfMessages=10, VisibilityTimeout=0
    )
    assert len(back.get("Messages", [])) == 2
    # no attempt is counted and nothing is recorded, not even on the last receive
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    rows = [ledger.get_file(batch_id, i) for i in range(2)]
    assert [(r.attempts, r.outcome) for r in rows if r] == [(0, None), (0, None)]


def test_with_a_file_budget_and_margin_left_the_message_is_processed(deps: Deps) -> None:
    batch_id, msgs = staged(deps, 1)
    left = deps.settings.limits.file_budget_seconds + FILE_MARGIN_SECONDS + 1
    result = load_handler("process_pdf").handler(sqs_event_of(msgs), ShortContext(left))
    assert result == {"batchItemFailures": []}
    assert assert_counters_match_ledger(deps, batch_id)["status"] == "COMPLETED"


# --- (a) messages that reach the work DLQ with no outcome ------------------------------------------


def test_a_dead_letter_without_an_outcome_is_recorded_gave_up_counted_once_and_parked(
    deps: Deps, parked: SqsQueue
) -> None:
    # GIVEN a batch whose first file was processed, and whose second file's last delivery died (its
    # invocation timed out: nothing recorded) so its message reached the work DLQ
    batch_id, msgs = staged(deps)
    process_all(deps, [json.loads(msgs[0]["Body"])])
    assert assert_counters_match_ledger(deps, batch_id)["status"] == "PROCESSING"
    unzip = load_handler("unzip")
    # WHEN the DLQ's consumer (unzip's WorkDeadLetters event) gets it, twice (SQS redelivers)
    for _ in range(2):
        result = unzip.handler(sqs_event_of([msgs[1]], arn=DLQ_ARN), Context())
        assert result == {"batchItemFailures": []}
    # THEN the file is failed/gave_up, counted once, and the batch finished without an operator
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"], status["failed"]) == ("COMPLETED", 2, 1)
    assert status["reasons"]["gave_up"] == 1
    # AND the message is parked where `pdfbatch dlq --redrive` finds it (once per delivery at most)
    assert {(b["batchId"], b["index"]) for b in parked_bodies(parked)} == {(batch_id, 1)}


def test_a_dead_letter_whose_file_has_an_outcome_is_counted_once_and_not_parked(
    deps: Deps, parked: SqsQueue
) -> None:
    # GIVEN a file recorded (skipped_no_match) whose count was lost, and its message in the DLQ
    batch_id, msgs = staged(deps, 1)
    task = json.loads(msgs[0]["Body"])
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    real_count = deps.progress.count
    deps.progress.count = lambda *a: (_ for _ in ()).throw(DependencyUnavailable("redis"))  # type: ignore[method-assign]
    with pytest.raises(DependencyUnavailable):
        process_all(deps, [task])
    deps.progress.count = real_count  # type: ignore[method-assign]
    # WHEN the consumer gets it
    load_handler("unzip").handler(sqs_event_of(msgs, arn=DLQ_ARN), Context())
    # THEN it is counted once and the batch completes; nothing is parked (there is nothing to redrive)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["skipped_no_match"]) == ("COMPLETED", 1)
    assert parked_bodies(parked) == []


def test_a_dead_letter_arriving_while_mysql_is_down_is_retried_not_lost(deps: Deps, parked: SqsQueue) -> None:
    # GIVEN a dead letter without an outcome, and MySQL down
    batch_id, msgs = staged(deps, 1)
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    real_get = ledger.get_file
    ledger.get_file = lambda *a: (_ for _ in ()).throw(DependencyUnavailable("mysql"))  # type: ignore[method-assign]
    unzip = load_handler("unzip")
    # WHEN the consumer gets it THEN it fails that message (SQS brings it back), records nothing
    failed = unzip.handler(sqs_event_of(msgs, arn=DLQ_ARN), Context())
    assert failed == {"batchItemFailures": [{"itemIdentifier": msgs[0]["MessageId"]}]}
    assert parked_bodies(parked) == []
    # AND once MySQL is back, its redelivery records it and the batch finishes
    ledger.get_file = real_get  # type: ignore[method-assign]
    assert unzip.handler(sqs_event_of(msgs, arn=DLQ_ARN), Context()) == {"batchItemFailures": []}
    assert assert_counters_match_ledger(deps, batch_id)["status"] == "COMPLETED"


def test_settle_dead_letter_drops_a_message_with_no_ledger_row(deps: Deps, parked: SqsQueue) -> None:
    from pdfbatch.model import FileTask

    assert processing.settle_dead_letter(deps, FileTask("e" * 32, 0, "staging/x.pdf", "b")) is None
    assert parked_bodies(parked) == []


# --- (c) dead letters are routed by the queue they come from ---------------------------------------


def _failed_upload_record(deps: Deps) -> tuple[str, dict[str, Any]]:
    """An upload unzip never got to, and the OnFailure destination record of its S3 event (a message)."""
    key = "uploads/never.zip"
    event = s3_event(deps.settings.bucket, key, 10, "0A")
    body = {"requestPayload": event, "responsePayload": {"errorType": "Sandbox.Timedout"}}
    message = {"MessageId": "m-upload", "ReceiptHandle": "rh-upload", "Body": json.dumps(body)}
    message.update(Attributes={"ApproximateReceiveCount": "1", "SentTimestamp": "1"}, MD5OfBody="")
    return key, message


@pytest.mark.parametrize("from_unzip_dlq", [True, False])
def test_a_failed_upload_record_fails_its_batch_only_from_the_unzip_dlq(
    deps: Deps, parked: SqsQueue, from_unzip_dlq: bool
) -> None:
    # GIVEN the failure record of an S3 event unzip never got to
    key, message = _failed_upload_record(deps)
    arn = UNZIP_DLQ_ARN if from_unzip_dlq else DLQ_ARN
    # WHEN it arrives on the unzip DLQ, or (misrouted) on the work DLQ
    result = load_handler("unzip").handler(sqs_event_of([message], arn=arn), Context())
    # THEN only the unzip DLQ's copy ends a batch (FAILED unzip_failed); on the work DLQ it is no work
    # message, dropped, and no batch appears
    assert result == {"batchItemFailures": []}
    found = [
        views.batch_status(deps, b["batchId"], caller=ADMIN)
        for b in views.find_batches(deps, key, caller=ADMIN)["batches"]
    ]
    expected = [("FAILED", "unzip_failed")] if from_unzip_dlq else []
    assert [(b["status"], b["reason"]) for b in found] == expected


@pytest.mark.parametrize("from_unzip_dlq", [True, False])
def test_a_work_message_is_settled_as_a_file_only_from_a_file_dlq(
    deps: Deps, parked: SqsQueue, from_unzip_dlq: bool
) -> None:
    # GIVEN a staged file whose work message has no outcome
    batch_id, msgs = staged(deps, 1)
    arn = UNZIP_DLQ_ARN if from_unzip_dlq else DLQ_ARN
    # WHEN the message arrives on the work DLQ, or (misrouted) on the unzip DLQ
    result = load_handler("unzip").handler(sqs_event_of(msgs, arn=arn), Context())
    # THEN only the work DLQ's copy records the file gave_up (and parks it); the unzip DLQ's names no
    # S3 upload, so it is dropped and the file is left to its own queue
    assert result == {"batchItemFailures": []}
    status = assert_counters_match_ledger(deps, batch_id)
    assert status["status"] == ("PROCESSING" if from_unzip_dlq else "COMPLETED")
    assert len(parked_bodies(parked)) == (0 if from_unzip_dlq else 1)


def test_unzip_refuses_dead_letters_when_it_cannot_tell_the_queues_apart(deps: Deps) -> None:
    # GIVEN unzip deployed without PDFBATCH_UNZIP_DLQ_ARN
    deps.settings = replace(deps.settings, unzip_dlq_arn="")
    _, message = _failed_upload_record(deps)
    # WHEN a dead letter arrives THEN the invocation fails naming the variable (SQS keeps the message)
    with pytest.raises(ConfigError, match="PDFBATCH_UNZIP_DLQ_ARN"):
        load_handler("unzip").handler(sqs_event_of([message], arn=UNZIP_DLQ_ARN), Context())
