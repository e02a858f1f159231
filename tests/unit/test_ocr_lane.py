"""The OCR lane (issue 12, phase 2): process_pdf hands a PDF without a text layer to the OCR queue, and
ocr_pdf (services/processing.process_scan) links, records and counts it through the text PDFs' path.

Over the fakes and moto's SQS, with a fake engine (the real Tesseract: tests/unit/test_ocr.py, and the
lane on the local stack: tests/e2e/test_ocr_lane.py).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import uuid
from types import SimpleNamespace
from typing import Any
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeLedger
from fixtures import pdfs, scans
from fixtures.apigw import Context, load_handler
from fixtures.events import sqs_event_of
from fixtures.examples import examples
from fixtures.pipeline import assert_counters_match_ledger, drain, files_by_name, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement, invariants
from pdfbatch.adapters.sqs import SqsQueue
from pdfbatch.config import Limits
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileTask
from pdfbatch.ocr.engine import Raster
from pdfbatch.services import processing, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

blank_scan = functools.cache(scans.blank_scan)
resume = functools.cache(pdfs.resume_pdf)


class FakeEngine:
    """Reads ``text`` in every region it is given (the reader skips regions without ink). It runs in
    the forked OCR worker, so it keeps no count the test could see."""

    name = "fake"
    dpi = 36

    def __init__(self, text: str = "") -> None:
        self.text = text

    def load(self) -> None:
        pass

    def read(self, raster: Raster) -> str:
        return self.text


@pytest.fixture()
def ocr_queue(deps: Deps) -> SqsQueue:
    """The OCR lane's queue, wired into ``deps`` (process_pdf hands scans to it)."""
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    queue = SqsQueue(sqs, sqs.create_queue(QueueName="ocr")["QueueUrl"], sleep=lambda _: None)
    deps.ocr_queue = queue
    return queue


def checked(deps: Deps, batch_id: str) -> bool:
    """The invariant checker holds for the batch (and says which rule broke if not)."""
    client: Any = deps.store.client  # type: ignore[attr-defined]
    report = invariants.check(invariants.Sources.from_deps(deps, invariants.S3Keys(client)), [batch_id])
    assert report.ok, report.lines()
    return True


def ocr_messages(queue: SqsQueue) -> list[dict[str, Any]]:
    """Every message on the OCR queue, deleted as received."""
    out: list[dict[str, Any]] = []
    while True:
        got = queue.client.receive_message(QueueUrl=queue.queue_url, MaxNumberOfMessages=10)
        msgs = got.get("Messages", [])
        if not msgs:
            return out
        for m in msgs:
            out.append(json.loads(m["Body"]))
            queue.client.delete_message(QueueUrl=queue.queue_url, ReceiptHandle=m["ReceiptHandle"])


def stage(deps: Deps, entries: list[tuple[str, bytes]]) -> str:
    return staging.stage_zip(deps, upload(deps, make_zip(entries))).batch_id


def inked(text: str = "Curriculum vitae", pages: int = 1) -> bytes:
    """A PDF with ink on every page (what the fake engine "reads" is its own text, not this)."""
    return pdfs.text_pdf([[f"{text} {n} " + "lorem ipsum dolor " * 5] * 40 for n in range(1, pages + 1)])


def scan_task(deps: Deps, entries: list[tuple[str, bytes]]) -> tuple[str, FileTask]:
    """A staged batch whose first entry is handed to the OCR lane; its OCR message as a task."""
    batch_id = stage(deps, entries)
    row = deps.ledger.get_file(batch_id, 0)
    assert row is not None
    task = FileTask(batch_id, 0, f"staging/{batch_id}/{0:07d}.pdf", deps.settings.bucket)
    return batch_id, task


# --- routing --------------------------------------------------------------------------------------


def test_a_pdf_without_a_text_layer_is_handed_to_the_ocr_lane_uncounted(
    deps: Deps, ocr_queue: SqsQueue
) -> None:
    # GIVEN a batch of a scan (no text layer) and a text résumé
    deps.ledger.add_user("ann@example.com")  # type: ignore[attr-defined]
    batch_id = stage(deps, [("scan.pdf", blank_scan()), ("cv.pdf", resume("Ann Lee", "ann@example.com"))])
    # WHEN process_pdf handles every work message
    drain(deps)
    # THEN the résumé is linked by the text lane, the scan has no outcome yet and is marked for OCR
    rows = files_by_name(deps, batch_id)
    assert (rows["cv.pdf"].outcome, rows["cv.pdf"].source) == ("linked", "text")
    assert (rows["scan.pdf"].outcome, rows["scan.pdf"].source) == (None, "ocr")
    # AND exactly its message is on the OCR queue, and the batch waits for it
    assert [m["index"] for m in ocr_messages(ocr_queue)] == [rows["scan.pdf"].index]
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("PROCESSING", 1)
    assert status["lanes"] == {"text": {"done": 1}, "ocr": {"waiting": 1, "done": 0}}
    assert views.list_files(deps, batch_id, caller=ADMIN)["items"][0]["source"] == "ocr"


