"""Every bad-input case at once through the real pipeline (MariaDB, Redis; moto S3/SQS); writes docs/CASES.md.

`make cases` runs this file with PDFBATCH_WRITE_CASES=1, which rewrites docs/CASES.md from what the run
observed; tests/unit/test_cases.py checks the file against the registry.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest

from fixtures import cases, reuse
from fixtures.pipeline import assert_counters_match_ledger, ledger_rows
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.config import UsersTable
from plugins.services import add_users

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[2] / "docs" / "CASES.md"


@pytest.fixture()
def use_table(deps: Any, db: Any) -> Iterator[cases.UseTable]:
    """run_entry_cases' hook over MariaDB: the development `users` table, or a new table of the shape."""
    made: list[tuple[str, MysqlLedger]] = []

    def use(d: Any, shape: cases.UsersTableShape | None) -> Callable[[str], str]:
        if shape is None:
            return lambda email: add_users(db, email)[email]
        name = f"users_case_{shape.name}"
        with db.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{name}`")
            cur.execute(shape.ddl(f"`{name}`"))
        users = UsersTable(table=name)
        ledger = MysqlLedger(MysqlClient.from_url(d.settings.mysql_url), users)
        made.append((name, ledger))
        d.settings = replace(d.settings, users=users)
        d.ledger, d.users = ledger, ledger.user_rows
        numbers = itertools.count(1)

        def add(email: str) -> str:
            user_id = shape.user_id(next(numbers))
            with db.cursor() as cur:
                if user_id is None:
                    cur.execute(f"INSERT INTO `{name}` (email) VALUES (%s)", (email,))
                    return str(cur.lastrowid)
                cur.execute(f"INSERT INTO `{name}` (id, email) VALUES (%s, %s)", (user_id, email))
                return user_id

        return add

    yield use
    for name, ledger in made:
        ledger.client.close()
        with db.cursor() as cur:
            cur.execute(f"DROP TABLE IF EXISTS `{name}`")


def test_one_zip_of_every_bad_entry_ends_with_its_outcome_and_the_batch_completes(
    deps: Any, db: Any, use_table: cases.UseTable
) -> None:
    # GIVEN one ZIP holding every entry case, then an ordinary résumé, and the users they name (and one
    # ZIP per users table of another shape, for the cases that need one)
    # WHEN it is staged and every message processed over the real MySQL and Redis
    development = replace(deps)  # use_table points ``deps`` at each case's users table in turn
    observed, statuses, rows = cases.run_entry_cases(deps, cases.ENTRY_CASES, use_table)
    # AND each unreadable upload is staged on its own
    archives = {case.name: cases.run_archive_case(development, case) for case in cases.ARCHIVE_CASES}
    # AND each upload case's scenario runs (each asserts what it proves)
    uploads = {
        case.name: cases.run_upload_case(upload_world(development, db, case), case)
        for case in cases.UPLOAD_CASES
    }
    if os.environ.get("PDFBATCH_WRITE_CASES") == "1":
        DOC.write_text(cases.render(observed, archives, uploads), encoding="utf-8")

    # THEN every entry has its case's outcome, reason, link and pages read
    problems = [p for case in cases.ENTRY_CASES for p in cases.mismatches(case, observed[case.name])]
    assert problems == []
    assert observed["after_the_cases"][0].outcome == "linked"
    # AND every batch completed, its counters equal to the ledger
    for status in statuses:
        assert status["status"] == "COMPLETED"
        pdf_rows = sum(1 for r in rows if r.kind == "pdf" and r.batch_id == status["batchId"])
        assert status["processed"] == status["totalFiles"] == pdf_rows
        assert_counters_match_ledger(deps, status["batchId"])

    # AND every entry name (unicode, backslashes, `..`, cp437, a lying UTF-8 flag) round-trips through the
    # MySQL ledger
    def names(group: list[cases.EntryCase]) -> list[str]:
        return [e.shown for c in group for e in c.entries]

    ordered = cases.in_run_order(cases.ENTRY_CASES)
    plain = [c for c in ordered if c.table is None]
    stored = [r["entry_name"] for status in statuses for r in ledger_rows(db, status["batchId"])]
    # (a nested ZIP's entries come after every outer entry of their batch: only the first batch has one)
    nested = [n for c in plain for e in c.entries for n in e.nested]
    assert not any(e.nested for c in ordered[len(plain) :] for e in c.entries)
    assert stored == [*names(plain), "after-the-cases.pdf", *nested, *names(ordered[len(plain) :])]
    # AND each unreadable upload failed its batch with its reason
    assert {n: (s["status"], s.get("reason")) for n, s in archives.items()} == {
        n: (s["status"], s["reason"]) for n, s in cases.expected_archives().items()
    }
    # AND the observations are what docs/CASES.md shows
    assert cases.render(observed, archives, uploads) == cases.render(
        cases.expected_entries(), cases.expected_archives()
    )


def upload_world(deps: Any, db: Any, case: cases.UploadCase) -> reuse.World:
    """The real adapters for one upload case: a bucket of its own (without versions if the case says),
    and a users table holding only the people it adds (each case names the same people)."""
    with db.cursor() as cur:
        cur.execute("DELETE FROM users")
    clock = reuse.ManualClock()
    bucket = f"{deps.settings.bucket}-{case.name.replace('_', '-')}"[:63]
    s3 = boto3.client("s3", region_name="us-east-1")
    s3.create_bucket(Bucket=bucket)
    if case.versioned:
        s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    mine = replace(deps, settings=replace(deps.settings, bucket=bucket), clock=clock)
    return reuse.World(mine, lambda e: add_users(db, e)[e], clock.advance)
