"""Every rule of the pipeline (pdfbatch.services) over in-memory fakes of MySQL/Redis and moto's S3/SQS.

The fakes are held to the real adapters by tests/integration/test_fakes_contract.py; the ``deps``,
``ledger``, ``progress`` and ``clock`` fixtures come from tests/unit/conftest.py.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock, FakeLedger, FakeProgress
from fixtures import pdfs, zips
from fixtures.examples import examples
from fixtures.pipeline import (
    BUCKET,
    assert_counters_match_ledger,
    drain,
    fake_deps,
    files_by_name,
    process_all,
    receive_all,
    sweep_orphans,
    upload,
)
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import archive
from pdfbatch.adapters.sqs import SqsQueue
from pdfbatch.errors import DependencyUnavailable, InvalidInput, NotFound
from pdfbatch.model import FileTask, staging_key
from pdfbatch.ports import FileRow
from pdfbatch.services import batches, processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

RANK = {"PENDING": 0, "PROCESSING": 1, "COMPLETED": 2, "FAILED": 2}


# --- helpers -----------------------------------------------------------------------------------

resume = functools.cache(pdfs.resume_pdf)
text_pdf = functools.cache(lambda *pages: pdfs.text_pdf(list(pages)))


def objects(deps: Deps, prefix: str) -> list[str]:
    """Keys under ``prefix`` in the bucket."""
    listed = deps.store.client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)  # type: ignore[attr-defined]
    return [o["Key"] for o in listed.get("Contents", [])]


def stage(deps: Deps, entries: list[tuple[str, bytes]], **kwargs: Any) -> staging.StageReport:
    """Upload a ZIP of ``entries`` and run unzip on it."""
    return staging.stage_zip(deps, upload(deps, make_zip(entries), **kwargs))


def fail_once(target: Callable[..., Any], error: BaseException) -> Callable[..., Any]:
    """``target``, except that its first call raises ``error`` (a crash at that point)."""
    calls = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise error
        return target(*args, **kwargs)

    return wrapper


def tasks(n: int, batch_id: str = "a" * 32) -> list[FileTask]:
    return [FileTask(batch_id, i, staging_key(batch_id, i), BUCKET) for i in range(n)]


class StubSqs:
    """A boto3 SQS client double: refuses the entries ``refuse(call_number, entry)`` picks."""

    def __init__(self, refuse: Callable[[int, dict[str, str]], bool], sender_fault: bool = False) -> None:
        self.refuse = refuse
        self.sender_fault = sender_fault
        self.calls: list[list[dict[str, str]]] = []

    def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, str]]) -> dict[str, Any]:
        self.calls.append(Entries)
        failed = [e for e in Entries if self.refuse(len(self.calls), e)]
        return {
            "Successful": [{"Id": e["Id"]} for e in Entries if e not in failed],
            "Failed": [
                {"Id": e["Id"], "SenderFault": self.sender_fault, "Code": "InternalError"} for e in failed
            ],
        }


class CheckingQueue:
    """A WorkQueue that runs ``check`` on every send before handing the tasks on."""

    def __init__(self, inner: Any, check: Callable[[Sequence[FileTask]], None]) -> None:
        self.inner = inner
        self.check = check
        self.sent: list[list[FileTask]] = []

    def send_tasks(self, tasks: Sequence[FileTask]) -> None:
        self.check(tasks)
        self.sent.append(list(tasks))
        self.inner.send_tasks(tasks)


# --- unzip: staging ----------------------------------------------------------------------------


def test_total_files_is_recorded_before_any_message_is_sent(deps: Deps, progress: FakeProgress) -> None:
    # GIVEN a queue that checks what a worker could already see when each message goes out
    def check(batch: Sequence[FileTask]) -> None:
        batch_id = batch[0].batch_id
        live = progress.get(batch_id)
        assert live is not None and live.total_files == 12
        ledger_batch = deps.ledger.get_batch(batch_id)
        assert ledger_batch is not None and ledger_batch.total_files == 12
        assert all(deps.ledger.get_file(batch_id, t.index) is not None for t in batch)

    queue = CheckingQueue(deps.queue, check)
    deps = replace(deps, queue=queue)
    # WHEN a ZIP of twelve PDFs is staged
    stage(deps, [(f"{i}.pdf", text_pdf("no address")) for i in range(12)])
    # THEN every message went out after totalFiles was recorded, ten at most per send
    assert sorted(t.index for sent in queue.sent for t in sent) == list(range(12))
    assert max(len(sent) for sent in queue.sent) <= 10


def test_ignored_entries_are_listed_but_never_counted(deps: Deps) -> None:
    # GIVEN a ZIP with two PDFs and four entries that are not documents
    entries = [
        ("a.pdf", text_pdf("no address")),
        ("__MACOSX/._a.pdf", b"\0\5\x16\7"),
        (".hidden.pdf", b"%PDF-1.4"),
        ("notes.txt", b"hello"),
        ("docs/", b""),
        ("b.pdf", text_pdf("none here either")),
    ]
    # WHEN it is staged and processed
    report = stage(deps, entries)
    msgs = drain(deps)
    # THEN only the PDFs are queued and counted, and the rest are listed as ignored with a reason
    assert (report.total_files, report.ignored, len(msgs)) == (2, 4, 2)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["totalFiles"], status["processed"], status["ignored"]) == (
        "COMPLETED",
        2,
        2,
        4,
    )
    listed = views.list_files(deps, report.batch_id, outcome="ignored", caller=ADMIN)["items"]
    assert [(i["name"], i["reason"]) for i in listed] == [
        ("__MACOSX/._a.pdf", "macos_metadata"),
        (".hidden.pdf", "hidden_file"),
        ("notes.txt", "not_pdf"),
        ("docs/", "directory"),
    ]


def test_pdfs_named_otherwise_and_in_a_nested_zip_are_linked_and_each_has_one_outcome(deps: Deps) -> None:
    # GIVEN a ZIP of a résumé named `resume` and a department ZIP holding two résumés, a text and a ZIP
    ledger: Any = deps.ledger
    for email in ("ann@example.com", "bob@example.com", "cy@example.com"):
        ledger.add_user(email)
    deeper = make_zip([("lost.pdf", resume("Lost", "lost@example.com"))])
    dept = make_zip(
        [
            ("cv.pdf", resume("Bob", "bob@example.com")),
            ("notes.txt", b"hello"),
            ("more.zip", deeper),
            ("Cy CV", resume("Cy", "cy@example.com")),
        ]
    )
    # WHEN it is staged and processed
    report = stage(deps, [("resume", resume("Ann", "ann@example.com")), ("dept.zip", dept)])
    drain(deps)
    # THEN every PDF to one level deep is linked under its path, the ZIP deeper is failed nested_too_deep,
    # and the counters agree with the ledger: one outcome per counted entry
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (
        status["status"],
        status["totalFiles"],
        status["linked"],
        status["failed"],
        status["ignored"],
    ) == (
        "COMPLETED",
        4,
        3,
        1,
        2,
    )
    rows = list(views.iter_all_files(deps, report.batch_id))
    assert [(r.index, r.name, r.outcome, r.reason) for r in rows] == [
        (0, "resume", "linked", "matched"),
        (1, "dept.zip", "ignored", "nested_zip"),
        (2, "dept.zip/cv.pdf", "linked", "matched"),
        (3, "dept.zip/notes.txt", "ignored", "not_pdf"),
        (4, "dept.zip/more.zip", "failed", "nested_too_deep"),
        (5, "dept.zip/Cy CV", "linked", "matched"),
    ]
    assert rows[2].name_hex == b"dept.zip/cv.pdf".hex()


def test_one_name_flagged_utf8_with_latin1_bytes_is_processed_and_keeps_its_bytes(deps: Deps) -> None:
    # GIVEN a ZIP whose second entry is flagged UTF-8 but named in Latin-1 (an exporter's bug)
    ledger: Any = deps.ledger
    ledger.add_user("jose@example.com")
    data = zips.raw_zip(
        [
            zips.RawEntry("a.pdf", text_pdf("no address")),
            zips.RawEntry(b"Jos\xe9.pdf", resume("Jos\u00e9", "jose@example.com"), flags=0x800),
        ]
    )
    # WHEN it is staged and processed
    report = staging.stage_zip(deps, upload(deps, data))
    drain(deps)
    # THEN the batch completes and the odd entry is linked like any other, shown decoded (cp437),
    # with its raw bytes kept in the ledger
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)
    rows = list(views.iter_all_files(deps, report.batch_id))
    assert [(r.name, r.name_hex, r.outcome) for r in rows] == [
        ("a.pdf", b"a.pdf".hex(), "skipped_no_match"),
        ("Jos\u0398.pdf", b"Jos\xe9.pdf".hex(), "linked"),
    ]


_RAW_NAMES = st.lists(
    st.tuples(
        st.one_of(st.binary(max_size=24), st.binary(max_size=20).map(lambda b: b + b".pdf")),
        st.sampled_from([0, 0x800]),
    ),
    max_size=8,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=list(HealthCheck))
@given(names=_RAW_NAMES)
def test_arbitrary_entry_name_bytes_never_fail_the_batch_and_each_entry_gets_one_row(
    moto_aws: None, names: list[tuple[bytes, int]]
) -> None:
    # GIVEN a ZIP whose entry names are arbitrary bytes, flagged UTF-8 or not (a fresh stack per example)
    deps = fake_deps(f"names-{uuid.uuid4().hex[:12]}")
    data = zips.raw_zip(
        zips.RawEntry(raw, zips.pdf_bytes(str(i)), flags=flags) for i, (raw, flags) in enumerate(names)
    )
    # WHEN it is staged and every message processed
    report = staging.stage_zip(deps, upload(deps, data))
    drain(deps)
    # THEN the batch is never FAILED: every entry has exactly one ledger row, under its decoded name,
    # with its raw bytes, and the batch completes with counters equal to the ledger
    assert report.status != "FAILED" and report.reason is None
    rows = list(views.iter_all_files(deps, report.batch_id))
    assert [r.index for r in rows] == list(range(len(names)))
    assert [(r.name, r.name_hex) for r in rows] == [
        (archive.decode_name(raw, flags), raw.hex()) for raw, flags in names
    ]
    assert all(r.outcome is not None for r in rows)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert status["status"] == "COMPLETED"


def test_staging_keys_come_from_batch_and_index_never_from_entry_names(deps: Deps) -> None:
    # GIVEN entry names that would escape a naive staging prefix
    names = ["../../x.pdf", "/abs/y.pdf", "C:\\win\\z.pdf", "ok/../../../w.pdf"]
    # WHEN the ZIP is staged
    report = stage(deps, [(n, text_pdf("no address")) for n in names])
    # THEN each message and staged object uses staging/{batch}/{index}.pdf
    msgs = receive_all(deps)
    assert sorted(m["key"] for m in msgs) == [staging_key(report.batch_id, i) for i in range(4)]
    assert sorted(objects(deps, "")) == sorted(["uploads/drop.zip", *(m["key"] for m in msgs)])


def test_too_large_entry_is_failed_without_inflating_it_and_the_rest_goes_on(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a per-PDF limit below one entry's size, and a spy on entry reads
    ledger.add_user("small@example.com")
    small = resume("S", "small@example.com")
    limits = replace(deps.settings.limits, max_pdf_bytes=len(small) + 100)
    deps = replace(deps, settings=replace(deps.settings, limits=limits))
    read: list[str] = []
    real_read = archive.OpenedArchive.read

    def spy(self: archive.OpenedArchive, entry: archive.Entry) -> bytes:
        read.append(entry.name)
        return real_read(self, entry)

    monkeypatch.setattr(archive.OpenedArchive, "read", spy)
    monkeypatch.setattr(archive.OpenedArchive, "open", lambda *_: pytest.fail("entries are read whole"))
    # WHEN the ZIP is staged and processed
    report = stage(deps, [("big.pdf", small + b" " * 5000), ("small.pdf", small)])
    drain(deps)
    # THEN the big entry is failed/too_large without being read, and the small one is linked
    assert read == ["small.pdf"]
    rows = files_by_name(deps, report.batch_id)
    assert (rows["big.pdf"].outcome, rows["big.pdf"].reason) == ("failed", "too_large")
    assert rows["small.pdf"].outcome == "linked"
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["status"] == "COMPLETED"


@pytest.mark.parametrize(
    ("data", "reason", "limit"),
    [
        (zips.not_a_zip(), "not_a_zip", None),
        (zips.truncated_zip(), "corrupt_zip", None),
        (make_zip([("a.pdf", b"%PDF-1.4")]), "zip_too_large", 10),
    ],
    ids=["not_a_zip", "truncated", "too_large"],
)
def test_unreadable_zip_fails_the_batch_with_its_reason(
    deps: Deps, data: bytes, reason: str, limit: int | None
) -> None:
    # GIVEN a ZIP that cannot be read (or is over the limit)
    if limit is not None:
        limits = replace(deps.settings.limits, max_zip_bytes=limit)
        deps = replace(deps, settings=replace(deps.settings, limits=limits))
    # WHEN it is staged
    report = staging.stage_zip(deps, upload(deps, data))
    # THEN the batch is FAILED with the reason, in Redis and MySQL, and nothing is queued
    assert (report.status, report.reason) == ("FAILED", reason)
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (status["status"], status["reason"]) == ("FAILED", reason)
    batch = deps.ledger.get_batch(report.batch_id)
    assert batch is not None and (batch.status, batch.reason) == ("FAILED", reason)
    assert receive_all(deps) == []


def test_zip_deleted_before_unzip_reads_it_fails_zip_missing(deps: Deps) -> None:
    # GIVEN a notification for an object that is gone (and no size in the event)
    up = batches.Upload(bucket=BUCKET, key="uploads/gone.zip", size=None, sequencer="01")
    # WHEN it is staged
    report = staging.stage_zip(deps, up)
    # THEN the batch is FAILED zip_missing
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["reason"] == "zip_missing"


def test_zip_without_pdfs_completes_with_zero_files(deps: Deps) -> None:
    # GIVEN a ZIP with no PDF at all WHEN it is staged
    report = stage(deps, [("readme.txt", b"hi"), ("._x.pdf", b"x")])
    # THEN the batch is COMPLETED at once with totalFiles 0
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (status["status"], status["totalFiles"], status["ignored"], status["percent"]) == (
        "COMPLETED",
        0,
        2,
        100.0,
    )
    batch = deps.ledger.get_batch(report.batch_id)
    assert batch is not None and batch.status == "COMPLETED"


# --- unzip: the work queue ---------------------------------------------------------------------


def test_send_message_batch_carries_ten_messages_per_call() -> None:
    # GIVEN an SQS client that accepts everything
    client = StubSqs(refuse=lambda call, entry: False)
    # WHEN 25 tasks are sent
    SqsQueue(client, "url", sleep=lambda _: None).send_tasks(tasks(25))
    # THEN three calls carry 10, 10 and 5 messages, every task once
    assert [len(c) for c in client.calls] == [10, 10, 5]
    sent = [json.loads(e["MessageBody"])["index"] for c in client.calls for e in c]
    assert sent == list(range(25))


def test_an_entry_sqs_refuses_is_resent_alone_until_accepted() -> None:
    # GIVEN an SQS client that refuses entry 3 on the first call only
    client = StubSqs(refuse=lambda call, entry: call == 1 and entry["Id"] == "3")
    # WHEN ten tasks are sent
    SqsQueue(client, "url", sleep=lambda _: None).send_tasks(tasks(10))
    # THEN the second call re-sends exactly the refused one
    assert [len(c) for c in client.calls] == [10, 1]
    assert json.loads(client.calls[1][0]["MessageBody"])["index"] == 3


def test_an_entry_refused_on_every_attempt_makes_the_send_fail() -> None:
    # GIVEN an SQS client that always refuses entry 0
    client = StubSqs(refuse=lambda call, entry: entry["Id"] == "0")
    # WHEN tasks are sent THEN the send retries and then raises, so unzip is retried
    with pytest.raises(DependencyUnavailable, match="sqs"):
        SqsQueue(client, "url", sleep=lambda _: None).send_tasks(tasks(3))
    assert [len(c) for c in client.calls] == [3, 1, 1, 1, 1]


def test_a_sender_fault_fails_the_send_at_once() -> None:
    client = StubSqs(refuse=lambda call, entry: True, sender_fault=True)
    with pytest.raises(DependencyUnavailable, match="refused"):
        SqsQueue(client, "url", sleep=lambda _: None).send_tasks(tasks(2))
    assert len(client.calls) == 1


def test_unzip_fails_when_messages_are_refused_and_its_retry_sends_them(deps: Deps) -> None:
    # GIVEN a queue that refuses every message
    data = make_zip([(f"{i}.pdf", text_pdf("no address")) for i in range(3)])
    up = upload(deps, data)
    refusing = SqsQueue(StubSqs(refuse=lambda call, entry: True), "url", sleep=lambda _: None)
    # WHEN unzip runs THEN it raises (the S3 event is retried) and the batch is not marked unpacked
    with pytest.raises(DependencyUnavailable):
        staging.stage_zip(replace(deps, queue=refusing), up)
    batch_id, _ = batches.resolve_batch(deps, up)
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "PROCESSING"
    # and the retry with a working queue sends every message, so the batch completes
    report = staging.stage_zip(deps, up)
    assert report.batch_id == batch_id and len(drain(deps)) == 3
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "COMPLETED"


# --- unzip: batch identity and re-runs ---------------------------------------------------------


def test_duplicate_notification_with_the_same_sequencer_is_the_same_batch_and_not_recounted(
    deps: Deps,
) -> None:
    # GIVEN a dropped ZIP processed once
    up = upload(deps, make_zip([("a.pdf", text_pdf("x")), ("b.pdf", text_pdf("y"))]), key="uploads/x y.zip")
    first = staging.stage_zip(deps, up)
    drain(deps)
    # WHEN the same notification arrives again
    second = staging.stage_zip(deps, up)
    # THEN it is the same batch, nothing is re-sent and the counts stay
    assert (second.batch_id, second.duplicate) == (first.batch_id, True)
    assert receive_all(deps) == []
    status = assert_counters_match_ledger(deps, first.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 2)


def test_a_new_sequencer_for_the_same_key_is_a_new_batch(deps: Deps, clock: FakeClock) -> None:
    # GIVEN a ZIP dropped twice at the same key
    data = make_zip([("a.pdf", text_pdf("x"))])
    first = staging.stage_zip(deps, upload(deps, data, sequencer="0A"))
    clock.advance(5)
    second = staging.stage_zip(deps, upload(deps, data, sequencer="0B"))
    # THEN each upload is its own batch, both findable by key, newest first
    assert second.batch_id != first.batch_id
    assert not second.duplicate
    found = views.find_batches(deps, "uploads/drop.zip", caller=ADMIN)["batches"]
    assert [b["batchId"] for b in found] == [second.batch_id, first.batch_id]
    assert {b["source"] for b in found} == {"s3"}


def test_api_upload_keeps_the_batch_id_it_was_given(deps: Deps) -> None:
    # GIVEN a batch created through POST /batches
    created = batches.create_batch(deps)
    assert views.batch_status(deps, created["batchId"], caller=ADMIN)["status"] == "PENDING"
    # WHEN its ZIP lands at uploads/{id}.zip
    report = stage(deps, [("a.pdf", text_pdf("x"))], key=created["key"])
    drain(deps)
    # THEN unzip works on that very batch
    assert report.batch_id == created["batchId"]
    batch = deps.ledger.get_batch(report.batch_id)
    assert batch is not None and (batch.source, batch.status) == ("api", "COMPLETED")


@pytest.mark.parametrize(
    ("key", "source"),
    [
        (f"uploads/{'ab' * 16}.zip", "api"),
        (f"uploads/{'AB' * 16}.zip", "s3"),
        (f"uploads/{'ab' * 16}.zip.zip", "s3"),
        ("uploads/other.zip", "s3"),
    ],
)
def test_only_an_api_shaped_key_carries_its_own_batch_id(deps: Deps, key: str, source: str) -> None:
    batch_id, got = batches.resolve_batch(deps, batches.Upload(BUCKET, key, 1, sequencer="01"))
    assert got == source and re.fullmatch(r"[0-9a-f]{32}", batch_id)
    assert (batch_id == "ab" * 16) == (source == "api")


def test_a_dropped_zip_gets_a_random_id_that_every_duplicate_notification_finds(deps: Deps) -> None:
    # GIVEN two notifications of one upload, and one of a later upload of the same key
    first = batches.Upload(BUCKET, "uploads/drop.zip", 1, sequencer="0055")
    again = batches.Upload(BUCKET, "uploads/drop.zip", 1, sequencer="0055")
    later = batches.Upload(BUCKET, "uploads/drop.zip", 1, sequencer="0056")
    # WHEN each is resolved to a batch
    ids = [batches.resolve_batch(deps, up)[0] for up in (first, again, later)]
    # THEN the duplicate finds the first's batch, the new upload gets its own,
    # and neither id can be computed from what the event carries
    assert ids[0] == ids[1] != ids[2]
    for up, batch_id in zip((first, later), (ids[0], ids[2]), strict=True):
        token = batches.upload_token(up)
        assert batch_id not in token and batch_id != hashlib.sha256(token.encode()).hexdigest()[:32]


def unzip_dies_before_recording_unpacked(deps: Deps, up: batches.Upload, monkeypatch: Any) -> str:
    """Run unzip on ``up`` and let it die after queueing every message; return the batch id."""
    dies = fail_once(deps.ledger.mark_unpacked, DependencyUnavailable("mysql"))
    monkeypatch.setattr(deps.ledger, "mark_unpacked", dies)
    with pytest.raises(DependencyUnavailable):
        staging.stage_zip(deps, up)
    return batches.resolve_batch(deps, up)[0]


def test_rerun_of_an_unfinished_batch_resends_only_what_is_not_done(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an unzip run that died at the end, and whose messages were partly processed
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(5)]))
    report = staging.StageReport(unzip_dies_before_recording_unpacked(deps, up, monkeypatch), "PROCESSING")
    msgs = receive_all(deps)
    process_all(deps, msgs[:2])
    # WHEN S3 retries the same event
    rerun = staging.stage_zip(deps, up)
    # THEN only the three unfinished files are re-sent and nothing is counted twice
    assert (rerun.batch_id, rerun.skipped_done) == (report.batch_id, 2)
    resent = receive_all(deps)
    assert len(resent) == 3
    process_all(deps, resent + msgs)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 5)


def test_rerun_after_progress_expired_resumes_from_the_ledger_counts(
    deps: Deps, progress: FakeProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an unzip run that died at the end, two of five files done, and Redis progress expired
    up = upload(deps, make_zip([(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(5)]))
    report = staging.StageReport(unzip_dies_before_recording_unpacked(deps, up, monkeypatch), "PROCESSING")
    msgs = receive_all(deps)
    process_all(deps, msgs[:2])
    progress.expire(report.batch_id)
    # WHEN S3 retries the event
    staging.stage_zip(deps, up)
    # THEN progress restarts from the ledger, not from zero (it never goes backwards)
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == 2
    # and processing the three re-sent files completes the batch with exact counts
    drain(deps)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 5)


# --- process_pdf: one outcome per file ---------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "outcome", "reason"),
    [
        (lambda: b"hello, I am not a PDF", "failed", "malformed_pdf"),
        (lambda: pdfs.truncated_pdf("alice@example.com"), "failed", "malformed_pdf"),
        (lambda: pdfs.password_pdf("Contact: alice@example.com"), "failed", "encrypted"),
        (lambda: pdfs.owner_only_encrypted_pdf("Contact: alice@example.com"), "linked", "matched"),
        (pdfs.image_only_pdf, "skipped_no_match", "no_text_layer"),
        (lambda: text_pdf("No address on this page"), "skipped_no_match", "no_email"),
        (lambda: resume("S", "stranger@nowhere.org"), "skipped_no_match", "no_user"),
    ],
    ids=["not_pdf", "truncated", "encrypted", "owner_only", "scan", "no_email", "no_user"],
)
def test_each_kind_of_pdf_gets_its_outcome_and_only_a_match_is_linked(
    deps: Deps, ledger: FakeLedger, make: Callable[[], bytes], outcome: str, reason: str
) -> None:
    # GIVEN a user whose address some of these PDFs show
    alice = ledger.add_user("alice@example.com")
    # WHEN the PDF is staged and processed
    report = stage(deps, [("doc.pdf", make())])
    drain(deps)
    # THEN it has exactly that outcome and reason, and only a linked PDF is copied and set
    row = files_by_name(deps, report.batch_id)["doc.pdf"]
    assert (row.outcome, row.reason) == (outcome, reason)
    linked = outcome == "linked"
    assert (ledger.pdf_url_of(alice) is not None) == linked
    assert objects(deps, "pdfs/") == ([f"pdfs/{alice}/{row.sha256}.pdf"] if linked else [])
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["reasons"] == {reason: 1}


def test_first_candidate_in_document_order_that_is_a_user_wins(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN a recruiter's address (no user) before the candidate's, and a later user on page 2
    candidate = ledger.add_user("Candidate@Example.com")
    later = ledger.add_user("later@example.com")
    pdf = pdfs.text_pdf(
        [["Sent by recruiter@agency.com", "Candidate: candidate@example.com"], ["Ref: later@example.com"]]
    )
    # WHEN it is processed
    report = stage(deps, [("cv.pdf", pdf)])
    drain(deps)
    # THEN the candidate (matched case-insensitively) is linked, nobody else
    row = files_by_name(deps, report.batch_id)["cv.pdf"]
    assert (row.outcome, row.user_id) == ("linked", candidate)
    assert ledger.pdf_url_of(candidate) == f"s3://{BUCKET}/{row.final_key}"
    assert ledger.pdf_url_of(later) is None


def test_user_with_a_pdf_already_is_skipped_and_nothing_is_copied(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a user who already has a PDF
    taken = ledger.add_user("taken@example.com", pdf_url="s3://elsewhere/old.pdf")
    monkeypatch.setattr(deps.store, "copy", lambda *a: pytest.fail("nothing may be copied"))
    # WHEN their résumé is processed
    report = stage(deps, [("t.pdf", resume("T", "taken@example.com"))])
    drain(deps)
    # THEN it is skipped as already linked and their pdf_url is untouched
    row = files_by_name(deps, report.batch_id)["t.pdf"]
    assert (row.outcome, row.reason, row.user_id) == ("skipped_already_exists", "already_linked", taken)
    assert ledger.pdf_url_of(taken) == "s3://elsewhere/old.pdf"
    assert objects(deps, "pdfs/") == []


def test_identical_pdfs_link_exactly_one_and_keep_the_shared_object(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN two byte-identical résumés of one user
    twin = ledger.add_user("twin@example.com")
    pdf = resume("Twin", "twin@example.com")
    # WHEN both are processed
    report = stage(deps, [("one.pdf", pdf), ("two.pdf", pdf)])
    drain(deps)
    # THEN one is linked, the other already_linked, and their one final object is there
    rows = files_by_name(deps, report.batch_id)
    assert sorted(r.outcome or "" for r in rows.values()) == ["linked", "skipped_already_exists"]
    assert objects(deps, "pdfs/") == [f"pdfs/{twin}/{rows['one.pdf'].sha256}.pdf"]


def test_identical_pdfs_racing_keep_the_shared_object_the_winner_points_at(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two byte-identical résumés, the second processed entirely while the first is between
    # its copy and its link (both saw the user without a PDF, both copy to the same key)
    twin = ledger.add_user("twin@example.com")
    pdf = resume("Twin", "twin@example.com")
    report = stage(deps, [("one.pdf", pdf), ("two.pdf", pdf)])
    first, second = sorted(receive_all(deps), key=lambda m: m["index"])
    real_copy = deps.store.copy
    copies: list[str] = []

    def copy_then_race(bucket: str, source: str, dest: str) -> None:
        real_copy(bucket, source, dest)
        copies.append(dest)
        if len(copies) == 1:
            processing.process_file(deps, FileTask.from_message(second))

    monkeypatch.setattr(deps.store, "copy", copy_then_race)
    # WHEN the first one runs
    processing.process_file(deps, FileTask.from_message(first))
    # THEN the second won, the first is already_linked, and the object the user points at survives
    rows = files_by_name(deps, report.batch_id)
    assert (rows["two.pdf"].outcome, rows["one.pdf"].reason) == ("linked", "already_linked")
    assert objects(deps, "pdfs/") == [copies[0]]
    assert ledger.pdf_url_of(twin) == f"s3://{BUCKET}/{copies[0]}"


def test_different_pdfs_racing_for_one_user_leave_the_losers_copy_to_gc(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two different résumés of one user, the second linked while the first is mid-way
    ledger.add_user("dup@example.com")
    report = stage(
        deps, [("v1.pdf", resume("V1", "dup@example.com")), ("v2.pdf", resume("V2", "dup@example.com"))]
    )
    first, second = sorted(receive_all(deps), key=lambda m: m["index"])
    real_copy = deps.store.copy
    raced: list[bool] = []

    def copy_then_race(bucket: str, source: str, dest: str) -> None:
        real_copy(bucket, source, dest)
        if not raced:
            raced.append(True)
            processing.process_file(deps, FileTask.from_message(second))

    monkeypatch.setattr(deps.store, "copy", copy_then_race)
    # WHEN the first one runs
    processing.process_file(deps, FileTask.from_message(first))
    # THEN the loser left its copy (another batch could be linking the same key), and the sweep removes
    # it: then the only object is the one the user points at
    rows = files_by_name(deps, report.batch_id)
    assert (rows["v2.pdf"].outcome, rows["v1.pdf"].reason) == ("linked", "already_linked")
    assert len(objects(deps, "pdfs/")) == 2
    assert sweep_orphans(deps).deleted == 1
    assert objects(deps, "pdfs/") == [rows["v2.pdf"].final_key]


# --- process_pdf: redelivery and crashes -------------------------------------------------------


def test_redelivering_every_message_twice_changes_nothing(
    deps: Deps, ledger: FakeLedger, progress: FakeProgress, clock: FakeClock
) -> None:
    # GIVEN a processed batch
    ledger.add_user("a@example.com")
    entries = [("a.pdf", resume("A", "a@example.com")), ("n.pdf", text_pdf("none")), ("x.pdf", b"junk")]
    report = stage(deps, entries)
    msgs = drain(deps)
    before = (dict(ledger.files), dict(ledger.users), progress.get(report.batch_id), objects(deps, ""))
    # WHEN every message is delivered twice more, later
    clock.advance(60)
    process_all(deps, msgs, times=2)
    # THEN ledger, users, counters and objects are exactly as they were
    after = (dict(ledger.files), dict(ledger.users), progress.get(report.batch_id), objects(deps, ""))
    assert after == before
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == 3


def test_crash_between_copy_and_link_then_redelivery_links_once_without_orphan(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a worker that dies after the S3 copy, before the link commits
    user = ledger.add_user("a@example.com")
    report = stage(deps, [("a.pdf", resume("A", "a@example.com"))])
    msgs = receive_all(deps)
    monkeypatch.setattr(ledger, "link", fail_once(ledger.link, DependencyUnavailable("mysql")))
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs)
    assert ledger.pdf_url_of(user) is None
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == 0
    # WHEN the message is redelivered (twice)
    process_all(deps, msgs, times=2)
    # THEN the file is linked once, counted once, and the only object is the linked one
    row = files_by_name(deps, report.batch_id)["a.pdf"]
    assert (row.outcome, row.attempts) == ("linked", 2)
    assert objects(deps, "pdfs/") == [row.final_key]
    assert ledger.pdf_url_of(user) == f"s3://{BUCKET}/{row.final_key}"
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 1)


def test_crash_after_link_before_counting_then_redelivery_counts_once(
    deps: Deps, ledger: FakeLedger, progress: FakeProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a worker that dies after the link committed, before Redis counted it
    ledger.add_user("a@example.com")
    report = stage(deps, [("a.pdf", resume("A", "a@example.com")), ("b.pdf", text_pdf("none"))])
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    monkeypatch.setattr(progress, "count", fail_once(progress.count, DependencyUnavailable("redis")))
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs[:1])
    assert files_by_name(deps, report.batch_id)["a.pdf"].outcome == "linked"
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["processed"] == 0
    assert staging_key(report.batch_id, 0) in objects(deps, "staging/")  # died before deleting it
    # WHEN every message arrives, the crashed one twice
    process_all(deps, msgs + msgs[:1])
    # THEN the linked file is counted exactly once and the batch completes
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)
    # AND the redelivery deleted the linked file's staged copy; the other one's stays for retry
    assert objects(deps, "staging/") == [staging_key(report.batch_id, 1)]


def test_progress_expiring_mid_batch_is_rebuilt_and_never_goes_backwards(
    deps: Deps, progress: FakeProgress
) -> None:
    # GIVEN a batch half processed, then its Redis progress expires
    report = stage(deps, [(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(6)])
    msgs = receive_all(deps)
    seen = [views.batch_status(deps, report.batch_id, caller=ADMIN)]
    for body in msgs[:3]:
        processing.process_file(deps, FileTask.from_message(body))
        seen.append(views.batch_status(deps, report.batch_id, caller=ADMIN))
    progress.expire(report.batch_id)
    # WHEN status is asked meanwhile THEN the ledger answers with the same progress
    from_ledger = views.batch_status(deps, report.batch_id, caller=ADMIN)
    seen.append(from_ledger)
    assert (from_ledger["source"], from_ledger["status"], from_ledger["processed"]) == (
        "ledger",
        "PROCESSING",
        3,
    )
    # WHEN the rest arrive (with a late duplicate) THEN the hash is rebuilt and counts are exact
    for body in msgs[2:]:
        processing.process_file(deps, FileTask.from_message(body))
        seen.append(views.batch_status(deps, report.batch_id, caller=ADMIN))
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["source"]) == ("COMPLETED", 6, "live")
    assert [s["processed"] for s in seen] == sorted(s["processed"] for s in seen)
    assert [RANK[s["status"]] for s in seen] == sorted(RANK[s["status"]] for s in seen)


def test_given_up_file_is_failed_gave_up_and_its_batch_finishes(deps: Deps) -> None:
    # GIVEN a batch whose second file kept failing
    report = stage(deps, [("a.pdf", text_pdf("x")), ("b.pdf", text_pdf("y"))])
    first, second = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, [first])
    # WHEN its last delivery gives up (and the first is given up late, after it was recorded)
    processing.give_up(deps, FileTask.from_message(second))
    processing.give_up(deps, FileTask.from_message(first))
    # THEN it is failed/gave_up, the first keeps its outcome, and the batch completes counted once
    rows = files_by_name(deps, report.batch_id)
    assert (rows["b.pdf"].outcome, rows["b.pdf"].reason) == ("failed", "gave_up")
    assert rows["a.pdf"].reason == "no_email"
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 2)


def test_missing_staged_object_is_failed_missing_object(deps: Deps) -> None:
    report = stage(deps, [("a.pdf", text_pdf("x"))])
    msgs = receive_all(deps)
    deps.store.delete(BUCKET, msgs[0]["key"])
    process_all(deps, msgs)
    row = files_by_name(deps, report.batch_id)["a.pdf"]
    assert (row.outcome, row.reason) == ("failed", "missing_object")


def test_message_without_a_ledger_row_is_dropped(deps: Deps) -> None:
    task = FileTask("c" * 32, 0, staging_key("c" * 32, 0), BUCKET)
    assert processing.process_file(deps, task) is None
    assert processing.give_up(deps, task) is None


# --- status and listing ------------------------------------------------------------------------


def test_status_while_processing_has_percent_reasons_and_eta(deps: Deps, clock: FakeClock) -> None:
    # GIVEN four files, two processed two seconds apart
    report = stage(deps, [(f"{i}.pdf", text_pdf("none")) for i in range(3)] + [("x.pdf", b"junk")])
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:1])
    clock.advance(2)
    process_all(deps, msgs[3:])
    # WHEN status is asked
    body = views.batch_status(deps, report.batch_id, caller=ADMIN)
    # THEN it shows progress, reasons and a rate-based ETA
    assert {k: body[k] for k in ("status", "totalFiles", "processed", "percent", "failed")} == {
        "status": "PROCESSING",
        "totalFiles": 4,
        "processed": 2,
        "percent": 50.0,
        "failed": 1,
    }
    assert body["reasons"] == {"no_email": 1, "malformed_pdf": 1}
    assert (body["filesPerSecond"], body["etaSeconds"]) == (0.5, 4.0)
    assert body["completedAt"] is None and "reason" not in body
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["createdAt"])
    # and once everything is done: 100 %, no ETA, a completion time
    process_all(deps, msgs[1:3])
    done = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (done["status"], done["percent"], done["processed"]) == ("COMPLETED", 100.0, 4)
    assert done["etaSeconds"] is None and done["completedAt"] is not None


def test_status_of_a_finished_batch_answers_from_the_ledger_after_expiry(
    deps: Deps, progress: FakeProgress
) -> None:
    report = stage(deps, [("a.pdf", text_pdf("x")), ("b.pdf", b"junk")])
    drain(deps)
    live = views.batch_status(deps, report.batch_id, caller=ADMIN)
    progress.expire(report.batch_id)
    stored = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert stored["source"] == "ledger"
    for field in ("status", "totalFiles", "processed", "percent", "failed", "reasons", "ignored"):
        assert stored[field] == live[field], field


def test_a_status_read_writes_nothing_unless_it_ends_the_batch(
    deps: Deps, ledger: FakeLedger, progress: FakeProgress, clock: FakeClock
) -> None:
    # GIVEN a batch half processed (PROCESSING, nothing to end)
    report = stage(deps, [(f"{i}.pdf", text_pdf(f"file {i}")) for i in range(4)])
    process_all(deps, sorted(receive_all(deps), key=lambda m: m["index"])[:2])

    def state() -> tuple[Any, ...]:
        hashes = {b: dict(h) for b, h in progress.hashes.items()}
        return dict(ledger.batches), dict(ledger.files), hashes, {b: set(d) for b, d in progress.done.items()}

    for expired in (False, True):
        if expired:
            progress.expire(report.batch_id)
        before = state()
        # WHEN its status is read, later, from the live counters and then from the ledger
        clock.advance(60)
        body = views.batch_status(deps, report.batch_id, caller=ADMIN)
        # THEN the answer is the progress, and neither the ledger nor the counters changed
        assert (body["status"], body["processed"]) == ("PROCESSING", 2)
        assert state() == before


@pytest.mark.parametrize("batch_id", ["0" * 32, "A" * 32, "../../etc/passwd", "abc", ""])
def test_unknown_or_malformed_batch_id_is_not_found(deps: Deps, batch_id: str) -> None:
    with pytest.raises(NotFound):
        views.batch_status(deps, batch_id, caller=ADMIN)
    with pytest.raises(NotFound):
        views.list_files(deps, batch_id, caller=ADMIN)


def test_files_are_paginated_in_entry_order_and_filtered(deps: Deps) -> None:
    # GIVEN five entries, one of them ignored (a text), two processed
    names = ["a.pdf", "b.pdf", "notes.txt", "c.pdf", "d.pdf"]
    content = {"b.pdf": b"junk", "notes.txt": b"some notes"}
    report = stage(deps, [(n, content.get(n) or text_pdf("none")) for n in names])
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:2])
    batch_id = report.batch_id
    # WHEN pages of two are read THEN every entry comes once, in order, and the last has no cursor
    pages, cursor = [], None
    while True:
        page = views.list_files(deps, batch_id, cursor=cursor, limit=2, caller=ADMIN)
        pages.append([i["name"] for i in page["items"]])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert pages == [["a.pdf", "b.pdf"], ["notes.txt", "c.pdf"], ["d.pdf"]]

    # and filters pick the right entries
    def names_of(outcome: str) -> list[str]:
        return [i["name"] for i in views.list_files(deps, batch_id, outcome=outcome, caller=ADMIN)["items"]]

    assert names_of("not_linked") == ["a.pdf", "b.pdf"]
    assert names_of("failed") == ["b.pdf"]
    assert names_of("pending") == ["c.pdf", "d.pdf"]
    assert names_of("ignored") == ["notes.txt"]
    assert names_of("linked") == []
    item = views.list_files(deps, batch_id, limit=1, caller=ADMIN)["items"][0]
    assert (item["outcome"], item["reason"], item["kind"], item["attempts"]) == (
        "skipped_no_match",
        "no_email",
        "pdf",
        1,
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"outcome": "deleted"}, "outcome must be one of"), ({"cursor": "abc"}, "bad cursor")],
)
def test_bad_file_listing_parameters_are_invalid_input(
    deps: Deps, kwargs: dict[str, Any], message: str
) -> None:
    report = stage(deps, [("a.pdf", text_pdf("x"))])
    with pytest.raises(InvalidInput, match=message):
        views.list_files(deps, report.batch_id, **kwargs, caller=ADMIN)


def test_file_listing_limit_is_clamped_between_1_and_1000(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = stage(deps, [(f"{i}.pdf", text_pdf("x")) for i in range(3)])
    asked: list[int] = []
    real = ledger.list_files

    def spy(batch_id: str, after: int, limit: int, outcome: str | None = None) -> list[FileRow]:
        asked.append(limit)
        return real(batch_id, after, limit, outcome)

    monkeypatch.setattr(ledger, "list_files", spy)
    assert len(views.list_files(deps, report.batch_id, limit=0, caller=ADMIN)["items"]) == 1
    views.list_files(deps, report.batch_id, limit=10**6, caller=ADMIN)
    assert asked == [2, 1001]  # one more than the page, to know whether another page follows


def test_created_batch_ids_are_32_hex_unique_and_pending(deps: Deps) -> None:
    # WHEN batches are created through the API
    bodies = [batches.create_batch(deps) for _ in range(20)]
    # THEN ids are 32 lowercase hex, unique, each with a presigned POST for its own key
    ids = [b["batchId"] for b in bodies]
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids) and len(set(ids)) == 20
    assert all(b["upload"]["fields"]["key"] == f"uploads/{b['batchId']}.zip" == b["key"] for b in bodies)
    status = views.batch_status(deps, ids[0], caller=ADMIN)
    assert (status["status"], status["totalFiles"], status["percent"]) == ("PENDING", None, 0.0)


def test_a_batch_nobody_uploads_to_ends_failed_upload_expired_once_its_link_and_grace_are_over(
    deps: Deps,
) -> None:
    # GIVEN a batch created through POST /batches whose ZIP never arrives
    clock = deps.clock
    assert isinstance(clock, FakeClock)
    batch_id = batches.create_batch(deps)["batchId"]
    # WHEN it is polled while the upload link (plus grace for an upload in flight) is still good
    clock.advance(deps.settings.upload_url_expires_seconds + batches.UPLOAD_GRACE_SECONDS - 1)
    # THEN it is still waiting for its upload
    assert views.batch_status(deps, batch_id, caller=ADMIN)["status"] == "PENDING"
    # WHEN it is polled after that, live counters still there or expired
    clock.advance(2)
    status = views.batch_status(deps, batch_id, caller=ADMIN)
    # THEN it has ended FAILED with a machine-readable reason, in Redis and in MySQL
    assert (status["status"], status["reason"]) == ("FAILED", "upload_expired")
    row = deps.ledger.get_batch(batch_id)
    assert row is not None and (row.status, row.reason) == ("FAILED", "upload_expired")
    # and an upload arriving after all revives it: the batch the user polls is processed
    # (tests/unit/test_uploads.py, case 7)
    late = stage(deps, [("a.pdf", text_pdf("x"))], key=f"uploads/{batch_id}.zip")
    assert (late.batch_id, late.duplicate, late.status) == (batch_id, False, "PROCESSING")


def test_a_linked_files_staged_copy_is_deleted_and_a_concurrent_delivery_that_finds_it_gone_changes_nothing(
    deps: Deps, ledger: FakeLedger, progress: FakeProgress, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a batch with a PDF naming a user and one naming nobody
    user = ledger.add_user("a@example.com")
    report = stage(
        deps, [("a.pdf", resume("A", "a@example.com")), ("n.pdf", resume("N", "n@nowhere.example"))]
    )
    msgs = receive_all(deps)
    unstarted = ledger.get_file(report.batch_id, 0)
    # WHEN both are processed
    process_all(deps, msgs)
    # THEN the linked file's staged copy is gone, the other one's stays for `pdfbatch retry`
    assert objects(deps, "staging/") == [staging_key(report.batch_id, 1)]
    linked = ledger.get_file(report.batch_id, 0)
    assert linked is not None and linked.outcome == "linked"
    # WHEN a second delivery of the linked file's message, which read the ledger before the link was
    # recorded, reaches S3 after the copy was deleted
    reads = iter([unstarted])
    real_get = ledger.get_file
    monkeypatch.setattr(ledger, "get_file", lambda b, i: next(reads, None) or real_get(b, i))
    processing.process_file(deps, FileTask.from_message(msgs[0]))
    # THEN the first outcome stands, untouched (not even its attempts: the report written when the
    # batch completed must still equal the ledger), counted once, and the user still points at the
    # final object
    assert ledger.get_file(report.batch_id, 0) == linked
    assert ledger.pdf_url_of(user) is not None
    status = views.batch_status(deps, report.batch_id, caller=ADMIN)
    assert (status["status"], status["processed"], status["linked"]) == ("COMPLETED", 2, 1)


def test_the_services_package_imports_no_use_case_and_lists_every_one() -> None:
    # GIVEN a fresh interpreter WHEN it imports the package alone
    code = (
        "import sys, pdfbatch.services; "
        "print(sorted(m for m in sys.modules if m.startswith('pdfbatch.services.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # THEN no use case came with it (a function pays only for the modules it names)
    assert out.strip() == "[]"
    # AND its docstring names every module of the package, so a newcomer finds each one
    import pdfbatch.services as package

    folder = Path(package.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {m for m in modules if f"``{m}``" not in (package.__doc__ or "")} == set()