def test_without_an_ocr_lane_a_scan_still_ends_no_text_layer(deps: Deps) -> None:
    # GIVEN no OCR queue configured (PDFBATCH_OCR_QUEUE_URL unset)
    batch_id = stage(deps, [("scan.pdf", blank_scan())])
    # WHEN it is processed
    drain(deps)
    # THEN it ends as before the lane existed, read by the text lane
    row = files_by_name(deps, batch_id)["scan.pdf"]
    assert (row.outcome, row.reason, row.source) == ("skipped_no_match", "no_text_layer", "text")
    assert assert_counters_match_ledger(deps, batch_id)["status"] == "COMPLETED"


def test_a_redelivered_work_message_sends_again_without_reading_or_counting(
    deps: Deps, ocr_queue: SqsQueue
) -> None:
    # GIVEN a scan handed to the lane, its work message then delivered twice more
    batch_id = stage(deps, [("scan.pdf", blank_scan())])
    drain(deps, times=3)
    # THEN it was read once (one attempt), counted never, and sent on each delivery (idempotent)
    row = files_by_name(deps, batch_id)["scan.pdf"]
    assert (row.outcome, row.attempts, row.source) == (None, 1, "ocr")
    msgs = ocr_messages(ocr_queue)
    assert len(msgs) == 3 and {m["index"] for m in msgs} == {0}
    assert views.batch_status(deps, batch_id, caller=ADMIN)["processed"] == 0
    # WHEN ocr_pdf handles all three duplicates
    engine = FakeEngine("nothing to see here")
    for body in msgs:
        processing.process_scan(deps, FileTask.from_message(body), engine)
    # THEN the file has one outcome, counted once, and the batch completes
    row = files_by_name(deps, batch_id)["scan.pdf"]
    assert (row.outcome, row.reason, row.source) == ("skipped_no_match", "no_email", "ocr")
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 1)
    assert status["lanes"]["ocr"] == {"waiting": 0, "done": 1}
    attempts = row.attempts
    processing.process_scan(deps, FileTask.from_message(msgs[0]), engine)
    assert deps.ledger.get_file(batch_id, 0).attempts == attempts  # type: ignore[union-attr]
    assert checked(deps, batch_id)


