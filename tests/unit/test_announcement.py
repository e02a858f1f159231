"""Results delivered (issue 13): the report file equals the ledger, and a final batch is announced once.

The announce step (tally.announce) is attacked where at-least-once bites: duplicate completions, a
worker killed between finish_batch and the announcement, or between its claim and its mark.
"""

from __future__ import annotations

import csv
import functools
import io
import json
from dataclasses import replace
from typing import Any
from urllib.parse import urlparse

import boto3
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock, FakeEvents, FakeLedger
from fixtures import pdfs
from fixtures.examples import examples
from fixtures.pipeline import BUCKET, drain, process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement
from pdfbatch.adapters.events import EventBridgeEvents
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import BatchReason, BatchStatus, FileResult
from pdfbatch.ports import FileRow, NewEntry
from pdfbatch.services import operations, staging, tally, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

resume = functools.cache(pdfs.resume_pdf)
text_pdf = functools.cache(lambda *pages: pdfs.text_pdf(list(pages)))


def events_of(deps: Deps) -> FakeEvents:
    assert isinstance(deps.events, FakeEvents)
    return deps.events


def ledger_rows(deps: Deps, batch_id: str) -> list[FileRow]:
    return deps.ledger.list_files(batch_id, -1, 100_000)


def report_bytes(deps: Deps, batch_id: str) -> dict[str, bytes]:
    keys = announcement.report_keys(batch_id)
    return {k: deps.store.get_bytes(BUCKET, key) for k, key in keys.items()}


def mixed_batch(deps: Deps, ledger: FakeLedger) -> str:
    """A batch of a linked PDF, one naming nobody, a broken one and a text file; unzipped, not processed."""
    ledger.add_user("a@example.com")
    entries = [
        ("a.pdf", resume("A", "a@example.com")),
        ("=cmd|' /C calc'!A0.pdf", text_pdf("no address here")),
        ("x.pdf", b"junk"),
        ("notes.txt", b"hello"),
    ]
    return staging.stage_zip(deps, upload(deps, make_zip(entries))).batch_id


# --- the report file ------------------------------------------------------------------------------


