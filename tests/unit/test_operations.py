"""The operator's services (retry, dead letters, report) over the in-memory fakes and moto's SQS/S3."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from fakes import FakeClock, FakeLedger, FakeProgress
from fixtures import pdfs
from fixtures.pipeline import (
    BUCKET,
    assert_counters_match_ledger,
    drain,
    files_by_name,
    receive_all,
    upload,
)
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.sqs import SqsDeadLetters
from pdfbatch.config import Limits
from pdfbatch.errors import InvalidInput, NotFound
from pdfbatch.model import FileResult, FileTask
from pdfbatch.services import operations, processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.services.report import batch_report, percentile
from pdfbatch.tenants import ADMIN

resume = functools.cache(pdfs.resume_pdf)
text_pdf = functools.cache(lambda *pages: pdfs.text_pdf(list(pages)))


@pytest.fixture()
def dlq(deps: Deps) -> Iterator[SqsDeadLetters]:
    sqs: Any = deps.queue.client  # type: ignore[union-attr]  # moto's SQS, as the work queue
    yield SqsDeadLetters(sqs, sqs.create_queue(QueueName="work-dlq")["QueueUrl"])


def stage(deps: Deps, entries: list[tuple[str, bytes]]) -> str:
    return staging.stage_zip(deps, upload(deps, make_zip(entries))).batch_id


def mixed_batch(deps: Deps, ledger: FakeLedger) -> str:
    """linked.pdf linked, later.pdf no_user (its user does not exist yet), broken.pdf malformed."""
    ledger.add_user("here@example.com")
    batch_id = stage(
        deps,
        [
            ("linked.pdf", resume("Here", "here@example.com")),
            ("later.pdf", resume("Later", "later@example.com")),
            ("broken.pdf", b"%PDF-1.4 not really"),
        ],
    )
    drain(deps)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["linked"], status["skipped_no_match"], status["failed"]) == (
        "COMPLETED",
        1,
        1,
        1,
    )
    return batch_id


# --- retry --------------------------------------------------------------------------------------


def test_retry_reruns_every_file_not_linked_and_counts_the_new_outcomes_once(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a completed batch, and the user of the unmatched résumé now exists
    batch_id = mixed_batch(deps, ledger)
    ledger.add_user("later@example.com")
    # WHEN the operator retries it
    report = operations.retry_batch(deps, batch_id)
    # THEN the two files not linked are reopened: un-counted, the batch PROCESSING, counters == ledger
    rows = files_by_name(deps, batch_id)
    assert sorted(report.reopened) == sorted([rows["later.pdf"].index, rows["broken.pdf"].index])
    assert rows["later.pdf"].outcome is None and rows["broken.pdf"].outcome is None
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("PROCESSING", 1, 1)
    assert deps.ledger.get_batch(batch_id).status == "PROCESSING"  # type: ignore[union-attr]
    assert "reason:no_user" not in views.batch_status(deps, batch_id, caller=ADMIN)["reasons"]
    # and once processed again the batch completes with the new outcome counted once
    sent = drain(deps)
    assert sorted(m["index"] for m in sent) == sorted(report.resent)
    rows = files_by_name(deps, batch_id)
    assert (rows["later.pdf"].outcome, rows["broken.pdf"].reason) == ("linked", "malformed_pdf")
    assert rows["later.pdf"].attempts == 2 and rows["linked.pdf"].attempts == 1
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["linked"], status["failed"], status["processed"]) == (
        "COMPLETED",
        2,
        1,
        3,
    )
    assert status["reasons"] == {"matched": 2, "malformed_pdf": 1}
    assert deps.ledger.get_batch(batch_id).counts["linked"] == 2  # type: ignore[union-attr]


def test_retry_that_died_between_reopening_and_uncounting_still_ends_with_counters_equal_to_the_ledger(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a completed batch whose unmatched résumé's user now exists
    batch_id = mixed_batch(deps, ledger)
    ledger.add_user("later@example.com")
    # WHEN a retry dies after reopening its first file in the ledger, before un-counting it in Redis
    real_uncount = deps.progress.uncount

    def dies(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(deps.progress, "uncount", real_uncount)
        raise SystemExit(137)

    monkeypatch.setattr(deps.progress, "uncount", dies)
    with pytest.raises(SystemExit):
        operations.retry_batch(deps, batch_id)
    # and the operator runs it again, and the files are processed
    operations.retry_batch(deps, batch_id)
    drain(deps)
    # THEN the batch completes and the live counters say what the ledger says (the stale count of the
    # reopened file was noticed at completion and the counters rebuilt from the ledger)
    rows = files_by_name(deps, batch_id)
    assert rows["later.pdf"].outcome == "linked"
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["linked"], status["skipped_no_match"], status["failed"]) == (
        "COMPLETED",
        2,
        0,
        1,
    )
    assert deps.ledger.get_batch(batch_id).counts["linked"] == 2  # type: ignore[union-attr]


def test_retry_failed_only_leaves_the_skipped_files_alone(deps: Deps, ledger: FakeLedger) -> None:
    batch_id = mixed_batch(deps, ledger)
    report = operations.retry_batch(deps, batch_id, failed_only=True)
    rows = files_by_name(deps, batch_id)
    assert report.reopened == [rows["broken.pdf"].index]
    assert report.kept == {"linked/matched": 1, "skipped_no_match/no_user": 1}
    assert rows["later.pdf"].reason == "no_user"
    drain(deps)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 3)


def test_retry_never_reruns_a_linked_file_nor_links_twice(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN a batch whose résumé was linked
    user = ledger.add_user("once@example.com")
    batch_id = stage(deps, [("cv.pdf", resume("Once", "once@example.com"))])
    drain(deps)
    before = ledger.users[user].pdf_url
    row = files_by_name(deps, batch_id)["cv.pdf"]
    # WHEN it is retried, twice, and its old message arrives again meanwhile
    assert operations.retry_batch(deps, batch_id).reopened == []
    assert operations.retry_batch(deps, batch_id).resent == []
    processing.process_file(
        deps, FileTask(batch_id, row.index, f"staging/{batch_id}/{row.index:07d}.pdf", BUCKET)
    )
    # THEN nothing changed: one link, one count, still COMPLETED
    assert receive_all(deps) == []
    assert ledger.users[user].pdf_url == before
    assert ledger.reopen_file(batch_id, row.index, "linked", "matched") is False
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["linked"], status["processed"]) == ("COMPLETED", 1, 1)


def test_retry_keeps_files_refused_at_unzip_they_were_never_staged(deps: Deps) -> None:
    deps.settings = replace(deps.settings, limits=Limits(max_pdf_bytes=2000))
    batch_id = stage(deps, [("big.pdf", b"%PDF-1.4\n" + b"0" * 5000), ("small.pdf", text_pdf("none"))])
    drain(deps)
    report = operations.retry_batch(deps, batch_id, failed_only=True)
    assert report.reopened == [] and report.kept["failed/too_large"] == 1
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "COMPLETED"


def test_retry_twice_in_a_row_reopens_and_counts_each_file_once(deps: Deps, ledger: FakeLedger) -> None:
    batch_id = mixed_batch(deps, ledger)
    first = operations.retry_batch(deps, batch_id, failed_only=True)
    second = operations.retry_batch(deps, batch_id, failed_only=True)  # before the first was processed
    assert len(first.reopened) == 1 and second.reopened == [] and second.kept["pending"] == 1
    drain(deps)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"], status["failed"]) == ("COMPLETED", 3, 1)


def test_retry_after_the_live_counters_expired_rebuilds_them_right(deps: Deps, ledger: FakeLedger) -> None:
    batch_id = mixed_batch(deps, ledger)
    assert isinstance(deps.progress, FakeProgress)
    deps.progress.expire(batch_id)
    operations.retry_batch(deps, batch_id)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("PROCESSING", 1)
    drain(deps)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 3)


def test_retry_refuses_unknown_and_failed_batches(deps: Deps) -> None:
    with pytest.raises(NotFound):
        operations.retry_batch(deps, "0" * 32)
    with pytest.raises(NotFound):
        operations.retry_batch(deps, "not-an-id")
    upload_ = upload(deps, b"not a zip at all", key="uploads/bad.zip")
    failed = staging.stage_zip(deps, upload_)
    assert failed.status == "FAILED"
    with pytest.raises(InvalidInput, match="upload the ZIP again"):
        operations.retry_batch(deps, failed.batch_id)


# --- dead letters -------------------------------------------------------------------------------


def dead_batch(deps: Deps, dlq: SqsDeadLetters) -> tuple[str, dict[str, Any]]:
    """A batch whose second file gave up on its last delivery; its message sits in the DLQ."""
    batch_id = stage(deps, [("a.pdf", text_pdf("x")), ("b.pdf", text_pdf("no address here"))])
    first, second = sorted(receive_all(deps), key=lambda m: m["index"])
    processing.process_file(deps, FileTask.from_message(first))
    processing.give_up(deps, FileTask.from_message(second))
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps(second))
    return batch_id, second


def test_listing_the_dlq_shows_each_file_and_leaves_the_messages_there(
    deps: Deps, dlq: SqsDeadLetters
) -> None:
    batch_id, dead = dead_batch(deps, dlq)
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody="not json")
    listing = operations.list_dead_letters(deps, dlq)
    assert listing["approximateCount"] == 2
    by_id = {m["batchId"]: m for m in listing["messages"]}
    assert (by_id[batch_id]["index"], by_id[batch_id]["name"]) == (dead["index"], "b.pdf")
    assert (by_id[batch_id]["outcome"], by_id[batch_id]["reason"]) == ("failed", "gave_up")
    assert by_id[None]["index"] is None  # the malformed one is listed too
    # the messages are visible again at once
    assert len(operations.list_dead_letters(deps, dlq)["messages"]) == 2


def test_redrive_reopens_the_gave_up_file_and_counts_its_new_outcome_once(
    deps: Deps, dlq: SqsDeadLetters
) -> None:
    # GIVEN a batch COMPLETED with one file failed/gave_up and its message in the DLQ
    batch_id, dead = dead_batch(deps, dlq)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["failed"], status["reasons"]["gave_up"]) == ("COMPLETED", 1, 1)
    # WHEN the DLQ is redriven (the cause fixed)
    report = operations.redrive_dead_letters(deps, dlq)
    # THEN the file is reopened and un-counted, the message is back on the work queue, the DLQ empty
    assert (report.resent, report.reopened, report.left, report.batches) == (1, 1, 0, [batch_id])
    assert dlq.approximate_count() == 0
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["failed"], status["processed"]) == ("PROCESSING", 0, 1)
    # and processing it again completes the batch with the new outcome, counted once
    assert [m["index"] for m in drain(deps, times=2)] == [dead["index"]]
    row = files_by_name(deps, batch_id)["b.pdf"]
    assert (row.outcome, row.reason) == ("skipped_no_match", "no_email")
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"], status["failed"]) == ("COMPLETED", 2, 0)


def test_redrive_deletes_messages_of_files_already_done_and_leaves_unreadable_ones(
    deps: Deps, dlq: SqsDeadLetters
) -> None:
    batch_id = stage(deps, [("a.pdf", text_pdf("x"))])
    (msg,) = receive_all(deps)
    processing.process_file(deps, FileTask.from_message(msg))  # recorded no_email: not gave_up
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps(msg))
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps({"batchId": "x"}))
    report = operations.redrive_dead_letters(deps, dlq)
    assert (report.resent, report.already_done, report.left) == (0, 1, 1)
    assert receive_all(deps) == []
    assert dlq.approximate_count() == 1  # the malformed one, hidden for now, not deleted
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "COMPLETED"


def test_redrive_resends_a_file_that_never_got_an_outcome(deps: Deps, dlq: SqsDeadLetters) -> None:
    # GIVEN give_up itself failed (MySQL down on the last receive): the row has no outcome
    batch_id = stage(deps, [("a.pdf", text_pdf("x")), ("b.pdf", text_pdf("y"))])
    msgs = receive_all(deps)
    for m in msgs:
        dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps(m))
    report = operations.redrive_dead_letters(deps, dlq, limit=1)
    assert (report.resent, report.reopened) == (1, 0)
    assert dlq.approximate_count() == 1
    operations.redrive_dead_letters(deps, dlq)
    drain(deps)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 2)


# --- report -------------------------------------------------------------------------------------


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert [percentile(values, p) for p in (50, 95, 99, 100)] == [50.0, 95.0, 99.0, 100.0]
    assert percentile([7.0], 99) == 7.0
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0


def test_report_reads_outcomes_reasons_and_stage_percentiles_from_the_ledger() -> None:
    # GIVEN a ledger with 20 recorded files of known download times, one pending, one ignored
    ledger = FakeLedger(FakeClock())
    batch_id = "a" * 32
    ledger.create_batch(batch_id, BUCKET, f"uploads/{batch_id}.zip", "api", "PROCESSING")
    ledger.start_batch(batch_id, 21, 1)
    from pdfbatch.ports import NewEntry

    ledger.add_entries(batch_id, [NewEntry(i, f"{i}.pdf", "pdf", 10) for i in range(21)])
    ledger.add_entries(batch_id, [NewEntry(21, "notes.txt", "ignored", 1, "ignored", "not_pdf")])
    ledger.begin_attempt(batch_id, 3)  # file 3 was tried twice before its outcome was recorded
    ledger.begin_attempt(batch_id, 3)
    for i in range(20):
        outcome, reason = ("linked", "matched") if i < 15 else ("failed", "encrypted")
        ledger.record(batch_id, i, FileResult(outcome, reason, detail={"download": (i + 1) / 1000}))
    # WHEN the report is made
    report = batch_report(ledger, batch_id)
    # THEN counts, reasons and nearest-rank percentiles (in ms) come from the rows
    assert report["outcomes"] == {
        "linked": 15,
        "skipped_no_match": 0,
        "skipped_already_exists": 0,
        "failed": 5,
    }
    assert [(r["reason"], r["files"]) for r in report["reasons"]] == [("matched", 15), ("encrypted", 5)]
    assert report["reasons"][1]["meaning"] == "password-protected"
    assert (report["pdfs"], report["pending"], report["ignored"], report["retriedFiles"]) == (21, 1, 1, 1)
    assert report["stagesMs"] == {
        "download": {"files": 20, "p50": 10.0, "p95": 19.0, "p99": 20.0, "max": 20.0}
    }
    with pytest.raises(NotFound):
        batch_report(ledger, "b" * 32)


def test_processed_files_keep_every_stage_time_including_the_final_write(
    deps: Deps, ledger: FakeLedger
) -> None:
    ledger.add_user("timed@example.com")
    batch_id = stage(deps, [("cv.pdf", resume("Timed", "timed@example.com")), ("x.pdf", text_pdf("none"))])
    drain(deps)
    rows = files_by_name(deps, batch_id)
    assert {"download", "validate", "extract", "match", "copy", "update"} <= set(rows["cv.pdf"].timings)
    assert {"download", "extract", "match", "update"} <= set(rows["x.pdf"].timings)
    report = batch_report(ledger, batch_id)
    assert report["stagesMs"]["update"]["files"] == 2 and report["stagesMs"]["copy"]["files"] == 1


def test_losing_the_timings_write_does_not_fail_a_recorded_file(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pdfbatch.errors import DependencyUnavailable

    def mysql_gone(*args: Any) -> None:
        raise DependencyUnavailable("mysql")

    monkeypatch.setattr(ledger, "set_timings", mysql_gone)
    batch_id = stage(deps, [("x.pdf", text_pdf("none"))])
    drain(deps)
    row = files_by_name(deps, batch_id)["x.pdf"]
    assert (row.outcome, "update" in row.timings) == ("skipped_no_match", False)
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "COMPLETED"


def test_redrive_counts_a_file_whose_outcome_was_recorded_but_never_counted(
    deps: Deps, dlq: SqsDeadLetters
) -> None:
    # GIVEN the ledger write of a file succeeded but counting it failed on every delivery (Redis down)
    batch_id = stage(deps, [("a.pdf", text_pdf("x"))])
    (msg,) = receive_all(deps)
    deps.ledger.record(batch_id, msg["index"], FileResult("skipped_no_match", "no_email"))
    dlq.client.send_message(QueueUrl=dlq.queue_url, MessageBody=json.dumps(msg))
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "PROCESSING"
    # WHEN the DLQ is redriven THEN it is counted once, the batch completes, nothing is re-sent
    report = operations.redrive_dead_letters(deps, dlq)
    assert (report.already_done, report.resent) == (1, 0)
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 1)
    assert deps.ledger.get_batch(batch_id).status == "COMPLETED"  # type: ignore[union-attr]