def test_a_worker_killed_between_the_mark_and_the_send_loses_nothing(
    deps: Deps, ocr_queue: SqsQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the OCR queue down for the first send (the hand-off's worker fails after the mark)
    batch_id = stage(deps, [("scan.pdf", blank_scan())])
    calls: list[int] = []
    send = ocr_queue.send_tasks

    def flaky(tasks: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise DependencyUnavailable("sqs", "down")
        send(tasks)

    monkeypatch.setattr(ocr_queue, "send_tasks", flaky)
    msgs = [m for m in _work_messages(deps)]
    task = FileTask.from_message(msgs[0])
    with pytest.raises(DependencyUnavailable):
        processing.process_file(deps, task)
    # THEN the file is marked but has no outcome, and nothing reached the lane
    row = deps.ledger.get_file(batch_id, 0)
    assert row is not None and (row.outcome, row.source) == (None, "ocr")
    assert ocr_messages(ocr_queue) == []
    # WHEN SQS delivers the work message again
    processing.process_file(deps, task)
    # THEN the scan reaches the lane without being read again
    assert [m["index"] for m in ocr_messages(ocr_queue)] == [0]
    assert deps.ledger.get_file(batch_id, 0).attempts == 1  # type: ignore[union-attr]


def _work_messages(deps: Deps) -> list[dict[str, Any]]:
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    got = sqs.receive_message(QueueUrl=deps.settings.work_queue_url, MaxNumberOfMessages=10)
    return [json.loads(m["Body"]) for m in got.get("Messages", [])]


# --- the OCR lane's use case ----------------------------------------------------------------------


def test_a_scan_naming_a_user_is_linked_through_the_text_path_with_source_ocr(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue
) -> None:
    # GIVEN a staged scan whose OCR text shows a user's address
    user_id = ledger.add_user("jane.doe@example.com")
    batch_id, task = scan_task(deps, [("scan.pdf", inked())])
    deps.ledger.mark_lane(batch_id, 0, "ocr")
    # WHEN ocr_pdf reads it
    row = processing.process_scan(deps, task, FakeEngine("Jane Doe | Jane.Doe@example.com | 555"))
    # THEN it is linked as a text PDF would be: final key, pdf_url, staged copy dropped, counted once
    assert row is not None and (row.outcome, row.user_id, row.source) == ("linked", user_id, "ocr")
    assert ledger.pdf_url_of(user_id) == deps.settings.pdf_url(row.final_key or "")
    status = assert_counters_match_ledger(deps, batch_id)
    assert status["status"] == "COMPLETED" and status["lanes"]["ocr"] == {"waiting": 0, "done": 1}
    # AND the report file carries the lane per file
    csv_rows = announcement.read_results_csv(announcement.results_csv(views.iter_all_files(deps, batch_id)))
    assert csv_rows[0][announcement.CSV_COLUMNS.index("source")] == "ocr"
    assert checked(deps, batch_id)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Contact: bob@example.com or jane.doe@example.com", "ambiguous"),  # two users in the region
        ("Jane Doe  jane.d0e@example.com", "no_user"),  # a misread names nobody
        ("Jane Doe, Engineer", "no_email"),
    ],
)
def test_ocr_text_is_held_to_the_text_pdfs_matching_rule(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue, text: str, reason: str
) -> None:
    ledger.add_user("jane.doe@example.com")
    ledger.add_user("bob@example.com")
    batch_id, task = scan_task(deps, [("scan.pdf", inked())])
    deps.ledger.mark_lane(batch_id, 0, "ocr")
    row = processing.process_scan(deps, task, FakeEngine(text))
    assert row is not None and (row.outcome, row.reason, row.user_id) == ("skipped_no_match", reason, None)
    assert ledger.pdf_url_of("1") is None and ledger.pdf_url_of("2") is None
    if reason == "ambiguous":
        assert row.users_named == 2


def letterhead_scan(recruiter: str, candidate: str) -> bytes:
    """A scanned page: an agency's letterhead naming its recruiter, the candidate's contact lower down."""
    from fpdf import FPDF

    doc = FPDF(unit="pt", format="A4")
    doc.set_auto_page_break(False)
    doc.add_page()
    doc.set_font("Helvetica", "B", 16)
    doc.text(50, 60, "Northwind Talent Partners")
    doc.set_font("Helvetica", "", 11)
    doc.text(50, 80, f"Your recruiter: {recruiter}")
    for n in range(8):
        doc.text(50, 300 + 18 * n, f"Profile summary line {n + 1}: platform engineering and delivery.")
    doc.text(50, 520, f"Candidate contact: {candidate}")
    return scans.rasterize(bytes(doc.output()), dpi=300, seed=4, max_angle=0.5)[0]


@pytest.mark.slow
def test_a_scanned_letterhead_naming_the_recruiter_and_a_body_naming_the_candidate_is_ambiguous(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue
) -> None:
    # GIVEN a scanned page whose letterhead (the header band) names a recruiter and whose body names the
    # candidate, both users (issue 26, class 6)
    from pdfbatch import ocr

    recruiter, candidate = ledger.add_user("talent.lead@example.org"), ledger.add_user("jane.doe@example.com")
    batch_id, task = scan_task(
        deps, [("scan.pdf", letterhead_scan("talent.lead@example.org", "jane.doe@example.com"))]
    )
    deps.ledger.mark_lane(batch_id, 0, "ocr")
    # WHEN ocr_pdf reads it with the real engine
    row = processing.process_scan(deps, task, ocr.Tesseract())
    # THEN the page is read whole before deciding, as a text page: ambiguous, nobody linked
    assert row is not None and (row.outcome, row.reason, row.users_named) == (
        "skipped_no_match",
        "ambiguous",
        2,
    )
    assert ledger.pdf_url_of(recruiter) is None and ledger.pdf_url_of(candidate) is None


def test_a_long_scan_naming_nobody_ends_at_the_page_limit(deps: Deps, ocr_queue: SqsQueue) -> None:
    # GIVEN a 7-page scan and a page limit of 3
    deps.settings = dataclasses.replace(deps.settings, limits=Limits(ocr_max_pages=3))
    batch_id, task = scan_task(deps, [("long.pdf", inked(pages=7))])
    deps.ledger.mark_lane(batch_id, 0, "ocr")
    # WHEN it is read and names nobody
    row = processing.process_scan(deps, task, FakeEngine("Chapter text"))
    # THEN it ends skipped_no_match / ocr_page_limit after 3 pages
    assert row is not None and (row.outcome, row.reason) == ("skipped_no_match", "ocr_page_limit")
    assert row.timings["pages"] == 3


def test_the_ocr_handler_backs_off_then_gives_up_on_the_last_delivery(
    deps: Deps, ocr_queue: SqsQueue, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a scan handed to the lane, and an engine that fails every read
    batch_id = stage(deps, [("scan.pdf", blank_scan())])
    drain(deps)
    handler = load_handler("ocr_pdf")

    class Broken(FakeEngine):
        def read(self, raster: Raster) -> str:
            raise DependencyUnavailable("ocr", "engine crashed")

    monkeypatch.setattr(handler, "engine", lambda: Broken())
    sqs: Any = ocr_queue.client
    msgs = sqs.receive_message(QueueUrl=ocr_queue.queue_url, AttributeNames=["All"])["Messages"]
    # A blank scan has no ink: give it some, so the engine is asked
    deps.store.put_bytes(deps.settings.bucket, json.loads(msgs[0]["Body"])["key"], inked(), "application/pdf")
    # WHEN ocr_pdf gets it on an early delivery, then on the last one
    msgs[0]["Attributes"]["ApproximateReceiveCount"] = "1"
    first = handler.handler(sqs_event_of(msgs), Context())
    assert first["batchItemFailures"]  # retried later
    assert deps.ledger.get_file(batch_id, 0).outcome is None  # type: ignore[union-attr]
    msgs[0]["Attributes"]["ApproximateReceiveCount"] = str(deps.settings.max_receive_count)
    last = handler.handler(sqs_event_of(msgs), Context())
    # THEN the file ends failed/gave_up in the OCR lane and its batch completes
    assert last["batchItemFailures"]
    row = files_by_name(deps, batch_id)["scan.pdf"]
    assert (row.outcome, row.reason, row.source) == ("failed", "gave_up", "ocr")
    assert assert_counters_match_ledger(deps, batch_id)["status"] == "COMPLETED"


class ListQueue:
    """An OCR queue in memory: what was sent, in order (SQS may deliver it in any order, many times)."""

    def __init__(self) -> None:
        self.sent: list[FileTask] = []

    def send_tasks(self, tasks: Any) -> None:
        self.sent.extend(tasks)

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        pass


@settings(
    max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    deliveries=st.lists(st.sampled_from(["work", "ocr", "ocr-again"]), min_size=1, max_size=8),
    names_user=st.booleans(),
)
def test_any_interleaving_of_duplicate_deliveries_ends_the_scan_once(
    deps: Deps, deliveries: list[str], names_user: bool
) -> None:
    # GIVEN a scan in a batch of its own, and an OCR lane whose queue holds whatever was sent
    owner = f"owner.{uuid.uuid4().hex[:12]}@example.com"  # a user of this example only
    if names_user:
        deps.ledger.add_user(owner)  # type: ignore[attr-defined]
    queue = ListQueue()
    deps.ocr_queue = queue  # type: ignore[assignment]
    key = f"uploads/{uuid.uuid4().hex}.zip"
    batch_id = staging.stage_zip(deps, upload(deps, make_zip([("scan.pdf", inked())]), key=key)).batch_id
    task = FileTask(batch_id, 0, f"staging/{batch_id}/{0:07d}.pdf", deps.settings.bucket)
    # (the PDF has ink so the fake engine is asked; process_pdf is told it has no text layer)
    engine = FakeEngine(f"Scan Owner {owner}")
    # WHEN the work message and the OCR messages it caused are delivered in any order, any number of times
    # (a work delivery hands the scan over again; an OCR delivery reads a message sent so far)
    unread = SimpleNamespace(extract_seconds=0.0, lookup_seconds=0.0, visibility_seconds=0.0, pages_read=1)
    no_text = processing.Verdict("no_text_layer")
    with mock.patch.object(processing, "_scan", lambda d, data: (unread, no_text)):
        for step in ["work", *deliveries, "ocr"]:
            if step == "work":
                processing.process_file(deps, task)
            elif queue.sent:
                processing.process_scan(deps, queue.sent[0 if step == "ocr" else -1], engine)
    # THEN the file has one outcome from the OCR lane, counted once, and the batch is complete
    row = deps.ledger.get_file(batch_id, 0)
    assert row is not None and row.source == "ocr"
    expected = ("linked", "matched") if names_user else ("skipped_no_match", "no_user")
    assert (row.outcome, row.reason) == expected
    status = assert_counters_match_ledger(deps, batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 1)
    assert status["lanes"]["ocr"] == {"waiting": 0, "done": 1}
    assert checked(deps, batch_id)
