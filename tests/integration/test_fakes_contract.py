"""The in-memory fakes (tests/fakes.py) answer exactly like the real adapters, call for call.

Each scenario is one script of calls run twice, on the fake and on the real adapter (MariaDB, Redis),
with the same clock; the two transcripts of results must be equal. A behaviour the fakes get wrong
shows up here, not as a unit test that passes against something production never does.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
import redis

from fakes import FakeClock, FakeLedger, FakeProgress
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.redis import RedisProgress, done_key, progress_key
from pdfbatch.adapters.users_table import can_hold
from pdfbatch.config import Settings, UsersTable
from pdfbatch.errors import ProgressMissing, UsersTableError
from pdfbatch.model import FileResult
from pdfbatch.ports import LiveProgress, NewEntry, Progress
from plugins.services import add_users

pytestmark = pytest.mark.integration

Transcript = list[tuple[str, Any]]


class Recorder:
    """Collects (label, result) pairs; expected exceptions are recorded by type name."""

    def __init__(self) -> None:
        self.out: Transcript = []

    def __call__(self, label: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
        except (ProgressMissing, LookupError, UsersTableError) as exc:
            result = type(exc).__name__
        self.out.append((label, result))
        return result


@dataclass
class LedgerSide:
    ledger: FakeLedger | MysqlBoth  # both a Ledger and Users
    add_user: Callable[[str, str | None], str]
    clock: FakeClock


class MysqlBoth:
    """The real side of a script that calls Ledger and Users on one object, as FakeLedger plays both:
    MysqlLedger, and for what it lacks, the MysqlUsers on its connection (``ledger.user_rows``)."""

    def __init__(self, ledger: MysqlLedger) -> None:
        self.ledger = ledger

    def __getattr__(self, name: str) -> Any:
        try:
            return getattr(self.ledger, name)
        except AttributeError:
            return getattr(self.ledger.user_rows, name)


def assert_same(fake: Transcript, real: Transcript) -> None:
    assert [label for label, _ in fake] == [label for label, _ in real]
    for (label, f), (_, r) in zip(fake, real, strict=True):
        assert f == r, label


# ---------------------------------------------------------------------------------------------
# Ledger and Users
# ---------------------------------------------------------------------------------------------


@pytest.fixture()
def real_ledger(db: Any, settings: Settings) -> Iterator[LedgerSide]:
    with db.cursor() as cur:
        cur.execute("TRUNCATE TABLE users")  # ids from 1, as the fake numbers them

    def add_user(email: str, pdf_url: str | None) -> int:
        return add_users(db, email, pdf_url=pdf_url)[email]

    clock = FakeClock()
    ledger = MysqlLedger(MysqlClient.from_url(settings.mysql_url), settings.users, clock=clock)
    yield LedgerSide(MysqlBoth(ledger), add_user, clock)
    ledger.client.close()


def fake_ledger() -> LedgerSide:
    clock = FakeClock()
    ledger = FakeLedger(clock)
    return LedgerSide(ledger, ledger.add_user, clock)


def linked(user_id: str, key: str) -> FileResult:
    return FileResult(
        "linked", "matched", user_id=user_id, final_key=key, sha256="ab" * 32, detail={"x": 0.1}
    )


def users_script(side: LedgerSide) -> Transcript:
    call, users = Recorder(), side.ledger
    a = side.add_user("Alice@Example.COM", None)
    b = side.add_user("bob@example.com", "s3://old/b.pdf")
    c = side.add_user("carol@example.com ", "")  # '' counts as empty; trailing blank ignored (PAD SPACE)
    call("ids", lambda: (a, b, c))
    call(
        "find", users.find_by_emails, ["alice@example.com", "BOB@EXAMPLE.COM", "carol@example.com", "x@y.org"]
    )
    call("find none", users.find_by_emails, [])
    call("find by a stored blank", users.find_by_emails, ["carol@example.com   "])
    call("pdf_url_of", lambda: [users.pdf_url_of(u) for u in (a, b, c, "999", "1abc")])
    return call.out


def ledger_script(side: LedgerSide, run: str) -> Transcript:
    call, ledger, tick = Recorder(), side.ledger, side.clock.advance
    a = side.add_user("a@example.com", None)
    c = side.add_user("c@example.com", "")
    d = side.add_user("d@example.com", None)
    b1, b2, b3, nope = (f"{i}{run}"[:32] for i in range(4))
    key = f"uploads/{run[:6]} drop.zip"

    # batches
    call("create", ledger.create_batch, b1, "bkt", f"uploads/{b1}.zip", "api", "PENDING")
    tick(0.1)
    call("create again keeps the row", ledger.create_batch, b1, "other", "uploads/x.zip", "s3", "FAILED")
    call("create s3", ledger.create_batch, b2, "bkt", key, "s3", "PROCESSING")
    tick(1.5)
    call("create s3 later", ledger.create_batch, b3, "bkt", key, "s3", "PROCESSING")
    call("find newest first", ledger.find_batches, key)
    call("find none", ledger.find_batches, "uploads/none.zip")
    call("claim upload", ledger.batch_for_upload, f"t{run}", b2)
    call("claim upload again finds the first", ledger.batch_for_upload, f"t{run}", b3)
    call("get unknown", ledger.get_batch, nope)
    tick(0.1)
    call("start", ledger.start_batch, b1, 5, 2)
    call("start unknown", ledger.start_batch, nope, 1, 1)
    call("get started", ledger.get_batch, b1)

    # entries
    entries = [NewEntry(i, f"dir/f{i}.pdf", "pdf", 100 + i) for i in range(5)]
    entries += [
        NewEntry(5, "notes.txt", "ignored", 3, "ignored", "not_pdf"),
        NewEntry(6, "d/", "ignored", 0, "ignored", "directory"),
    ]
    call("add", ledger.add_entries, b1, entries)
    tick(0.1)
    call("add again keeps rows", ledger.add_entries, b1, [NewEntry(0, "other.pdf", "pdf", 1)])
    call("get file", ledger.get_file, b1, 0)
    call("get ignored file", ledger.get_file, b1, 5)
    call("get missing file", ledger.get_file, b1, 99)
    call("attempt", ledger.begin_attempt, b1, 0)
    call("attempt again", ledger.begin_attempt, b1, 0)
    call("attempt missing", ledger.begin_attempt, b1, 99)

    # outcomes
    tick(0.1)
    call("record", ledger.record, b1, 1, FileResult("skipped_no_match", "no_email", sha256="cd" * 32))
    call("attempt on a recorded row", ledger.begin_attempt, b1, 1)
    call(
        "record ambiguous",
        ledger.record,
        b1,
        4,
        FileResult("skipped_no_match", "ambiguous", sha256="ef" * 32, users_named=3),
    )
    tick(0.1)
    call("record again keeps the first", ledger.record, b1, 1, FileResult("failed", "gave_up"))
    call("record missing", ledger.record, b1, 99, FileResult("failed", "gave_up"))
    tick(0.1)
    call("link", ledger.link, b1, 0, a, "s3://bkt/pdfs/a.pdf", linked(a, "pdfs/a.pdf"))
    call("link a taken user", ledger.link, b1, 2, a, "s3://bkt/pdfs/a2.pdf", linked(a, "pdfs/a2.pdf"))
    call("link empty-string user", ledger.link, b1, 2, c, "s3://bkt/pdfs/c.pdf", linked(c, "pdfs/c.pdf"))
    call("link a recorded file", ledger.link, b1, 1, d, "s3://bkt/pdfs/d.pdf", linked(d, "pdfs/d.pdf"))
    call("rolled back", ledger.pdf_url_of, d)
    call("link unknown user", ledger.link, b1, 3, "999", "s3://bkt/pdfs/z.pdf", linked("999", "pdfs/z.pdf"))
    call("link unknown file", ledger.link, b1, 99, d, "s3://bkt/pdfs/d.pdf", linked(d, "pdfs/d.pdf"))
    call("still empty", ledger.pdf_url_of, d)
    call("files after links", ledger.list_files, b1, -1, 100)

    # lanes: a file handed to the OCR lane keeps "ocr" whoever records it; a recorded file is not marked
    call("lanes before", ledger.lane_counts, b1, "ocr")
    call("mark for ocr", ledger.mark_lane, b1, 3, "ocr")
    call("mark again", ledger.mark_lane, b1, 3, "ocr")
    call("mark a recorded file is a no-op", ledger.mark_lane, b1, 1, "ocr")
    call("marked", ledger.get_file, b1, 3)
    call("lanes waiting", ledger.lane_counts, b1, "ocr")
    tick(0.1)
    call("record keeps the lane", ledger.record, b1, 3, FileResult("skipped_no_match", "no_email"))
    call("lanes done", ledger.lane_counts, b1, "ocr")
    call("text lane", ledger.lane_counts, b1, "text")
    call("ocr result", ledger.record, b1, 2, FileResult("failed", "timeout", source="ocr"))

    # listing and counting
    for outcome in (None, "", "linked", "ignored", "not_linked", "pending", "failed"):
        call(f"list {outcome!r}", ledger.list_files, b1, -1, 100, outcome)
    call("list page", ledger.list_files, b1, 0, 2)
    call("list other batch", ledger.list_files, b2, -1, 100)
    call("counts", ledger.outcome_counts, b1)
    call("counts empty", ledger.outcome_counts, nope)
    call("done", lambda: sorted(ledger.done_indices(b1)))
    call("done files", ledger.done_files, b1)
    call("done files none", ledger.done_files, nope)

    # lifecycle
    tick(0.1)
    call("unpacked", ledger.mark_unpacked, b1)
    tick(0.1)
    call("unpacked again", ledger.mark_unpacked, b1)
    call("finish", ledger.finish_batch, b1, "COMPLETED", {"linked": 2, "reason:matched": 2}, None)
    tick(0.1)
    call("finish again is ignored", ledger.finish_batch, b1, "FAILED", {}, "corrupt_zip")
    call("start a final batch", ledger.start_batch, b1, 9, 9)
    call("final", ledger.get_batch, b1)
    call("fail", ledger.finish_batch, b2, "FAILED", {}, "corrupt_zip")
    call("failed", ledger.get_batch, b2)

    # announcing a final batch (tally.announce): one claim per lease, marked only by its claim
    tick(0.1)
    mine = {b1, b2, b3}

    def due(created_after: float, after: tuple[float, str] | None = None, limit: int = 100_000) -> list[str]:
        # (the real table holds other runs' batches too: only this run's, in the order given)
        found = ledger.due_batches(side.clock(), created_after, after, limit)
        return [b.batch_id for b in found if b.batch_id in mine]

    call("due: every batch, by when it is due", due, side.clock() - 3600)
    call("due: only those created after", due, side.clock() - 1.65)
    first = ledger.get_batch(b1)
    assert first is not None
    call("due: after a cursor", due, side.clock() - 3600, (first.settle_at, b1))
    call("defer with a stale settle_at is a no-op", ledger.defer_settle, b3, -1.0, side.clock() + 60)
    call("due: b3 still due", due, side.clock() - 3600)
    call("defer", ledger.defer_settle, b3, ledger.get_batch(b3).settle_at, side.clock() + 60)  # type: ignore[union-attr]
    call("due: b3 deferred", due, side.clock() - 3600)
    call("claim a final batch", ledger.claim_announcement, b1, 60.0)
    claim = ledger.get_batch(b1).announce_started_at  # type: ignore[union-attr]
    call("claim it again within the lease", ledger.claim_announcement, b1, 60.0)
    call("claim a batch still processing", ledger.claim_announcement, b3, 60.0)
    call("claim an unknown batch", ledger.claim_announcement, nope, 60.0)
    tick(61)
    call("claim it after the lease", ledger.claim_announcement, b1, 60.0)
    call("mark with the lapsed claim", ledger.mark_announced, b1, claim)
    call("mark with the live claim", ledger.mark_announced, b1, ledger.get_batch(b1).announce_started_at)  # type: ignore[union-attr]
    call("claim an announced batch", ledger.claim_announcement, b1, 0.0)
    call("announced", ledger.get_batch, b1)
    call("due: an announced batch is not", due, side.clock() - 3600)
    call("claim the failed batch", ledger.claim_announcement, b2, 60.0)

    # reopening (pdfbatch retry, dlq --redrive) and the timings written after the outcome
    tick(0.1)
    call("set timings", ledger.set_timings, b1, 1, {"download": 0.5, "update": 0.25})
    call("set timings of an open row", ledger.set_timings, b1, 3, {"download": 1.0})
    call("timed", ledger.get_file, b1, 1)
    call("not timed", ledger.get_file, b1, 3)
    tick(0.1)
    call("reopen a completed batch", ledger.reopen_batch, b1)
    call("reopen it again", ledger.reopen_batch, b1)
    call("reopen a failed batch", ledger.reopen_batch, b2)
    call("reopen an unknown batch", ledger.reopen_batch, nope)
    call("reopened batch", ledger.get_batch, b1)
    call("claim a reopened batch", ledger.claim_announcement, b1, 0.0)
    call("reopen linked", ledger.reopen_file, b1, 0, "linked", "matched")
    call("reopen with a stale outcome", ledger.reopen_file, b1, 1, "failed", "gave_up")
    call("reopen", ledger.reopen_file, b1, 1, "skipped_no_match", "no_email")
    call("reopen twice", ledger.reopen_file, b1, 1, "skipped_no_match", "no_email")
    call("reopen ignored", ledger.reopen_file, b1, 5, "ignored", "not_pdf")
    call("reopen missing", ledger.reopen_file, b1, 99, "failed", "gave_up")
    call("reopened file keeps attempts", ledger.get_file, b1, 1)
    call("counts after reopen", ledger.outcome_counts, b1)
    call("pending after reopen", ledger.list_files, b1, -1, 100, "pending")
    tick(0.1)
    call("record a reopened file", ledger.record, b1, 1, FileResult("failed", "timeout"))
    call("finish a reopened batch", ledger.finish_batch, b1, "COMPLETED", {"linked": 1}, None)
    call("finished again", ledger.get_batch, b1)
    call("claim it once finished again", ledger.claim_announcement, b1, 60.0)

    # uploads claiming batches (issue 11): each batch is claimed by one upload at most
    p1, p2, p3, p4 = (f"{i}{run}"[:32] for i in range(4, 8))
    call("claim the named batch", ledger.batch_for_upload, f"u1{run}", p2, p1)
    call("a duplicate finds it", ledger.batch_for_upload, f"u1{run}", p3, p1)
    call("another upload gets its candidate", ledger.batch_for_upload, f"u2{run}", p3, p1)
    call("its duplicate finds that", ledger.batch_for_upload, f"u2{run}", p4, p1)
    call("no preference", ledger.batch_for_upload, f"u3{run}", p4)
    for batch_id in (p1, p4, p2):
        call(
            "create pending",
            ledger.create_batch,
            batch_id,
            "bkt",
            f"uploads/{batch_id}.zip",
            "api",
            "PENDING",
        )
    tick(0.1)
    counts = {"processed": 0, "linked": 0}
    call("expire a claimed batch", ledger.expire_unclaimed, p1, "upload_expired", counts)
    call("expire an unclaimed one", ledger.expire_unclaimed, p2, "upload_expired", counts)
    call("expire it again", ledger.expire_unclaimed, p2, "upload_expired", counts)
    call("expire a processing batch", ledger.expire_unclaimed, b3, "upload_expired", counts)
    call("expire an unknown batch", ledger.expire_unclaimed, nope, "upload_expired", counts)
    call("expired", ledger.get_batch, p2)
    call("claim an expired batch", ledger.claim_announcement, p2, 60.0)
    tick(0.1)
    call("revive another reason", ledger.revive_expired, p2, "corrupt_zip")
    call("revive", ledger.revive_expired, p2, "upload_expired")
    call("revive again", ledger.revive_expired, p2, "upload_expired")
    call("revived", ledger.get_batch, p2)
    call("claim a revived batch", ledger.claim_announcement, p2, 0.0)
    call("revive a failed batch with files", ledger.revive_expired, b2, "corrupt_zip")
    call("revive a pending batch", ledger.revive_expired, p1, "upload_expired")

    # what gc keeps: final keys of linked entries, by content
    call("linked keys", lambda: sorted(ledger.linked_keys(["ab" * 32, "cd" * 32, "ef" * 32])))
    call("linked keys of nothing", ledger.linked_keys, [])
    return call.out


def test_fake_users_match_mysql_users(real_ledger: LedgerSide) -> None:
    assert_same(users_script(fake_ledger()), users_script(real_ledger))


def test_fake_ledger_matches_mysql_ledger(real_ledger: LedgerSide) -> None:
    run = uuid.uuid4().hex
    assert_same(ledger_script(fake_ledger(), run), ledger_script(real_ledger, run))


def lookups_script(side: LedgerSide, run: str) -> Transcript:
    """Issue 25's reads: a tenant's recent batches (pages, filters). The tenant is this run's own, so
    batches other tests leave in the shared database never show."""
    call, ledger, tick = Recorder(), side.ledger, side.clock.advance
    tenant, other = f"t{run[:20]}", f"u{run[:20]}"
    ids = [f"{i:02d}{run}"[:32] for i in range(6)]
    for n, batch_id in enumerate(ids):
        ledger.create_batch(
            batch_id, "bkt", f"uploads/{batch_id}.zip", "api", "PENDING", other if n == 2 else tenant
        )
        if n == 3:
            tick(0.0)  # two batches at the same instant: batch_id breaks the tie
        else:
            tick(1.25)
    ledger.finish_batch(ids[1], "COMPLETED", {"linked": 1, "processed": 1}, None)
    call("recent", lambda: [b.batch_id for b in ledger.recent_batches(tenant)])
    first = ledger.recent_batches(tenant, limit=2)
    call("page 1", lambda: [b.batch_id for b in first])
    last = first[-1]
    call(
        "page 2",
        lambda: [
            b.batch_id
            for b in ledger.recent_batches(tenant, limit=2, before=(last.created_at, last.batch_id))
        ],
    )
    call("completed", lambda: [b.batch_id for b in ledger.recent_batches(tenant, status="COMPLETED")])
    start = ledger.get_batch(ids[1])
    assert start is not None
    window = (start.created_at, start.created_at + 2.0)
    call(
        "window",
        lambda: [b.batch_id for b in ledger.recent_batches(tenant, since=window[0], until=window[1])],
    )
    call("other tenant", lambda: [b.batch_id for b in ledger.recent_batches(other)])
    call("nobody", ledger.recent_batches, f"n{run[:20]}")

    # a document traced: the same content in three batches of two tenants, and in two entries of one
    digest, other_digest = (
        hashlib.sha256(run.encode()).hexdigest(),
        hashlib.sha256(b"x" + run.encode()).hexdigest(),
    )
    for batch_id in ids[:3]:
        ledger.add_entries(batch_id, [NewEntry(i, f"f{i}.pdf", "pdf", 10) for i in range(3)])
    for batch_id, index, content in (
        (ids[0], 1, digest),
        (ids[1], 0, digest),
        (ids[1], 2, digest),
        (ids[2], 0, digest),
        (ids[0], 0, other_digest),
    ):
        page = 1 + index
        ledger.record(
            batch_id,
            index,
            FileResult("skipped_no_match", "ambiguous", sha256=content, users_named=2, page=page),
        )
        tick(0.5)
    call("trace", ledger.files_by_sha, digest)
    call("trace tenant", ledger.files_by_sha, digest, tenant)
    call("trace other", ledger.files_by_sha, digest, other)
    call("trace limited", ledger.files_by_sha, digest, None, 2)
    call("trace nothing", ledger.files_by_sha, "0" * 64, tenant)

    # a person traced: linked (user_id), and named without linking (keyed hashes in pdfbatch_named)
    user, hashed = (
        f"u-{run}",
        (hashlib.sha256(b"k1" + run.encode()).digest(), hashlib.sha256(b"k2" + run.encode()).digest()),
    )
    ledger.add_entries(ids[3], [NewEntry(i, f"g{i}.pdf", "pdf", 10) for i in range(4)])
    ledger.record(ids[3], 0, FileResult("skipped_already_exists", "already_linked", user_id=user, page=1))
    ledger.record(ids[3], 1, FileResult("skipped_no_match", "ambiguous", users_named=2, page=3, named=hashed))
    ledger.record(ids[3], 2, FileResult("skipped_no_match", "ambiguous", users_named=2, named=hashed[1:]))
    ledger.record(ids[3], 2, FileResult("skipped_no_match", "no_user", named=hashed[:1]))  # recorded already
    ledger.record(ids[2], 1, FileResult("skipped_no_match", "ambiguous", users_named=2, named=hashed[:1]))
    call("user", ledger.files_of_user, user, list(hashed))
    call("user, first key only", ledger.files_of_user, user, list(hashed[:1]))
    call("user, no keys", ledger.files_of_user, user, [])
    call("user of tenant", ledger.files_of_user, user, list(hashed), tenant)
    call("user of other", ledger.files_of_user, user, list(hashed), other)
    call("user limited", ledger.files_of_user, user, list(hashed), None, 1)
    call("reopen", ledger.reopen_file, ids[3], 1, "skipped_no_match", "ambiguous")
    call("user after reopen", ledger.files_of_user, user, list(hashed))
    return call.out


def test_fake_lookups_match_mysql(real_ledger: LedgerSide) -> None:
    run = uuid.uuid4().hex
    assert_same(lookups_script(fake_ledger(), run), lookups_script(real_ledger, run))


# ---------------------------------------------------------------------------------------------
# Users tables as customers have them: string and UUID ids, duplicate emails, latin1 and utf8mb3
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A users table: its DDL ({table} is its name), its email column's charset, the ids to insert."""

    name: str
    ddl: str
    charset: str
    ids: tuple[str, ...] | None  # None: AUTO_INCREMENT


