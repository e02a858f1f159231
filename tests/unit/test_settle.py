"""The scheduled settle (services/settle.py): every batch ends and is announced without a reader.

The rule "every batch reaches COMPLETED or FAILED, and every final batch is announced (report, event)"
must hold for batches nobody polls. Hypothesis draws batches, each with one kind of damage a crash or a
cut connection leaves behind, a time that passes, and two settle runs:

- healthy: processed normally;
- announcer died: the completion's PutEvents failed after its claim, and the redelivered message found
  the claim held (the chaos soak, seed 256111: no event was ever put);
- count lost: the last file recorded in the ledger and never counted (live counters short by one);
- count and counters lost: the same, and the live hash expired;
- no upload: POST /batches, and no ZIP ever came.

Then: once every lease, quiet time and upload link is over, every batch is final, announced once (one
event), and its counters equal its ledger; before that, nothing due is left undone and nothing not due
is ended early (an upload link still good stays PENDING, a claim within its lease is not taken over).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock, FakeEvents, FakeLedger, FakeProgress
from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.examples import examples
from fixtures.pipeline import assert_counters_match_ledger, process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.model import FINAL_STATUSES, FileResult
from pdfbatch.services import Deps, batches, operations, settle, staging, tally

text_pdf = functools.cache(lambda text: pdfs.text_pdf([text]))
DAMAGES = ("healthy", "announcer died", "count lost", "count and counters lost", "no upload", "retried")
# Long enough for every lease, quiet time and upload link (with its grace) to be over.
LONG_AFTER = 86_400.0  # (and within the settle window)


def _parts(deps: Deps) -> tuple[FakeClock, FakeLedger, FakeProgress, FakeEvents]:
    assert isinstance(deps.clock, FakeClock) and isinstance(deps.ledger, FakeLedger)
    assert isinstance(deps.progress, FakeProgress) and isinstance(deps.events, FakeEvents)
    return deps.clock, deps.ledger, deps.progress, deps.events


def damaged_batch(deps: Deps, damage: str, n: int) -> tuple[str, list[dict[str, Any]]]:
    """A batch of ``n`` one-page PDFs left as ``damage`` leaves it; its id and the messages still to run."""
    clock, ledger, progress, events = _parts(deps)
    if damage == "no upload":
        return str(batches.create_batch(deps)["batchId"]), []
    data = make_zip([(f"{i}.pdf", text_pdf(f"page {i}")) for i in range(n)])
    key = f"uploads/{damage.replace(' ', '-')}-{len(ledger.batches)}.zip"
    report = staging.stage_zip(deps, upload(deps, data, key=key))
    messages = receive_all(deps)
    last = messages.pop()
    process_all(deps, messages)
    clock.advance(1)
    if damage in ("healthy", "retried"):
        process_all(deps, [last])
        if damage == "retried":  # `pdfbatch retry` after it ended: its files run again, not yet done
            clock.advance(2 * settle.QUIET_SECONDS)  # (their first outcomes are long past the quiet time)
            operations.retry_batch(deps, report.batch_id)
            return report.batch_id, receive_all(deps)
    elif damage == "announcer died":
        events.fail = 1
        with pytest.raises(DependencyUnavailable):
            process_all(deps, [last])
        process_all(deps, [last])  # redelivered at once: the claim is held, nothing is announced
    else:
        ledger.record(report.batch_id, int(last["index"]), FileResult("skipped_no_match", "no_email_found"))
        if damage == "count and counters lost":
            progress.expire(report.batch_id)
    return report.batch_id, []


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    damages=st.lists(st.sampled_from(DAMAGES), min_size=1, max_size=5),
    sizes=st.lists(st.integers(1, 3), min_size=5, max_size=5),
    early=st.floats(0, 3 * settle.QUIET_SECONDS),
)
def test_settle_ends_and_announces_every_batch_once_and_nothing_before_it_is_due(
    deps: Deps, damages: list[str], sizes: list[int], early: float
) -> None:
    # GIVEN batches, each left by one kind of damage
    clock, ledger, _, events = _parts(deps)
    made = [(damaged_batch(deps, d, sizes[i]), d) for i, d in enumerate(damages)]
    ids = {b: d for (b, _), d in made}
    running = [m for (_, messages), _ in made for m in messages]
    before = {b: ledger.batches[b] for b in ids}
    # WHEN a settle run comes soon after (drawn)
    clock.advance(early)
    # (ages at the run: later batches' damages moved the clock on, too)
    claim_age = {b: clock() - (r.announce_started_at or 0.0) for b, r in before.items()}
    last_age = {
        b: clock() - max((f.finished_at or 0.0 for f in ledger.done_files(b)), default=0.0) for b in ids
    }
    settle.settle(deps)
    # THEN it ended nothing before its time: an upload link still good stays PENDING, a claim within its
    # lease is not taken over, a batch whose last outcome is younger than the quiet time keeps running
    for b, damage in ids.items():
        now = ledger.batches[b]
        if damage == "no upload":
            assert now.status == "PENDING"
        if damage == "announcer died" and claim_age[b] < tally.ANNOUNCE_LEASE_SECONDS:
            assert now.announced_at is None and not events.of(b)
        if damage.startswith("count") and last_age[b] < settle.QUIET_SECONDS:
            assert now.status == before[b].status == "PROCESSING"
        if damage == "retried":  # its files are running again: never completed under them
            assert now.status == "PROCESSING"
    # WHEN the files still running are done, and the runs go on long after every lease, quiet time and link
    process_all(deps, running)
    clock.advance(LONG_AFTER)
    settle.settle(deps)
    settle.settle(deps)  # and once more: nothing left to do
    # THEN every batch is final, announced once, and its counters (live or summary) equal its ledger
    for b, damage in ids.items():
        row = ledger.batches[b]
        assert row.status in FINAL_STATUSES, (damage, row.status)
        assert row.announced_at is not None, damage
        # (a retried batch is announced again when it ends again: docs/RESULTS.md, "Once, and what once
        # means")
        assert len(events.of(b)) == (2 if damage == "retried" else 1), (damage, events.of(b))
        if damage == "no upload":
            assert (row.status, row.reason) == ("FAILED", "upload_expired")
        else:
            assert row.status == "COMPLETED"
            assert_counters_match_ledger(deps, b)
    assert not ledger.due_batches(clock(), clock() - settle.SETTLE_WINDOW_SECONDS, None, 100)


def test_a_batch_older_than_the_window_is_left_to_its_readers(deps: Deps) -> None:
    # GIVEN a batch nobody uploaded to, created longer ago than the settle window
    clock, ledger, _, _ = _parts(deps)
    batch_id = batches.create_batch(deps)["batchId"]
    clock.advance(settle.SETTLE_WINDOW_SECONDS + 1)
    # WHEN settle runs
    settled = settle.settle(deps)
    # THEN it does not see it (announcing years of history at once is not its job; a read still ends it)
    assert settled.checked == 0 and ledger.batches[batch_id].status == "PENDING"


def test_a_batch_that_cannot_settle_does_not_stop_the_others(
    deps: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN two batches nobody uploaded to, and expiring the first one fails every time
    clock, ledger, _, _ = _parts(deps)
    first = batches.create_batch(deps)["batchId"]
    clock.advance(1)
    second = batches.create_batch(deps)["batchId"]
    real = ledger.expire_unclaimed

    def broken(batch_id: str, reason: str, counts: Any) -> bool:
        if batch_id == first:
            raise RuntimeError("a bug, or a row nobody foresaw")
        return real(batch_id, reason, counts)

    monkeypatch.setattr(ledger, "expire_unclaimed", broken)
    clock.advance(LONG_AFTER)
    # WHEN settle runs
    settled = settle.settle(deps)
    # THEN the first is left for the next run and the second is settled
    assert (settled.failed, settled.expired) == ([first], [second])
    assert (ledger.batches[first].status, ledger.batches[second].status) == ("PENDING", "FAILED")


def test_the_status_function_settles_on_its_schedule_and_answers_requests_as_before(deps: Deps) -> None:
    # GIVEN the status function, and a batch nobody uploaded to whose link is long over
    status = load_handler("status")
    clock, ledger, _, _ = _parts(deps)
    batch_id = batches.create_batch(deps)["batchId"]
    clock.advance(LONG_AFTER)
    # WHEN EventBridge's scheduled event invokes it
    event = {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "000000000000",
        "time": "2026-12-01T07:00:00Z",
        "region": "us-east-1",
        "resources": ["arn:aws:events:us-east-1:000000000000:rule/pdfbatch-settle"],
        "detail": {},
    }
    answer = status.handler(event, Context())
    # THEN it settled the batch and said what it did (counts only)
    assert answer == {"settled": {"checked": 1, "announced": 0, "expired": 1, "completed": 0, "failed": 0}}
    assert ledger.batches[batch_id].status == "FAILED"
    json.dumps(answer)
    # and an API request whose body says the same is still a request (401 without a key), not a run
    request = {"httpMethod": "POST", "path": "/batches", "headers": {}, "body": json.dumps(event)}
    assert status.handler(request, Context())["statusCode"] == 401
