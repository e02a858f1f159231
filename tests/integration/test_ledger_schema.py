"""ensure_schema brings a ledger created by an earlier release up to date, on the real MariaDB."""

from __future__ import annotations

from typing import Any

import pytest

from pdfbatch.adapters.mysql import ADDED_COLUMNS, ADDED_INDEXES, SCHEMA, MysqlClient, MysqlLedger
from pdfbatch.config import Settings

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
    assert not {c for _, c, _ in ADDED_COLUMNS} & columns(db, "pdfbatch_batches")
    ledger = MysqlLedger(MysqlClient.from_url(settings.mysql_url), settings.users)
    ledger.create_batch("a" * 32, "b", "uploads/x.zip", "s3", "PROCESSING")
    # WHEN a new release starts (twice: cold starts race)
    client = MysqlClient.from_url(settings.mysql_url)
    client.ensure_schema()
    client.ensure_schema()
    # THEN the new columns exist, the old row is intact, and the ledger uses them
    assert {c for _, c, _ in ADDED_COLUMNS} <= columns(db, "pdfbatch_batches")
    ledger = MysqlLedger(client, settings.users)
    ledger.start_batch("a" * 32, 3, 0)
    row = ledger.get_batch("a" * 32)
    assert row is not None and row.object_key == "uploads/x.zip" and row.started_at is not None
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
    assert {name for _, name, _ in ADDED_INDEXES} <= indexes(db, "pdfbatch_uploads")
    ledger.client.close()


def indexes(db: Any, table: str) -> set[str]:
    with db.cursor() as cur:
        cur.execute(
            "SELECT INDEX_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = %s",
            (table,),
        )
        return {r[0] for r in cur.fetchall()}