SHAPES = (
    Shape(
        "latin1_string_ids",
        "CREATE TABLE {table} (id VARCHAR(64) PRIMARY KEY, email VARCHAR(320) NOT NULL, "
        "pdf_url VARCHAR(1024) NULL) DEFAULT CHARSET=latin1",
        "latin1",
        ("user/7 ü", "ID-2", "a b", "x.y", "0042", "z"),
    ),
    Shape(
        "utf8mb3_uuid_ids",
        "CREATE TABLE {table} (id CHAR(36) PRIMARY KEY, email VARCHAR(255) NOT NULL, "
        "pdf_url TEXT NULL) DEFAULT CHARSET=utf8mb3",
        "utf8mb3",
        tuple(str(uuid.UUID(int=n * 0x1111_1111_1111_1111)) for n in range(1, 7)),
    ),
    Shape(
        "utf8mb4_bigint_ids",
        "CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(320) NOT NULL, "
        "pdf_url VARCHAR(1024) NULL, KEY by_email (email)) DEFAULT CHARSET=utf8mb4",
        "utf8mb4",
        None,
    ),
)

# Addresses in three scripts: ASCII, Latin-1 accents, Cyrillic, and a 4-byte (outside the BMP) one.
ACCENTED = "josé@example.com"
CYRILLIC = "мария@example.com"
ASTRAL = "𝕞𝕒𝕣𝕚𝕒@example.com"


