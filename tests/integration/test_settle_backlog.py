"""Settle against the real MariaDB: no backlog of empty batches starves a due batch, and a tenant's
outstanding empty batches are limited (issue 24, item 3)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from fakes import FakeEvents
from fixtures import pdfs
from fixtures.pipeline import process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.errors import DependencyUnavailable, TooManyRequests
from pdfbatch.services import batches, settle, staging, tally
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import Caller

pytestmark = pytest.mark.integration


def test_505_empty_batches_do_not_keep_settle_from_a_batch_whose_announcer_died(deps: Deps, db: Any) -> None:
    # GIVEN 505 POST /batches nobody uploads to (one tenant's key, 22 s of it in issue 24)...
    events = FakeEvents()
    deps = replace(deps, events=events, settings=replace(deps.settings, max_pending_batches=0))
    empty = [batches.create_batch(deps)["batchId"] for _ in range(505)]
    # ...and then a real batch whose announcer died: PutEvents failed after its claim, and the message
    # redelivered found the claim held (no event, no announcement), its claim now past the lease
    data = make_zip([("a.pdf", pdfs.text_pdf(["page a"])), ("b.pdf", pdfs.text_pdf(["page b"]))])
    report = staging.stage_zip(deps, upload(deps, data, key="uploads/real.zip"))
    messages = receive_all(deps)
    process_all(deps, messages[:-1])
    events.fail = 1
    with pytest.raises(DependencyUnavailable):
        process_all(deps, messages[-1:])
    process_all(deps, messages[-1:])
    with db.cursor() as cur:
        cur.execute(
            "UPDATE pdfbatch_batches SET announce_started_at = announce_started_at - %s WHERE batch_id = %s",
            (tally.ANNOUNCE_LEASE_SECONDS + 80, report.batch_id),
        )
    real = deps.ledger.get_batch(report.batch_id)
    assert real is not None and real.status == "COMPLETED" and real.announced_at is None
    assert not events.of(report.batch_id)
    # WHEN one settle run comes
    settled = settle.settle(deps)
    # THEN the real batch is announced in it (the old settle read the 500 oldest unannounced batches:
    # all empty, none due, the real one never reached), and the empty ones were not even read
    assert settled.announced == [report.batch_id]
    assert len(events.of(report.batch_id)) == 1
    assert settled.checked == 1
    row = deps.ledger.get_batch(report.batch_id)
    assert row is not None and row.announced_at is not None
    # and the empty batches still wait for their uploads
    assert all(deps.ledger.get_batch(b).status == "PENDING" for b in empty[:3] + empty[-3:])  # type: ignore[union-attr]


def test_settle_reads_every_due_batch_past_a_page_with_its_cursor(deps: Deps, db: Any) -> None:
    # GIVEN more due batches than one page: created long ago, their links over, nobody uploaded
    deps = replace(deps, events=FakeEvents(), settings=replace(deps.settings, max_pending_batches=0))
    made = [batches.create_batch(deps)["batchId"] for _ in range(25)]
    with db.cursor() as cur:
        cur.execute(
            "UPDATE pdfbatch_batches SET created_at = created_at - 86400, settle_at = settle_at - 86400"
        )
    # WHEN one run reads them ten at a time
    settled = settle.settle(deps, page=10)
    # THEN every one of them is ended in that one run
    assert sorted(settled.expired) == sorted(made)
    assert {deps.ledger.get_batch(b).status for b in made} == {"FAILED"}  # type: ignore[union-attr]


def test_a_batch_settle_cannot_settle_yet_goes_behind_the_others(deps: Deps, db: Any) -> None:
    # GIVEN a running batch (one file not done) and, due after it, an expired empty batch
    deps = replace(deps, events=FakeEvents(), settings=replace(deps.settings, max_pending_batches=0))
    data = make_zip([("a.pdf", pdfs.text_pdf(["page a"]))])
    running = staging.stage_zip(deps, upload(deps, data, key="uploads/running.zip")).batch_id
    receive_all(deps)  # (its message is never processed)
    empty = batches.create_batch(deps)["batchId"]
    with db.cursor() as cur:
        cur.execute(
            "UPDATE pdfbatch_batches SET created_at = created_at - 86400, settle_at = settle_at - 86400"
        )
    # WHEN a run reads one batch per page
    settled = settle.settle(deps, page=1)
    # THEN it looked at both; the running one was put off by RECHECK_SECONDS, not left in front
    assert settled.checked == 2 and settled.expired == [empty]
    row = deps.ledger.get_batch(running)
    assert row is not None and row.settle_at is not None
    assert row.settle_at >= deps.clock() + settle.RECHECK_SECONDS - 5
    assert settle.settle(deps).checked == 0  # nothing due until then


def test_a_tenants_outstanding_empty_batches_are_limited_with_retry_after(deps: Deps, db: Any) -> None:
    # GIVEN a limit of 3 batches waiting for their upload
    deps = replace(deps, settings=replace(deps.settings, max_pending_batches=3))
    acme, other = Caller("acme"), Caller("other")
    for _ in range(3):
        batches.create_batch(deps, acme)
    # WHEN acme asks for a fourth
    with pytest.raises(TooManyRequests) as refused:
        batches.create_batch(deps, acme)
    # THEN it is refused until the oldest ends upload_expired (its link, grace and a settle run)
    s = deps.settings
    assert s.upload_url_expires_seconds + batches.UPLOAD_GRACE_SECONDS <= refused.value.retry_after
    assert refused.value.retry_after <= s.upload_url_expires_seconds + batches.UPLOAD_GRACE_SECONDS + 120
    # and another tenant (and the admin) are not held by acme's batches
    batches.create_batch(deps, other)
    batches.create_batch(deps)
    # and an upload to one of acme's batches frees a place
    with db.cursor() as cur:
        cur.execute(
            "UPDATE pdfbatch_batches SET status = 'PROCESSING' WHERE tenant = 'acme' "
            "ORDER BY created_at LIMIT 1"
        )
    batches.create_batch(deps, acme)
