"""`pdfbatch gc` and the orphan count of `pdfbatch report` (services/orphans.py), over the fakes and moto.

Final objects are never deleted on the hot path (tests/unit/test_uploads.py, case 2); a copy whose link
was lost stays until this sweep, which removes it only once nothing points at it and it is old enough.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from fakes import FakeLedger
from fixtures import pdfs
from fixtures.pipeline import BUCKET, receive_all, sweep_orphans, upload
from fixtures.reuse import email, resume
from fixtures.zips import zipfile_zip
from pdfbatch.errors import DependencyUnavailable, InvalidInput
from pdfbatch.model import FileTask, final_key
from pdfbatch.services import orphans, processing, staging
from pdfbatch.services.deps import Deps
from pdfbatch.services.report import batch_report


def objects(deps: Deps) -> list[str]:
    listed = deps.store.client.list_objects_v2(Bucket=BUCKET, Prefix="pdfs/")  # type: ignore[attr-defined]
    return sorted(o["Key"] for o in listed.get("Contents", []))


def put(deps: Deps, key: str, data: bytes = b"%PDF-1.4") -> None:
    deps.store.put_bytes(BUCKET, key, data, "application/pdf")


def batch_with_an_orphan(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str, str]:
    """Two résumés of Bob: v1's worker copies and dies before linking, v2 links Bob, v1 comes back
    (already linked). Returns (batch id, Bob's linked key, v1's copy)."""
    bob = ledger.add_user(email("bob"))
    v2_pdf = pdfs.resume_pdf("Bob", email("bob"), "second version")
    report = staging.stage_zip(
        deps, upload(deps, zipfile_zip([("v1.pdf", resume("bob")), ("v2.pdf", v2_pdf)]))
    )
    v1, v2 = (FileTask.from_message(m) for m in sorted(receive_all(deps), key=lambda m: m["index"]))
    real_link = ledger.link
    calls: list[int] = []

    def dies_once(*args: Any) -> bool:
        calls.append(1)
        if len(calls) == 1:
            raise DependencyUnavailable("mysql")
        return real_link(*args)

    monkeypatch.setattr(ledger, "link", dies_once)
    with pytest.raises(DependencyUnavailable):
        processing.process_file(deps, v1)
    processing.process_file(deps, v2)
    row = processing.process_file(deps, v1)
    assert row is not None and row.reason == "already_linked"
    linked = ledger.get_file(report.batch_id, v2.index)
    assert linked is not None and linked.final_key is not None
    return report.batch_id, linked.final_key, final_key(bob, row.sha256 or "")


def test_gc_lists_copies_nothing_points_at_and_deletes_them_only_when_told(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a batch that left a copy whose link was lost, beside the object Bob points at
    _, linked, orphan = batch_with_an_orphan(deps, ledger, monkeypatch)
    # WHEN gc runs a day later without --delete
    dry = sweep_orphans(deps, delete=False).as_dict()
    # THEN it lists that copy alone and deletes nothing
    assert (dry["dryRun"], dry["scanned"], dry["referenced"], dry["orphans"], dry["deleted"]) == (
        True,
        2,
        1,
        1,
        0,
    )
    assert dry["keys"] == [orphan] and dry["orphanBytes"] > 0
    assert objects(deps) == sorted([linked, orphan])
    # WHEN it runs with --delete THEN the copy is gone, Bob's object stays, and a second run finds nothing
    assert sweep_orphans(deps).deleted == 1
    assert objects(deps) == [linked]
    assert sweep_orphans(deps).as_dict()["orphans"] == 0


def test_gc_never_sweeps_a_copy_younger_than_the_grace(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an orphaned copy made just now
    _, linked, orphan = batch_with_an_orphan(deps, ledger, monkeypatch)
    # WHEN gc runs now with an hour's grace, deleting
    report = orphans.sweep(replace(deps, clock=time.time), older_than_seconds=3600, delete=True)
    # THEN nothing is judged, let alone deleted
    assert (report.young, report.orphans, report.deleted) == (2, [], 0)
    assert objects(deps) == sorted([linked, orphan])
    # AND a grace shorter than a copy-to-link could take is refused
    with pytest.raises(InvalidInput, match="at least"):
        orphans.sweep(deps, older_than_seconds=60)


def test_gc_keeps_what_a_user_points_at_without_a_ledger_entry_and_never_touches_other_keys(
    deps: Deps, ledger: FakeLedger
) -> None:
    # GIVEN a user pointing at an object no ledger entry names, an unreferenced object of theirs,
    # and an object under pdfs/ that pdfbatch would never have written
    user = ledger.add_user("carol@example.com")
    pointed, loose = f"pdfs/{user}/{'a' * 64}.pdf", f"pdfs/{user}/{'b' * 64}.pdf"
    ledger.users[user] = replace(ledger.users[user], pdf_url=deps.settings.pdf_url(pointed))
    for key in (pointed, loose, "pdfs/readme.txt"):
        put(deps, key)
    # WHEN gc runs with --delete
    report = sweep_orphans(deps)
    # THEN only the unreferenced object of pdfbatch's own shape is removed
    assert (report.referenced, report.foreign, [o.key for o in report.orphans]) == (1, 1, [loose])
    assert objects(deps) == sorted([pointed, "pdfs/readme.txt"])


def test_gc_removes_every_version_of_an_orphan_so_no_older_one_comes_back(deps: Deps) -> None:
    # GIVEN an orphaned key copied twice (a redelivery): two versions in the versioned bucket
    key = f"pdfs/7/{'c' * 64}.pdf"
    put(deps, key, b"%PDF-1.4 one")
    put(deps, key, b"%PDF-1.4 two")
    # WHEN gc deletes it
    assert sweep_orphans(deps).deleted == 1
    # THEN no version is left to become current again
    listed = deps.store.client.list_object_versions(Bucket=BUCKET, Prefix="pdfs/")  # type: ignore[attr-defined]
    assert listed.get("Versions", []) == [] and objects(deps) == []


def test_report_counts_a_batchs_orphaned_copies(
    deps: Deps, ledger: FakeLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a batch that left one copy whose link was lost
    batch_id, _, orphan = batch_with_an_orphan(deps, ledger, monkeypatch)
    # THEN the report counts it, and once gc removed it, counts none
    assert orphans.batch_orphans(deps, batch_id) == [orphan]
    assert batch_report(ledger, batch_id, orphans=len(orphans.batch_orphans(deps, batch_id)))["orphans"] == 1
    sweep_orphans(deps)
    assert orphans.batch_orphans(deps, batch_id) == []


@pytest.mark.parametrize(
    ("text", "seconds"), [("900", 900), ("90s", 90), ("45m", 2700), ("6h", 21600), ("2d", 172800)]
)
def test_older_than_takes_seconds_minutes_hours_or_days(text: str, seconds: int) -> None:
    assert orphans.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "1w", "-5m", "1.5h", "soon"])
def test_a_duration_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(InvalidInput):
        orphans.parse_duration(text)
