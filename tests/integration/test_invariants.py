"""The invariant checker over the real MariaDB ledger and users table and the real Redis counters."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import redis

from fixtures import pdfs
from fixtures.pipeline import drain, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.redis import progress_key
from pdfbatch.invariants import ExpectedUpload, Oracle, S3Keys, Sources, check
from pdfbatch.services import staging
from plugins.services import add_users

pytestmark = pytest.mark.integration


def test_a_run_on_mysql_and_redis_holds_every_invariant_until_a_counter_drifts(deps: Any, db: Any) -> None:
    # GIVEN a batch processed to the end on MariaDB and Redis, its staged copies removed
    ids = add_users(db, "alice@example.com", "bob@example.com")
    entries = [
        ("alice.pdf", pdfs.resume_pdf("Alice", "alice@example.com")),
        ("bob.pdf", pdfs.resume_pdf("Bob", "bob@example.com")),
        ("stranger.pdf", pdfs.resume_pdf("Stranger", "nobody@nowhere.org")),
        ("notes.txt", b"hello"),
    ]
    key = "uploads/invariants-it.zip"
    report = staging.stage_zip(deps, upload(deps, make_zip(entries), key=key))
    drain(deps)
    objects = S3Keys(deps.store.client)
    for staged in objects.list_keys(deps.settings.bucket, f"staging/{report.batch_id}/"):
        deps.store.delete(deps.settings.bucket, staged)
    digest = {n: hashlib.sha256(d).hexdigest() for n, d in entries}
    oracle = Oracle(
        {digest["alice.pdf"]: ids["alice@example.com"], digest["bob.pdf"]: ids["bob@example.com"]}
        | {digest["stranger.pdf"]: None},
        [ExpectedUpload(key, tuple(digest.items()))],
    )
    sources = Sources.from_deps(deps, objects, settle_period=60.0)  # announced at once: never overdue
    # WHEN it is checked
    clean = check(sources, [report.batch_id], oracle)
    # THEN every invariant held, but the two this run gives no input for: no callback log, and a bucket
    # whose uploads/ other tests share (the soak checks both)
    assert clean.ok, "\n".join(clean.lines())
    unchecked = {r.name for r in clean.results if r.held is None}
    assert unchecked == {"callbacks_recorded", "drops_recorded"}, "\n".join(clean.lines())
    # WHEN the live counters drift by one
    redis.Redis.from_url(deps.settings.redis_url).hincrby(progress_key(report.batch_id), "linked", 1)
    drifted = check(sources, [report.batch_id], oracle)
    # THEN exactly that is reported
    assert drifted.broken() == ["counters_match_ledger"], drifted.lines()
