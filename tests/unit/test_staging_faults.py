"""unzip's concurrent staging under faults: PUTs and sends that fail (before or after taking effect), an
unzip killed at a random call, then S3's retry: every entry ends staged, queued and processed once.

The S3 store and the work queue are moto's, wrapped so a Hypothesis-drawn plan decides which calls fail
and where the process dies; after the death nothing takes effect any more (no PUT, no send, no SQL), as
when a Lambda environment is killed with PUTs and sends in flight on other threads.
"""

from __future__ import annotations

import functools
import itertools
import threading
import uuid
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from fixtures.pdfs import text_pdf
from fixtures.pipeline import assert_counters_match_ledger, drain, fake_deps, process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.adapters.sqs import SqsQueue
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FileTask, staging_key
from pdfbatch.services import staging, tally
from pdfbatch.services.deps import Deps

_SERIAL = itertools.count()


@functools.cache
def _pdf(i: int) -> bytes:
    return text_pdf([f"staged file {i}"])


class Killed(BaseException):
    """The unzip process died at this call: nothing after it takes effect."""


class Plan:
    """One unzip attempt's faults: which PUTs and sends fail, whether a failing call took effect
    first (its reply was lost), and the store or queue call at which the process dies."""

    def __init__(self, fail_puts: set[int], fail_sends: set[int], lost_reply: bool, kill_at: int | None):
        self.fail_puts, self.fail_sends = fail_puts, fail_sends
        self.lost_reply, self.kill_at = lost_reply, kill_at
        self.lock = threading.Lock()
        self.calls = self.puts = self.sends = 0
        self.dead = False

    def alive(self) -> None:
        """Raise Killed once the process has died."""
        if self.dead:
            raise Killed

    def verdict(self, kind: str) -> str:
        """'ok', 'fail' or 'kill' for the next call of ``kind`` (put or send)."""
        with self.lock:
            self.alive()
            n, self.calls = self.calls, self.calls + 1
            if self.kill_at is not None and n >= self.kill_at:
                self.dead = True
                return "kill"
            if kind == "put":
                k, self.puts = self.puts, self.puts + 1
                return "fail" if k in self.fail_puts else "ok"
            k, self.sends = self.sends, self.sends + 1
            return "fail" if k in self.fail_sends else "ok"

    def call(self, kind: str, effect: Any) -> None:
        """Run ``effect`` as the plan says: done, refused, done but reported failed, or the death."""
        verdict = self.verdict(kind)
        if verdict != "ok" and not self.lost_reply:
            raise Killed if verdict == "kill" else DependencyUnavailable(kind, "injected")
        effect()
        if verdict == "kill":
            raise Killed
        if verdict == "fail":
            raise DependencyUnavailable(kind, "injected after taking effect")


HEALTHY = Plan(set(), set(), False, None)


class FlakyStore:
    """The store with PUTs as the plan says; every other call only checks the process is alive."""

    def __init__(self, inner: Any, plan: Plan) -> None:
        self.inner, self.plan = inner, plan

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str) -> None:
        self.plan.call("put", lambda: self.inner.put_bytes(bucket, key, data, content_type))

    def __getattr__(self, name: str) -> Any:
        self.plan.alive()
        return getattr(self.inner, name)


class FlakyQueue:
    """The work queue with sends as the plan says; each message that goes out is checked against what a
    worker receiving it would find: its ledger row and its staged object with the entry's bytes."""

    def __init__(self, inner: Any, plan: Plan, deps: Deps, sent: list[FileTask], problems: list[str]):
        self.inner, self.plan, self.deps = inner, plan, deps
        self.sent, self.problems = sent, problems

    def send_tasks(self, tasks: list[FileTask]) -> None:
        def effect() -> None:
            for t in tasks:
                if self.deps.ledger.get_file(t.batch_id, t.index) is None:
                    self.problems.append(f"entry {t.index} messaged before its ledger row")
                if self.deps.store.get_bytes(t.bucket, t.staging_key) != _pdf(t.index):
                    self.problems.append(f"entry {t.index} messaged before its object was staged")
            self.inner.send_tasks(tasks)
            self.sent.extend(tasks)

        self.plan.call("send", effect)


