"""Issue 11, cases 1, 2 and 7 over the fakes and moto: a reused upload link, one shared final key, and
expiry versus a slow upload. The scenarios live in tests/fixtures/reuse.py; tests/integration/
test_uploads.py runs them over the real MariaDB and Redis.
"""

from __future__ import annotations

import io
import zipfile
from typing import Any

import pytest

from fakes import FakeLedger
from fixtures import reuse
from fixtures.apigw import Context, load_handler
from fixtures.events import s3_event
from fixtures.pipeline import drain, fake_deps, upload
from pdfbatch.services import batches, staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN


def world(deps: Deps) -> reuse.World:
    ledger, clock = deps.ledger, deps.clock
    assert isinstance(ledger, FakeLedger)
    return reuse.World(deps, ledger.add_user, clock.advance)  # type: ignore[attr-defined]


@pytest.fixture()
def unversioned(moto_aws: None) -> reuse.World:
    """Over a bucket without versioning: reads are pinned by the event's ETag (If-Match) instead."""
    return world(fake_deps("pdfbatch-unversioned", versioning=False))


# --- case 1: a reused presigned POST ---------------------------------------------------------------


def test_a_zip_posted_again_after_the_first_batch_finished_is_a_batch_of_its_own(deps: Deps) -> None:
    reuse.scenario_reused_after_the_first_batch_finished(world(deps))


def test_duplicate_notifications_of_either_upload_find_their_own_batch(deps: Deps) -> None:
    reuse.scenario_duplicates_of_either_upload(world(deps))


def test_a_zip_posted_again_while_the_first_unzip_is_retried_never_mixes_names_and_content(
    deps: Deps,
) -> None:
    reuse.scenario_reused_while_the_first_unzip_is_retried(world(deps))


def test_without_bucket_versions_a_zip_replaced_during_the_retry_fails_its_files_loudly(
    unversioned: reuse.World,
) -> None:
    reuse.scenario_unversioned_zip_replaced_during_the_retry(unversioned)


def test_without_bucket_versions_a_zip_replaced_before_unzip_read_it_fails_its_batch_zip_replaced(
    unversioned: reuse.World,
) -> None:
    reuse.scenario_unversioned_zip_replaced_before_it_was_read(unversioned)


def test_two_uploads_notified_with_one_sequencer_are_told_apart_by_their_versions(deps: Deps) -> None:
    # GIVEN two ZIPs posted with one link, notified with the same sequencer (LocalStack sends one
    # constant sequencer for every event) but each with its own version id
    created = batches.create_batch(deps)
    ups = [
        reuse.post_zip(deps, created["key"], reuse.zip_of([p]), "0055AED6DCD90281E5") for p in ("ann", "bo")
    ]
    assert ups[0].sequencer == ups[1].sequencer and ups[0].version_id != ups[1].version_id
    # WHEN each notification is resolved THEN each is its own batch, and each duplicate finds its own
    first, second = (batches.resolve_batch(deps, u)[0] for u in ups)
    assert first == created["batchId"] != second
    assert [batches.resolve_batch(deps, u)[0] for u in ups] == [first, second]


