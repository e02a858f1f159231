"""The MySQL connection pdfbatch shares (one per execution environment), the schema and its migrations.

The ledger itself (batches and per-file results) and the customer's users table are read and written by
``adapters/ledger.py`` over this client."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pymysql
import pymysql.cursors

from pdfbatch.config import MysqlParams, parse_mysql_url
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.logs import logger

SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_batches (
      batch_id CHAR(32) NOT NULL PRIMARY KEY,
      bucket VARCHAR(63) NOT NULL,
      object_key VARCHAR(1024) NOT NULL,
      key_hash BINARY(32) NOT NULL,
      source VARCHAR(8) NOT NULL,
      status VARCHAR(16) NOT NULL,
      total_files INT NULL,
      ignored_files INT NOT NULL DEFAULT 0,
      counts LONGTEXT NULL,
      reason VARCHAR(64) NULL,
      created_at DOUBLE NOT NULL,
      updated_at DOUBLE NOT NULL,
      unpacked_at DOUBLE NULL,
      completed_at DOUBLE NULL,
      started_at DOUBLE NULL,
      object_version VARCHAR(1024) NULL,
      announce_started_at DOUBLE NULL,
      announced_at DOUBLE NULL,
      tenant VARCHAR(32) CHARACTER SET ascii NULL,
      settle_at DOUBLE NULL,
      KEY by_key (key_hash, created_at),
      KEY by_unannounced (announced_at, created_at),
      KEY by_settle_at (announced_at, settle_at, batch_id),
      KEY by_tenant_status (tenant, status, created_at),
      KEY by_created (created_at),
      KEY by_tenant (tenant, created_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_files (
      batch_id CHAR(32) NOT NULL,
      entry_index INT NOT NULL,
      entry_name TEXT NOT NULL,
      name_hex MEDIUMTEXT CHARACTER SET ascii NULL,
      kind VARCHAR(8) NOT NULL,
      size BIGINT NOT NULL DEFAULT 0,
      sha256 CHAR(64) NULL,
      outcome VARCHAR(32) NULL,
      reason VARCHAR(32) NULL,
      user_id VARCHAR(1024) NULL,
      final_key VARCHAR(1024) NULL,
      attempts INT NOT NULL DEFAULT 0,
      timings TEXT NULL,
      created_at DOUBLE NOT NULL,
      started_at DOUBLE NULL,
      finished_at DOUBLE NULL,
      users_named INT NULL,
      source VARCHAR(8) NULL,
      decided_page INT NULL,
      PRIMARY KEY (batch_id, entry_index),
      KEY by_sha (sha256),
      KEY by_lane (batch_id, source, outcome),
      KEY by_user (user_id(64))
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
    """,
    # S3 upload (bucket, key, sequencer or version) -> the batch its first notification claimed; a batch
    # is claimed by one upload at most (by_batch), so a reused upload link gets a batch of its own.
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_uploads (
      token CHAR(64) NOT NULL PRIMARY KEY,
      batch_id CHAR(32) NOT NULL,
      created_at DOUBLE NOT NULL,
      UNIQUE KEY by_batch (batch_id)
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
    # Issue 25 (pdfbatch.named): the users a file named without linking them, as keyed hashes of their
    # ids (never the id): found for a given user, never listed for a file.
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_named (
      named_hash BINARY(32) NOT NULL,
      batch_id CHAR(32) NOT NULL,
      entry_index INT NOT NULL,
      PRIMARY KEY (named_hash, batch_id, entry_index)
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
    # Issue 13, signed callbacks (adapters/mysql_callbacks.py): a batch's callback URL, and every
    # delivery attempt (never the URL's query or the body: those stay in the URL row and in S3).
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_callbacks (
      batch_id CHAR(32) NOT NULL PRIMARY KEY,
      url VARCHAR(2048) NOT NULL,
      created_at DOUBLE NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_callback_attempts (
      delivery_id CHAR(32) NOT NULL,
      attempt INT NOT NULL,
      batch_id CHAR(32) NOT NULL,
      kind VARCHAR(8) NOT NULL,
      started_at DOUBLE NOT NULL,
      duration_ms INT NULL,
      http_status INT NULL,
      error VARCHAR(64) NULL,
      PRIMARY KEY (delivery_id, attempt),
      KEY by_batch (batch_id, started_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
    # Tenant keys (issue 13, adapters/tenant_keys.py): the SHA-256 of each key, never the key; the status
    # function finds a key's tenant by its primary key, one indexed read per request.
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_tenant_keys (
      key_hash CHAR(64) NOT NULL PRIMARY KEY,
      tenant VARCHAR(32) NOT NULL,
      created_at DOUBLE NOT NULL,
      revoked_at DOUBLE NULL,
      KEY by_tenant (tenant, revoked_at)
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
    # A tenant's settings next to its keys (issue 13): its default callback URL, set by the operator
    # (`pdfbatch keys set-callback`) and copied into pdfbatch_callbacks when a batch of it is created.
    """
    CREATE TABLE IF NOT EXISTS pdfbatch_tenants (
      tenant VARCHAR(32) NOT NULL PRIMARY KEY,
      callback_url VARCHAR(2048) NULL,
      secret_id CHAR(32) NULL,
      previous_secret_id CHAR(32) NULL,
      previous_until DOUBLE NULL,
      updated_at DOUBLE NOT NULL
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii COLLATE=ascii_bin
    """,
)

# Columns added after the first release: (table, column, definition), added by ensure_schema when missing.
ADDED_COLUMNS = (
    ("pdfbatch_batches", "started_at", "DOUBLE NULL"),
    ("pdfbatch_files", "users_named", "INT NULL"),
    # An entry name's raw bytes (hex): names are shown decoded, and a decoding can be a guess.
    ("pdfbatch_files", "name_hex", "MEDIUMTEXT CHARACTER SET ascii NULL"),
    # Issue 13: the ZIP version unzip read (summary.json names it), and the announcement's claim and mark.
    ("pdfbatch_batches", "object_version", "VARCHAR(1024) NULL"),
    ("pdfbatch_batches", "announce_started_at", "DOUBLE NULL"),
    ("pdfbatch_batches", "announced_at", "DOUBLE NULL"),
    # Issue 13: the tenant that owns the batch (NULL: the admin's; rows from before tenants are).
    ("pdfbatch_batches", "tenant", "VARCHAR(32) CHARACTER SET ascii NULL"),
    # Issue 12: the lane that read a file ("text", "ocr"); "ocr" from the hand-off to the OCR lane on.
    ("pdfbatch_files", "source", "VARCHAR(8) NULL"),
    # Issue 24: a tenant's signing secret ids (the secrets are derived from them and a root elsewhere).
    ("pdfbatch_tenants", "secret_id", "CHAR(32) NULL"),
    ("pdfbatch_tenants", "previous_secret_id", "CHAR(32) NULL"),
    ("pdfbatch_tenants", "previous_until", "DOUBLE NULL"),
    # Issue 24: when the scheduled settle next has something to do with a batch (services/settle.py).
    # NULL on rows from before it: settle sets those to their created_at before it reads (due at once).
    ("pdfbatch_batches", "settle_at", "DOUBLE NULL"),
    # Issue 25: the page that decided (a trace shows it).
    ("pdfbatch_files", "decided_page", "INT NULL"),
)
# Columns whose type changed: (table, column, definition, the DATA_TYPEs it is converted from).
# user_id: BIGINT until the users table could have string and UUID ids; MODIFY keeps every stored id
# (an integer becomes its decimal digits, the text the ledger now writes).
CHANGED_COLUMNS = (("pdfbatch_files", "user_id", "VARCHAR(1024) NULL", ("bigint", "int")),)
# Indexes added after the first release: (table, index, definition), added by ensure_schema when missing.
# Earlier releases recorded only ZIPs dropped with the AWS CLI there, each with a fresh id, so by_batch holds.
ADDED_INDEXES = (
    ("pdfbatch_uploads", "by_batch", "UNIQUE KEY by_batch (batch_id)"),
    # The status API's per-lane progress reads only a batch's OCR rows (a covering index).
    ("pdfbatch_files", "by_lane", "KEY by_lane (batch_id, source, outcome)"),
    # The scheduled settle (services/settle.py) reads batches not announced yet: the running ones and
    # the few whose announcement is due, never the table's announced history.
    ("pdfbatch_batches", "by_unannounced", "KEY by_unannounced (announced_at, created_at)"),
    # Issue 24: settle reads the unannounced batches that are due, by when each is due, with a cursor;
    # POST /batches counts a tenant's outstanding empty (PENDING) batches.
    ("pdfbatch_batches", "by_settle_at", "KEY by_settle_at (announced_at, settle_at, batch_id)"),
    ("pdfbatch_batches", "by_tenant_status", "KEY by_tenant_status (tenant, status, created_at)"),
    # Issue 25: a caller's recent batches, newest first (the admin's across tenants, a tenant's own).
    ("pdfbatch_batches", "by_created", "KEY by_created (created_at)"),
    ("pdfbatch_batches", "by_tenant", "KEY by_tenant (tenant, created_at)"),
    # A trace by user: the entries linked (or found already linked) to a user id.
    ("pdfbatch_files", "by_user", "KEY by_user (user_id(64))"),
)
_ER_DUP_FIELDNAME = 1060
_ER_DUP_KEYNAME = 1061

# Connections unused for longer than this are pinged (and reconnected) before use.
_STALE_AFTER_SECONDS = 10.0


class MysqlClient:
    """One lazily opened connection per execution environment, reused and reconnected when stale."""

    def __init__(self, params: MysqlParams, connect_timeout: float = 5.0, read_timeout: float = 30.0) -> None:
        self.params = params
        self._connect_timeout = connect_timeout
        self._read_timeout = read_timeout
        self._conn: pymysql.connections.Connection[Any] | None = None
        self._last_used = 0.0
        self._lock = threading.RLock()  # pymysql connections are not thread-safe
        self._schema_pending = False  # ensure_schema_on_first_use: checked by the first cursor() that works

    @classmethod
    def from_url(cls, url: str, connect_timeout: float = 5.0, read_timeout: float = 30.0) -> MysqlClient:
        """Build from a mysql:// URL (no connection is opened yet)."""
        return cls(parse_mysql_url(url), connect_timeout, read_timeout)

    def _connect(self) -> pymysql.connections.Connection[Any]:
        return pymysql.connect(
            host=self.params.host,
            port=self.params.port,
            user=self.params.user,
            password=self.params.password,
            database=self.params.database,
            charset="utf8mb4",
            autocommit=True,
            connect_timeout=max(1, int(self._connect_timeout)),
            read_timeout=max(1, int(self._read_timeout)),
            write_timeout=max(1, int(self._read_timeout)),
            cursorclass=pymysql.cursors.DictCursor,
        )

    def ensure_schema_on_first_use(self) -> None:
        """Run ``ensure_schema`` before the first statement instead of now (no connection opened here).

        A cold start then never fails before its handler can: MySQL down at that moment fails the
        first call that needs it, inside the handler's own failure path (logged, backed off), instead of
        failing a message with no log that SQS then hides for the queue's whole visibility timeout (the
        chaos soak, seed 965370: a scan waited 12 minutes). Tried again by each use until it works.
        """
        self._schema_pending = True

    @contextmanager
    def cursor(self) -> Iterator[pymysql.cursors.DictCursor]:
        """A cursor on the shared connection; library errors become DependencyUnavailable('mysql')."""
        with self._lock:
            if self._schema_pending:
                self._schema_pending = False  # (ensure_schema's own cursor() must not come back here)
                try:
                    self.ensure_schema()
                except BaseException:
                    self._schema_pending = True
                    raise
            try:
                if self._conn is None:
                    self._conn = self._connect()
                elif time.monotonic() - self._last_used > _STALE_AFTER_SECONDS:
                    self._conn.ping(reconnect=True)
                with self._conn.cursor() as cur:
                    yield cur
                self._last_used = time.monotonic()
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError, OSError) as exc:
                self.close()
                raise DependencyUnavailable("mysql", type(exc).__name__) from exc
            except pymysql.err.InternalError as exc:
                self.close()
                raise DependencyUnavailable("mysql", type(exc).__name__) from exc

    @contextmanager
    def transaction(self) -> Iterator[pymysql.cursors.DictCursor]:
        """A cursor inside BEGIN ... COMMIT (ROLLBACK on any error)."""
        with self.cursor() as cur:
            assert self._conn is not None
            cur.execute("BEGIN")
            try:
                yield cur
            except BaseException:
                try:
                    self._conn.rollback()
                except pymysql.err.Error:  # the connection is gone: the server rolls back itself
                    self.close()
                raise
            self._conn.commit()

    def close(self) -> None:
        """Drop the connection; the next use reconnects."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                except pymysql.err.Error as exc:
                    # Closing a connection the server already dropped: nothing left to release.
                    logger.debug("mysql connection was already closed", extra={"error": type(exc).__name__})
                self._conn = None

    def ensure_schema(self) -> None:
        """Create the ledger tables if missing and add columns newer releases need (idempotent)."""
        with self.cursor() as cur:
            for statement in SCHEMA:
                cur.execute(statement)
            for table, column, definition in ADDED_COLUMNS:
                cur.execute(
                    "SELECT COUNT(*) AS n FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                    (table, column),
                )
                row = cur.fetchone()
                if row and int(row["n"]) == 0:
                    try:
                        cur.execute(f"ALTER TABLE `{table}` ADD COLUMN `{column}` {definition}")
                    except pymysql.err.OperationalError as exc:
                        if exc.args[0] != _ER_DUP_FIELDNAME:
                            raise
                        # Another cold start added it between our check and our ALTER: what we wanted.
            for table, column, definition, old_types in CHANGED_COLUMNS:
                cur.execute(
                    "SELECT DATA_TYPE AS t FROM information_schema.COLUMNS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s AND COLUMN_NAME = %s",
                    (table, column),
                )
                row = cur.fetchone()
                if row and str(row["t"]).lower() in old_types:
                    # Two cold starts may both convert: the second MODIFY finds the new type, a no-op.
                    logger.info("ledger column converted", extra={"table": table, "column": column})
                    cur.execute(f"ALTER TABLE `{table}` MODIFY COLUMN `{column}` {definition}")
            for table, index, definition in ADDED_INDEXES:
                cur.execute(
                    "SELECT COUNT(*) AS n FROM information_schema.STATISTICS "
                    "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = %s AND INDEX_NAME = %s",
                    (table, index),
                )
                row = cur.fetchone()
                if row and int(row["n"]) == 0:
                    try:
                        cur.execute(f"ALTER TABLE `{table}` ADD {definition}")
                    except pymysql.err.OperationalError as exc:
                        if exc.args[0] != _ER_DUP_KEYNAME:
                            raise
                        # Added by a concurrent cold start: what we wanted.