@dataclass
class UsersSide:
    users: FakeLedger | MysqlBoth
    add_user: Callable[[str, str | None, str | None], str]


def sorted_rows(users: FakeLedger | MysqlBoth, emails: list[str]) -> list[Any]:
    return sorted(users.find_by_emails(emails), key=lambda r: (r.id, r.email))


def users_shape_script(side: UsersSide, shape: Shape, run: str) -> Transcript:
    call, users = Recorder(), side.users
    ids = iter(shape.ids or ())

    def add(email: str, pdf_url: str | None = None) -> str | None:
        if not can_hold(shape.charset, email):
            return None  # the column cannot hold it: MySQL refuses the INSERT (1366)
        return side.add_user(email, pdf_url, next(ids, None))

    alice = add("Alice@Example.COM")
    twin = add("alice@example.com ")  # the same address on a second row (no UNIQUE key)
    bob = add("bob@example.com", "s3://old/b.pdf")
    jose = add(ACCENTED)
    maria = add(CYRILLIC)  # not in the latin1 table
    call("ids", lambda: (alice, twin, bob, jose, maria))

    def find(label: str, emails: list[str]) -> None:
        call(label, sorted_rows, users, emails)

    find("a shared address gives every row", ["ALICE@example.com"])
    find("addresses the column cannot hold are never sent", [CYRILLIC, ASTRAL, "bob@example.com"])
    find("accents are not folded (general_ci would equate them)", ["jose@example.com"])
    find("accents are compared case-insensitively", ["JOSÉ@EXAMPLE.COM"])
    find("thousands of candidates, chunked", [f"n{i}@example.com" for i in range(1200)] + ["bob@example.com"])
    find("only candidates it cannot hold", [ASTRAL])
    call("pdf_url_of", lambda: [users.pdf_url_of(u) for u in (alice, bob, jose, "no such id") if u])

    b = run[:32]
    assert isinstance(users, FakeLedger | MysqlBoth)
    call("create", users.create_batch, b, "bkt", f"uploads/{b}.zip", "api", "PROCESSING")
    call("add", users.add_entries, b, [NewEntry(i, f"f{i}.pdf", "pdf", 1) for i in range(3)])
    assert alice is not None and bob is not None
    call("link a string id", users.link, b, 0, alice, "s3://bkt/a.pdf", linked(alice, "pdfs/a.pdf"))
    call("link a linked user", users.link, b, 1, bob, "s3://bkt/b.pdf", linked(bob, "pdfs/b.pdf"))
    call("linked", lambda: [users.pdf_url_of(u) for u in (alice, twin, bob) if u])
    call("recorded", users.get_file, b, 0)
    return call.out