class Recording:
    """A boto3 S3 client that records the arguments of every read, then calls the real one."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.reads: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        real = getattr(self.client, name)
        if name not in ("get_object", "head_object"):
            return real

        def read(**kwargs: Any) -> Any:
            self.reads.append((name, kwargs))
            return real(**kwargs)

        return read


@pytest.mark.parametrize("versioned", [True, False], ids=["versioned", "unversioned"])
def test_every_read_of_an_upload_is_pinned_to_the_notified_version(moto_aws: None, versioned: bool) -> None:
    # GIVEN an upload whose notification has no size (so unzip asks for it with HEAD)
    deps = fake_deps("pdfbatch-pinned", versioning=versioned)
    up = upload(deps, reuse.zip_of(reuse.FIRST))
    up = batches.Upload(up.bucket, up.key, None, up.sequencer, up.version_id, up.etag)
    store: Any = deps.store
    store.client = Recording(store.client)
    # WHEN unzip reads it
    staging.stage_zip(deps, up)
    # THEN every GET and HEAD of the ZIP names its version, or (no versions) carries If-Match on its ETag
    reads = [(op, kw) for op, kw in store.client.reads if kw["Key"] == up.key]
    assert {op for op, _ in reads} == {"head_object", "get_object"}
    for op, kw in reads:
        if versioned:
            assert kw.get("VersionId") == up.version_id, op
        else:
            assert up.version_id is None and kw.get("IfMatch") == f'"{up.etag}"', op


# --- case 2: one shared final key ------------------------------------------------------------------


def test_a_delivery_that_loses_its_link_never_deletes_the_object_another_batch_links(deps: Deps) -> None:
    reuse.scenario_lost_link_keeps_the_object_another_batch_links(world(deps))


# --- case 7: expiry versus a slow upload -----------------------------------------------------------


def test_a_slow_upload_arriving_after_its_batch_expired_is_processed_under_the_same_id(deps: Deps) -> None:
    reuse.scenario_slow_upload_after_its_batch_expired(world(deps))


def test_a_batch_whose_upload_arrived_is_not_expired_while_its_unzip_is_retried(deps: Deps) -> None:
    reuse.scenario_claimed_batch_is_not_expired_while_its_unzip_is_retried(world(deps))


def test_the_unzip_handler_pins_each_event_to_its_version_and_a_second_post_is_its_own_batch(
    deps: Deps,
) -> None:
    # GIVEN a batch from POST /batches, and two ZIPs posted with its link, as S3 notifies them
    # (versionId and eTag in each record), both posted before unzip saw either
    w = world(deps)
    reuse.add_people(w.add_user, reuse.FIRST + reuse.SECOND)
    created = batches.create_batch(deps)
    ups = [
        reuse.post_zip(deps, created["key"], reuse.zip_of(people), seq)
        for people, seq in ((reuse.FIRST, "0A"), (reuse.SECOND, "0B"))
    ]
    unzip = load_handler("unzip")
    # WHEN the unzip function receives both events
    out = [
        unzip.handler(
            s3_event(u.bucket, u.key, u.size or 0, u.sequencer or "", u.version_id, u.etag), Context()
        )
        for u in ups
    ]
    drain(deps)
    # THEN each event is a batch of its own, read from its own version
    first, second = (o["batches"][0]["batchId"] for o in out)
    assert first == created["batchId"] != second
    assert reuse.people_of(list(reuse.rows_by_name(deps, first).values())) == list(reuse.FIRST)
    assert reuse.people_of(list(reuse.rows_by_name(deps, second).values())) == list(reuse.SECOND)
    assert views.batch_status(deps, first, caller=ADMIN)["laterUploads"] == [second]


@pytest.mark.parametrize("key", ["uploads/Batch.Zip", "uploads/batch", "uploads/batch.zip "])
def test_a_zip_dropped_under_any_name_is_a_batch_find_lists(deps: Deps, key: str) -> None:
    # GIVEN a ZIP of one résumé dropped with `aws s3 cp` under a name no suffix rule matched (issue 24)
    w = world(deps)
    reuse.add_people(w.add_user, reuse.FIRST)
    up = upload(deps, reuse.zip_of(reuse.FIRST), key=key)
    # WHEN unzip receives its notification (the key URL-encoded, a space as "+")
    out = load_handler("unzip").handler(
        s3_event(up.bucket, up.key, up.size or 0, up.sequencer or "", up.version_id, up.etag), Context()
    )
    drain(deps)
    # THEN `pdfbatch find KEY` lists its batch, processed as the ZIP it is
    found = views.find_batches(deps, key, caller=ADMIN)["batches"]
    assert [b["batchId"] for b in found] == [out["batches"][0]["batchId"]]
    assert found[0]["status"] == "COMPLETED"
    assert reuse.people_of(list(reuse.rows_by_name(deps, found[0]["batchId"]).values())) == list(reuse.FIRST)


@pytest.mark.parametrize("key", ["uploads/batch.zip", "uploads/cv.pdf", "uploads/batch"])
def test_an_object_that_is_not_a_zip_is_a_batch_failed_not_a_zip(deps: Deps, key: str) -> None:
    # GIVEN a PDF dropped under uploads/ (named as a ZIP, as itself, or with no extension)
    data = reuse.zip_of(reuse.FIRST)  # (a ZIP's first entry is a PDF: its bytes are the PDF's)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        pdf = zf.read(zf.infolist()[0])
    up = upload(deps, pdf, key=key)
    # WHEN unzip receives its notification
    load_handler("unzip").handler(
        s3_event(up.bucket, up.key, up.size or 0, up.sequencer or "", up.version_id, up.etag), Context()
    )
    # THEN it is a batch FAILED not_a_zip (not corrupt_zip, not nothing), listed by find
    found = views.find_batches(deps, key, caller=ADMIN)["batches"]
    assert len(found) == 1
    status = views.batch_status(deps, found[0]["batchId"], caller=ADMIN)
    assert (status["status"], status["reason"]) == ("FAILED", "not_a_zip")
