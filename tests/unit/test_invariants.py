"""The invariant checker (pdfbatch.invariants) over the fakes and moto: a clean run holds every
invariant, and each invariant, broken on purpose, is reported (a checker that cannot fail proves nothing).
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeLedger, FakeProgress
from fixtures import pdfs
from fixtures.pipeline import BUCKET, drain, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement
from pdfbatch.invariants import ExpectedUpload, Oracle, Report, S3Keys, Sources, check
from pdfbatch.model import staging_key
from pdfbatch.services import staging
from pdfbatch.services.deps import Deps

resume = functools.cache(pdfs.resume_pdf)
KEY = "uploads/invariants.zip"


@dataclass
class Run:
    """A finished batch and what its input should have produced."""

    batch_id: str
    users: dict[str, str]  # name -> user id
    oracle: Oracle
    index: dict[str, int]  # entry name -> index


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_batch(deps: Deps, *, leave_linked_copies: bool = False) -> Run:
    """Ada and Bob are linked, Carol already has a PDF, a stranger matches no one, a text file is ignored."""
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    users = {
        "ada": ledger.add_user("ada@example.com"),
        "bob": ledger.add_user("bob@example.com"),
        "carol": ledger.add_user("carol@example.com", pdf_url="s3://legacy/carol.pdf"),
    }
    entries = [
        ("a.pdf", resume("Ada", "ada@example.com")),
        ("b.pdf", resume("Bob", "bob@example.com")),
        ("c.pdf", resume("Carol", "carol@example.com")),
        ("s.pdf", resume("Stranger", "stranger@nowhere.example")),
        ("notes.txt", b"not a pdf"),
    ]
    report = staging.stage_zip(deps, upload(deps, make_zip(entries), key=KEY))
    drain(deps)
    if deps.callbacks is not None:  # its callback: one attempt timed out (recorded), the next delivered
        started = deps.clock()
        deps.callbacks.begin_attempt(report.batch_id, "d" * 32, 1, "first", started)
        deps.callbacks.finish_attempt("d" * 32, 1, None, "timeout", 3000)
        deps.callbacks.begin_attempt(report.batch_id, "d" * 32, 2, "first", started + 30)
        deps.callbacks.finish_attempt("d" * 32, 2, 200, None, 12)
    if leave_linked_copies:
        put_back_linked_copies(deps, report.batch_id)
    owners = {
        sha(entries[0][1]): users["ada"],
        sha(entries[1][1]): users["bob"],
        sha(entries[2][1]): users["carol"],
        sha(entries[3][1]): None,
    }
    names = [(n, sha(d) if n.endswith(".pdf") else None) for n, d in entries]
    oracle = Oracle(owners, [ExpectedUpload(KEY, tuple(names))])
    index = {row.name: row.index for row in ledger.list_files(report.batch_id, -1, 100)}
    return Run(report.batch_id, users, oracle, index)


def put_back_linked_copies(deps: Deps, batch_id: str) -> None:
    """Ada's and Bob's staged copies, as if the pipeline's delete after their link had failed."""
    for index in (0, 1):
        deps.store.put_bytes(BUCKET, staging_key(batch_id, index), b"%PDF-1.4 copy", "application/pdf")


def keys(deps: Deps, prefix: str) -> list[str]:
    return S3Keys(deps.store.client).list_keys(BUCKET, prefix)  # type: ignore[attr-defined]


PERIOD = 60.0  # the settle schedule's (SettleSchedule's default)


def verify(deps: Deps, run: Run, oracle: Oracle | None = None) -> Report:
    sources = Sources.from_deps(deps, S3Keys(deps.store.client), own_uploads=True, settle_period=PERIOD)  # type: ignore[attr-defined]
    return check(sources, [run.batch_id], oracle if oracle is not None else run.oracle)


def broken_only(report: Report, name: str) -> None:
    """``name`` is the one broken invariant, and it says what and where."""
    assert report.broken() == [name], report.lines()
    assert report.result(name).examples, report.lines()
    assert not report.ok


# --- a clean run --------------------------------------------------------------------------------------


def test_a_clean_run_holds_every_invariant(deps: Deps) -> None:
    # GIVEN a batch processed to the end, its staged copies removed
    run = run_batch(deps)
    # WHEN it is checked with the oracle of its input
    report = verify(deps, run)
    # THEN every invariant held, and each looked at something
    assert report.ok, report.lines()
    assert all(r.held is True for r in report.results), report.lines()
    assert all(r.checked > 0 for r in report.results), report.lines()