def test_report_csv_equals_the_ledger_row_for_row_and_the_summary_its_counts(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a mixed batch WHEN it is processed to the end
    batch_id = mixed_batch(deps, ledger)
    drain(deps)
    # THEN results.csv holds one row per ledger entry, each the ledger's values, in entry order
    files = report_bytes(deps, batch_id)
    rows = ledger_rows(deps, batch_id)
    assert len(rows) == 4
    assert announcement.read_results_csv(files["csv"]) == [announcement.csv_row(r) for r in rows]
    # AND summary.json has the ledger's counts, reasons and the ZIP's key and version
    summary = json.loads(files["summary"])
    batch = ledger.get_batch(batch_id)
    assert batch is not None and batch.object_version
    assert summary["status"] == "COMPLETED"
    assert summary["counts"] == {
        "linked": 1,
        "skipped_no_match": 1,
        "skipped_already_exists": 0,
        "failed": 1,
        "processed": 3,
        "ignored": 1,
    }
    assert sum(summary["reasons"].values()) == 3
    assert summary["upload"]["key"] == batch.object_key
    assert summary["upload"]["versionId"] == batch.object_version


def test_a_name_written_like_a_formula_reaches_the_spreadsheet_as_text(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a batch with an entry named like a DDE formula WHEN it completes
    batch_id = mixed_batch(deps, ledger)
    drain(deps)
    # THEN the raw cell starts with a quote, and reading it back gives the ledger's name
    raw = list(csv.reader(io.StringIO(report_bytes(deps, batch_id)["csv"].decode("utf-8"))))
    names = [r[1] for r in raw[1:]]
    assert "'=cmd|' /C calc'!A0.pdf" in names
    assert all(not n.startswith(("=", "+", "-", "@", "\t", "\r")) for n in names)


def _row(name: str, index: int = 0, **kw: Any) -> FileRow:
    values: dict[str, Any] = {
        "batch_id": "b" * 32,
        "index": index,
        "name": name,
        "kind": "pdf",
        "outcome": "linked",
        "reason": "matched",
        "user_id": None,
        "final_key": None,
        "sha256": None,
        "size": 1,
        "attempts": 1,
        "created_at": 1.0,
        "finished_at": 2.5,
        "timings": {"download": 0.125, "total": 1.5},
    }
    values.update(kw)
    return FileRow(**values)


_FORMULA = st.sampled_from(["=", "+", "-", "@", "\t", "\r", "'", ""])
_cells = st.builds(lambda head, tail: head + tail, _FORMULA, st.text(max_size=40))


@given(names=st.lists(_cells, min_size=1, max_size=8), user_ids=st.lists(_cells, min_size=8, max_size=8))
def test_no_cell_ever_starts_a_formula_and_every_cell_reads_back_as_the_ledger_holds_it(
    names: list[str], user_ids: list[str]
) -> None:
    # GIVEN entries whose names and user ids may start like a formula (or with the quote itself)
    rows = [_row(n, i, user_id=user_ids[i]) for i, n in enumerate(names)]
    # WHEN written as results.csv
    data = announcement.results_csv(rows)
    # THEN no cell a spreadsheet reads starts a formula, and reading back gives the ledger's text
    raw = list(csv.reader(io.StringIO(data.decode("utf-8", "surrogateescape"), newline="")))
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for r in raw for cell in r)
    assert announcement.read_results_csv(data) == [announcement.csv_row(r) for r in rows]


def test_rewriting_the_report_gives_the_same_bytes(deps: Deps, ledger: FakeLedger, clock: FakeClock) -> None:
    # GIVEN a completed batch and its report
    batch_id = mixed_batch(deps, ledger)
    drain(deps)
    first = report_bytes(deps, batch_id)
    # WHEN an announcer that died before marking is followed by another, after the lease
    ledger.batches[batch_id] = replace(ledger.batches[batch_id], announced_at=None)
    clock.advance(tally.ANNOUNCE_LEASE_SECONDS + 1)
    assert tally.announce(deps, batch_id)
    # THEN the report is the same bytes
    assert report_bytes(deps, batch_id) == first


# --- the completion event ---------------------------------------------------------------------------


def test_duplicate_completions_put_one_event(deps: Deps, ledger: FakeLedger, clock: FakeClock) -> None:
    # GIVEN a batch whose every message is delivered three times, and, long after (past the claim's
    # lease: only announced_at stops them now), its completion run again by every path
    batch_id = mixed_batch(deps, ledger)
    msgs = drain(deps, times=3)
    clock.advance(tally.ANNOUNCE_LEASE_SECONDS + 1)
    process_all(deps, msgs)
    tally.complete(deps, batch_id)
    tally.write_summary(deps, batch_id, BatchStatus.COMPLETED, None)
    batch = ledger.get_batch(batch_id)
    assert batch is not None
    tally.complete_from_ledger(deps, batch, ledger.outcome_counts(batch_id))
    views.batch_status(deps, batch_id, caller=ADMIN)
    # THEN one event was put, Batch Completed from pdfbatch, with the ledger's counts
    put = events_of(deps).of(batch_id)
    assert [(s, t) for s, t, _ in put] == [("pdfbatch", "Batch Completed")]
    detail = put[0][2]
    assert detail["counts"]["processed"] == 3 and detail["status"] == "COMPLETED"
    assert detail["report"] == announcement.report_keys(batch_id)


def test_a_failed_batch_is_announced_batch_failed_with_its_reason(deps: Deps) -> None:
    # GIVEN an upload that is not a ZIP WHEN unzip fails its batch
    batch_id = staging.stage_zip(deps, upload(deps, b"not a zip")).batch_id
    # THEN one Batch Failed event with the batch's reason, and a report
    put = events_of(deps).of(batch_id)
    assert [(t, d["status"]) for _, t, d in put] == [("Batch Failed", "FAILED")]
    assert put[0][2]["reason"] in {r.value for r in BatchReason}
    assert announcement.read_results_csv(report_bytes(deps, batch_id)["csv"]) == []


def test_worker_killed_after_finish_batch_before_announcing_is_announced_once_by_the_redelivery(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the worker of the last file dies right after finish_batch (its first announce call raises)
    batch_id = mixed_batch(deps, ledger)
    msgs = receive_all(deps)
    process_all(deps, msgs[:-1])
    real_claim = ledger.claim_announcement
    monkeypatch.setattr(ledger, "claim_announcement", _raising_once(real_claim))
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs[-1:])
    batch = ledger.get_batch(batch_id)
    assert batch is not None and batch.status == "COMPLETED" and batch.announced_at is None
    assert events_of(deps).of(batch_id) == []
    # WHEN SQS redelivers that message (twice)
    process_all(deps, msgs[-1:], times=2)
    # THEN the batch is announced once: one event, the report equal to the ledger, announced_at set
    assert len(events_of(deps).of(batch_id)) == 1
    rows = ledger_rows(deps, batch_id)
    assert announcement.read_results_csv(report_bytes(deps, batch_id)["csv"]) == [
        announcement.csv_row(r) for r in rows
    ]
    batch = ledger.get_batch(batch_id)
    assert batch is not None and batch.announced_at is not None


def test_announcer_killed_after_its_claim_is_repaired_by_a_status_read_once_the_lease_is_over(
    deps: Deps, ledger: FakeLedger, clock: FakeClock
) -> None:
    # GIVEN the announcer dies between its claim and its event (PutEvents never returned)
    batch_id = mixed_batch(deps, ledger)
    msgs = receive_all(deps)
    events_of(deps).fail = 1
    with pytest.raises(DependencyUnavailable):
        process_all(deps, msgs)
    assert events_of(deps).of(batch_id) == []
    # WHEN status is read and the last message redelivered while the claim holds
    body = views.batch_status(deps, batch_id, caller=ADMIN)
    process_all(deps, msgs[-1:])
    # THEN nothing is announced yet (the claim may still be at work) and no report is linked
    assert body["status"] == "COMPLETED" and "report" not in body
    assert events_of(deps).of(batch_id) == []
    # WHEN the lease is over and status is read (twice)
    clock.advance(tally.ANNOUNCE_LEASE_SECONDS + 1)
    first = views.batch_status(deps, batch_id, caller=ADMIN)
    second = views.batch_status(deps, batch_id, caller=ADMIN)
    # THEN one event, and both answers link the report with short-lived presigned GETs
    assert len(events_of(deps).of(batch_id)) == 1
    for body in (first, second):
        report = body["report"]
        assert report["expiresIn"] == announcement.REPORT_URL_EXPIRES_SECONDS
        assert urlparse(report["csv"]).path.endswith(f"/reports/{batch_id}/results.csv")
        assert "Signature" in report["csv"] and "Signature" in report["summary"]


def test_a_batch_still_processing_links_no_report(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN a batch with unprocessed files WHEN status is read THEN there is no report and no event
    batch_id = mixed_batch(deps, ledger)
    assert "report" not in views.batch_status(deps, batch_id, caller=ADMIN)
    assert events_of(deps).of(batch_id) == []


def test_a_retried_batch_is_announced_again_when_it_completes_again(
    deps: Deps, ledger: FakeLedger, clock: FakeClock
) -> None:
    # GIVEN an announced batch with a failed file WHEN `pdfbatch retry` reopens it and it completes again
    batch_id = mixed_batch(deps, ledger)
    drain(deps)
    clock.advance(60)
    operations.retry_batch(deps, batch_id)
    drain(deps)
    # THEN each completion is announced once, told apart by completedAt
    put = events_of(deps).of(batch_id)
    assert len(put) == 2
    assert put[0][2]["completedAt"] < put[1][2]["completedAt"]


_email_like = st.builds(
    lambda local, domain: f"{local}@{domain}.example",
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-", min_size=3, max_size=20),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=3, max_size=12),
)


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(names=st.lists(_email_like, min_size=1, max_size=6, unique=True))
def test_the_event_names_no_entry_and_no_address(deps: Deps, ledger: FakeLedger, names: list[str]) -> None:
    # GIVEN a batch whose entries are named by email addresses, linked to users with those addresses
    batch_id = tally_batch(deps, ledger, names)
    # WHEN it completes
    tally.write_summary(deps, batch_id, BatchStatus.COMPLETED, None)
    # THEN its event holds none of them, nor any '@'
    (event,) = events_of(deps).of(batch_id)
    text = json.dumps(event)
    assert "@" not in text
    assert not any(n in text or f"{n}.pdf" in text for n in names)
    assert set(event[2]) == {
        "batchId",
        "status",
        "reason",
        "totalFiles",
        "counts",
        "reasons",
        "completedAt",
        "report",
    }


def tally_batch(deps: Deps, ledger: FakeLedger, names: list[str]) -> str:
    """A batch in the ledger whose entries are ``names`` (.pdf), each linked to a user of that address."""
    from pdfbatch.services import batches

    batch_id = batches.new_batch_id()
    ledger.create_batch(batch_id, BUCKET, f"uploads/{batch_id}.zip", "api", "PROCESSING")
    ledger.start_batch(batch_id, len(names), 0)
    ledger.add_entries(batch_id, [NewEntry(i, f"{n}.pdf", "pdf", 1) for i, n in enumerate(names)])
    for i, n in enumerate(names):
        user = ledger.add_user(n)
        ledger.record(
            batch_id, i, FileResult("linked", "matched", user_id=user, final_key=f"pdfs/{user}/x.pdf")
        )
    return batch_id


def _raising_once(target: Any) -> Any:
    calls: list[int] = []

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise DependencyUnavailable("mysql", "killed")
        return target(*args, **kwargs)

    return wrapper


# --- the EventBridge adapter, against moto ---------------------------------------------------------


def test_the_adapter_puts_one_entry_on_the_default_bus_and_moto_accepts_it(moto_aws: None) -> None:
    # GIVEN EventBridge (moto; a rule to an SQS queue is proven on LocalStack, tests/e2e/test_announcement.py)
    client = boto3.client("events", region_name="us-east-1")
    sent: list[dict[str, Any]] = []

    class Recording:
        def put_events(self, Entries: Any) -> Any:
            sent.extend(Entries)
            return client.put_events(Entries=Entries)

    # WHEN the adapter puts one event
    EventBridgeEvents(Recording()).put_event(
        "pdfbatch", "Batch Completed", {"batchId": "c" * 32, "counts": {}}
    )
    # THEN one entry: source, detail-type, the JSON detail, on the default bus, and it was accepted
    assert sent == [
        {
            "Source": "pdfbatch",
            "DetailType": "Batch Completed",
            "Detail": json.dumps({"batchId": "c" * 32, "counts": {}}, sort_keys=True),
            "EventBusName": "default",
        }
    ]


def test_a_refused_entry_raises_dependency_unavailable() -> None:
    # GIVEN an EventBridge that answers 200 with the entry refused WHEN the adapter puts THEN it raises
    class Refusing:
        def put_events(self, Entries: Any) -> dict[str, Any]:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "InternalFailure"}]}

    with pytest.raises(DependencyUnavailable):
        EventBridgeEvents(Refusing()).put_event("pdfbatch", "Batch Completed", {})


