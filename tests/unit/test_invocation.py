"""process_pdf overlapping each file's S3 waits with its neighbours' work (issue 15, services/invocation.py):
the next message's PDF fetched while one is read, a file's copy running while the next is read, and
exactly the outcomes, failed message ids, links, objects and counters of one file after another.

Over the fakes and moto, through the handler as Lambda calls it.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from moto import mock_aws

from fakes import FakeLedger
from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import sqs_record
from fixtures.examples import examples
from fixtures.pipeline import assert_counters_match_ledger, fake_deps, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import bootstrap
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileTask, staging_key
from pdfbatch.services import staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

resume = functools.cache(pdfs.resume_pdf)
BUCKET = "overlap-unit"

# What an entry of the generated ZIPs is: a résumé of a user (two different ones of alice, so two files
# race for her), of a user who has a PDF already, of nobody, no address, or not a PDF at all.
KINDS: dict[str, Any] = {
    "alice": lambda: resume("Alice", "alice@example.com"),
    "alice_again": lambda: resume("Alice A.", "alice@example.com", "Second edition"),
    "bob": lambda: resume("Bob", "bob@example.com"),
    "carol_has_one": lambda: resume("Carol", "carol@example.com"),
    "stranger": lambda: resume("S", "stranger@nowhere.org"),
    "no_email": lambda: pdfs.text_pdf(["No address on this page"]),
    "malformed": lambda: b"hello, I am not a PDF",
}
FAULTS = (
    None,
    None,
    None,
    "get",
    "copy",
    "missing",
    "delete",
)  # injected per entry: its GET or its COPY fails, it is gone, or S3 refuses to delete its staged copy


class FaultyStore:
    """The S3 store, with every GET (or COPY from) the listed staged keys failing as S3 being down; every
    call is noted with its thread."""

    def __init__(
        self, store: Any, fail_get: set[str], fail_copy: set[str], fail_delete: frozenset[str] = frozenset()
    ) -> None:
        self._store = store
        self.fail_get, self.fail_copy, self.fail_delete = fail_get, fail_copy, fail_delete
        self.calls: list[tuple[str, str, str]] = []  # (operation, key, thread name)
        self.lock = threading.Lock()

    def _note(self, op: str, key: str) -> None:
        with self.lock:
            self.calls.append((op, key, threading.current_thread().name))

    def get_bytes(self, bucket: str, key: str) -> bytes:
        self._note("get", key)
        if key in self.fail_get:
            raise DependencyUnavailable("s3", "injected")
        data: bytes = self._store.get_bytes(bucket, key)
        return data

    def copy(self, bucket: str, source_key: str, dest_key: str) -> None:
        self._note("copy", source_key)
        if source_key in self.fail_copy:
            raise DependencyUnavailable("s3", "injected")
        self._store.copy(bucket, source_key, dest_key)

    def delete(self, bucket: str, key: str, version_id: str | None = None) -> None:
        self._note("delete", key)
        if key in self.fail_delete:
            raise DependencyUnavailable("s3", "injected")
        self._store.delete(bucket, key, version_id)

    def delete_many(self, bucket: str, keys: Sequence[str]) -> list[str]:
        # S3 refuses the listed keys one by one, on an HTTP 200, and deletes the others
        self._note("delete_many", ",".join(keys))
        refused = [k for k in keys if k in self.fail_delete]
        self._store.delete_many(bucket, [k for k in keys if k not in self.fail_delete])
        return refused

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


@dataclass
class World:
    """A staged batch in a fresh moto account and fake ledger, with its users and faults."""

    deps: Deps
    batch_id: str
    store: FaultyStore

    @property
    def ledger(self) -> FakeLedger:
        assert isinstance(self.deps.ledger, FakeLedger)
        return self.deps.ledger

    def body(self, index: int) -> str:
        return json.dumps(
            FileTask(self.batch_id, index, staging_key(self.batch_id, index), BUCKET).to_message()
        )


def make_world(kinds: list[str], faults: list[str | None], overlap: bool) -> World:
    """Call inside mock_aws: the ZIP of ``kinds`` staged, users alice, bob and carol (who has a PDF)."""
    deps = fake_deps(BUCKET, process_overlap=overlap)
    ledger = deps.ledger
    assert isinstance(ledger, FakeLedger)
    for email, url in (
        ("alice@example.com", None),
        ("bob@example.com", None),
        ("carol@example.com", "s3://x/c"),
    ):
        ledger.add_user(email, pdf_url=url)
    entries = [(f"{i}-{k}.pdf", KINDS[k]()) for i, k in enumerate(kinds)]
    report = staging.stage_zip(deps, upload(deps, make_zip(entries)))
    batch = report.batch_id
    keys = [staging_key(batch, i) for i in range(len(kinds))]
    for key, fault in zip(keys, faults, strict=True):
        if fault == "missing":
            deps.store.delete(BUCKET, key)
    store = FaultyStore(
        deps.store,
        {k for k, f in zip(keys, faults, strict=True) if f == "get"},
        {k for k, f in zip(keys, faults, strict=True) if f == "copy"},
        frozenset(k for k, f in zip(keys, faults, strict=True) if f == "delete"),
    )
    return World(replace(deps, store=store), batch, store)  # type: ignore[arg-type]


def run(world: World, records: list[tuple[int, int]]) -> dict[str, Any]:
    """process_pdf's handler given one event of ``records`` ((entry index, receive count), message ids
    m0, m1, ...); what it answered and left, by entry index (batch ids differ between worlds)."""
    event = {
        "Records": [
            sqs_record(world.body(i), {"ApproximateReceiveCount": str(rc), "SentTimestamp": "1"}, f"m{k}")
            for k, (i, rc) in enumerate(records)
        ]
    }
    bootstrap.override(world.deps)
    try:
        answer = load_handler("process_pdf").handler(event, Context())
    finally:
        bootstrap.override(None)
    rows = list(views.iter_all_files(world.deps, world.batch_id))
    listed = world.deps.store.client.list_objects_v2(Bucket=BUCKET)  # type: ignore[attr-defined]
    status = views.batch_status(world.deps, world.batch_id, caller=ADMIN)
    return {
        "failed": sorted(f["itemIdentifier"] for f in answer["batchItemFailures"]),
        "rows": [(r.index, r.outcome, r.reason, r.user_id, r.final_key, r.attempts, r.sha256) for r in rows],
        "users": {u.email: u.pdf_url for u in world.ledger.users.values()},
        "objects": sorted(o["Key"].replace(world.batch_id, "B") for o in listed.get("Contents", [])),
        "counters": {k: status[k] for k in ("status", "processed", "linked", "failed", "skipped_no_match")},
    }


@pytest.fixture()
def world(aws_credentials: None) -> Iterator[Any]:
    """make_world inside a fresh moto account, for the duration of the test."""
    with mock_aws():
        yield make_world


# Weighted towards files that link (two résumés of alice, so adjacent files race for her) and no fault.
_KIND_DRAW = ["alice", "alice", "alice_again", "alice_again", "bob", *sorted(KINDS)]


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[str], list[str | None], list[tuple[int, int]]]:
    kinds = draw(st.lists(st.sampled_from(_KIND_DRAW), min_size=1, max_size=6))
    faults = draw(st.lists(st.sampled_from(FAULTS), min_size=len(kinds), max_size=len(kinds)))
    # Every message in some order, a few of them again (SQS delivers at least once), each on a first or
    # a last receive.
    order = draw(st.permutations(range(len(kinds))))
    again = draw(st.lists(st.integers(0, len(kinds) - 1), max_size=3))
    indexes = draw(st.permutations([*order, *again]))
    receives = draw(st.lists(st.sampled_from([1, 1, 5]), min_size=len(indexes), max_size=len(indexes)))
    return kinds, faults, list(zip(indexes, receives, strict=True))


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(batch=batches())
def test_overlapped_invocation_ends_exactly_as_one_file_after_another(
    aws_credentials: None, batch: tuple[list[str], list[str | None], list[tuple[int, int]]]
) -> None:
    # GIVEN a staged batch of generated entries, S3 failing the GET or the COPY of some of them, or the
    # delete of their staged copy (or that copy gone), and an event of their messages in any order, some
    # twice, first or last receives
    kinds, faults, records = batch
    seen = []
    for overlap in (False, True):
        with mock_aws():
            world = make_world(kinds, faults, overlap)
            # WHEN process_pdf handles the event, one file after another, then overlapped
            seen.append(run(world, records))
            if overlap:
                assert_counters_match_ledger(world.deps, world.batch_id)
    # THEN a staged copy is gone exactly when its file was linked and S3 did not refuse its delete
    linked = {r[0] for r in seen[1]["rows"] if r[1] == "linked"}
    kept = [
        staging_key("B", i)
        for i, fault in enumerate(faults)
        if fault != "missing" and (i not in linked or fault == "delete")
    ]
    assert [o for o in seen[1]["objects"] if o.startswith("staging/")] == kept
    # AND the same messages failed, and every ledger row, link, object and counter is the same
    sequential, overlapped = seen
    assert overlapped == sequential


def test_the_next_file_is_read_while_a_files_copy_runs_and_sql_stays_on_the_invocation_thread(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN three résumés of users, and notes of when each copy starts and ends and each ledger call runs
    w: World = world(["alice", "bob", "no_email"], [None, None, None], True)
    steps: list[tuple[str, Any, str]] = []
    real_copy, real_begin, real_link = w.store.copy, w.ledger.begin_attempt, w.ledger.link
    begun = {i: threading.Event() for i in range(3)}

    def copy(bucket: str, source: str, dest: str) -> None:
        index = int(source[-11:-4])
        begun[index + 1].wait(10)  # a slow copy: it ends only once the next file has begun
        real_copy(bucket, source, dest)
        steps.append(("copy end", index, threading.current_thread().name))

    def begin_attempt(batch_id: str, index: int) -> int:
        steps.append(("begin", index, threading.current_thread().name))
        begun[index].set()
        return real_begin(batch_id, index)

    def link(batch_id: str, index: int, *args: Any) -> bool:
        steps.append(("link", index, threading.current_thread().name))
        return real_link(batch_id, index, *args)

    monkeypatch.setattr(w.store, "copy", copy)
    monkeypatch.setattr(w.ledger, "begin_attempt", begin_attempt)
    monkeypatch.setattr(w.ledger, "link", link)
    # WHEN process_pdf handles their three messages in one invocation
    out = run(w, [(0, 1), (1, 1), (2, 1)])
    # THEN each file's copy ended after the next file began, and its link came after its copy; the copies
    # ran in the pool, and the ledger was only ever called from the invocation thread
    at = {(s, i): n for n, (s, i, _) in enumerate(steps)}
    for i in (0, 1):
        assert at["begin", i] < at["begin", i + 1] < at["copy end", i] < at["link", i], steps
    main = threading.current_thread().name
    assert {t for s, _, t in steps if s != "copy end"} == {main}
    assert all(t != main for s, _, t in steps if s == "copy end")
    # and the next message's PDF was fetched by the pool (prefetch), the first one's by the invocation
    gets = [(key[-11:-4], t) for op, key, t in w.store.calls if op == "get"]
    assert sorted(key for key, _ in gets) == ["0000000", "0000001", "0000002"]
    assert [key for key, thread in gets if thread == main] == ["0000000"]
    assert [r[1] for r in out["rows"]] == ["linked", "linked", "skipped_no_match"] and out["failed"] == []


def test_with_overlap_off_each_file_runs_start_to_end_on_the_invocation_thread(world: Any) -> None:
    # GIVEN PDFBATCH_PROCESS_OVERLAP=false
    w: World = world(["alice", "bob"], [None, None], False)
    # WHEN process_pdf handles both messages
    out = run(w, [(0, 1), (1, 1)])
    # THEN every S3 call came from the invocation thread, file after file: get, copy, get, copy
    main = threading.current_thread().name
    assert [(op, key[-11:-4], t) for op, key, t in w.store.calls if op in ("get", "copy")] == [
        ("get", "0000000", main),
        ("copy", "0000000", main),
        ("get", "0000001", main),
        ("copy", "0000001", main),
    ]
    assert out["failed"] == [] and [r[1] for r in out["rows"]] == ["linked", "linked"]


def test_a_failed_copy_fails_its_own_message_only_and_links_nothing_for_it(world: Any) -> None:
    # GIVEN two résumés, the first one's copy failing (S3 down), the second read while it runs
    w: World = world(["alice", "bob"], ["copy", None], True)
    # WHEN process_pdf handles both messages (first receive)
    out = run(w, [(0, 1), (1, 1)])
    # THEN only the first message is reported failed (SQS retries it), its file has no outcome and alice
    # no PDF; the second file, read while the copy failed, is linked
    assert out["failed"] == ["m0"]
    assert [r[1:3] for r in out["rows"]] == [(None, None), ("linked", "matched")]
    assert out["users"]["alice@example.com"] is None and out["users"]["bob@example.com"]


def test_a_failure_reading_the_next_file_ahead_is_its_own_message_failure(world: Any) -> None:
    # GIVEN two résumés, the second one's GET failing; the second is read ahead while the first copies
    w: World = world(["alice", "bob"], [None, "get"], True)
    # WHEN process_pdf handles both messages
    out = run(w, [(0, 1), (1, 1)])
    # THEN the first is linked and reported done, the second reported failed
    assert out["failed"] == ["m1"]
    assert [r[1] for r in out["rows"]] == ["linked", None]


def test_a_user_linked_by_one_file_is_already_linked_for_the_next_file_read_beside_its_copy(
    world: Any,
) -> None:
    # GIVEN two different résumés naming alice, one after the other in one invocation
    w: World = world(["alice", "alice_again"], [None, None], True)
    # WHEN process_pdf handles both (the second's users looked up before the first's link)
    out = run(w, [(0, 1), (1, 1)])
    # THEN the first is linked, the second skipped as already linked and never copied: one final object
    assert [r[1:3] for r in out["rows"]] == [
        ("linked", "matched"),
        ("skipped_already_exists", "already_linked"),
    ]
    assert [key for op, key, _ in w.store.calls if op == "copy"] == [staging_key(w.batch_id, 0)]
    assert len([o for o in out["objects"] if o.startswith("pdfs/")]) == 1


def test_the_linked_files_staged_copies_go_in_one_request_when_the_invocation_ends(world: Any) -> None:
    # GIVEN three résumés of users and a file naming nobody, in one invocation
    w: World = world(["alice", "no_email", "bob", "alice_again"], [None, None, None, None], True)
    # WHEN process_pdf handles their four messages
    out = run(w, [(0, 1), (1, 1), (2, 1), (3, 1)])
    # THEN the two linked files' staged copies went in one DeleteObjects, after the last file's work,
    # and no file was deleted on its own; the unlinked files' copies stay for `pdfbatch retry`
    assert [r[1] for r in out["rows"]] == ["linked", "skipped_no_match", "linked", "skipped_already_exists"]
    ops = [(op, key) for op, key, _ in w.store.calls]
    assert [op for op, _ in ops].count("delete") == 0
    (batch_delete,) = [key for op, key in ops if op == "delete_many"]
    assert batch_delete.split(",") == [staging_key(w.batch_id, 0), staging_key(w.batch_id, 2)]
    assert ops[-1][0] == "delete_many"
    staged = [o for o in out["objects"] if o.startswith("staging/")]
    assert staged == [staging_key("B", 1), staging_key("B", 3)]


def test_a_refused_batch_delete_leaves_the_outcomes_as_they_are(
    world: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two résumés of users, and S3 refusing the invocation's DeleteObjects
    w: World = world(["alice", "bob"], [None, None], True)

    def refused(bucket: str, keys: Sequence[str]) -> list[str]:
        raise DependencyUnavailable("s3", "injected")

    monkeypatch.setattr(w.store, "delete_many", refused)
    # WHEN process_pdf handles both messages
    out = run(w, [(0, 1), (1, 1)])
    # THEN both are linked and reported done; the staged copies wait for the lifecycle rule
    assert out["failed"] == [] and [r[1] for r in out["rows"]] == ["linked", "linked"]
    assert [o for o in out["objects"] if o.startswith("staging/")] == [
        staging_key("B", 0),
        staging_key("B", 1),
    ]


@pytest.mark.slow
def test_delete_many_deletes_past_s3s_thousand_keys_a_request(world: Any) -> None:
    # GIVEN 1,003 objects (S3 takes at most 1,000 keys in one DeleteObjects), and the requests noted
    w: World = world(["alice"], [None], True)
    store = w.store._store
    keys = [f"staging/many/{i:07d}.pdf" for i in range(1003)]
    for key in keys:
        store.put_bytes(BUCKET, key, b"%PDF-", "application/pdf")
    sizes: list[int] = []

    def note(params: dict[str, Any], **_: Any) -> None:
        sizes.append(len(params["Delete"]["Objects"]))

    store.client.meta.events.register("before-parameter-build.s3.DeleteObjects", note)
    # WHEN the S3 adapter deletes them in one call
    refused = store.delete_many(BUCKET, keys)
    # THEN none is refused or left, in requests of at most 1,000 keys
    listed = store.client.list_objects_v2(Bucket=BUCKET, Prefix="staging/many/")
    assert refused == [] and listed.get("KeyCount", 0) == 0
    assert sizes == [1000, 3]