def test_invariants_that_need_an_oracle_are_not_checked_without_one(deps: Deps) -> None:
    run = run_batch(deps)
    report = verify(deps, run, Oracle())
    assert report.ok
    assert report.result("links_match_oracle").held is None
    assert report.result("uploads_accounted").held is None


def test_the_report_names_ids_and_hashes_never_entry_names_or_addresses(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a run where every invariant the fakes can break is broken
    run = run_batch(deps, leave_linked_copies=True)
    ledger.users[run.users["ada"]] = replace(ledger.users[run.users["ada"]], pdf_url="s3://elsewhere/x.pdf")
    ledger.batches[run.batch_id] = replace(ledger.batches[run.batch_id], total_files=99)
    owners = dict.fromkeys(run.oracle.owners, run.users["bob"])
    report = verify(
        deps, run, Oracle(owners, [*run.oracle.uploads, ExpectedUpload("uploads/Mr Smith.zip", ())])
    )
    # THEN the JSON report holds neither
    text = json.dumps(report.as_dict())
    assert len(report.broken()) >= 5, report.lines()
    for secret in ("ada@", "bob@", "carol@", "a.pdf", "notes.txt", "Mr Smith", "Ada"):
        assert secret not in text


# --- each invariant, broken on purpose -------------------------------------------------------------------


def test_a_batch_left_processing_is_not_final_and_its_entries_have_no_outcome(deps: Deps) -> None:
    # GIVEN a ZIP unpacked but whose messages nobody processed
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", resume("Ada", "ada@example.com"))])))
    # WHEN it is checked
    got = check(Sources.from_deps(deps, S3Keys(deps.store.client)), [report.batch_id])  # type: ignore[attr-defined]
    # THEN it is not final, and its entry has no outcome
    assert set(got.broken()) == {"batches_final", "one_outcome"}, got.lines()
    assert got.result("batches_final").examples[0]["status"] == "PROCESSING"


def test_a_reason_belonging_to_another_outcome_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    key = (run.batch_id, run.index["s.pdf"])
    ledger.files[key] = replace(ledger.files[key], reason="encrypted")  # skipped_no_match/encrypted
    report = verify(deps, run)
    assert "one_outcome" in report.broken()
    assert report.result("one_outcome").examples[0]["reason"] == "encrypted"


def test_an_entry_that_is_not_a_pdf_but_counted_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    key = (run.batch_id, run.index["notes.txt"])
    ledger.files[key] = replace(ledger.files[key], outcome="failed", reason="malformed_pdf")
    assert "one_outcome" in verify(deps, run).broken()


def test_a_pending_entry_in_a_completed_batch_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    key = (run.batch_id, run.index["s.pdf"])
    ledger.files[key] = replace(ledger.files[key], outcome=None, reason=None)
    report = verify(deps, run)
    assert "one_outcome" in report.broken()
    assert report.result("one_outcome").examples[0]["problem"] == "no outcome"


def test_entries_left_open_by_a_batch_failed_as_a_whole_are_noted_not_broken(
    deps: Deps, ledger: FakeLedger
) -> None:
    run = run_batch(deps)
    key = (run.batch_id, run.index["s.pdf"])
    ledger.files[key] = replace(ledger.files[key], outcome=None, reason=None)
    counts = ledger.outcome_counts(run.batch_id)
    ledger.batches[run.batch_id] = replace(
        ledger.batches[run.batch_id], status="FAILED", reason="unzip_failed", counts=counts
    )
    deps.progress.expire(run.batch_id)  # type: ignore[attr-defined]
    report = verify(deps, run)
    assert report.result("one_outcome").held is True, report.lines()
    assert "1 entries without an outcome" in report.result("one_outcome").note


def test_totals_that_disagree_with_the_entries_are_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    ledger.batches[run.batch_id] = replace(ledger.batches[run.batch_id], total_files=5)
    report = verify(deps, run)
    assert "totals_match_entries" in report.broken()
    assert report.result("totals_match_entries").examples[0]["pdfEntries"] == 4


def test_live_counters_off_by_one_are_reported(deps: Deps, progress: FakeProgress) -> None:
    run = run_batch(deps)
    progress.hashes[run.batch_id]["linked"] = str(int(progress.hashes[run.batch_id]["linked"]) + 1)
    report = verify(deps, run)
    broken_only(report, "counters_match_ledger")
    assert report.result("counters_match_ledger").examples[0]["ledgerVsLive"] == {"linked": [2, 3]}


def test_a_summary_that_disagrees_with_the_ledger_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    batch = ledger.batches[run.batch_id]
    ledger.batches[run.batch_id] = replace(batch, counts={**batch.counts, "failed": 1})
    report = verify(deps, run)
    # (the summary.json written at completion no longer equals the ledger's summary either)
    assert report.broken() == ["counters_match_ledger", "reports_match_ledger"], report.lines()
    assert report.result("counters_match_ledger").examples[0]["where"] == "summary"
    assert report.result("reports_match_ledger").examples[0]["fields"] == ["counts"]


def test_a_user_linked_by_two_rows_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    ada = ledger.files[(run.batch_id, run.index["a.pdf"])]
    key = (run.batch_id, run.index["s.pdf"])
    ledger.files[key] = replace(
        ledger.files[key], outcome="linked", reason="matched", user_id=ada.user_id, final_key=ada.final_key
    )
    report = verify(deps, run)
    assert "users_linked_once" in report.broken()
    assert report.result("users_linked_once").examples[0]["problem"] == "linked by several rows"


def test_a_user_pointing_at_another_object_than_their_linked_row_is_reported(
    deps: Deps, ledger: FakeLedger
) -> None:
    run = run_batch(deps)
    ledger.users[run.users["bob"]] = replace(
        ledger.users[run.users["bob"]], pdf_url=f"s3://{BUCKET}/pdfs/x.pdf"
    )
    report = verify(deps, run)
    broken_only(report, "users_linked_once")
    assert report.result("users_linked_once").examples[0]["problem"] == "user points elsewhere"


def test_a_user_linked_into_the_bucket_with_no_linked_row_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    # a user the oracle knows of got a link into the bucket that no ledger row made
    dave = ledger.add_user("dave@example.com", pdf_url=f"s3://{BUCKET}/pdfs/9/abc.pdf")
    report = verify(deps, run, Oracle({**run.oracle.owners, "ff" * 32: dave}, run.oracle.uploads))
    broken_only(report, "users_linked_once")
    assert report.result("users_linked_once").examples[0] == {
        "userId": dave,
        "problem": "linked with no linked row in these batches",
    }


def test_already_linked_naming_a_user_who_is_not_linked_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    ledger.users[run.users["carol"]] = replace(ledger.users[run.users["carol"]], pdf_url=None)
    report = verify(deps, run)
    broken_only(report, "users_linked_once")
    assert report.result("users_linked_once").examples[0]["problem"] == "already_linked, user unlinked"


def test_a_deleted_final_object_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    final_key = ledger.files[(run.batch_id, run.index["a.pdf"])].final_key
    assert final_key
    deps.store.delete(BUCKET, final_key)
    report = verify(deps, run)
    broken_only(report, "final_objects_exist")
    assert report.result("final_objects_exist").examples[0]["problem"] == "missing"


def test_a_final_object_holding_other_content_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    run = run_batch(deps)
    final_key = ledger.files[(run.batch_id, run.index["a.pdf"])].final_key
    assert final_key
    deps.store.put_bytes(BUCKET, final_key, resume("Bob", "bob@example.com"), "application/pdf")
    report = verify(deps, run)
    broken_only(report, "final_objects_exist")
    assert report.result("final_objects_exist").examples[0]["problem"] == "other content"


def test_a_link_to_a_user_the_pdf_does_not_name_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    owners = dict(run.oracle.owners)
    ada_pdf = sha(resume("Ada", "ada@example.com"))
    owners[ada_pdf] = run.users["bob"]  # the oracle says this content names Bob; Ada was linked to it
    report = verify(deps, run, Oracle(owners, run.oracle.uploads))
    broken_only(report, "links_match_oracle")
    assert report.result("links_match_oracle").examples[0]["problem"] == "wrong user"


def test_a_link_to_content_no_upload_held_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    owners = {k: v for k, v in run.oracle.owners.items() if k != sha(resume("Ada", "ada@example.com"))}
    report = verify(deps, run, Oracle(owners, run.oracle.uploads))
    broken_only(report, "links_match_oracle")


def test_a_pdf_naming_a_user_recorded_as_no_match_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    owners = {**run.oracle.owners, sha(resume("Stranger", "stranger@nowhere.example")): run.users["bob"]}
    report = verify(deps, run, Oracle(owners, run.oracle.uploads))
    broken_only(report, "links_match_oracle")
    assert report.result("links_match_oracle").examples[0]["problem"] == "names a user, recorded no match"


def test_staged_copies_of_linked_files_left_after_the_batch_are_reported(deps: Deps) -> None:
    # GIVEN a finished batch: the pipeline deleted its linked files' staged copies, kept the others for
    # `pdfbatch retry`
    run = run_batch(deps)
    left = keys(deps, f"staging/{run.batch_id}/")
    assert sorted(left) == [staging_key(run.batch_id, 2), staging_key(run.batch_id, 3)]
    assert verify(deps, run).result("no_staged_leftovers").held is True
    # WHEN the linked files' copies are there too (the delete after the link failed)
    put_back_linked_copies(deps, run.batch_id)
    report = verify(deps, run)
    # THEN each is a breach, and the note says which outcomes they belonged to
    broken_only(report, "no_staged_leftovers")
    result = report.result("no_staged_leftovers")
    assert result.broken == 2
    assert result.note == "staged objects left by entry outcome: linked 2"


def test_a_final_batch_never_announced_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN a completed batch whose announcer died before marking it (its report is written)
    run = run_batch(deps)
    ledger.batches[run.batch_id] = replace(ledger.batches[run.batch_id], announced_at=None)
    # WHEN it is checked
    report = verify(deps, run)
    # THEN it is reported as not announced
    broken_only(report, "reports_match_ledger")
    assert report.result("reports_match_ledger").examples[0]["problem"] == "final but not announced"


def test_a_missing_report_file_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    deps.store.delete(BUCKET, announcement.report_keys(run.batch_id)["csv"])
    report = verify(deps, run)
    broken_only(report, "reports_match_ledger")
    assert report.result("reports_match_ledger").examples[0]["missing"] == ["csv"]


def test_a_ledger_row_changed_after_the_report_was_written_is_reported_by_index_and_column(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a completed batch, then one of its rows touched after the report was written (as a late
    # duplicate delivery counting an attempt on a recorded row once did)
    run = run_batch(deps)
    index = run.index["s.pdf"]
    row = ledger.files[(run.batch_id, index)]
    ledger.files[(run.batch_id, index)] = replace(row, attempts=row.attempts + 1)
    # WHEN it is checked
    report = verify(deps, run)
    # THEN the entry and the column are named, never a value
    broken_only(report, "reports_match_ledger")
    example = report.result("reports_match_ledger").examples[0]
    assert (example["index"], example["columns"]) == (str(index), ["attempts"])


def test_an_accepted_upload_with_no_batch_of_its_own_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    # the oracle knows of a second upload to the same key (a reused link): no batch holds it
    second = ExpectedUpload(KEY, (("z.pdf", sha(b"%PDF-other")),))
    report = verify(deps, run, Oracle(run.oracle.owners, [*run.oracle.uploads, second]))
    broken_only(report, "uploads_accounted")
    example = report.result("uploads_accounted").examples[0]
    assert (example["upload"], example["problem"]) == ("2 of 2", "no batch holds this upload")


@pytest.mark.parametrize(
    "name", ["uploads/Batch.Zip", "uploads/batch", "uploads/batch.zip ", "uploads/x.txt"]
)
def test_an_object_under_uploads_with_no_batch_is_reported_whatever_its_name(deps: Deps, name: str) -> None:
    run = run_batch(deps)
    # GIVEN an object under uploads/ whose notification never made a batch (issue 24: a name that the
    # notification rules did not match vanished without a record)
    deps.store.client.put_object(Bucket=deps.settings.bucket, Key=name, Body=b"PK\x05\x06" + b"\0" * 18)  # type: ignore[attr-defined]
    # WHEN the run is checked
    report = verify(deps, run)
    # THEN the drop is the one broken rule, named by a hash of its key only
    broken_only(report, "drops_recorded")
    (example,) = report.result("drops_recorded").examples
    assert example == {"keyHash": hashlib.sha256(name.encode()).hexdigest()[:12], "problem": "no batch"}


def test_every_object_under_uploads_with_its_batch_holds_whatever_its_name_or_bytes(deps: Deps) -> None:
    # GIVEN a run, and drops the notification rules once missed, each notified: a ZIP named .Zip, one
    # with no suffix, one with a trailing space, and a text file (issue 24, case 5)
    run = run_batch(deps)
    zipped = make_zip([("a.pdf", resume("Ada", "ada@example.com"))])
    drops = {
        "uploads/Batch.Zip": zipped,
        "uploads/batch": zipped,
        "uploads/batch.zip ": zipped,
        "uploads/x.txt": b"not a zip",
    }
    made = [staging.stage_zip(deps, upload(deps, data, key=key)).batch_id for key, data in drops.items()]
    drain(deps)
    # WHEN the run is checked
    report = verify(deps, run)
    # THEN every key under uploads/ was looked at, the first run's too, and each has its batch
    result = report.result("drops_recorded")
    assert result.held is True and result.checked == 5, report.lines()
    # AND the text file's batch is FAILED with a reason that says what it is
    assert deps.ledger.get_batch(made[-1]).reason == "not_a_zip"  # type: ignore[union-attr]


def test_a_batch_holding_another_uploads_contents_is_reported(deps: Deps) -> None:
    run = run_batch(deps)
    (only,) = run.oracle.uploads
    swapped = tuple((n, sha(b"other") if n == "b.pdf" else s) for n, s in only.entries)
    report = verify(deps, run, Oracle(run.oracle.owners, [ExpectedUpload(KEY, swapped)]))
    broken_only(report, "uploads_accounted")
    assert report.result("uploads_accounted").examples[0]["problem"] == "contents differ"


def test_an_upload_whose_batch_failed_as_a_whole_is_accounted_for(deps: Deps) -> None:
    # GIVEN a ZIP that is not a ZIP: its batch FAILED corrupt_zip, with no entries
    report = staging.stage_zip(deps, upload(deps, b"not a zip at all", key="uploads/broken.zip"))
    assert report.status == "FAILED"
    # WHEN it is checked against the upload the oracle knows of
    oracle = Oracle({}, [ExpectedUpload("uploads/broken.zip", ())])
    got = check(Sources.from_deps(deps, S3Keys(deps.store.client)), [report.batch_id], oracle)  # type: ignore[attr-defined]
    # THEN the loud failure accounts for it
    assert got.ok, got.lines()
    assert got.result("uploads_accounted").held is True


@pytest.mark.parametrize("owner", ["7", "0b6d8c1e-uuid", None])
def test_an_oracle_survives_its_json_file(owner: str | None, tmp_path: Path) -> None:
    oracle = Oracle(
        {"ab" * 32: owner}, [ExpectedUpload("uploads/x.zip", (("a.pdf", "cd" * 32), ("r.txt", None)))]
    )
    path = tmp_path / "oracle.json"
    path.write_text(json.dumps(oracle.as_json()))
    assert Oracle.load(path) == oracle


def test_a_drop_owned_by_a_tenant_its_key_does_not_name_is_reported(deps: Deps, ledger: FakeLedger) -> None:
    # GIVEN a clean run of a ZIP dropped straight into uploads/ (the admin's)
    run = run_batch(deps)
    assert verify(deps, run).result("owners_match_origin").held is True
    # WHEN the ledger says a tenant owns it
    ledger.batches[run.batch_id] = replace(ledger.batches[run.batch_id], tenant="acme")
    # THEN the owner does not fit the key
    broken_only(verify(deps, run), "owners_match_origin")
    # AND an owner that is no tenant name at all is reported too
    ledger.batches[run.batch_id] = replace(ledger.batches[run.batch_id], tenant="../x")
    broken_only(verify(deps, run), "owners_match_origin")


def test_a_later_upload_owned_by_someone_else_than_its_links_batch_is_reported(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN acme's batch, and a later upload through its link (both acme's: the rule holds)
    first = ledger.create_batch("a" * 32, BUCKET, f"uploads/{'a' * 32}.zip", "api", "COMPLETED", "acme")
    later = ledger.create_batch("b" * 32, BUCKET, first.object_key, "s3", "COMPLETED", "acme")
    sources = Sources.from_deps(deps, S3Keys(deps.store.client))  # type: ignore[attr-defined]
    assert check(sources, [later.batch_id]).result("owners_match_origin").held is True
    # WHEN the later upload is recorded as the admin's
    ledger.batches[later.batch_id] = replace(later, tenant=None)
    # THEN it is reported, naming the link's batch
    result = check(sources, [later.batch_id]).result("owners_match_origin")
    assert result.held is False and result.examples[0]["firstBatch"] == first.batch_id


def test_an_evidence_png_gone_from_under_its_row_is_reported(deps: Deps) -> None:
    # GIVEN a finished batch whose linked files kept their evidence
    from pdfbatch import evidence

    run = run_batch(deps)
    kept = keys(deps, f"reports/{run.batch_id}/evidence/")
    assert kept and verify(deps, run).result("evidence_stored").held is True
    # WHEN one of them is deleted
    deps.store.delete(BUCKET, kept[0])
    report = verify(deps, run)
    # THEN its row is a breach, by index and key
    broken_only(report, "evidence_stored")
    example = report.result("evidence_stored").examples[0]
    assert example["key"] == kept[0] == evidence.key(run.batch_id, example["index"])


def test_a_callback_attempt_that_never_recorded_its_outcome_is_reported(deps: Deps) -> None:
    # GIVEN a batch whose callback's third attempt began and recorded nothing (its deliverer died)
    run = run_batch(deps)
    log = deps.callbacks
    assert log is not None
    clock: Any = deps.clock
    log.begin_attempt(run.batch_id, "d" * 32, 3, "first", clock())
    # WHEN it is checked at once THEN that attempt may still be running: noted, not broken
    report = verify(deps, run)
    assert report.ok and "maybe running: 1" in report.result("callbacks_recorded").note
    # WHEN it is checked after any attempt would have ended THEN it is reported, by batch and attempt
    clock.advance(61)
    report = verify(deps, run)
    broken_only(report, "callbacks_recorded")
    assert report.result("callbacks_recorded").examples == [
        {"batchId": run.batch_id, "deliveryId": "d" * 32, "attempt": 3, "problem": "no outcome"}
    ]


def test_without_a_callback_log_callbacks_recorded_is_not_checked(deps: Deps) -> None:
    run = run_batch(deps)
    report = verify(replace(deps, callbacks=None), run)
    assert report.ok and report.result("callbacks_recorded").held is None


def test_a_due_batch_no_settle_run_reached_for_two_periods_is_reported(deps: Deps, clock: Any) -> None:
    from pdfbatch.services import batches, settle

    # GIVEN a finished run, and a POST /batches batch nobody uploaded to
    run = run_batch(deps)
    pending = batches.create_batch(deps)["batchId"]
    sources = Sources.from_deps(deps, S3Keys(deps.store.client), settle_period=PERIOD)  # type: ignore[attr-defined]
    ids = [run.batch_id, pending]
    # WHEN its link and grace are over (it is due now), and less than two periods pass without a run
    due = deps.ledger.get_batch(pending).settle_at  # type: ignore[union-attr]
    clock.advance(due - clock() + 2 * PERIOD - 1)
    # THEN it is not overdue yet: settle has two periods to reach it
    assert check(sources, ids).result("settled_in_time").held is True
    # WHEN two periods have passed and no run reached it
    clock.advance(2)
    report = check(sources, ids)
    # THEN it is reported, by id and how long it has been due
    result = report.result("settled_in_time")
    assert result.held is False and result.checked == 2, report.lines()
    assert result.examples == [
        {
            "batchId": pending,
            "status": "PENDING",
            "dueSecondsAgo": 121,
            "problem": "due and not settled within two schedule periods",
        }
    ]
    # WHEN a settle run comes THEN the batch ends upload_expired, is announced, and the rule holds
    assert settle.settle(deps).expired == [pending]
    report = check(sources, ids)
    assert report.result("settled_in_time").held is True, report.lines()
    assert report.ok, report.lines()


def test_a_running_batch_settle_puts_off_is_not_overdue(deps: Deps, clock: Any) -> None:
    from pdfbatch.services import settle

    # GIVEN a batch unpacked whose files nobody processed yet: due at once, and settle can do nothing
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", resume("Ada", "ada@example.com"))])))
    sources = Sources.from_deps(deps, S3Keys(deps.store.client), settle_period=PERIOD)  # type: ignore[attr-defined]
    # WHEN every period a settle run looks at it, for ten periods
    for _ in range(10):
        clock.advance(PERIOD)
        assert settle.settle(deps).checked == 1
    # THEN it is still running, and never overdue: each run put it off to the next
    got = check(sources, [report.batch_id])
    assert got.result("settled_in_time").held is True, got.lines()
    # WHEN the runs stop (a dead schedule) for two periods and a second THEN it is overdue
    clock.advance(3 * PERIOD + 1)
    assert check(sources, [report.batch_id]).result("settled_in_time").held is False


def test_without_a_settle_period_settled_in_time_is_not_checked(deps: Deps) -> None:
    run = run_batch(deps)
    report = check(Sources.from_deps(deps, S3Keys(deps.store.client)), [run.batch_id], run.oracle)  # type: ignore[attr-defined]
    assert report.result("settled_in_time").held is None