# --- pdfbatch report --download -------------------------------------------------------------------


def test_report_download_saves_both_files_as_written(
    deps: Deps, ledger: FakeLedger, tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    from pdfbatch.cli import operator
    from pdfbatch.cli.parser import build_parser

    # GIVEN a completed batch, and the CLI reaching this deps
    batch_id = mixed_batch(deps, ledger)
    drain(deps)
    monkeypatch.setattr(operator, "ops_deps", lambda: (deps, {}))
    # WHEN `pdfbatch report BATCH --download DIR` runs
    args = build_parser().parse_args(["report", batch_id, "--download", str(tmp_path)])
    code = args.func(args)
    # THEN DIR/BATCH holds results.csv and summary.json, byte for byte the report
    assert code == 0
    saved = {p.name: p.read_bytes() for p in (tmp_path / batch_id).iterdir()}
    written = report_bytes(deps, batch_id)
    assert saved == {"results.csv": written["csv"], "summary.json": written["summary"]}
    assert json.loads(capsys.readouterr().out)["status"] == "COMPLETED"


def test_report_download_of_a_batch_still_running_is_a_usage_error(
    deps: Deps, ledger: FakeLedger, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pdfbatch.cli import operator
    from pdfbatch.cli.common import CliError
    from pdfbatch.cli.parser import build_parser

    batch_id = mixed_batch(deps, ledger)
    monkeypatch.setattr(operator, "ops_deps", lambda: (deps, {}))
    args = build_parser().parse_args(["report", batch_id, "--download", str(tmp_path)])
    with pytest.raises(CliError):
        args.func(args)
    assert not (tmp_path / batch_id).exists()
