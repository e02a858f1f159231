"""ensure_schema brings a ledger created by an earlier release up to date, on the real MariaDB."""

from __future__ import annotations

from typing import Any

import pytest

from pdfbatch import archive
from pdfbatch.adapters.mysql import ADDED_COLUMNS, SCHEMA, MysqlClient, MysqlLedger
from pdfbatch.config import Settings
from pdfbatch.ports import NewEntry

pytestmark = pytest.mark.integration


def columns(db: Any, table: str) -> set[str]:
    with db.cursor() as cur:
        cur.execute(
            "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s",
            (table,),
        )
        return {r[0] for r in cur.fetchall()}


def test_columns_added_since_the_first_release_appear_and_rows_are_kept(db: Any, settings: Settings) -> None:
    # GIVEN the batches table as the first release created it, holding a batch
    with db.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS pdfbatch_batches")
        first_release = SCHEMA[0]
        for _, column, _ in ADDED_COLUMNS:
            first_release = first_release.replace(f"      {column} DOUBLE NULL,\n", "")
        cur.execute(first_release)
    added = {c for table, c, _ in ADDED_COLUMNS if table == "pdfbatch_batches"}
    assert not added & columns(db, "pdfbatch_batches")
    ledger = MysqlLedger(MysqlClient.from_url(settings.mysql_url), settings.users)
    ledger.create_batch("a" * 32, "b", "uploads/x.zip", "s3", "PROCESSING")
    # WHEN a new release starts (twice: cold starts race)
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    client.ensure_schema()
    # THEN the new columns exist, the old row is intact, and the ledger uses them
    assert added <= columns(db, "pdfbatch_batches")
    ledger = MysqlLedger(client, settings.users)
    ledger.start_batch("a" * 32, 3, 0)
    row = ledger.get_batch("a" * 32)
    assert row is not None and row.object_key == "uploads/x.zip" and row.started_at is not None
    ledger.client.close()


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
    assert "name_hex" not in columns(db, "pdfbatch_files")
    # WHEN a new release starts
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    ledger = MysqlLedger(client, settings.users)
    # THEN the old row reads with no raw name, and new rows keep theirs, whatever the name:
    # Latin-1 bytes shown as cp437, control characters, and the longest name a ZIP can hold
    # (65,535 bytes, each three in UTF-8 once decoded as cp437), whose shown name is cut to fit TEXT
    assert "name_hex" in columns(db, "pdfbatch_files")
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
