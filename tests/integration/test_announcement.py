"""Results delivered (issue 13) on the real MariaDB and Redis: the announce step's claim holds in MySQL.

S3 and SQS are moto's; EventBridge is tests/fakes.FakeEvents (the e2e test puts real events on
LocalStack's bus and reads them from an SQS queue a rule targets).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from fakes import FakeEvents
from fixtures import pdfs
from fixtures.events import completions_queue
from fixtures.faults import KILLED, run_killed_worker
from fixtures.pipeline import drain, process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement, bootstrap
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.services import staging, tally, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN
from plugins.services import add_users

pytestmark = pytest.mark.integration


def _batch(deps: Deps, db: Any) -> str:
    add_users(db, "ada@example.com")
    entries = [
        ("cv/ada.pdf", pdfs.resume_pdf("Ada", "ada@example.com")),
        ("+SUM(A1).pdf", pdfs.text_pdf(["nobody here"])),
        ("broken.pdf", b"%PDF-1.7 junk"),
        ("notes.txt", b"not a pdf"),
    ]
    return staging.stage_zip(deps, upload(deps, make_zip(entries))).batch_id


def _csv_equals_ledger(deps: Deps, batch_id: str) -> None:
    data = deps.store.get_bytes(deps.settings.bucket, announcement.report_keys(batch_id)["csv"])
    rows = deps.ledger.list_files(batch_id, -1, 100_000)
    assert len(rows) == 4
    assert announcement.read_results_csv(data) == [announcement.csv_row(r) for r in rows]


def test_report_csv_equals_the_mysql_ledger_row_for_row(deps: Deps, db: Any) -> None:
    # GIVEN a mixed batch on MySQL and Redis WHEN it is processed (every message twice)
    deps = replace(deps, events=FakeEvents())
    batch_id = _batch(deps, db)
    drain(deps, times=2)
    # THEN the CSV equals the ledger, one event was put, and the ledger says it was announced
    _csv_equals_ledger(deps, batch_id)
    assert isinstance(deps.events, FakeEvents)
    assert [t for _, t, _ in deps.events.of(batch_id)] == ["Batch Completed"]
    batch = deps.ledger.get_batch(batch_id)
    assert batch is not None and batch.announced_at is not None and batch.object_version


def test_worker_dying_after_finish_batch_is_announced_once_by_the_redelivery(
    deps: Deps, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the worker of the last file dies right after MySQL committed finish_batch
    deps = replace(deps, events=FakeEvents())
    assert isinstance(deps.ledger, MysqlLedger) and isinstance(deps.events, FakeEvents)
    batch_id = _batch(deps, db)
    msgs = receive_all(deps)
    process_all(deps, msgs[:-1])
    real_finish = deps.ledger.finish_batch

    def finish_then_die(*args: Any) -> None:
        real_finish(*args)
        raise DependencyUnavailable("lambda", "killed after finish_batch")

    monkeypatch.setattr(deps.ledger, "finish_batch", finish_then_die)
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs[-1:])
    monkeypatch.undo()
    batch = deps.ledger.get_batch(batch_id)
    assert batch is not None and batch.status == "COMPLETED" and batch.announced_at is None
    assert deps.events.of(batch_id) == []
    # WHEN SQS redelivers the message, twice, and status is read
    process_all(deps, msgs[-1:], times=2)
    body = views.batch_status(deps, batch_id, caller=ADMIN)
    # THEN one event, the CSV equal to the ledger, and status links the report
    assert len(deps.events.of(batch_id)) == 1
    _csv_equals_ledger(deps, batch_id)
    assert body["report"]["expiresIn"] == announcement.REPORT_URL_EXPIRES_SECONDS


def test_announcer_dying_after_its_claim_is_retried_after_the_lease_and_only_then(
    deps: Deps, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a one-second lease, and an announcer whose PutEvents never returns (it died)
    monkeypatch.setattr(tally, "ANNOUNCE_LEASE_SECONDS", 1.0)
    events = FakeEvents()
    deps = replace(deps, events=events)
    batch_id = _batch(deps, db)
    events.fail = 1
    with pytest.raises(DependencyUnavailable):
        drain(deps)
    # WHEN another caller comes within the lease THEN it announces nothing
    assert not tally.announce(deps, batch_id)
    # WHEN one comes after the lease THEN it announces, once
    time.sleep(1.2)
    assert tally.announce(deps, batch_id)
    assert not tally.announce(deps, batch_id)
    assert len(events.of(batch_id)) == 1


def test_announcers_racing_on_separate_connections_put_one_event(deps: Deps, db: Any) -> None:
    # GIVEN a final batch not announced yet (its announcer died before claiming)
    events = FakeEvents()
    quiet = replace(deps, events=None)
    batch_id = _batch(quiet, db)
    claim = quiet.ledger.claim_announcement
    quiet.ledger.claim_announcement = lambda *a: None  # type: ignore[method-assign]
    drain(quiet)
    quiet.ledger.claim_announcement = claim  # type: ignore[method-assign]
    # WHEN eight workers, each with its own MySQL connection, announce it at once
    won: list[bool] = []
    barrier = threading.Barrier(8)

    def worker() -> None:
        ledger = MysqlLedger(MysqlClient.from_url(deps.settings.mysql_url), deps.settings.users)
        mine = replace(deps, ledger=ledger, users=ledger.user_rows, events=events)
        barrier.wait()
        won.append(tally.announce(mine, batch_id))
        ledger.client.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN exactly one claimed it and one event was put
    assert sorted(won) == [False] * 7 + [True]
    assert len(events.of(batch_id)) == 1
    _csv_equals_ledger(deps, batch_id)


# --- a real worker process killed right after finish_batch, over LocalStack S3/SQS/EventBridge ---------


@pytest.fixture()
def completions(ls_deps: Deps) -> Iterator[tuple[Any, str]]:
    """An EventBridge rule (source pdfbatch, default bus) targeting a fresh SQS queue: (sqs, queue url)."""
    s = ls_deps.settings
    events, sqs = bootstrap.boto3_client("events", s), bootstrap.boto3_client("sqs", s)
    name = f"done-{s.bucket}"[:64]
    with completions_queue(events, sqs, name) as url:
        yield sqs, url


def _received(sqs: Any, url: str, batch_id: str, seconds: float) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for m in sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
            "Messages", []
        ):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
            body = json.loads(m["Body"])
            if body["detail"].get("batchId") == batch_id:
                found.append(body)
    return found


def test_worker_process_killed_after_finish_batch_is_announced_once_by_the_redelivery(
    ls_deps: Deps, db: Any, completions: tuple[Any, str]
) -> None:
    deps, (sqs, url) = ls_deps, completions
    # GIVEN a batch whose every file but the last is processed
    batch_id = _batch(deps, db)
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:-1])
    # WHEN the worker of the last file is killed (os._exit) right after MySQL committed finish_batch
    hook = {"port": "ledger", "method": "finish_batch"}
    scenario = {"run": "process_file", "message": msgs[-1], "die_after": hook}
    assert run_killed_worker(deps.settings, scenario) == KILLED
    batch = deps.ledger.get_batch(batch_id)
    assert batch is not None and batch.status == "COMPLETED" and batch.announced_at is None
    assert _received(sqs, url, batch_id, 3) == []
    # and SQS redelivers its message, twice
    process_all(deps, msgs[-1:], times=2)
    # THEN the rule's queue gets exactly one Batch Completed event, and the CSV equals the ledger
    events = _received(sqs, url, batch_id, 8)
    assert [e["detail-type"] for e in events] == ["Batch Completed"]
    assert events[0]["detail"]["counts"]["processed"] == 3
    _csv_equals_ledger(deps, batch_id)


def test_a_stacks_callback_rule_takes_its_own_batches_events_and_no_neighbours(ls_deps: Deps) -> None:
    from cfnlint import decode as cfn_decode

    from fixtures.apigw import ROOT
    from pdfbatch.adapters.events import EventBridgeEvents, bucket_arn

    # GIVEN our stack's callback rule on the account's one bus (the template's pattern, its bucket ARN
    # as the template names the stack's bucket: unit/test_template.py), routing to a fresh queue
    s = ls_deps.settings
    events, sqs = bootstrap.boto3_client("events", s), bootstrap.boto3_client("sqs", s)
    template, errors = cfn_decode.decode(str(ROOT / "infra" / "template.yaml"))
    assert not errors
    ours = bucket_arn(events.meta.partition, f"ours-{s.bucket}")
    pattern = {**template["Resources"]["CallbackRule"]["Properties"]["EventPattern"], "resources": [ours]}
    name = f"cb-{s.bucket}"[:64]
    queue = sqs.create_queue(QueueName=name)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events.put_rule(Name=name, EventPattern=json.dumps(pattern), EventBusName="default")
    events.put_targets(Rule=name, Targets=[{"Id": "callbacks", "Arn": arn}])
    try:
        # WHEN our stack and two neighbours (one with a named bucket) each announce a batch
        for n, bucket in enumerate((f"ours-{s.bucket}", f"theirs-{s.bucket}", f"named-{s.bucket}")):
            EventBridgeEvents(events, resources=[bucket_arn(events.meta.partition, bucket)]).put_event(
                announcement.EVENT_SOURCE, "Batch Completed", {"batchId": str(n) * 32}
            )
        # THEN our queue gets our batch's event only, never a neighbour's
        got: list[str] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            answer = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1)
            got += [json.loads(m["Body"])["detail"]["batchId"] for m in answer.get("Messages", [])]
        assert got == ["0" * 32]
    finally:
        events.remove_targets(Rule=name, Ids=["callbacks"])
        events.delete_rule(Name=name)
        sqs.delete_queue(QueueUrl=queue)
