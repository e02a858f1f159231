"""The pipeline's services against the real MariaDB and Redis (S3 and SQS from moto)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest

from fixtures import pdfs
from fixtures.pipeline import (
    assert_counters_match_ledger,
    drain,
    ledger_rows,
    pdf_urls,
    receive_all,
    sweep_orphans,
    upload,
)
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.redis import done_key, progress_key
from pdfbatch.model import FileTask
from pdfbatch.services import batches, processing, staging, views
from pdfbatch.tenants import ADMIN
from plugins.services import add_users

pytestmark = pytest.mark.integration


def test_mixed_zip_ends_with_one_outcome_per_pdf_and_counters_equal_ledger(deps: Any, db: Any) -> None:
    # GIVEN users and a ZIP covering the main outcomes plus junk entries
    ids = add_users(db, "alice@example.com", "bob@example.com")
    add_users(db, "taken@example.com", pdf_url="s3://elsewhere/old.pdf")
    data = make_zip(
        [
            ("resumes/alice.pdf", pdfs.resume_pdf("Alice", "Alice@Example.com")),
            ("resumes/BOB.PDF", pdfs.resume_pdf("Bob", "bob@example.com")),
            ("stranger.pdf", pdfs.resume_pdf("Stranger", "nobody@nowhere.org")),
            ("noemail.pdf", pdfs.text_pdf(["Just some text without an address"])),
            ("scan.pdf", pdfs.image_only_pdf()),
            ("broken.pdf", pdfs.truncated_pdf("alice@example.com")),
            ("locked.pdf", pdfs.password_pdf("Contact: bob@example.com")),
            ("taken.pdf", pdfs.resume_pdf("Taken", "taken@example.com")),
            ("__MACOSX/._alice.pdf", b"junk"),
            ("notes.txt", b"hello"),
            ("docs/", b""),
        ]
    )
    # WHEN the ZIP is staged and every message is processed
    report = staging.stage_zip(deps, upload(deps, data))
    assert report.total_files == 8
    assert report.ignored == 3
    drain(deps)
    # THEN the batch is COMPLETED and every PDF has exactly one outcome and reason
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert status["status"] == "COMPLETED"
    assert (
        status["linked"],
        status["skipped_no_match"],
        status["skipped_already_exists"],
        status["failed"],
    ) == (
        2,
        3,
        1,
        2,
    )
    rows = {r["entry_name"]: r for r in ledger_rows(db, report.batch_id)}
    assert rows["stranger.pdf"]["reason"] == "no_user"
    assert rows["noemail.pdf"]["reason"] == "no_email"
    assert rows["scan.pdf"]["reason"] == "no_text_layer"
    assert rows["broken.pdf"]["reason"] == "malformed_pdf"
    assert rows["locked.pdf"]["reason"] == "encrypted"
    assert rows["taken.pdf"]["reason"] == "already_linked"
    assert rows["notes.txt"]["outcome"] == "ignored"
    urls = pdf_urls(db)
    alice_key = rows["resumes/alice.pdf"]["final_key"]
    assert urls["alice@example.com"] == f"s3://{deps.settings.bucket}/{alice_key}"
    assert alice_key.startswith(f"pdfs/{ids['alice@example.com']}/")
    assert urls["taken@example.com"] == "s3://elsewhere/old.pdf"
    assert deps.store.get_bytes(deps.settings.bucket, alice_key).startswith(b"%PDF-")
    # and the MySQL summary agrees with Redis
    batch = deps.ledger.get_batch(report.batch_id)
    assert batch.status == "COMPLETED"
    assert batch.counts["linked"] == 2


def test_redelivering_every_message_twice_changes_nothing(deps: Any, db: Any) -> None:
    # GIVEN a processed batch
    add_users(db, "a@example.com", "b@example.com")
    data = make_zip(
        [
            (f"f{i}.pdf", pdfs.resume_pdf("X", f"{'ab'[i % 2]}@example.com" if i < 2 else f"n{i}@x.org"))
            for i in range(6)
        ]
    )
    report = staging.stage_zip(deps, upload(deps, data))
    msgs = receive_all(deps)
    for body in msgs:
        processing.process_file(deps, FileTask.from_message(body))
    before_status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    before_rows = ledger_rows(db, report.batch_id)
    before_urls = pdf_urls(db)
    # WHEN every message arrives twice more
    for _ in range(2):
        for body in msgs:
            processing.process_file(deps, FileTask.from_message(body))
    # THEN counters, ledger outcomes and pdf_url values are as after one delivery
    after = views.batch_status(deps, report.batch_id, caller=ADMIN)
    for field in ("processed", "linked", "skipped_no_match", "skipped_already_exists", "failed", "status"):
        assert after[field] == before_status[field]
    assert [(r["outcome"], r["reason"], r["final_key"]) for r in ledger_rows(db, report.batch_id)] == [
        (r["outcome"], r["reason"], r["final_key"]) for r in before_rows
    ]
    assert pdf_urls(db) == before_urls
    assert after["status"] == "COMPLETED" and after["linked"] == 2


def test_duplicate_s3_notification_reruns_the_same_batch_without_double_counting(deps: Any, db: Any) -> None:
    # GIVEN a ZIP dropped with the AWS CLI and processed once
    add_users(db, "a@example.com")
    data = make_zip(
        [("a.pdf", pdfs.resume_pdf("A", "a@example.com")), ("b.pdf", pdfs.text_pdf(["no email"]))]
    )
    up = upload(deps, data, key="uploads/ops drop.zip")
    first = staging.stage_zip(deps, up)
    drain(deps)
    # WHEN the same notification (same sequencer) arrives again
    second = staging.stage_zip(deps, up)
    # THEN it maps to the same batch, which stays COMPLETED with the same counts
    assert second.batch_id == first.batch_id
    assert second.duplicate
    assert receive_all(deps) == []
    status = assert_counters_match_ledger(deps, first.batch_id)
    assert status["processed"] == 2 and status["linked"] == 1
    # and a new upload of the same key (a new sequencer) is a new batch
    third = staging.stage_zip(deps, replace(up, sequencer="0055AED6DCD90281F0"))
    assert third.batch_id != first.batch_id


def test_rerun_of_an_unfinished_batch_resends_only_what_is_not_done(
    deps: Any, db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an unzip run that died after queueing, before recording that unpacking finished,
    # and whose messages were partly processed
    add_users(db, "a@example.com")
    data = make_zip(
        [(f"{i}.pdf", pdfs.resume_pdf("A", "a@example.com" if i == 0 else f"x{i}@x.org")) for i in range(5)]
    )
    up = upload(deps, data)
    real_mark = deps.ledger.mark_unpacked

    def dies(batch_id: str) -> None:
        raise SystemExit(137)

    monkeypatch.setattr(deps.ledger, "mark_unpacked", dies)
    with pytest.raises(SystemExit):
        staging.stage_zip(deps, up)
    monkeypatch.setattr(deps.ledger, "mark_unpacked", real_mark)
    report = staging.StageReport(batches.resolve_batch(deps, up)[0], "")
    msgs = receive_all(deps)
    for body in msgs[:2]:
        processing.process_file(deps, FileTask.from_message(body))
    # WHEN S3 retries the same event
    rerun = staging.stage_zip(deps, up)
    # THEN the same batch is resumed, finished files are not re-sent, and nothing is counted twice
    assert rerun.batch_id == report.batch_id
    assert rerun.skipped_done == 2
    resent = receive_all(deps)
    assert len(resent) == 3
    for body in resent + msgs:  # late duplicates of the first run arrive too
        processing.process_file(deps, FileTask.from_message(body))
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert status["status"] == "COMPLETED"
    assert status["processed"] == 5


def test_identical_pdfs_in_one_zip_link_exactly_one(deps: Any, db: Any) -> None:
    # GIVEN two byte-identical résumés of the same user
    add_users(db, "twin@example.com")
    pdf = pdfs.resume_pdf("Twin", "twin@example.com")
    report = staging.stage_zip(deps, upload(deps, make_zip([("one.pdf", pdf), ("two.pdf", pdf)])))
    # WHEN both are processed
    drain(deps)
    # THEN one is linked, the other skipped, and the shared final object is still there
    rows = ledger_rows(db, report.batch_id)
    assert sorted(r["outcome"] for r in rows) == ["linked", "skipped_already_exists"]
    key = next(r["final_key"] for r in rows if r["outcome"] == "linked")
    assert deps.store.get_bytes(deps.settings.bucket, key).startswith(b"%PDF-")


def test_different_pdfs_for_one_user_leave_no_orphan_copy_after_gc(deps: Any, db: Any) -> None:
    # GIVEN two different résumés of the same user
    add_users(db, "dup@example.com")
    data = make_zip(
        [
            ("v1.pdf", pdfs.resume_pdf("V1", "dup@example.com")),
            ("v2.pdf", pdfs.resume_pdf("V2", "dup@example.com", "second version")),
        ]
    )
    staging.stage_zip(deps, upload(deps, data))
    # WHEN both are processed (and `pdfbatch gc --delete` runs after its grace)
    drain(deps)
    sweep_orphans(deps)
    # THEN exactly one object exists under pdfs/ and it is the linked one
    listed = deps.store.client.list_objects_v2(Bucket=deps.settings.bucket, Prefix="pdfs/")
    keys = [o["Key"] for o in listed.get("Contents", [])]
    assert len(keys) == 1
    assert pdf_urls(db)["dup@example.com"].endswith(keys[0])


def test_two_workers_racing_for_one_user_link_exactly_one_pdf(deps: Any, db: Any, mysql_url: str) -> None:
    # GIVEN many different PDFs of the same user, staged
    add_users(db, "race@example.com")
    n = 8
    data = make_zip(
        [(f"r{i}.pdf", pdfs.resume_pdf(f"R{i}", "race@example.com", f"variant {i}")) for i in range(n)]
    )
    report = staging.stage_zip(deps, upload(deps, data))
    msgs = receive_all(deps)
    # WHEN two workers with their own MySQL connections process all of them at once (each twice)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def worker(order: list[dict[str, Any]]) -> None:
        ledger = MysqlLedger(MysqlClient.from_url(mysql_url), deps.settings.users)
        mine = replace(deps, ledger=ledger, users=ledger.user_rows)
        barrier.wait()
        try:
            for body in order:
                processing.process_file(mine, FileTask.from_message(body))
        except BaseException as exc:
            errors.append(exc)

    threads = [
        threading.Thread(target=worker, args=(msgs,)),
        threading.Thread(target=worker, args=(msgs[::-1],)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # THEN exactly one PDF is linked, every other one is already_exists, and once gc swept the copies
    # that lost the race (left in place: another batch could be linking the same key), one object remains
    assert not errors
    rows = ledger_rows(db, report.batch_id)
    assert Counter(r["outcome"] for r in rows) == {"linked": 1, "skipped_already_exists": n - 1}
    swept = sweep_orphans(deps)
    assert swept.referenced == 1 and swept.deleted == len(swept.orphans)
    listed = deps.store.client.list_objects_v2(Bucket=deps.settings.bucket, Prefix="pdfs/")
    assert len(listed.get("Contents", [])) == 1
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert status["status"] == "COMPLETED"


def test_first_candidate_that_is_a_user_wins_over_an_earlier_non_user(deps: Any, db: Any) -> None:
    # GIVEN a résumé whose first address is a recruiter's (not a user) and then the candidate's
    add_users(db, "candidate@example.com", "later@example.com")
    pdf = pdfs.text_pdf(
        [
            ["Sent by recruiter@agency.com", "Candidate: candidate@example.com"],
            ["Reference: later@example.com"],
        ]
    )
    report = staging.stage_zip(deps, upload(deps, make_zip([("cv.pdf", pdf)])))
    drain(deps)
    # THEN the candidate is linked
    rows = ledger_rows(db, report.batch_id)
    assert rows[0]["outcome"] == "linked"
    assert pdf_urls(db)["candidate@example.com"] is not None
    assert pdf_urls(db)["later@example.com"] is None


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        # bytes that are no ZIP at all: said so by what they are, not by their name
        (b"this is not a zip at all" * 100, "not_a_zip"),
        # a ZIP that starts like one and is cut off before its central directory
        (make_zip([("a.pdf", b"%PDF-1.4 " + random.Random(1).randbytes(8000))])[:4000], "corrupt_zip"),
    ],
    ids=["not_a_zip", "truncated"],
)
def test_a_zip_that_cannot_be_read_fails_the_batch_with_a_reason(
    deps: Any, db: Any, data: bytes, reason: str
) -> None:
    report = staging.stage_zip(deps, upload(deps, data))
    assert report.status == "FAILED"
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert status["status"] == "FAILED"
    assert status["reason"] == reason
    assert deps.ledger.get_batch(report.batch_id).status == "FAILED"


def test_zip_without_pdfs_completes_with_zero_files(deps: Any, db: Any) -> None:
    report = staging.stage_zip(deps, upload(deps, make_zip([("readme.txt", b"hi"), ("._x.pdf", b"x")])))
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert status["status"] == "COMPLETED"
    assert status["totalFiles"] == 0
    assert status["ignored"] == 2
    assert status["percent"] == 100.0


def test_oversized_entry_is_failed_too_large_and_the_rest_goes_on(deps: Any, db: Any) -> None:
    # GIVEN a per-PDF limit smaller than one entry
    add_users(db, "small@example.com")
    small = pdfs.resume_pdf("S", "small@example.com")
    big = pdfs.manual_pdf(30, 1)
    limits = replace(deps.settings.limits, max_pdf_bytes=len(small) + 1000)
    deps = replace(deps, settings=replace(deps.settings, limits=limits))
    report = staging.stage_zip(deps, upload(deps, make_zip([("small.pdf", small), ("big.pdf", big)])))
    drain(deps)
    rows = {r["entry_name"]: r for r in ledger_rows(db, report.batch_id)}
    assert (rows["big.pdf"]["outcome"], rows["big.pdf"]["reason"]) == ("failed", "too_large")
    assert rows["small.pdf"]["outcome"] == "linked"
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["status"] == "COMPLETED"


def test_progress_expiring_mid_batch_is_rebuilt_from_the_ledger(deps: Any, db: Any) -> None:
    # GIVEN a batch half processed
    data = make_zip([(f"{i}.pdf", pdfs.text_pdf([f"file {i}"])) for i in range(6)])
    report = staging.stage_zip(deps, upload(deps, data))
    msgs = receive_all(deps)
    for body in msgs[:3]:
        processing.process_file(deps, FileTask.from_message(body))
    before = views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"]
    # WHEN the Redis keys expire
    deps.progress.client.delete(progress_key(report.batch_id), done_key(report.batch_id))
    # THEN status still answers from MySQL without going backwards
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == before == 3
    # and processing the rest (plus a duplicate) completes with exact counts
    for body in msgs[2:]:
        processing.process_file(deps, FileTask.from_message(body))
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert status["status"] == "COMPLETED"
    assert status["processed"] == 6


def test_status_of_unknown_or_malformed_id_is_not_found(deps: Any) -> None:
    from pdfbatch.errors import NotFound

    for batch_id in ("0" * 32, "../../etc", "ABC"):
        with pytest.raises(NotFound):
            views.batch_status(deps, batch_id, caller=ADMIN)


def test_files_are_listed_in_entry_order_with_a_cursor(deps: Any, db: Any) -> None:
    names = ["../../evil.pdf", "/abs/x.pdf", "dir\\win.pdf", "résumé ünïcödé.pdf", "quote'\"`.pdf"]
    data = make_zip([(n, pdfs.text_pdf(["no email here"])) for n in names])
    report = staging.stage_zip(deps, upload(deps, data))
    drain(deps)
    page1 = views.list_files(deps, report.batch_id, limit=2, caller=ADMIN)
    page2 = views.list_files(deps, report.batch_id, cursor=page1["nextCursor"], limit=10, caller=ADMIN)
    listed = [i["name"] for i in page1["items"] + page2["items"]]
    assert listed == names
    assert page2["nextCursor"] is None
    # and untrusted names never become keys
    listed_keys = deps.store.client.list_objects_v2(Bucket=deps.settings.bucket, Prefix="staging/")
    assert all(k["Key"].startswith(f"staging/{report.batch_id}/") for k in listed_keys["Contents"])


def test_create_batch_returns_a_presigned_post_for_its_own_key(deps: Any) -> None:
    body = batches.create_batch(deps)
    assert body["upload"]["fields"]["key"] == f"uploads/{body['batchId']}.zip"
    assert views.batch_status(deps, body["batchId"], caller=ADMIN)["status"] == "PENDING"
    other = batches.create_batch(deps)
    assert other["batchId"] != body["batchId"]
