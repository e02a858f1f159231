"""ensure_schema brings a ledger created by an earlier release up to date, on the real MariaDB."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from pdfbatch import archive
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import (
    ADDED_COLUMNS,
    ADDED_INDEXES,
    CHANGED_COLUMNS,
    SCHEMA,
    MysqlClient,
)
from pdfbatch.config import Settings, parse_mysql_url
from pdfbatch.model import FileResult
from pdfbatch.ports import NewEntry

pytestmark = pytest.mark.integration

# Each changed column's definition before its change.
PREVIOUS_DEFINITIONS = {("pdfbatch_files", "user_id"): "BIGINT NULL"}


def column_types(db: Any, table: str) -> dict[str, str]:
    with db.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s",
            (table,),
        )
        return {r[0]: r[1] for r in cur.fetchall()}


def statement_of(table: str) -> str:
    (statement,) = [s for s in SCHEMA if f"CREATE TABLE IF NOT EXISTS {table} (" in s]
    return statement


def first_release(table: str) -> str:
    """The CREATE TABLE of ``table`` as the first release wrote it: no added column, every changed one old."""
    statement = statement_of(table)
    for t, column, definition in ADDED_COLUMNS:
        if t == table:
            statement = statement.replace(f"      {column} {definition},\n", "")
    for t, column, definition, _ in CHANGED_COLUMNS:
        if t == table:
            old = PREVIOUS_DEFINITIONS[(t, column)]
            statement = statement.replace(f"      {column} {definition},\n", f"      {column} {old},\n")
    for t, _, definition in ADDED_INDEXES:
        if t == table:
            statement = statement.replace(f",\n      {definition}", "")
    return statement


def test_the_first_release_schema_is_what_the_test_rebuilds() -> None:
    # The rebuild above only works while SCHEMA spells each column as ADDED/CHANGED_COLUMNS do.
    for table, column, definition in ADDED_COLUMNS:
        assert f"      {column} {definition},\n" in statement_of(table), column
    for table, column, definition, _ in CHANGED_COLUMNS:
        assert f"      {column} {definition},\n" in statement_of(table), column


@pytest.fixture()
def first_release_ledger(db: Any) -> Iterator[Any]:
    """The ledger tables as the first release created them; dropped afterwards (the next test's db
    fixture creates them as this release does)."""
    with db.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS pdfbatch_batches, pdfbatch_files, pdfbatch_tenants")
        for table in ("pdfbatch_batches", "pdfbatch_files", "pdfbatch_tenants"):
            cur.execute(first_release(table))
    yield db
    with db.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS pdfbatch_batches, pdfbatch_files, pdfbatch_tenants")


def test_columns_added_and_changed_since_the_first_release_appear_and_rows_are_kept(
    first_release_ledger: Any, settings: Settings
) -> None:
    db = first_release_ledger
    # GIVEN the ledger as the first release created it, holding a batch and a file linked to user 42
    assert "started_at" in column_types(db, "pdfbatch_files")  # a column of the first release
    for table, column, _ in ADDED_COLUMNS:
        assert column not in column_types(db, table)
    assert column_types(db, "pdfbatch_files")["user_id"] == "bigint"
    batch = "a" * 32
    with db.cursor() as cur:
        cur.execute(
            "INSERT INTO pdfbatch_batches (batch_id, bucket, object_key, key_hash, source, status, "
            "created_at, updated_at) VALUES (%s, 'b', 'uploads/x.zip', %s, 's3', 'PROCESSING', 1, 1)",
            (batch, b"\0" * 32),
        )
        cur.execute(
            "INSERT INTO pdfbatch_files (batch_id, entry_index, entry_name, kind, outcome, reason, user_id, "
            "final_key, created_at) VALUES (%s, 0, 'a.pdf', 'pdf', 'linked', 'matched', 42, "
            "'pdfs/42/x.pdf', 1), (%s, 1, 'b.pdf', 'pdf', NULL, NULL, NULL, NULL, 1)",
            (batch, batch),
        )
    # WHEN a new release starts (twice: cold starts race)
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    client.ensure_schema()
    # THEN the new columns exist, user_id holds text, and the old rows are intact
    for table, column, _ in ADDED_COLUMNS:
        assert column in column_types(db, table)
    assert column_types(db, "pdfbatch_files")["user_id"] == "varchar"
    with db.cursor() as cur:  # the status API's per-lane read has its covering index
        cur.execute(
            "SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'pdfbatch_files' AND INDEX_NAME = 'by_lane'"
        )
        assert cur.fetchone()[0] == 3  # (batch_id, source, outcome)
    ledger = MysqlLedger(client, settings.users)
    old = ledger.get_file(batch, 0)
    assert old is not None
    assert (old.outcome, old.user_id, old.final_key, old.users_named) == (
        "linked",
        "42",
        "pdfs/42/x.pdf",
        None,
    )
    # AND the ledger uses them: started_at, a string user id, users_named
    ledger.start_batch(batch, 3, 0)
    row = ledger.get_batch(batch)
    assert row is not None and row.object_key == "uploads/x.zip" and row.started_at is not None
    ledger.add_entries(batch, [NewEntry(2, "c.pdf", "pdf", 1)])
    ledger.record(batch, 1, FileResult("skipped_already_exists", "already_linked", user_id="user/7 ü"))
    ledger.record(batch, 2, FileResult("skipped_no_match", "ambiguous", users_named=2))
    assert [(f.user_id, f.users_named) for f in ledger.list_files(batch, -1, 10)] == [
        ("42", None),
        ("user/7 ü", None),
        (None, 2),
    ]
    # AND the lane: an old row has none; rows recorded now say "text", a scan handed to OCR "ocr"
    ledger.add_entries(batch, [NewEntry(3, "scan.pdf", "pdf", 1)])
    ledger.mark_lane(batch, 3, "ocr")
    assert ledger.lane_counts(batch, "ocr") == {"waiting": 1, "done": 0}
    ledger.record(batch, 3, FileResult("skipped_no_match", "ocr_page_limit", source="ocr"))
    assert [f.source for f in ledger.list_files(batch, -1, 10)] == [None, "text", "text", "ocr"]
    assert ledger.lane_counts(batch, "ocr") == {"waiting": 0, "done": 1}
    ledger.client.close()


def test_the_one_upload_per_batch_index_is_added_to_an_earlier_uploads_table(
    db: Any, settings: Settings
) -> None:
    # GIVEN the uploads table as earlier releases created it (no index on batch_id), with a claim
    with db.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS pdfbatch_uploads")
        cur.execute(SCHEMA[2].replace(",\n      UNIQUE KEY by_batch (batch_id)", ""))
    ledger = MysqlLedger(MysqlClient.from_url(settings.mysql_url), settings.users)
    assert ledger.batch_for_upload("t" * 64, "a" * 32) == "a" * 32
    # WHEN a new release starts (twice: cold starts race)
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    client.ensure_schema()
    # THEN the claim is kept, and a batch can no longer be claimed by a second upload
    ledger = MysqlLedger(client, settings.users)
    assert ledger.batch_for_upload("t" * 64, "b" * 32) == "a" * 32
    assert ledger.batch_for_upload("u" * 64, "c" * 32, "a" * 32) == "c" * 32
    added = {name for t, name, _ in ADDED_INDEXES if t == "pdfbatch_uploads"}
    assert added <= indexes(db, "pdfbatch_uploads")
    ledger.client.close()


def indexes(db: Any, table: str) -> set[str]:
    with db.cursor() as cur:
        cur.execute(
            "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s",
            (table,),
        )
        return {r[0] for r in cur.fetchall()}


def test_name_hex_is_added_to_a_files_table_without_it_and_odd_names_round_trip(
    db: Any, settings: Settings
) -> None:
    # GIVEN the files table as releases before name_hex created it, holding an entry
    with db.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS pdfbatch_files")
        cur.execute(SCHEMA[1].replace("      name_hex MEDIUMTEXT CHARACTER SET ascii NULL,\n", ""))
        cur.execute(
            "INSERT INTO pdfbatch_files (batch_id, entry_index, entry_name, kind, created_at) "
            "VALUES (%s, 0, 'old.pdf', 'pdf', 1)",
            ("a" * 32,),
        )
    assert "name_hex" not in column_types(db, "pdfbatch_files")
    # WHEN a new release starts
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    ledger = MysqlLedger(client, settings.users)
    # THEN the old row reads with no raw name, and new rows keep theirs, whatever the name:
    # Latin-1 bytes shown as cp437, control characters, and the longest name a ZIP can hold
    # (65,535 bytes, each three in UTF-8 once decoded as cp437), whose shown name is cut to fit TEXT
    assert "name_hex" in column_types(db, "pdfbatch_files")
    old = ledger.get_file("a" * 32, 0)
    assert old is not None and (old.name, old.name_hex) == ("old.pdf", None)
    names = [b"Jos\xe9.pdf", b"\x1b[31mred\x1b[0m\x00.pdf", b"\xb0" * 65_535]
    ledger.add_entries(
        "b" * 32,
        [
            NewEntry(i, archive.decode_name(raw, 0x800), "pdf", 1, name_hex=raw.hex())
            for i, raw in enumerate(names)
        ],
    )
    rows = [ledger.get_file("b" * 32, i) for i in range(len(names))]
    assert [r.name_hex if r else None for r in rows] == [raw.hex() for raw in names]
    assert [r.name if r else None for r in rows[:2]] == [archive.decode_name(raw, 0) for raw in names[:2]]
    longest = rows[2]
    assert longest is not None and longest.name.endswith("\u2026") and set(longest.name[:-1]) == {"\u2591"}
    assert len(longest.name.encode()) <= 65_535
    client.close()


def test_a_cold_start_with_mysql_refusing_fails_only_its_first_use_then_checks_the_schema(
    mysql_url: str, settings: Settings
) -> None:
    from dataclasses import replace

    from pdfbatch.bootstrap import build_deps
    from pdfbatch.errors import DependencyUnavailable
    from soak.proxy import ChaosProxy

    p = parse_mysql_url(mysql_url)
    with ChaosProxy() as proxy:
        port = proxy.add("mysql", 0, (p.host, p.port))
        # GIVEN a database whose newest table is missing (a new release), and MySQL refusing connections
        root = MysqlClient.from_url(mysql_url)
        with root.cursor() as cur:
            cur.execute("DROP TABLE IF EXISTS pdfbatch_tenants")
        proxy.refuse("mysql", 2.0)
        url = mysql_url.replace(f"@{p.host}:{p.port}/", f"@{p.host}:{port}/")
        # WHEN a function's dependencies are built (a cold start)
        deps = build_deps(replace(settings, mysql_url=url))
        # THEN building opens no connection: only the first use fails, inside the caller's failure path
        with pytest.raises(DependencyUnavailable):
            deps.ledger.get_batch("a" * 32)
        # WHEN MySQL accepts again THEN the next use checks the schema first (the table is back) and works
        time.sleep(2.5)
        assert deps.ledger.get_batch("a" * 32) is None
        with root.cursor() as cur:
            cur.execute("SHOW TABLES LIKE 'pdfbatch_tenants'")
            assert cur.fetchone() is not None