class Dying:
    """The ledger or the live counters: refused once the process has died (no SQL after a death)."""

    def __init__(self, inner: Any, plan: Plan) -> None:
        self.inner, self.plan = inner, plan

    def __getattr__(self, name: str) -> Any:
        self.plan.alive()
        attr = getattr(self.inner, name)
        if not callable(attr):
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            self.plan.alive()
            return attr(*args, **kwargs)

        return call


_PLAN = st.builds(
    Plan,
    fail_puts=st.sets(st.integers(0, 30), max_size=4),
    fail_sends=st.sets(st.integers(0, 4), max_size=2),
    lost_reply=st.booleans(),
    kill_at=st.none() | st.integers(0, 40),
)


@settings(
    max_examples=examples(20),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    pdfs=st.integers(1, 14),
    workers=st.sampled_from([1, 2, 3, 8]),
    attempts=st.lists(_PLAN, min_size=1, max_size=3),
)
def test_failed_puts_and_sends_and_a_kill_then_the_retry_stage_and_queue_every_entry_once_in_effect(
    moto_aws: None, pdfs: int, workers: int, attempts: list[Plan]
) -> None:
    # GIVEN a ZIP of PDFs (and an entry that is not one) and unzip attempts that meet drawn faults
    n = next(_SERIAL)
    deps = fake_deps(f"staging-faults-{n}", stage_workers=workers)
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    queue = SqsQueue(sqs, sqs.create_queue(QueueName=f"work-{n}")["QueueUrl"], sleep=lambda _: None)
    deps = replace(deps, queue=queue)
    entries = [(f"cv/{i}.pdf", _pdf(i)) for i in range(pdfs)] + [("notes.txt", b"not a pdf")]
    up = upload(deps, make_zip(entries), key=f"uploads/{uuid.uuid4().hex}.zip")
    sent: list[FileTask] = []
    problems: list[str] = []
    # WHEN each attempt runs (S3 retries the event after a failure or a death), the last one healthy
    report = None
    for plan in [*attempts, HEALTHY]:
        flaky = replace(
            deps,
            store=FlakyStore(deps.store, plan),
            queue=FlakyQueue(queue, plan, deps, sent, problems),
            ledger=Dying(deps.ledger, plan),
            progress=Dying(deps.progress, plan),
        )
        try:
            report = staging.stage_zip(flaky, up)
        except (Killed, DependencyUnavailable):
            assert plan is not HEALTHY
            continue
        break
    # THEN the batch is unpacked, every message found its row and its object, every PDF was queued
    assert report is not None and not problems, problems
    batch = deps.ledger.get_batch(report.batch_id)
    assert batch is not None and batch.unpacked_at is not None and batch.total_files == pdfs
    assert {t.index for t in sent} == set(range(pdfs))
    for i in range(pdfs):
        assert deps.store.get_bytes(up.bucket, staging_key(report.batch_id, i)) == _pdf(i)
    # AND processing every message (duplicates included) gives each PDF exactly one outcome, counted once
    drain(deps)
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"], status["totalFiles"]) == ("COMPLETED", pdfs, pdfs)
    rows = [r for r in deps.ledger.list_files(report.batch_id, -1, 1000, None) if r.kind == "pdf"]
    assert len(rows) == pdfs and all(r.outcome for r in rows)


def test_a_pool_of_one_is_sequential_and_sends_each_ten_after_their_puts(moto_aws: None) -> None:
    # GIVEN one staging worker and a queue that checks each message's object is staged
    deps = fake_deps("staging-sequential", stage_workers=1)
    sent: list[FileTask] = []
    problems: list[str] = []
    threads: set[str] = set()

    class Watching(FlakyQueue):
        def send_tasks(self, tasks: list[FileTask]) -> None:
            threads.add(threading.current_thread().name)
            super().send_tasks(tasks)

    flaky = replace(deps, queue=Watching(deps.queue, HEALTHY, deps, sent, problems))
    up = upload(deps, make_zip([(f"{i}.pdf", _pdf(i)) for i in range(23)]))
    # WHEN unzip stages 23 PDFs
    report = staging.stage_zip(flaky, up)
    # THEN everything ran on the caller's thread, in messages of ten, each after its objects
    assert report.staged == 23 and not problems
    assert threads == {threading.current_thread().name}
    assert [t.index for t in sent] == list(range(23))


