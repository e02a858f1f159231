"""The ledger (batches and per-file results) and the customer's users table, over one MysqlClient
(``adapters/mysql.py``: the connection, the schema and its migrations)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.users_table import MysqlUsers, quote_table, users_errors
from pdfbatch.config import UsersTable
from pdfbatch.model import COUNTED_OUTCOMES, FINAL_STATUSES, FileResult
from pdfbatch.ports import BatchRow, DoneFile, FileRow, NewEntry, TracedFile

# entry_name is TEXT: 65,535 bytes. A 65,535-byte name decoded as cp437 can take three times that in
# UTF-8 (INSERT IGNORE would cut it anywhere, silently), so the shown name is cut to fit with an
# ellipsis; name_hex keeps every byte.
_NAME_BYTES = 65_535

_SELECT_BATCH = "SELECT * FROM pdfbatch_batches WHERE batch_id = %s"
_FIND_BATCHES = (
    "SELECT * FROM pdfbatch_batches WHERE key_hash = %s AND object_key = %s "
    "ORDER BY created_at DESC LIMIT 100"
)
_FIND_TENANT_BATCHES = (
    "SELECT * FROM pdfbatch_batches WHERE key_hash = %s AND object_key = %s AND tenant = %s "
    "ORDER BY created_at DESC LIMIT 100"
)
_SELECT_FILE = "SELECT * FROM pdfbatch_files WHERE batch_id = %s AND entry_index = %s"
_SELECT_LINKED_KEYS = (
    "SELECT DISTINCT final_key FROM pdfbatch_files "
    "WHERE sha256 IN ({placeholders}) AND outcome = 'linked' AND final_key IS NOT NULL"
)


def _key_hash(key: str) -> bytes:
    import hashlib

    return hashlib.sha256(key.encode("utf-8")).digest()


def _batch(row: Mapping[str, Any]) -> BatchRow:
    return BatchRow(
        batch_id=row["batch_id"],
        bucket=row["bucket"],
        object_key=row["object_key"],
        source=row["source"],
        status=row["status"],
        total_files=row["total_files"],
        ignored_files=row["ignored_files"],
        counts=json.loads(row["counts"]) if row["counts"] else {},
        reason=row["reason"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        unpacked_at=row["unpacked_at"],
        completed_at=row["completed_at"],
        started_at=row.get("started_at"),
        object_version=row.get("object_version"),
        announce_started_at=row.get("announce_started_at"),
        announced_at=row.get("announced_at"),
        tenant=row.get("tenant"),
        settle_at=row.get("settle_at"),
    )


def _file(row: Mapping[str, Any]) -> FileRow:
    return FileRow(
        batch_id=row["batch_id"],
        index=row["entry_index"],
        name=row["entry_name"],
        kind=row["kind"],
        outcome=row["outcome"],
        reason=row["reason"],
        user_id=row["user_id"],
        final_key=row["final_key"],
        sha256=row["sha256"],
        size=row["size"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        timings=json.loads(row["timings"]) if row["timings"] else {},
        users_named=row.get("users_named"),
        name_hex=row.get("name_hex"),
        source=row.get("source"),
        page=row.get("decided_page"),
    )


def _traced(row: Mapping[str, Any]) -> TracedFile:
    return TracedFile(_file(row), row["b_created_at"], row["b_object_key"], row["b_tenant"], row["b_status"])


# A trace's rows: the entry and what its batch says of it, newest batch first.
_TRACE_SELECT = (
    "SELECT f.*, b.created_at AS b_created_at, b.object_key AS b_object_key, b.tenant AS b_tenant, "
    "b.status AS b_status FROM pdfbatch_files AS f JOIN pdfbatch_batches AS b ON b.batch_id = f.batch_id "
)
_TRACE_ORDER = " ORDER BY b.created_at DESC, f.batch_id DESC, f.entry_index LIMIT %s"


def _fit_name(name: str) -> str:
    """``name``, cut (with an ellipsis) to what entry_name holds; almost every name is returned as is."""
    raw = name.encode("utf-8")
    if len(raw) <= _NAME_BYTES:
        return name
    return raw[: _NAME_BYTES - 3].decode("utf-8", "ignore") + "\u2026"


class MysqlLedger:
    """The Ledger over a MysqlClient. Its ``link`` writes the users table too (the user's pdf_url and the
    file's outcome in one statement); reading users is MysqlUsers (adapters/users_table.py), which may
    share the client."""

    def __init__(self, client: MysqlClient, users: UsersTable, clock: Any = time.time) -> None:
        self.client = client
        self.users = users
        self._clock = clock
        self.user_rows = MysqlUsers(client, users)  # link() needs the id column's type
        # Only identifiers are formatted in (validated as plain names in config); values stay %s.
        u = users
        # The user's pdf_url and the file's outcome in one multi-table UPDATE: the join has a row only
        # while the user is unlinked AND the file has no outcome, so both rows change or neither does
        # (one atomic statement: one round trip instead of BEGIN, two UPDATEs and COMMIT).
        self._sql_link = (
            f"UPDATE {quote_table(u.table)} AS u JOIN pdfbatch_files AS f "
            "ON f.batch_id = %s AND f.entry_index = %s AND f.outcome IS NULL "
            f"SET u.`{u.pdf_url_column}` = %s, {_RECORD_SET} "
            f"WHERE u.`{u.id_column}` = %s "
            f"AND (u.`{u.pdf_url_column}` IS NULL OR u.`{u.pdf_url_column}` = '')"
        )

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
        """Insert the batch (owned by ``tenant``, due for settle at ``settle_at``, default now) if new and
        return the stored row."""
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT IGNORE INTO pdfbatch_batches (batch_id, bucket, object_key, key_hash, source, "
                "status, created_at, updated_at, tenant, settle_at) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (batch_id, bucket, key, _key_hash(key), source, status, now, now, tenant, settle_at or now),
            )
            cur.execute(_SELECT_BATCH, (batch_id,))
            row = cur.fetchone()
        assert row is not None
        return _batch(row)

    def batch_for_upload(self, token: str, candidate_id: str, preferred_id: str | None = None) -> str:
        """The batch a token claimed first; else ``preferred_id`` unless claimed, else ``candidate_id``.

        Each INSERT IGNORE is atomic and is ignored on either key (the token claimed already, or the
        batch claimed by another upload), so of two uploads racing for ``preferred_id`` one gets it.
        """
        now = self._clock()
        sql = "INSERT IGNORE INTO pdfbatch_uploads (token, batch_id, created_at) VALUES (%s, %s, %s)"
        with self.client.cursor() as cur:
            if preferred_id is not None:
                cur.execute(sql, (token, preferred_id, now))
            cur.execute(sql, (token, candidate_id, now))
            cur.execute("SELECT batch_id FROM pdfbatch_uploads WHERE token = %s", (token,))
            row = cur.fetchone()
        assert row is not None
        return str(row["batch_id"])

    def expire_unclaimed(self, batch_id: str, reason: str, counts: Mapping[str, int]) -> bool:
        """FAILED ``reason`` for a PENDING batch no upload has claimed, in one statement; True if it did.

        One statement: an upload claims before it reads the batch row, so a claim committed first
        stops the expiry, and an expiry committed first is seen (and revived) by the upload.
        """
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET status = 'FAILED', reason = %s, counts = %s, "
                "completed_at = %s, updated_at = %s, settle_at = %s WHERE batch_id = %s "
                "AND status = 'PENDING' "
                "AND NOT EXISTS (SELECT 1 FROM pdfbatch_uploads AS u WHERE u.batch_id = %s)",
                (reason, json.dumps(dict(counts), sort_keys=True), now, now, now, batch_id, batch_id),
            )
            return bool(cur.rowcount == 1)

    def revive_expired(self, batch_id: str, reason: str) -> bool:
        """FAILED ``reason`` with nothing unpacked goes back to PROCESSING, its summary cleared."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET status = 'PROCESSING', reason = NULL, counts = NULL, "
                "completed_at = NULL, announce_started_at = NULL, announced_at = NULL, updated_at = %s, "
                "settle_at = %s "
                "WHERE batch_id = %s AND status = 'FAILED' AND reason = %s AND total_files IS NULL",
                (self._clock(), self._clock(), batch_id, reason),
            )
            return bool(cur.rowcount == 1)

    def get_batch(self, batch_id: str) -> BatchRow | None:
        """The batch row, or None."""
        with self.client.cursor() as cur:
            cur.execute(_SELECT_BATCH, (batch_id,))
            row = cur.fetchone()
        return _batch(row) if row else None

    def find_batches(self, key: str, tenant: str | None = None) -> list[BatchRow]:
        """Batches created from ``key`` (newest first, at most 100); only ``tenant``'s when given."""
        with self.client.cursor() as cur:
            if tenant is None:
                cur.execute(_FIND_BATCHES, (_key_hash(key), key))
            else:
                cur.execute(_FIND_TENANT_BATCHES, (_key_hash(key), key, tenant))
            rows = cur.fetchall()
        return [_batch(r) for r in rows]

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
        """Batches newest first, a page after ``before`` (by_tenant for a tenant, else by_created)."""
        where: list[str] = []
        args: list[Any] = []
        if tenant is not None:
            where.append("tenant = %s")
            args.append(tenant)
        if status is not None:
            where.append("status = %s")
            args.append(status)
        if since is not None:
            where.append("created_at >= %s")
            args.append(since)
        if until is not None:
            where.append("created_at < %s")
            args.append(until)
        if before is not None:
            where.append("(created_at < %s OR (created_at = %s AND batch_id < %s))")
            args += [before[0], before[0], before[1]]
        sql = "SELECT * FROM pdfbatch_batches"
        if where:
            sql += f" WHERE {' AND '.join(where)}"
        sql += " ORDER BY created_at DESC, batch_id DESC LIMIT %s"
        args.append(int(limit))
        with self.client.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        return [_batch(r) for r in rows]

    def start_batch(
        self, batch_id: str, total_files: int, ignored_files: int, object_version: str | None = None
    ) -> None:
        """Record totals (and the version read); PENDING becomes PROCESSING, final statuses are kept."""
        with self.client.cursor() as cur:
            now = self._clock()
            cur.execute(
                "UPDATE pdfbatch_batches SET total_files = %s, ignored_files = %s, updated_at = %s, "
                "started_at = COALESCE(started_at, %s), object_version = COALESCE(%s, object_version), "
                "settle_at = LEAST(COALESCE(settle_at, %s), %s), "
                "status = IF(status IN ('COMPLETED', 'FAILED'), status, 'PROCESSING') WHERE batch_id = %s",
                (total_files, ignored_files, now, now, object_version, now, now, batch_id),
            )

    def mark_unpacked(self, batch_id: str) -> None:
        """Record when unpacking finished (first time only)."""
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET unpacked_at = COALESCE(unpacked_at, %s), updated_at = %s "
                "WHERE batch_id = %s",
                (now, now, batch_id),
            )

    def finish_batch(self, batch_id: str, status: str, counts: Mapping[str, int], reason: str | None) -> None:
        """Write the final status and summary once; later calls change nothing."""
        assert status in FINAL_STATUSES
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET status = %s, counts = %s, reason = %s, "
                "completed_at = %s, updated_at = %s, settle_at = %s "
                "WHERE batch_id = %s AND status NOT IN ('COMPLETED', 'FAILED')",
                (status, json.dumps(dict(counts), sort_keys=True), reason, now, now, now, batch_id),
            )

    def due_batches(
        self, now: float, created_after: float, after: tuple[float, str] | None, limit: int
    ) -> list[BatchRow]:
        """Unannounced batches due by ``now`` (settle_at), by when each is due, after the cursor ``after``
        ((settle_at, batch_id) of the last one read), created after ``created_after`` (by_settle_at)."""
        with self.client.cursor() as cur:
            if after is None:
                # Rows from before settle_at, or written by a function version older than it: due now.
                cur.execute(
                    "UPDATE pdfbatch_batches SET settle_at = created_at "
                    "WHERE announced_at IS NULL AND settle_at IS NULL",
                )
                cur.execute(
                    "SELECT * FROM pdfbatch_batches WHERE announced_at IS NULL AND settle_at <= %s "
                    "AND created_at > %s ORDER BY settle_at, batch_id LIMIT %s",
                    (now, created_after, int(limit)),
                )
            else:
                cur.execute(
                    "SELECT * FROM pdfbatch_batches WHERE announced_at IS NULL AND settle_at <= %s "
                    "AND (settle_at > %s OR (settle_at = %s AND batch_id > %s)) "
                    "AND created_at > %s ORDER BY settle_at, batch_id LIMIT %s",
                    (now, after[0], after[0], after[1], created_after, int(limit)),
                )
            return [_batch(row) for row in cur.fetchall()]

    def defer_settle(self, batch_id: str, seen: float | None, until: float) -> None:
        """Settle looks at the batch again at ``until``, unless its settle_at moved since it read ``seen``."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET settle_at = %s WHERE batch_id = %s AND settle_at <=> %s",
                (until, batch_id, seen),
            )

    def pending_batches(self, tenant: str | None) -> tuple[int, float | None]:
        """(how many, the oldest's created_at) of ``tenant``'s batches still waiting for their upload."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM pdfbatch_batches "
                "WHERE tenant <=> %s AND status = 'PENDING'",
                (tenant,),
            )
            row = cur.fetchone()
        if not row:
            return 0, None
        return int(row["n"]), (float(row["oldest"]) if row["oldest"] is not None else None)

    def claim_announcement(self, batch_id: str, lease_seconds: float) -> BatchRow | None:
        """One UPDATE claims a final, unannounced batch whose last claim (if any) is past the lease."""
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET announce_started_at = %s WHERE batch_id = %s "
                "AND status IN ('COMPLETED', 'FAILED') AND announced_at IS NULL "
                "AND (announce_started_at IS NULL OR announce_started_at <= %s)",
                (now, batch_id, now - lease_seconds),
            )
            if cur.rowcount != 1:
                return None
            cur.execute(_SELECT_BATCH, (batch_id,))
            row = cur.fetchone()
        return _batch(row) if row else None

    def mark_announced(self, batch_id: str, claimed_at: float) -> bool:
        """``announced_at`` set if the claim ``claimed_at`` still holds (not re-claimed, not reopened)."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET announced_at = %s WHERE batch_id = %s "
                "AND announced_at IS NULL AND announce_started_at = %s",
                (self._clock(), batch_id, claimed_at),
            )
            return bool(cur.rowcount == 1)

    # ---- files -------------------------------------------------------------------------------

    def add_entries(self, batch_id: str, entries: Iterable[NewEntry]) -> None:
        """Register entries in chunks; rows that exist are kept as they are."""
        now = self._clock()
        rows = [
            (
                batch_id,
                e.index,
                _fit_name(e.name),
                e.name_hex,
                e.kind,
                e.size,
                e.outcome,
                e.reason,
                now,
                now if e.outcome else None,
            )
            for e in entries
        ]
        with self.client.cursor() as cur:
            for start in range(0, len(rows), 1000):
                cur.executemany(
                    "INSERT IGNORE INTO pdfbatch_files (batch_id, entry_index, entry_name, name_hex, kind, "
                    "size, outcome, reason, created_at, finished_at) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    rows[start : start + 1000],
                )

    def get_file(self, batch_id: str, index: int) -> FileRow | None:
        """One entry's row."""
        with self.client.cursor() as cur:
            cur.execute(_SELECT_FILE, (batch_id, index))
            row = cur.fetchone()
        return _file(row) if row else None

    def begin_attempt(self, batch_id: str, index: int) -> int:
        """Count an attempt and return its number (0 when there is no such row, or it has an outcome).

        A recorded row is never touched again: a duplicate delivery that read the row just before the
        first one recorded it must not change it after the batch's report was written from it.

        One statement, not UPDATE then SELECT: LAST_INSERT_ID(expr) makes the server return the new
        count in the UPDATE's own reply (as the insert id), per connection, so no other writer can
        interleave.
        """
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_files SET attempts = LAST_INSERT_ID(attempts + 1), started_at = %s "
                "WHERE batch_id = %s AND entry_index = %s AND outcome IS NULL",
                (self._clock(), batch_id, index),
            )
            return int(cur.lastrowid or 0) if cur.rowcount == 1 else 0

    def _record_values(self, result: FileResult) -> tuple[Any, ...]:
        # The values of _RECORD_SET, in its order.
        return (
            result.outcome,
            result.reason,
            result.user_id,
            result.final_key,
            result.sha256,
            json.dumps(result.detail, sort_keys=True) if result.detail else None,
            self._clock(),
            result.users_named,
            result.source,
            result.page,
        )

    def record(self, batch_id: str, index: int, result: FileResult) -> FileRow:
        """Record ``result`` unless an outcome is already there; return the row as stored."""
        with self.client.cursor() as cur:
            cur.execute(
                f"UPDATE pdfbatch_files AS f SET {_RECORD_SET} "
                "WHERE f.batch_id = %s AND f.entry_index = %s AND f.outcome IS NULL",
                (*self._record_values(result), batch_id, index),
            )
            if cur.rowcount == 1 and result.named:
                _insert_named(cur, batch_id, index, result.named)
            cur.execute(_SELECT_FILE, (batch_id, index))
            row = cur.fetchone()
        if row is None:
            raise LookupError(f"no ledger row for batch entry {index}")
        return _file(row)

    def link(self, batch_id: str, index: int, user_id: str, pdf_url: str, result: FileResult) -> bool:
        """Set the user's pdf_url and record ``result`` in one transaction; False when either was taken.

        The id is compared as a string parameter whatever the column's type (MySQL converts it for an
        integer column). Raises UsersTableError when the table cannot be updated as configured.
        """
        if not self.user_rows.columns().id.can_be_id(user_id):
            return False
        args = (batch_id, index, pdf_url, *self._record_values(result), user_id)
        with self.client.cursor() as cur, users_errors(self.users):
            cur.execute(self._sql_link, args)
            # 0: another file (or batch) linked this user first, or another delivery recorded this file.
            # More than 2: rows sharing the id (an id column that is not unique) are one user, all linked.
            return bool(cur.rowcount >= 2)

    def list_files(
        self, batch_id: str, after_index: int, limit: int, outcome: str | None = None
    ) -> list[FileRow]:
        """Entries after ``after_index`` in index order, optionally of one outcome."""
        sql = "SELECT * FROM pdfbatch_files WHERE batch_id = %s AND entry_index > %s"
        args: list[Any] = [batch_id, after_index]
        if outcome == "not_linked":
            sql += " AND kind = 'pdf' AND outcome IS NOT NULL AND outcome <> 'linked'"
        elif outcome == "pending":
            sql += " AND outcome IS NULL"
        elif outcome:
            sql += " AND outcome = %s"
            args.append(outcome)
        sql += " ORDER BY entry_index LIMIT %s"
        args.append(limit)
        with self.client.cursor() as cur:
            cur.execute(sql, args)
            rows = cur.fetchall()
        return [_file(r) for r in rows]

    def outcome_counts(self, batch_id: str) -> dict[str, int]:
        """Counts by outcome and ``reason:<r>`` of counted entries, plus ``processed`` and ``ignored``."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT kind, outcome, reason, COUNT(*) AS n FROM pdfbatch_files "
                "WHERE batch_id = %s AND outcome IS NOT NULL GROUP BY kind, outcome, reason",
                (batch_id,),
            )
            rows = cur.fetchall()
        counts: dict[str, int] = {o: 0 for o in COUNTED_OUTCOMES}
        counts["processed"] = 0
        counts["ignored"] = 0
        for row in rows:
            n = int(row["n"])
            if row["kind"] != "pdf":
                counts["ignored"] += n
                continue
            counts[row["outcome"]] = counts.get(row["outcome"], 0) + n
            counts[f"reason:{row['reason']}"] = counts.get(f"reason:{row['reason']}", 0) + n
            counts["processed"] += n
        return counts

    def done_indices(self, batch_id: str) -> list[int]:
        """Indices of PDF entries with an outcome."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT entry_index FROM pdfbatch_files "
                "WHERE batch_id = %s AND kind = 'pdf' AND outcome IS NOT NULL",
                (batch_id,),
            )
            rows = cur.fetchall()
        return [int(r["entry_index"]) for r in rows]

    def done_files(self, batch_id: str) -> list[DoneFile]:
        """PDF entries with an outcome, in one statement (one consistent read, so counts match indices)."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT entry_index, outcome, reason, finished_at FROM pdfbatch_files "
                "WHERE batch_id = %s AND kind = 'pdf' AND outcome IS NOT NULL ORDER BY entry_index",
                (batch_id,),
            )
            rows = cur.fetchall()
        return [
            DoneFile(int(r["entry_index"]), r["outcome"], r["reason"] or "", r["finished_at"]) for r in rows
        ]

    def linked_keys(self, sha256s: Sequence[str]) -> set[str]:
        """Final keys of linked entries with one of these contents (by_sha: no scan of the ledger)."""
        if not sha256s:
            return set()
        found: set[str] = set()
        with self.client.cursor() as cur:
            for start in range(0, len(sha256s), 500):
                chunk = list(sha256s[start : start + 500])
                cur.execute(_SELECT_LINKED_KEYS.format(placeholders=", ".join(["%s"] * len(chunk))), chunk)
                found.update(str(r["final_key"]) for r in cur.fetchall())
        return found

    def files_by_sha(self, sha256: str, tenant: str | None = None, limit: int = 100) -> list[TracedFile]:
        """Entries of this content, newest batch first: by_sha, then each one's batch by primary key."""
        sql = _TRACE_SELECT + "WHERE f.sha256 = %s"
        args: list[Any] = [sha256]
        if tenant is not None:
            sql += " AND b.tenant = %s"
            args.append(tenant)
        with self.client.cursor() as cur:
            cur.execute(sql + _TRACE_ORDER, [*args, int(limit)])
            rows = cur.fetchall()
        return [_traced(r) for r in rows]

    def files_of_user(
        self, user_id: str, named: Sequence[bytes], tenant: str | None = None, limit: int = 100
    ) -> list[TracedFile]:
        """Entries of a user: by_user for the linked ones, pdfbatch_named's key for those naming them."""
        owner = " AND b.tenant = %s" if tenant is not None else ""
        by_tenant: list[Any] = [tenant] if tenant is not None else []
        parts = [f"({_TRACE_SELECT}WHERE f.user_id = %s{owner})"]
        args: list[Any] = [user_id, *by_tenant]
        if named:
            parts.append(
                f"({_TRACE_SELECT}JOIN pdfbatch_named AS n ON n.batch_id = f.batch_id "
                f"AND n.entry_index = f.entry_index WHERE n.named_hash IN "
                f"({', '.join(['%s'] * len(named))}){owner})"
            )
            args += [*named, *by_tenant]
        sql = (
            f"SELECT * FROM ({' UNION '.join(parts)}) AS t "
            "ORDER BY t.b_created_at DESC, t.batch_id DESC, t.entry_index LIMIT %s"
        )
        with self.client.cursor() as cur:
            cur.execute(sql, [*args, int(limit)])
            rows = cur.fetchall()
        return [_traced(r) for r in rows]

    def set_timings(self, batch_id: str, index: int, timings: Mapping[str, float]) -> None:
        """Replace the timings of a recorded entry."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_files SET timings = %s "
                "WHERE batch_id = %s AND entry_index = %s AND outcome IS NOT NULL",
                (json.dumps(dict(timings), sort_keys=True), batch_id, index),
            )

    def reopen_batch(self, batch_id: str) -> bool:
        """COMPLETED goes back to PROCESSING, its summary cleared; other statuses are kept."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_batches SET status = 'PROCESSING', counts = NULL, completed_at = NULL, "
                "settle_at = %s, "
                "announce_started_at = NULL, announced_at = NULL, "
                "updated_at = %s WHERE batch_id = %s AND status = 'COMPLETED'",
                (self._clock(), self._clock(), batch_id),
            )
            return bool(cur.rowcount == 1)

    def mark_lane(self, batch_id: str, index: int, lane: str) -> None:
        """Note that a file without an outcome is handed to ``lane``; a recorded file is left alone."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_files SET source = %s "
                "WHERE batch_id = %s AND entry_index = %s AND outcome IS NULL",
                (lane, batch_id, index),
            )

    def lane_counts(self, batch_id: str, lane: str) -> dict[str, int]:
        """PDF entries of ``lane``: {"waiting": no outcome yet, "done": recorded} (by_lane: no scan)."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT outcome IS NULL AS waiting, COUNT(*) AS n FROM pdfbatch_files "
                "WHERE batch_id = %s AND source = %s AND kind = 'pdf' GROUP BY outcome IS NULL",
                (batch_id, lane),
            )
            rows = cur.fetchall()
        counts = {"waiting": 0, "done": 0}
        for row in rows:
            counts["waiting" if int(row["waiting"]) else "done"] += int(row["n"])
        return counts

    def reopen_file(self, batch_id: str, index: int, outcome: str, reason: str) -> bool:
        """Clear a recorded outcome other than linked if it is still the one given; keep attempts."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_files SET outcome = NULL, reason = NULL, user_id = NULL, final_key = NULL, "
                "timings = NULL, finished_at = NULL, users_named = NULL, decided_page = NULL "
                "WHERE batch_id = %s AND entry_index = %s AND kind = 'pdf' AND outcome <> 'linked' "
                "AND outcome = %s AND reason = %s",
                (batch_id, index, outcome, reason),
            )
            reopened = bool(cur.rowcount == 1)
            if reopened:  # its next reading records whom it names then
                cur.execute(
                    "DELETE FROM pdfbatch_named WHERE batch_id = %s AND entry_index = %s", (batch_id, index)
                )
            return reopened


# What record() and link() write to a file's row (f: pdfbatch_files), in _record_values' order.
_RECORD_SET = (
    "f.outcome = %s, f.reason = %s, f.user_id = %s, f.final_key = %s, f.sha256 = COALESCE(%s, f.sha256), "
    "f.timings = %s, f.finished_at = %s, f.users_named = %s, "
    # A file handed to the OCR lane stays "ocr" whoever records it (ocr_pdf, or give_up after it).
    "f.source = COALESCE(f.source, %s), f.decided_page = %s"
)


def _insert_named(cur: Any, batch_id: str, index: int, named: Sequence[bytes]) -> None:
    """Record the keyed hashes of the users an entry named (INSERT IGNORE: a re-run names them again)."""
    cur.executemany(
        "INSERT IGNORE INTO pdfbatch_named (named_hash, batch_id, entry_index) VALUES (%s, %s, %s)",
        [(h, batch_id, index) for h in dict.fromkeys(named)],
    )