@pytest.fixture()
def shape_table(db: Any, settings: Settings, run_id: str) -> Iterator[tuple[UsersTable, Any]]:
    table = f"users_{run_id}"
    yield UsersTable(table=table), db
    with db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{table}`")


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.name)
def test_fake_users_match_mysql_users_of_any_shape(
    shape: Shape, shape_table: tuple[UsersTable, Any], settings: Settings
) -> None:
    users_table, db = shape_table
    with db.cursor() as cur:
        cur.execute(shape.ddl.format(table=f"`{users_table.table}`"))

    def add_real(email: str, pdf_url: str | None, user_id: str | None) -> str:
        with db.cursor() as cur:
            if user_id is None:
                cur.execute(
                    f"INSERT INTO `{users_table.table}` (email, pdf_url) VALUES (%s, %s)", (email, pdf_url)
                )
                return str(cur.lastrowid)
            cur.execute(
                f"INSERT INTO `{users_table.table}` (id, email, pdf_url) VALUES (%s, %s, %s)",
                (user_id, email, pdf_url),
            )
            return user_id

    fake = FakeLedger(FakeClock())
    fake.email_charset = shape.charset
    real = MysqlBoth(MysqlLedger(MysqlClient.from_url(settings.mysql_url), users_table, clock=FakeClock()))
    run = uuid.uuid4().hex
    try:
        assert_same(
            users_shape_script(UsersSide(fake, fake.add_user), shape, run),
            users_shape_script(UsersSide(real, add_real), shape, run),
        )
    finally:
        real.client.close()


def misconfigured_script(users: FakeLedger | MysqlBoth) -> Transcript:
    call = Recorder()
    call("find", users.find_by_emails, ["a@example.com"])
    call("find nothing", users.find_by_emails, [])
    call("pdf_url_of", users.pdf_url_of, "1")
    call("link", users.link, "0" * 32, 0, "1", "s3://bkt/a.pdf", linked("1", "pdfs/a.pdf"))
    return call.out


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, email VARCHAR(320) NOT NULL)",
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, mail VARCHAR(320), pdf_url TEXT)",
        None,  # no table at all
    ],
    ids=["no_pdf_url_column", "no_email_column", "no_table"],
)
def test_fake_misconfigured_users_table_matches_mysql(
    ddl: str | None, shape_table: tuple[UsersTable, Any], settings: Settings
) -> None:
    users_table, db = shape_table
    if ddl:
        with db.cursor() as cur:
            cur.execute(ddl.format(table=f"`{users_table.table}`"))
    fake = FakeLedger(FakeClock())
    fake.users_table_error = UsersTableError("misconfigured")
    real = MysqlBoth(MysqlLedger(MysqlClient.from_url(settings.mysql_url), users_table, clock=FakeClock()))
    try:
        assert_same(misconfigured_script(fake), misconfigured_script(real))
    finally:
        real.client.close()


# ---------------------------------------------------------------------------------------------
# Progress
# ---------------------------------------------------------------------------------------------


@dataclass
class ProgressSide:
    progress: Progress
    expire: Callable[[str], None]
    raw: Callable[[str], dict[str, str]]  # the hash as stored, field for field


@pytest.fixture()
def real_progress(settings: Settings) -> Iterator[ProgressSide]:
    client = redis.Redis.from_url(settings.redis_url, decode_responses=True)
    used: list[str] = []

    def expire(batch_id: str) -> None:
        used.append(batch_id)
        client.delete(progress_key(batch_id), done_key(batch_id))

    yield ProgressSide(
        RedisProgress(client, ttl_seconds=600), expire, lambda b: dict(client.hgetall(progress_key(b)))
    )
    for batch_id in used:
        client.delete(progress_key(batch_id), done_key(batch_id))
    client.close()


def progress_script(side: ProgressSide, run: str) -> Transcript:
    call, p = Recorder(), side.progress

    def get(label: str, batch_id: str) -> None:
        # The typed value the services see, and the stored hash behind it.
        call(label, p.get, batch_id)
        call(f"{label} (stored)", side.raw, batch_id)

    b, early, failed, empty = (f"{i}{run}"[:32] for i in range(4))
    for batch_id in (b, early, failed, empty):
        side.expire(batch_id)  # start clean (and let the real side clean up afterwards)

    get("get missing", b)
    call("count missing", p.count, b, 0, "linked", "matched", 1.0)
    call("unpacked missing", p.mark_unpacked, b, 3, 1.0)
    call("init pending", p.init_batch, b, "PENDING", None, 10.0)
    get("pending", b)
    call("init processing", p.init_batch, b, "PROCESSING", 3, 11.0, ignored=2)
    call("init pending never goes back", p.init_batch, b, "PENDING", None, 12.0)
    get("processing", b)
    call("count", p.count, b, 0, "linked", "matched", 13.25)
    call("count same index", p.count, b, 0, "linked", "matched", 14.0)
    call("count other", p.count, b, 1, "failed", "too_large", 15.0)
    call("unpacked", p.mark_unpacked, b, 3, 16.0)
    get("after unpacked", b)
    call("count last", p.count, b, 2, "skipped_no_match", "no_email", 17.0)
    call("count last again", p.count, b, 2, "skipped_no_match", "no_email", 18.0)
    call("init a final batch", p.init_batch, b, "PROCESSING", 5, 19.0)
    call("fail a final batch", p.fail, b, "corrupt_zip", 19.0)
    call("unpacked a final batch", p.mark_unpacked, b, 7, 19.0)
    get("completed", b)

    side.expire(b)
    get("expired", b)
    call("count expired", p.count, b, 2, "failed", "gave_up", 20.0)
    snapshot = LiveProgress("PROCESSING", total_files=4, unpacked=True, created_at=10.0)
    counted = replace(
        snapshot,
        processed=2,
        outcomes={"linked": 1, "failed": 1},
        reasons={"matched": 1, "too_large": 1},
        first_done_at=10.5,
        rebuilt_at=20.25,
    )
    call("rebuild", p.rebuild, b, counted, [0, 1])
    call("rebuild again", p.rebuild, b, snapshot, [])
    call("count a rebuilt index", p.count, b, 1, "failed", "too_large", 21.0)
    call("count new", p.count, b, 2, "failed", "gave_up", 22.0)
    call("count completes", p.count, b, 3, "linked", "matched", 23.0)
    get("rebuilt", b)
    resync = replace(snapshot, processed=1, outcomes={"linked": 1}, reasons={"matched": 1})
    call("rebuild replacing a live hash", p.rebuild, b, resync, [3], replace=True)
    get("replaced", b)
    call("count an index the replace dropped", p.count, b, 0, "failed", "gave_up", 24.0)

    call("init early", p.init_batch, early, "PROCESSING", 2, 1.0)
    call("all counted before unpacked", p.count, early, 0, "linked", "matched", 2.0)
    call("all counted before unpacked", p.count, early, 1, "linked", "matched", 3.0)
    call("unpacked completes", p.mark_unpacked, early, 2, 4.0)
    get("early", early)

    call("fail missing", p.fail, failed, "corrupt_zip", 5.0)
    call("fail again keeps reason", p.fail, failed, "zip_missing", 6.0)
    get("failed", failed)

    call("init empty", p.init_batch, empty, "PROCESSING", 0, 7.0)
    call("empty completes when unpacked", p.mark_unpacked, empty, 0, 8.0)
    get("empty", empty)

    # uncount (pdfbatch retry, dlq --redrive): b is COMPLETED with indices 0-3 counted
    call("uncount", p.uncount, b, 3, "linked", "matched", 24.0)
    call("uncount twice", p.uncount, b, 3, "linked", "matched", 25.0)
    get("reopened", b)
    call("uncount never goes below zero", p.uncount, b, 0, "skipped_already_exists", "already_linked", 26.0)
    call("count a reopened file", p.count, b, 3, "failed", "timeout", 27.0)
    call("count the other back", p.count, b, 0, "failed", "timeout", 27.5)
    get("completed again", b)
    call("uncount in a failed batch", p.uncount, failed, 0, "linked", "matched", 28.0)
    get("still failed", failed)
    side.expire(b)
    call("uncount expired", p.uncount, b, 0, "linked", "matched", 29.0)

    # later uploads through a batch's link (issue 11)
    call("note on a missing hash", p.note_later_upload, b, "f" * 32)
    call("note", p.note_later_upload, failed, "e" * 32)
    call("note the same again", p.note_later_upload, failed, "e" * 32)
    call("note another", p.note_later_upload, failed, "d" * 32)
    get("noted", failed)
    call("rebuild keeps them", p.rebuild, b, replace(snapshot, later_uploads=("c" * 32, "e" * 32)), [])
    get("rebuilt with later uploads", b)
    return call.out


def test_fake_progress_matches_redis_progress(real_progress: ProgressSide) -> None:
    fake = FakeProgress()
    run = uuid.uuid4().hex
    side = ProgressSide(fake, fake.expire, lambda b: dict(fake.hashes.get(b, {})))
    assert_same(progress_script(side, run), progress_script(real_progress, run))
