"""Faults injected into the pipeline over in-memory fakes (MySQL/Redis) and moto (S3/SQS).

The same rules are proven against the real MariaDB/Redis/LocalStack, with real killed processes and
closed ports, in tests/integration/test_faults.py; these run in milliseconds and pin the logic.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import pytest

from fakes import FakeClock, FakeLedger, FakeProgress
from fixtures import pdfs
from fixtures.pipeline import (
    BUCKET,
    assert_counters_match_ledger,
    drain,
    files_by_name,
    process_all,
    receive_all,
    sweep_orphans,
    upload,
)
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.config import Settings
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileResult, final_key
from pdfbatch.services import batches, redelivery, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

resume = functools.cache(pdfs.resume_pdf)
text_pdf = functools.cache(lambda *pages: pdfs.text_pdf(list(pages)))


def objects(deps: Deps, prefix: str) -> list[str]:
    listed = deps.store.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return sorted(o["Key"] for o in listed.get("Contents", []))


def crash_once(target: Callable[..., Any], error: BaseException) -> Callable[..., Any]:
    """``target``, except that its first call raises ``error`` before doing anything."""
    calls: list[int] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise error
        return target(*args, **kwargs)

    return wrapper


# --- retry backoff -------------------------------------------------------------------------------


def test_backoff_doubles_per_receive_up_to_the_cap_with_jitter_in_the_upper_half() -> None:
    s = Settings(retry_base_seconds=30, retry_max_seconds=900)
    lowest = [redelivery.file_retry_delay(s, n, lambda: 0.0) for n in range(1, 9)]
    highest = [redelivery.file_retry_delay(s, n, lambda: 0.999999) for n in range(1, 9)]
    assert lowest == [15, 30, 60, 120, 240, 450, 450, 450]
    assert highest == [29, 59, 119, 239, 479, 899, 899, 899]
    # a message received a thousand times does not overflow or exceed SQS's limits
    assert redelivery.file_retry_delay(s, 1000, lambda: 0.5) == 675


def test_backoff_is_applied_to_the_received_message(deps: Deps) -> None:
    # GIVEN a work message received from the queue
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    url = deps.settings.work_queue_url
    sqs.send_message(QueueUrl=url, MessageBody="{}")
    (msg,) = sqs.receive_message(QueueUrl=url, VisibilityTimeout=0)["Messages"]
    # WHEN its processing failed on the second receive
    delay = redelivery.retry_later(deps, msg["ReceiptHandle"], 2, rng=lambda: 0.0)
    # THEN it is hidden for the backoff (here 30 s), not returned at once
    assert delay == deps.settings.retry_base_seconds
    assert sqs.receive_message(QueueUrl=url).get("Messages", []) == []


def test_backoff_that_cannot_be_applied_is_reported_not_raised(deps: Deps) -> None:
    # GIVEN an SQS that refuses the visibility change (an expired receipt handle)
    # WHEN the backoff is applied THEN the caller's own error is what propagates, not this one
    assert redelivery.retry_later(deps, "not-a-receipt-handle", 1) is None


# --- the orphan copy ----------------------------------------------------------------------------


def test_copy_of_a_worker_that_died_before_linking_is_left_to_gc_which_removes_it_once_unreferenced(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two different résumés of one user; the worker of the first dies after its S3 copy
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    user = ledger.add_user("a@example.com")
    report = staging.stage_zip(
        deps,
        upload(
            deps,
            make_zip(
                [("v1.pdf", resume("V1", "a@example.com")), ("v2.pdf", resume("V2", "a@example.com", "v2"))]
            ),
        ),
    )
    first, second = sorted(receive_all(deps), key=lambda m: m["index"])
    monkeypatch.setattr(ledger, "link", crash_once(ledger.link, DependencyUnavailable("mysql")))
    with pytest.raises(DependencyUnavailable):
        process_all(deps, [first])
    assert len(objects(deps, "pdfs/")) == 1  # the dead worker's copy
    # WHEN the second file links the user before the first message comes back (twice)
    process_all(deps, [second])
    process_all(deps, [first], times=2)
    # THEN the first is already_exists, and its copy is left where it is (never deleted on the hot path)
    rows = files_by_name(deps, report.batch_id)
    assert (rows["v1.pdf"].outcome, rows["v2.pdf"].outcome) == ("skipped_already_exists", "linked")
    orphan = final_key(user, rows["v1.pdf"].sha256 or "")
    assert objects(deps, "pdfs/") == sorted([orphan, rows["v2.pdf"].final_key or ""])
    assert ledger.pdf_url_of(user) == f"s3://{BUCKET}/{rows['v2.pdf'].final_key}"
    # AND the sweep finds that copy, and only it, and removes it
    assert sweep_orphans(deps).as_dict()["keys"] == [orphan]
    assert objects(deps, "pdfs/") == [rows["v2.pdf"].final_key]
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 2)


# --- duplicates of an S3 notification ------------------------------------------------------------


def test_duplicate_notification_after_the_zip_was_deleted_leaves_a_running_batch_alone(deps: Deps) -> None:
    # GIVEN a batch unpacked and half processed, whose ZIP was then deleted
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(4)]))
    report = staging.stage_zip(deps, up)
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:2])
    deps.store.delete(BUCKET, up.key)
    # WHEN the same notification arrives again
    again = staging.stage_zip(deps, up)
    # THEN it is a no-op: same batch, still PROCESSING, nothing re-sent, no zip_missing
    assert (again.batch_id, again.duplicate, again.status) == (report.batch_id, True, "PROCESSING")
    assert receive_all(deps) == []
    assert "reason" not in views.batch_status(deps, report.batch_id, caller=ADMIN)
    # and the rest finishes it
    process_all(deps, msgs[2:])
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 4)


def test_unzip_dying_after_recording_unpacked_is_finished_by_the_duplicate(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN unzip died after MySQL recorded the batch unpacked, before Redis did
    progress = deps.progress
    assert isinstance(progress, FakeProgress)
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(3)]))
    monkeypatch.setattr(progress, "mark_unpacked", crash_once(progress.mark_unpacked, SystemExit(137)))
    with pytest.raises(SystemExit):
        staging.stage_zip(deps, up)
    drain(deps)
    batch_id = batches.resolve_batch(deps, up)[0]
    assert (
        views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "PROCESSING"
    )  # every file done, not known
    # WHEN S3 retries the event THEN the batch completes, nothing re-sent or counted twice
    again = staging.stage_zip(deps, up)
    assert (again.duplicate, again.status) == (True, "COMPLETED")
    assert receive_all(deps) == []
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 3)
    assert deps.ledger.get_batch(batch_id).status == "COMPLETED"  # type: ignore[union-attr]


# --- the unzip DLQ ------------------------------------------------------------------------------


def test_upload_unzip_never_got_to_is_failed_unzip_failed(deps: Deps) -> None:
    # GIVEN an S3 event unzip failed on before it created the batch
    up = batches.Upload(BUCKET, "uploads/never.zip", 10, sequencer="0A")
    # WHEN it comes out of the unzip DLQ
    assert batches.abandon_upload(deps, up) == "FAILED"
    # THEN the batch exists, FAILED with a machine-readable reason, in Redis and MySQL
    batch_id = batches.resolve_batch(deps, up)[0]
    status = views.batch_status(deps, batch_id, caller=ADMIN)
    assert (status["status"], status["reason"]) == ("FAILED", "unzip_failed")
    row = deps.ledger.get_batch(batch_id)
    assert row is not None and (row.status, row.reason, row.object_key) == ("FAILED", "unzip_failed", up.key)


def test_upload_unzip_died_on_half_way_is_failed_with_what_was_done_counted(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN unzip died after staging some entries, and their files were processed; Redis expired
    progress = deps.progress
    assert isinstance(progress, FakeProgress)
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(12)]))
    monkeypatch.setattr(deps.store, "put_bytes", crash_once_after(deps.store.put_bytes, 10))
    with pytest.raises(SystemExit):
        staging.stage_zip(deps, up)
    done = drain(deps)
    batch_id = batches.resolve_batch(deps, up)[0]
    progress.expire(batch_id)
    # WHEN its event comes out of the unzip DLQ
    batches.abandon_upload(deps, up)
    # THEN the batch is FAILED unzip_failed and still shows the files that were processed
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["reason"], status["processed"]) == ("FAILED", "unzip_failed", len(done))
    assert deps.ledger.get_batch(batch_id).reason == "unzip_failed"  # type: ignore[union-attr]


def test_failed_unzip_event_of_an_unpacked_or_finished_batch_changes_nothing(deps: Deps) -> None:
    # GIVEN a batch fully unpacked by one delivery (the other delivery is the one that failed)
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(2)]))
    report = staging.stage_zip(deps, up)
    msgs = receive_all(deps)
    # WHEN the failed delivery comes out of the DLQ, before and after the batch finished
    assert batches.abandon_upload(deps, up) == "PROCESSING"
    process_all(deps, msgs)
    assert batches.abandon_upload(deps, up) == "COMPLETED"
    # THEN the batch completed normally
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 2)


def crash_once_after(target: Callable[..., Any], n: int) -> Callable[..., Any]:
    """``target``, except that the process "dies" (SystemExit) on call ``n + 1``."""
    calls: list[int] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == n + 1:
            raise SystemExit(137)
        return target(*args, **kwargs)

    return wrapper


# --- Redis progress expiring --------------------------------------------------------------------


def test_file_recorded_while_progress_is_rebuilt_is_counted_exactly_once(deps: Deps) -> None:
    # GIVEN a batch of four, two processed, whose Redis progress expired
    ledger, progress = deps.ledger, deps.progress
    assert isinstance(ledger, FakeLedger) and isinstance(progress, FakeProgress)
    report = staging.stage_zip(
        deps, upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"f{i}")) for i in range(4)]))
    )
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:2])
    progress.expire(report.batch_id)
    # and a worker that records file 2 while another worker's rebuild reads the ledger
    armed = [True]

    def record_file_2_midway(read: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any) -> Any:
            result = read(*args)
            if armed[0]:
                armed[0] = False
                ledger.record(report.batch_id, 2, FileResult("skipped_no_match", "no_email"))
            return result

        return wrapper

    for name in ("outcome_counts", "done_indices", "done_files"):
        if hasattr(ledger, name):
            setattr(ledger, name, record_file_2_midway(getattr(ledger, name)))
    # WHEN file 3 is processed (it rebuilds) and then file 2's worker counts its outcome
    process_all(deps, [msgs[3]])
    process_all(deps, [msgs[2]])
    # THEN every file is counted once and the batch completes
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 4)


def test_rate_and_eta_after_a_rebuild_stay_an_average_over_the_batch(deps: Deps) -> None:
    # GIVEN six files processed one every 10 s, with the progress expiring after the third
    clock, progress = deps.clock, deps.progress
    assert isinstance(clock, FakeClock) and isinstance(progress, FakeProgress)
    report = staging.stage_zip(
        deps, upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"f{i}")) for i in range(6)]))
    )
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    for body in msgs[:3]:
        clock.advance(10)
        process_all(deps, [body])
    progress.expire(report.batch_id)
    # WHEN the fourth is processed 10 s later (it rebuilds the hash)
    clock.advance(10)
    process_all(deps, [msgs[3]])
    # THEN the rate is 3 files in 30 s, not 3 files in no time, and the ETA follows from it
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (status["processed"], status["filesPerSecond"], status["etaSeconds"]) == (4, 0.1, 20.0)


def test_batch_whose_summary_write_was_lost_is_completed_when_status_is_asked(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a batch whose last count completed it in Redis, but MySQL failed the summary write on
    # every delivery of that message (it went to the DLQ), and Redis then expired
    ledger, progress = deps.ledger, deps.progress
    assert isinstance(ledger, FakeLedger) and isinstance(progress, FakeProgress)
    report = staging.stage_zip(
        deps, upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"f{i}")) for i in range(2)]))
    )
    msgs = receive_all(deps)

    def mysql_down(*args: Any) -> None:
        raise DependencyUnavailable("mysql")

    monkeypatch.setattr(ledger, "finish_batch", mysql_down)
    process_all(deps, msgs[:1])
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs[1:])
    monkeypatch.undo()
    progress.expire(report.batch_id)
    assert ledger.get_batch(report.batch_id).status == "PROCESSING"  # type: ignore[union-attr]
    # WHEN its status is asked THEN it is COMPLETED, and so is its MySQL row from now on
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (status["status"], status["processed"], status["source"]) == ("COMPLETED", 2, "ledger")
    assert ledger.get_batch(report.batch_id).status == "COMPLETED"  # type: ignore[union-attr]