@pytest.mark.parametrize(("workers", "cap_entries"), [(2, 100), (8, 3)])
def test_entries_read_and_not_yet_staged_are_bounded_by_count_and_bytes(
    moto_aws: None, monkeypatch: pytest.MonkeyPatch, workers: int, cap_entries: int
) -> None:
    # GIVEN slow PUTs, and a byte cap of ``cap_entries`` entries
    deps = fake_deps("staging-bounded", stage_workers=workers)
    size = len(_pdf(0))
    monkeypatch.setattr(staging, "STAGE_INFLIGHT_BYTES", cap_entries * size)
    lock = threading.Lock()
    counts = {"handed": 0, "staged": 0, "peak": 0}

    class Slow:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def put_bytes(self, *args: Any) -> None:
            threading.Event().wait(0.005)
            self.inner.put_bytes(*args)
            with lock:
                counts["staged"] += 1

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    submit = staging._Stager.submit

    def counting(self: Any, index: int, data: bytes) -> None:
        submit(self, index, data)
        with lock:
            counts["handed"] += 1
            counts["peak"] = max(counts["peak"], counts["handed"] - counts["staged"])

    monkeypatch.setattr(staging._Stager, "submit", counting)
    up = upload(deps, make_zip([(f"{i}.pdf", _pdf(0)) for i in range(60)]))
    # WHEN 60 entries of one size are staged
    report = staging.stage_zip(replace(deps, store=Slow(deps.store)), up)
    # THEN all were staged, with never more read ahead than twice the workers, nor than the byte cap
    assert report.staged == 60
    assert 1 <= counts["peak"] <= min(2 * workers, cap_entries)


def test_a_rerun_while_workers_count_never_drops_a_count(moto_aws: None) -> None:
    # GIVEN an unzip that sent every message and died before marking the batch unpacked
    deps = fake_deps("staging-rerun-race")
    up = upload(deps, make_zip([(f"{i}.pdf", _pdf(i)) for i in range(3)]))

    class DiesAtTheEnd(Dying):
        def mark_unpacked(self, batch_id: str) -> None:
            raise DependencyUnavailable("mysql", "injected")

    with pytest.raises(DependencyUnavailable):
        staging.stage_zip(replace(deps, ledger=DiesAtTheEnd(deps.ledger, HEALTHY)), up)
    messages = receive_all(deps)
    assert len(messages) == 3

    # WHEN S3 retries it, and a worker records and counts a file just after the retry read the ledger
    class WorkerInBetween(Dying):
        def done_files(self, batch_id: str) -> Any:
            snapshot = self.inner.done_files(batch_id)
            if messages:
                process_all(deps, [messages.pop()])
            return snapshot

    staging.stage_zip(replace(deps, ledger=WorkerInBetween(deps.ledger, HEALTHY)), up)
    process_all(deps, messages)
    drain(deps)  # what the retry sent again
    # THEN every file is counted once and the batch completes
    report = staging.stage_zip(deps, up)  # a duplicate notification: finds the batch, changes nothing
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", 3)


@settings(
    max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(files=st.integers(1, 6), data=st.data())
def test_counters_replaced_from_the_ledger_keep_every_count_made_between_the_read_and_the_write(
    moto_aws: None, files: int, data: st.DataObject
) -> None:
    # GIVEN a batch of staged files, some processed (drawn)
    deps = fake_deps(f"replace-race-{uuid.uuid4().hex[:8]}")
    report = staging.stage_zip(deps, upload(deps, make_zip([(f"{i}.pdf", _pdf(i)) for i in range(files)])))
    messages = receive_all(deps)
    before = data.draw(st.integers(0, files - 1), label="processed before")
    during = data.draw(st.integers(0, files - before), label="processed between the read and the write")
    process_all(deps, [messages.pop() for _ in range(before)])

    # WHEN the counters are replaced from the ledger (a completion that found them drifted, an expired
    # batch revived) while workers record and count files just after the ledger was read
    class WorkersInBetween(Dying):
        reads = 0

        def done_files(self, batch_id: str) -> Any:
            snapshot = self.inner.done_files(batch_id)
            self.reads += 1
            if self.reads == 1:
                process_all(deps, [messages.pop() for _ in range(during)])
            return snapshot

    racing = replace(deps, ledger=WorkersInBetween(deps.ledger, HEALTHY))
    tally.rebuild_progress(racing, report.batch_id, replace=True)
    process_all(deps, messages)
    # THEN those counts survived: every file is counted once and the batch completes
    status = assert_counters_match_ledger(deps, report.batch_id)
    assert (status["status"], status["processed"]) == ("COMPLETED", files)
