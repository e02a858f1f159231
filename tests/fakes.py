"""In-memory fakes of the MySQL ledger/users and the Redis progress hash, for unit tests.

Each mirrors its real adapter statement by statement (adapters/mysql.py, the Lua scripts of
adapters/redis.py); tests/integration/test_fakes_contract.py runs both side by side so they cannot drift.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from pdfbatch.adapters.redis import hash_fields, live_progress
from pdfbatch.adapters.users_table import can_hold, normalise
from pdfbatch.errors import DependencyUnavailable, ProgressMissing, UsersTableError
from pdfbatch.model import COUNTED_OUTCOMES, FINAL_STATUSES, FileResult
from pdfbatch.ports import (
    BatchRow,
    CallbackAttempt,
    DoneFile,
    FileRow,
    LiveProgress,
    NewEntry,
    SigningIds,
    TenantKey,
    TracedFile,
    UserRow,
)

_FINAL = ("COMPLETED", "FAILED")


class FakeClock:
    """A clock that moves only when told to (inject as ``Deps.clock`` and the fakes' ``clock``)."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move time forward."""
        self.now += seconds


class FakeLedger:
    """ports.Ledger and ports.Users in memory, with MysqlLedger's semantics (one lock = one transaction)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.RLock()
        self.batches: dict[str, BatchRow] = {}
        self.uploads: dict[str, str] = {}
        self.files: dict[tuple[str, int], FileRow] = {}
        self.named: set[tuple[bytes, str, int]] = set()  # pdfbatch_named: (keyed hash, batch, index)
        self.users: dict[str, UserRow] = {}  # by id, as stored: email as inserted, pdf_url may be ""
        self.email_charset: str | None = "utf8mb4"  # the email column's character set (None: binary)
        # Set to the UsersTableError the adapter raises for a misconfigured table (every users query).
        self.users_table_error: UsersTableError | None = None

    # ---- users -------------------------------------------------------------------------------

    def add_user(self, email: str, pdf_url: str | None = None, user_id: str | None = None) -> str:
        """Insert a user (AUTO_INCREMENT id from 1 unless ``user_id`` is given); return its id.

        Emails need not be unique (no UNIQUE key, like many customers' tables).
        """
        if not can_hold(self.email_charset, email):
            raise ValueError("the email column's character set cannot hold this address (MySQL: 1366)")
        with self._lock:
            if user_id is None:
                user_id = str(max((int(u) for u in self.users if u.isdigit()), default=0) + 1)
            self.users[user_id] = UserRow(user_id, email, pdf_url)
            return user_id

    def _users_query(self) -> None:
        if self.users_table_error is not None:
            raise self.users_table_error

    def find_by_emails(self, emails: Sequence[str]) -> list[UserRow]:
        """Every row whose email equals a candidate, as MysqlLedger.find_by_emails: candidates normalised,
        those the column's character set cannot hold dropped, rows found as a *_ci PAD SPACE collation
        compares (case and trailing blanks) and kept when their normalised email is a candidate."""
        self._users_query()
        wanted = {n for n in map(normalise, emails) if n and can_hold(self.email_charset, n)}
        collated = {_ci(n) for n in wanted}
        with self._lock:
            return [
                UserRow(user.id, user.email, user.pdf_url or None)
                for user in self.users.values()
                if _ci(user.email) in collated and normalise(user.email) in wanted
            ]

    def pdf_url_of(self, user_id: str) -> str | None:
        """The user's current pdf_url (None when empty or no such user)."""
        self._users_query()
        with self._lock:
            user = self.users.get(user_id)
            return (user.pdf_url or None) if user else None

    # ---- batches -----------------------------------------------------------------------------

    def create_batch(
        self,
        batch_id: str,
        bucket: str,
        key: str,
        source: str,
        status: str,
        tenant: str | None = None,
        *,
        settle_at: float | None = None,
    ) -> BatchRow:
        """Insert the batch (owned by ``tenant``, due for settle at ``settle_at``) if new; the stored row."""
        now = self._clock()
        with self._lock:
            return self.batches.setdefault(
                batch_id,
                BatchRow(
                    batch_id,
                    bucket,
                    key,
                    source,
                    status,
                    None,
                    0,
                    {},
                    None,
                    now,
                    now,
                    None,
                    None,
                    tenant=tenant,
                    settle_at=settle_at or now,
                ),
            )

    def batch_for_upload(self, token: str, candidate_id: str, preferred_id: str | None = None) -> str:
        """The batch a token claimed first; else ``preferred_id`` unless claimed, else ``candidate_id``."""
        with self._lock:
            if token not in self.uploads:
                claimed = set(self.uploads.values())  # UNIQUE KEY by_batch
                free = [b for b in (preferred_id, candidate_id) if b is not None and b not in claimed]
                if free:
                    self.uploads[token] = free[0]
            return self.uploads[token]

    def expire_unclaimed(self, batch_id: str, reason: str, counts: Mapping[str, int]) -> bool:
        """FAILED ``reason`` for a PENDING batch no upload has claimed; True if it did."""
        now = self._clock()
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.status != "PENDING" or batch_id in self.uploads.values():
                return False
            stored = json.loads(json.dumps(dict(counts), sort_keys=True))
            self._update_batch(
                batch_id,
                status="FAILED",
                reason=reason,
                counts=stored,
                completed_at=now,
                updated_at=now,
                settle_at=now,
            )
            return True

    def revive_expired(self, batch_id: str, reason: str) -> bool:
        """FAILED ``reason`` with nothing unpacked goes back to PROCESSING, its summary cleared."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or (batch.status, batch.reason, batch.total_files) != ("FAILED", reason, None):
                return False
            self._update_batch(
                batch_id,
                status="PROCESSING",
                reason=None,
                counts={},
                completed_at=None,
                announce_started_at=None,
                announced_at=None,
                updated_at=self._clock(),
                settle_at=self._clock(),
            )
            return True

    def get_batch(self, batch_id: str) -> BatchRow | None:
        """The batch row, or None."""
        with self._lock:
            return self.batches.get(batch_id)

    def find_batches(self, key: str, tenant: str | None = None) -> list[BatchRow]:
        """Batches created from ``key`` (newest first, at most 100); only ``tenant``'s when given."""
        with self._lock:
            rows = [
                b
                for b in self.batches.values()
                if b.object_key == key and (tenant is None or b.tenant == tenant)
            ]
        return sorted(rows, key=lambda b: b.created_at, reverse=True)[:100]

    def recent_batches(
        self,
        tenant: str | None = None,
        *,
        limit: int = 20,
        before: tuple[float, str] | None = None,
        status: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[BatchRow]:
        """Batches newest first (created_at, then batch_id), a page after ``before``."""
        with self._lock:
            rows = [
                b
                for b in self.batches.values()
                if (tenant is None or b.tenant == tenant)
                and (status is None or b.status == status)
                and (since is None or b.created_at >= since)
                and (until is None or b.created_at < until)
                and (before is None or (b.created_at, b.batch_id) < before)
            ]
        return sorted(rows, key=lambda b: (b.created_at, b.batch_id), reverse=True)[:limit]

    def _update_batch(self, batch_id: str, **changes: Any) -> None:
        if batch_id in self.batches:  # UPDATE ... WHERE batch_id = %s: no row, no change
            self.batches[batch_id] = replace(self.batches[batch_id], **changes)

    def start_batch(
        self, batch_id: str, total_files: int, ignored_files: int, object_version: str | None = None
    ) -> None:
        """Record totals (and the version read); PENDING becomes PROCESSING, final statuses are kept."""
        with self._lock:
            batch = self.batches.get(batch_id)
            status = batch.status if batch and batch.status in _FINAL else "PROCESSING"
            now = self._clock()
            self._update_batch(
                batch_id,
                total_files=total_files,
                ignored_files=ignored_files,
                updated_at=now,
                started_at=(batch.started_at if batch else None) or now,
                object_version=object_version or (batch.object_version if batch else None),
                status=status,
                settle_at=min(now, (batch.settle_at if batch else None) or now),
            )

    def mark_unpacked(self, batch_id: str) -> None:
        """Record when unpacking finished (first time only)."""
        now = self._clock()
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch:
                self._update_batch(batch_id, unpacked_at=batch.unpacked_at or now, updated_at=now)

    def finish_batch(self, batch_id: str, status: str, counts: Mapping[str, int], reason: str | None) -> None:
        """Write the final status and summary once; later calls change nothing."""
        assert status in FINAL_STATUSES
        now = self._clock()
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch and batch.status not in _FINAL:
                stored = json.loads(json.dumps(dict(counts), sort_keys=True))
                self._update_batch(
                    batch_id,
                    status=status,
                    counts=stored,
                    reason=reason,
                    completed_at=now,
                    updated_at=now,
                    settle_at=now,
                )

    def due_batches(
        self, now: float, created_after: float, after: tuple[float, str] | None, limit: int
    ) -> list[BatchRow]:
        """Unannounced batches due by ``now``, by (settle_at, batch_id) after the cursor ``after``."""
        with self._lock:
            for b in list(self.batches.values()):
                if b.announced_at is None and b.settle_at is None:
                    self._update_batch(b.batch_id, settle_at=b.created_at)
            rows = [
                b
                for b in self.batches.values()
                if b.announced_at is None
                and b.settle_at is not None
                and b.settle_at <= now
                and b.created_at > created_after
                and (after is None or (b.settle_at, b.batch_id) > after)
            ]
        return sorted(rows, key=lambda b: (b.settle_at or 0.0, b.batch_id))[:limit]

    def defer_settle(self, batch_id: str, seen: float | None, until: float) -> None:
        """settle_at becomes ``until`` if it is still ``seen``."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is not None and batch.settle_at == seen:
                self._update_batch(batch_id, settle_at=until)

    def pending_batches(self, tenant: str | None) -> tuple[int, float | None]:
        """(count, oldest created_at) of ``tenant``'s PENDING batches."""
        with self._lock:
            mine = [
                b.created_at for b in self.batches.values() if b.tenant == tenant and b.status == "PENDING"
            ]
        return len(mine), min(mine, default=None)

    def claim_announcement(self, batch_id: str, lease_seconds: float) -> BatchRow | None:
        """Claim a final, unannounced batch whose last claim (if any) is past the lease."""
        now = self._clock()
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.status not in _FINAL or batch.announced_at is not None:
                return None
            if batch.announce_started_at is not None and batch.announce_started_at > now - lease_seconds:
                return None
            self._update_batch(batch_id, announce_started_at=now)
            return self.batches[batch_id]

    def mark_announced(self, batch_id: str, claimed_at: float) -> bool:
        """``announced_at`` set if the claim ``claimed_at`` still holds."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.announced_at is not None or batch.announce_started_at != claimed_at:
                return False
            self._update_batch(batch_id, announced_at=self._clock())
            return True

    # ---- files -------------------------------------------------------------------------------

    def add_entries(self, batch_id: str, entries: Iterable[NewEntry]) -> None:
        """Register entries; rows that exist are kept as they are."""
        now = self._clock()
        with self._lock:
            for e in entries:
                self.files.setdefault(
                    (batch_id, e.index),
                    FileRow(
                        batch_id=batch_id,
                        index=e.index,
                        name=e.name,
                        kind=e.kind,
                        outcome=e.outcome,
                        reason=e.reason,
                        user_id=None,
                        final_key=None,
                        sha256=None,
                        size=e.size,
                        attempts=0,
                        created_at=now,
                        finished_at=now if e.outcome else None,
                        name_hex=e.name_hex,
                    ),
                )

    def get_file(self, batch_id: str, index: int) -> FileRow | None:
        """One entry's row."""
        with self._lock:
            return self.files.get((batch_id, index))

    def begin_attempt(self, batch_id: str, index: int) -> int:
        """Count an attempt and return its number (0 when there is no such row, or it has an outcome)."""
        with self._lock:
            row = self.files.get((batch_id, index))
            if row is None or row.outcome is not None:
                return 0
            self.files[(batch_id, index)] = replace(row, attempts=row.attempts + 1)
            return row.attempts + 1

    def _record(self, batch_id: str, index: int, result: FileResult) -> bool:
        row = self.files.get((batch_id, index))
        if row is None or row.outcome is not None:
            return False
        self.files[(batch_id, index)] = replace(
            row,
            outcome=result.outcome,
            reason=result.reason,
            user_id=result.user_id,
            final_key=result.final_key,
            sha256=result.sha256 if result.sha256 is not None else row.sha256,
            timings=json.loads(json.dumps(result.detail)) if result.detail else {},
            finished_at=self._clock(),
            users_named=result.users_named,
            source=row.source or result.source,
            page=result.page,
        )
        self.named.update((h, batch_id, index) for h in result.named)
        return True

    def record(self, batch_id: str, index: int, result: FileResult) -> FileRow:
        """Record ``result`` unless an outcome is already there; return the row as stored."""
        with self._lock:
            self._record(batch_id, index, result)
            row = self.files.get((batch_id, index))
        if row is None:
            raise LookupError(f"no ledger row for batch entry {index}")
        return row

    def link(self, batch_id: str, index: int, user_id: str, pdf_url: str, result: FileResult) -> bool:
        """Set the user's pdf_url where empty and record ``result``, both or neither; False when taken."""
        self._users_query()
        with self._lock:
            user = self.users.get(user_id)
            if user is None or user.pdf_url:
                return False
            if not self._record(batch_id, index, result):
                return False  # nothing was written yet: "rolling back" the user is not writing it
            self.users[user_id] = replace(user, pdf_url=pdf_url)
            return True

    def list_files(
        self, batch_id: str, after_index: int, limit: int, outcome: str | None = None
    ) -> list[FileRow]:
        """Entries after ``after_index`` in index order, optionally of one outcome (or not_linked/pending)."""

        def wanted(r: FileRow) -> bool:
            if outcome == "not_linked":
                return r.kind == "pdf" and r.outcome is not None and r.outcome != "linked"
            if outcome == "pending":
                return r.outcome is None
            return not outcome or r.outcome == outcome

        with self._lock:
            rows = [r for (b, i), r in self.files.items() if b == batch_id and i > after_index and wanted(r)]
        return sorted(rows, key=lambda r: r.index)[:limit]

    def outcome_counts(self, batch_id: str) -> dict[str, int]:
        """Counts by outcome and ``reason:<r>`` of counted entries, plus ``processed`` and ``ignored``."""
        counts: dict[str, int] = {o: 0 for o in COUNTED_OUTCOMES}
        counts["processed"] = 0
        counts["ignored"] = 0
        with self._lock:
            rows = [r for (b, _), r in self.files.items() if b == batch_id and r.outcome is not None]
        for r in rows:
            if r.kind != "pdf":
                counts["ignored"] += 1
                continue
            assert r.outcome is not None
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
            counts[f"reason:{r.reason}"] = counts.get(f"reason:{r.reason}", 0) + 1
            counts["processed"] += 1
        return counts

    def done_indices(self, batch_id: str) -> list[int]:
        """Indices of PDF entries with an outcome."""
        with self._lock:
            return sorted(
                i for (b, i), r in self.files.items() if b == batch_id and r.kind == "pdf" and r.outcome
            )

    def done_files(self, batch_id: str) -> list[DoneFile]:
        """PDF entries with an outcome, read under the one lock (a consistent snapshot)."""
        with self._lock:
            rows = [r for (b, _), r in self.files.items() if b == batch_id and r.kind == "pdf" and r.outcome]
        return [
            DoneFile(r.index, r.outcome or "", r.reason or "", r.finished_at)
            for r in sorted(rows, key=lambda r: r.index)
        ]

    def linked_keys(self, sha256s: Sequence[str]) -> set[str]:
        """Final keys of linked entries with one of these contents."""
        wanted = set(sha256s)
        with self._lock:
            return {
                r.final_key
                for r in self.files.values()
                if r.sha256 in wanted and r.outcome == "linked" and r.final_key is not None
            }

    def files_by_sha(self, sha256: str, tenant: str | None = None, limit: int = 100) -> list[TracedFile]:
        """Entries of this content, newest batch first, then in entry order."""
        with self._lock:
            rows = [r for r in self.files.values() if r.sha256 == sha256]
            return self._traced(rows, tenant, limit)

    def files_of_user(
        self, user_id: str, named: Sequence[bytes], tenant: str | None = None, limit: int = 100
    ) -> list[TracedFile]:
        """Entries recorded with ``user_id``, and those that recorded one of the hashes ``named``."""
        wanted = set(named)
        with self._lock:
            keys = {(b, i) for h, b, i in self.named if h in wanted}
            rows = [r for k, r in self.files.items() if r.user_id == user_id or k in keys]
            return self._traced(rows, tenant, limit)

    def _traced(self, rows: Iterable[FileRow], tenant: str | None, limit: int) -> list[TracedFile]:
        """The rows with their batches (JOIN), of ``tenant`` only when given, as the trace orders them."""
        found = []
        for r in rows:
            b = self.batches.get(r.batch_id)
            if b is not None and (tenant is None or b.tenant == tenant):
                found.append(TracedFile(r, b.created_at, b.object_key, b.tenant, b.status))
        found.sort(key=lambda t: (-t.batch_created_at, _desc(t.file.batch_id), t.file.index))
        return found[:limit]

    def set_timings(self, batch_id: str, index: int, timings: Mapping[str, float]) -> None:
        """Replace the timings of a recorded entry."""
        with self._lock:
            row = self.files.get((batch_id, index))
            if row is not None and row.outcome is not None:
                self.files[(batch_id, index)] = replace(row, timings=json.loads(json.dumps(dict(timings))))

    def reopen_batch(self, batch_id: str) -> bool:
        """COMPLETED goes back to PROCESSING, its summary cleared; other statuses are kept."""
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.status != "COMPLETED":
                return False
            self._update_batch(
                batch_id,
                status="PROCESSING",
                counts={},
                completed_at=None,
                announce_started_at=None,
                announced_at=None,
                updated_at=self._clock(),
                settle_at=self._clock(),
            )
            return True

    def reopen_file(self, batch_id: str, index: int, outcome: str, reason: str) -> bool:
        """Clear a recorded outcome other than linked if it is still the one given; keep attempts."""
        with self._lock:
            row = self.files.get((batch_id, index))
            if row is None or row.kind != "pdf" or row.outcome == "linked":
                return False
            if (row.outcome, row.reason) != (outcome, reason):
                return False
            self.files[(batch_id, index)] = replace(
                row,
                outcome=None,
                reason=None,
                user_id=None,
                final_key=None,
                timings={},
                finished_at=None,
                users_named=None,
                page=None,
            )
            self.named = {n for n in self.named if n[1:] != (batch_id, index)}
            return True

    def mark_lane(self, batch_id: str, index: int, lane: str) -> None:
        """Note that a file without an outcome is handed to ``lane``; a recorded file is left alone."""
        with self._lock:
            row = self.files.get((batch_id, index))
            if row is not None and row.outcome is None:
                self.files[(batch_id, index)] = replace(row, source=lane)

    def lane_counts(self, batch_id: str, lane: str) -> dict[str, int]:
        """PDF entries of ``lane``: {"waiting": no outcome yet, "done": recorded}."""
        with self._lock:
            rows = [r for (b, _), r in self.files.items() if b == batch_id and r.kind == "pdf"]
        ours = [r for r in rows if r.source == lane]
        return {
            "waiting": sum(1 for r in ours if r.outcome is None),
            "done": sum(1 for r in ours if r.outcome is not None),
        }


class FakeProgress:
    """ports.Progress in memory: each method is the matching Lua script of adapters/redis.py.

    ``hashes`` holds each batch's fields as the Redis hash does (strings); they are read and written as
    ``LiveProgress`` through the adapter's own ``live_progress``/``hash_fields``. There is no
    clock-driven TTL: ``expire`` drops a batch's hash and done set the way an expiry (or a Redis
    restart) would.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.hashes: dict[str, dict[str, str]] = {}
        self.done: dict[str, set[str]] = {}

    def expire(self, batch_id: str) -> None:
        """Simulate the TTL running out: both keys of the batch disappear."""
        with self._lock:
            self.hashes.pop(batch_id, None)
            self.done.pop(batch_id, None)

    def _complete_if_done(self, h: dict[str, str], now: str) -> str | None:
        st = h.get("status")
        if st in _FINAL or h.get("unpacked") != "1":
            return st
        total = float(h.get("totalFiles") or "-1")
        processed = float(h.get("processed") or "0")
        if total >= 0 and processed >= total:
            h.update(status="COMPLETED", completedAt=now, updatedAt=now)
            return "COMPLETED"
        return st

    @staticmethod
    def _zeroed(now: str) -> dict[str, str]:
        return {"processed": "0", **{o: "0" for o in COUNTED_OUTCOMES}, "unpacked": "0", "createdAt": now}

    def init_batch(
        self, batch_id: str, status: str, total_files: int | None, now: float, ignored: int = 0
    ) -> None:
        """Create the hash (counters at 0) or update status/total of a non-final batch."""
        ts = _ts(now)
        with self._lock:
            h = self.hashes.get(batch_id)
            if h is None:
                h = self.hashes[batch_id] = {**self._zeroed(ts), "status": status, "updatedAt": ts}
                keep = False
            else:
                keep = h.get("status") in _FINAL or (status == "PENDING" and h.get("status") == "PROCESSING")
                if not keep:
                    h["status"] = status
                    h["updatedAt"] = ts
            if not keep:
                h["ignored"] = str(ignored)
                if total_files is not None:
                    h["totalFiles"] = str(total_files)
            if h.get("status") == "PROCESSING":
                h.setdefault("startedAt", ts)

    def count(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Count one file once; return (newly counted, status). Raises ProgressMissing when expired."""
        ts = _ts(now)
        with self._lock:
            h = self.hashes.get(batch_id)
            if h is None:
                raise ProgressMissing(batch_id)
            done = self.done.setdefault(batch_id, set())
            added = str(index) not in done
            if added:
                done.add(str(index))
                for name in ("processed", outcome, f"reason:{reason}"):
                    h[name] = str(int(h.get(name, "0")) + 1)
                h["updatedAt"] = ts
                h.setdefault("firstDoneAt", ts)
            return added, str(self._complete_if_done(h, ts))

    def mark_unpacked(self, batch_id: str, total_files: int, now: float) -> str:
        """Unpacking finished; return the status afterwards (COMPLETED when everything is counted)."""
        ts = _ts(now)
        with self._lock:
            h = self.hashes.get(batch_id)
            if h is None:
                raise ProgressMissing(batch_id)
            if h.get("status") not in _FINAL:
                h.update(unpacked="1", totalFiles=str(total_files), unpackedAt=ts, updatedAt=ts)
            return str(self._complete_if_done(h, ts))

    def fail(self, batch_id: str, reason: str, now: float) -> None:
        """Mark the batch FAILED (unless already final); creates a zeroed hash when missing."""
        ts = _ts(now)
        with self._lock:
            h = self.hashes.setdefault(batch_id, {})
            if h.get("status") in _FINAL:
                return
            if "status" not in h:
                h.update(self._zeroed(ts))
            h.update(status="FAILED", reason=reason, completedAt=ts, updatedAt=ts)

    def get(self, batch_id: str) -> LiveProgress | None:
        """The batch's counters, or None when the hash is missing."""
        with self._lock:
            h = self.hashes.get(batch_id)
            return live_progress(h) if h else None

    def rebuild(self, batch_id: str, live: LiveProgress, done: Sequence[int], replace: bool = False) -> bool:
        """Recreate the hash and done set from a ledger snapshot unless the hash exists (or ``replace``)."""
        with self._lock:
            if replace:
                self.hashes.pop(batch_id, None)
            if self.hashes.get(batch_id):
                return False
            self.hashes[batch_id] = hash_fields(live)
            self.done[batch_id] = {str(i) for i in done}
            return True

    def uncount(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Take one counted file back out (counters never below 0); a COMPLETED batch is PROCESSING again."""
        ts = _ts(now)
        with self._lock:
            h = self.hashes.get(batch_id)
            if h is None:
                raise ProgressMissing(batch_id)
            done = self.done.setdefault(batch_id, set())
            removed = str(index) in done
            if removed:
                done.discard(str(index))
                for name in ("processed", outcome, f"reason:{reason}"):
                    if int(h.get(name, "0")) > 0:
                        h[name] = str(int(h[name]) - 1)
            if h.get("status") == "COMPLETED":
                h["status"] = "PROCESSING"
                h.pop("completedAt", None)
            h["updatedAt"] = ts
            return removed, str(h.get("status"))

    def note_later_upload(self, batch_id: str, later_id: str) -> bool:
        """Add a later upload's batch to the hash's list (once); False when the hash is gone."""
        with self._lock:
            h = self.hashes.get(batch_id)
            if h is None:
                return False
            later = [b for b in h.get("laterUploads", "").split(",") if b]
            if later_id not in later:
                h["laterUploads"] = ",".join([*later, later_id])
            return True


def _desc(text: str) -> tuple[int, ...]:
    """A sort key that orders ASCII text descending (ORDER BY ... DESC of a batch id)."""
    return tuple(-ord(c) for c in text)


def _ci(email: str) -> str:
    # Accent folding of utf8mb4_general_ci is not modelled: addresses found in PDFs are matched as typed.
    return email.rstrip(" ").lower()


def _ts(now: float) -> str:
    return f"{now:.3f}"


class FakeEvents:
    """ports.Events in memory: every event put, in order (``fail`` makes the next puts raise, as a
    worker that dies before its PutEvents returns)."""

    def __init__(self) -> None:
        self.put: list[tuple[str, str, dict[str, Any]]] = []
        self.fail = 0

    def put_event(self, source: str, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Record one event (JSON round-tripped, as EventBridge would carry it)."""
        if self.fail:
            self.fail -= 1
            raise DependencyUnavailable("events", "killed")
        self.put.append((source, detail_type, json.loads(json.dumps(dict(detail)))))

    def of(self, batch_id: str) -> list[tuple[str, str, dict[str, Any]]]:
        """The events put for one batch."""
        return [e for e in self.put if e[2].get("batchId") == batch_id]


class FakeCallbackLog:
    """ports.CallbackLog in memory, with MysqlCallbackLog's semantics (first URL kept; one row per
    (delivery, attempt); only an attempt in flight is finished)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self.urls: dict[str, str] = {}
        self.rows: dict[tuple[str, int], CallbackAttempt] = {}

    def set_url(self, batch_id: str, url: str, created_at: float) -> None:
        """INSERT IGNORE."""
        with self._lock:
            self.urls.setdefault(batch_id, url)

    def url_of(self, batch_id: str) -> str | None:
        """The batch's URL."""
        return self.urls.get(batch_id)

    def begin_attempt(
        self, batch_id: str, delivery_id: str, attempt: int, kind: str, started_at: float
    ) -> bool:
        """INSERT IGNORE on (delivery_id, attempt)."""
        with self._lock:
            if (delivery_id, attempt) in self.rows:
                return False
            self.rows[(delivery_id, attempt)] = CallbackAttempt(
                batch_id, delivery_id, attempt, kind, started_at, None, None, None
            )
            return True

    def finish_attempt(
        self, delivery_id: str, attempt: int, http_status: int | None, error: str | None, duration_ms: int
    ) -> None:
        """UPDATE ... WHERE duration_ms IS NULL."""
        with self._lock:
            row = self.rows.get((delivery_id, attempt))
            if row is not None and row.duration_ms is None:
                self.rows[(delivery_id, attempt)] = replace(
                    row, http_status=http_status, error=error, duration_ms=duration_ms
                )

    def delivered(self, delivery_id: str) -> bool:
        """A 2xx recorded for the delivery."""
        return any(
            r.delivery_id == delivery_id and r.http_status is not None and 200 <= r.http_status <= 299
            for r in self.rows.values()
        )

    def attempts(self, batch_id: str) -> list[CallbackAttempt]:
        """Oldest first."""
        return sorted(
            (r for r in self.rows.values() if r.batch_id == batch_id), key=lambda r: (r.started_at, r.attempt)
        )


class FakeTenantKeys:
    """ports.TenantKeys in memory, as adapters/tenant_keys.py (hashes only)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self.keys: dict[str, TenantKey] = {}
        self.lookups = 0  # tenant_of calls: the status function's one read per request
        self.defaults: dict[str, str] = {}  # tenant -> default callback URL (pdfbatch_tenants)
        self.signing: dict[str, SigningIds] = {}  # tenant -> its signing secret ids (pdfbatch_tenants)

    def add(self, tenant: str, key_hash: str) -> TenantKey:
        """Store a new key's hash for ``tenant``."""
        if key_hash in self.keys:
            raise ValueError("duplicate key hash (MySQL: 1062)")
        self.keys[key_hash] = TenantKey(key_hash, tenant, self._clock(), None)
        return self.keys[key_hash]

    def tenant_of(self, key_hash: str) -> str | None:
        """The tenant of a live key with this hash, or None."""
        self.lookups += 1
        key = self.keys.get(key_hash)
        return key.tenant if key is not None and key.revoked_at is None else None

    def is_active(self, tenant: str) -> bool:
        """Whether ``tenant`` holds a live key."""
        return any(k.tenant == tenant and k.revoked_at is None for k in self.keys.values())

    def revoke(self, tenant: str) -> int:
        """Revoke every live key of ``tenant``; how many."""
        live = [h for h, k in self.keys.items() if k.tenant == tenant and k.revoked_at is None]
        for h in live:
            self.keys[h] = replace(self.keys[h], revoked_at=self._clock())
        return len(live)

    def list_keys(self) -> list[TenantKey]:
        """Every key row, by tenant and creation time."""
        return sorted(self.keys.values(), key=lambda k: (k.tenant, k.created_at))

    def set_callback(self, tenant: str, url: str | None) -> None:
        """The upsert of pdfbatch_tenants."""
        if url is None:
            self.defaults.pop(tenant, None)
        else:
            self.defaults[tenant] = url

    def callback_of(self, tenant: str) -> str | None:
        """``tenant``'s default callback URL, or None."""
        return self.defaults.get(tenant)

    def callbacks(self) -> dict[str, str]:
        """Every tenant's default callback URL, by tenant."""
        return dict(sorted(self.defaults.items()))

    def signing_ids(self, tenant: str) -> SigningIds | None:
        """``tenant``'s signing secret ids, or None."""
        return self.signing.get(tenant)

    def set_signing_ids(self, tenant: str, ids: SigningIds) -> None:
        """Replace ``tenant``'s signing secret ids."""
        self.signing[tenant] = ids
