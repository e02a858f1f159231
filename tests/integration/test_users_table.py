"""Users tables as customers have them, over the real MariaDB: latin1 and utf8mb3 email columns, string and
UUID ids, duplicate emails, missing columns, a MySQL user without privileges; `stack up`'s check of
them; and a property test of the lookup over generated tables.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pymysql
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tools.users_check import check_users_table

from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import sqs_event
from fixtures.examples import examples
from fixtures.pipeline import drain, files_by_name, ledger_rows, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import bootstrap
from pdfbatch.adapters.ledger import MysqlLedger
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.users_table import can_hold, normalise
from pdfbatch.config import Settings, UsersTable, parse_mysql_url
from pdfbatch.model import final_key
from pdfbatch.services import staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN

pytestmark = pytest.mark.integration

CYRILLIC = "мария@example.com"
ASTRAL = "𝕞𝕒𝕣𝕚𝕒@example.com"  # 4 bytes in UTF-8 per letter


@dataclass
class Table:
    """A users table of this test's own, and the Deps whose ledger reads it."""

    name: str
    deps: Deps
    db: Any

    def create(self, ddl: str) -> None:
        with self.db.cursor() as cur:
            cur.execute(ddl.format(table=f"`{self.name}`"))

    def add(self, email: str, user_id: str | None = None, pdf_url: str | None = None) -> str:
        with self.db.cursor() as cur:
            if user_id is None:
                cur.execute(f"INSERT INTO `{self.name}` (email, pdf_url) VALUES (%s, %s)", (email, pdf_url))
                return str(cur.lastrowid)
            cur.execute(
                f"INSERT INTO `{self.name}` (id, email, pdf_url) VALUES (%s, %s, %s)",
                (user_id, email, pdf_url),
            )
            return user_id

    def pdf_urls(self) -> dict[str, str | None]:
        with self.db.cursor() as cur:
            cur.execute(f"SELECT id, pdf_url FROM `{self.name}`")
            return {str(i): u for i, u in cur.fetchall()}


@pytest.fixture()
def table(deps: Deps, db: Any, run_id: str) -> Iterator[Table]:
    name = f"users_{run_id}"
    users = UsersTable(table=name)
    ledger = MysqlLedger(MysqlClient.from_url(deps.settings.mysql_url), users)
    custom = replace(
        deps, settings=replace(deps.settings, users=users), ledger=ledger, users=ledger.user_rows
    )
    yield Table(name, custom, db)
    ledger.client.close()
    with db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{name}`")


def run(deps: Deps, entries: list[tuple[str, bytes]]) -> str:
    key = f"uploads/{uuid.uuid4().hex}.zip"
    report = staging.stage_zip(deps, upload(deps, make_zip(entries), key=key))
    drain(deps)
    return report.batch_id


# --- the pipeline over customers' tables ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("charset", "owner"),
    [("latin1", "josé.owner@example.com"), ("utf8mb3", CYRILLIC)],
)
def test_a_latin1_or_utf8mb3_table_is_never_sent_an_address_it_cannot_hold(
    table: Table, charset: str, owner: str
) -> None:
    # GIVEN a users table in a narrow character set, its owner's address one it can hold
    table.create(
        "CREATE TABLE {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(320) NOT NULL UNIQUE, "
        f"pdf_url VARCHAR(1024) NULL) DEFAULT CHARSET={charset}"
    )
    owner_id = table.add(owner)
    other = table.add("other@example.com")
    # AND a page showing addresses it cannot hold (Cyrillic for latin1, 4-byte for both) before the owner's
    unheld = [a for a in (CYRILLIC, ASTRAL) if not can_hold(charset, a)]
    pdf = pdfs.unicode_text_pdf([[" ".join(unheld), f"Owner: {owner}"]])
    # WHEN it is processed (MariaDB would refuse the lookup: "Illegal mix of collations")
    batch = run(table.deps, [("cv.pdf", pdf)])
    # THEN the owner is linked, nobody else, at the first attempt
    row = files_by_name(table.deps, batch)["cv.pdf"]
    assert (row.outcome, row.reason, row.user_id, row.attempts) == ("linked", "matched", owner_id, 1)
    urls = table.pdf_urls()
    assert urls[owner_id] == table.deps.settings.pdf_url(row.final_key or "") and urls[other] is None


@pytest.mark.parametrize(
    ("ddl", "user_id"),
    [
        ("id VARCHAR(64) PRIMARY KEY", "customer/7 ü"),
        ("id CHAR(36) PRIMARY KEY", "550e8400-e29b-41d4-a716-446655440000"),
        ("id UUID PRIMARY KEY", "6ccd780c-baba-1026-9564-5b8c656024db"),  # MariaDB's own UUID type
    ],
    ids=["varchar", "char36_uuid", "uuid_type"],
)
def test_string_and_uuid_ids_are_linked(table: Table, db: Any, ddl: str, user_id: str) -> None:
    # GIVEN a users table whose ids are strings or UUIDs
    table.create(f"CREATE TABLE {{table}} ({ddl}, email VARCHAR(320) NOT NULL, pdf_url TEXT NULL)")
    table.add("string.id@example.com", user_id)
    table.add("someone.else@example.com", str(uuid.UUID(int=1)))
    # WHEN their résumé is processed
    batch = run(table.deps, [("cv.pdf", pdfs.resume_pdf("S", "string.id@example.com"))])
    # THEN it is linked to that id: the ledger holds it as text, the key encodes it, pdf_url points there
    row = files_by_name(table.deps, batch)["cv.pdf"]
    assert (row.outcome, row.user_id) == ("linked", user_id)
    assert row.final_key == final_key(user_id, row.sha256 or "")
    assert table.deps.store.get_bytes(table.deps.settings.bucket, row.final_key).startswith(b"%PDF-")
    assert ledger_rows(db, batch)[0]["user_id"] == user_id
    assert table.pdf_urls()[user_id] == table.deps.settings.pdf_url(row.final_key)
    assert views.list_files(table.deps, batch, caller=ADMIN)["items"][0]["userId"] == user_id


def test_two_rows_with_one_email_are_ambiguous_and_nobody_is_linked(table: Table) -> None:
    # GIVEN two rows sharing an address (the table has no UNIQUE key on email)
    table.create(
        "CREATE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(320) NOT NULL, "
        "pdf_url VARCHAR(1024) NULL, KEY (email))"
    )
    table.add("twice@example.com")
    table.add("Twice@Example.com")
    # WHEN a résumé showing it is processed
    batch = run(table.deps, [("cv.pdf", pdfs.resume_pdf("T", "twice@example.com"))])
    # THEN it is ambiguous: two users named, no user recorded, nobody linked
    row = files_by_name(table.deps, batch)["cv.pdf"]
    assert (row.outcome, row.reason, row.users_named, row.user_id) == (
        "skipped_no_match",
        "ambiguous",
        2,
        None,
    )
    assert set(table.pdf_urls().values()) == {None}
    assert views.batch_status(table.deps, batch, caller=ADMIN)["reasons"] == {"ambiguous": 1}


@pytest.mark.parametrize(
    "ddl",
    [
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, mail VARCHAR(320), pdf_url TEXT)",
        "CREATE TABLE {table} (id BIGINT PRIMARY KEY, email VARCHAR(320))",
        None,
    ],
    ids=["no_email_column", "no_pdf_url_column", "no_table"],
)
def test_a_table_not_as_configured_fails_files_at_once_without_retries(
    table: Table, ddl: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a users table missing what is configured, and a résumé of someone
    if ddl:
        table.create(ddl)
    deps = table.deps
    report = staging.stage_zip(
        deps, upload(deps, make_zip([("cv.pdf", pdfs.resume_pdf("M", "missing@example.com"))]))
    )
    bodies = receive_all(deps)
    monkeypatch.setattr(deps.queue, "change_visibility", lambda *a: pytest.fail("no backoff: not an outage"))
    bootstrap.override(deps)
    try:
        # WHEN process_pdf receives it the first time
        result = load_handler("process_pdf").handler(sqs_event(bodies, receive_count=1), Context())
    finally:
        bootstrap.override(None)
    # THEN the message succeeds and the file is failed/users_table_error on its first attempt
    assert result == {"batchItemFailures": []}
    row = files_by_name(deps, report.batch_id)["cv.pdf"]
    assert (row.outcome, row.reason, row.attempts) == ("failed", "users_table_error", 1)
    assert views.batch_status(deps, report.batch_id, caller=ADMIN)["status"] == "COMPLETED"


# --- `stack up`'s check --------------------------------------------------------------------------------


def check(table: Table, **users: str) -> Any:
    client = MysqlClient.from_url(table.deps.settings.mysql_url)
    try:
        s = replace(table.deps.settings, users=replace(table.deps.settings.users, **users))
        return check_users_table(client, s, "pdfbatch-000000000000-us-east-1")
    finally:
        client.close()


def test_the_development_table_passes_the_check_with_no_warning(table: Table) -> None:
    from tools.devdb import USERS_DDL

    table.create(USERS_DDL)
    found = check(table)
    assert (found.error, found.warnings) == (None, [])
    assert found.notes == ["email column `email`: utf8mb4 (utf8mb4_general_ci)"]


@pytest.mark.parametrize(
    ("ddl", "config", "error"),
    [
        (None, {}, "the users table `{table}` (PDFBATCH_USERS_TABLE) does not exist"),
        (
            "CREATE TABLE {table} (id INT PRIMARY KEY, mail VARCHAR(99), pdf_url TEXT)",
            {},
            "the users table `{table}` has no column `email` (PDFBATCH_USERS_EMAIL_COLUMN)",
        ),
        (
            "CREATE TABLE {table} (uid INT PRIMARY KEY, email VARCHAR(99), url TEXT)",
            {"pdf_url_column": "cv_url"},
            "the users table `{table}` has no column `id` (PDFBATCH_USERS_ID_COLUMN) and no column `cv_url` "
            "(PDFBATCH_USERS_PDF_URL_COLUMN)",
        ),
        (
            "CREATE TABLE {table} (id BINARY(16) PRIMARY KEY, email VARCHAR(99), pdf_url TEXT)",
            {},
            "the id column `id` of `{table}` is a binary string (binary)",
        ),
        (
            "CREATE TABLE {table} (id INT PRIMARY KEY, email INT, pdf_url TEXT)",
            {},
            "the email column `email` of `{table}` is int, not a text column",
        ),
    ],
    ids=["no_table", "no_email_column", "two_columns_missing", "binary_id", "numeric_email"],
)
def test_the_check_names_what_makes_the_table_unusable(
    table: Table, ddl: str | None, config: dict[str, str], error: str
) -> None:
    if ddl:
        table.create(ddl)
    found = check(table, **config)
    assert found.error is not None and found.error.startswith(error.format(table=table.name))


def test_the_check_warns_about_what_works_but_surprises(table: Table) -> None:
    # GIVEN ids that are not unique, a case-sensitive email column without an index, a short pdf_url
    table.create(
        "CREATE TABLE {table} (id INT, email VARCHAR(99) COLLATE latin1_bin, pdf_url VARCHAR(40)) "
        "DEFAULT CHARSET=latin1"
    )
    found = check(table)
    assert found.error is None
    assert [w.split(":")[0] for w in found.warnings] == [
        "the id column `id` is neither the primary key nor unique",
        "the email column `email` compares case-sensitively (latin1_bin)",
        "the email column `email` has no index",
        "the pdf_url column `pdf_url` holds 40 characters, a PDF URL needs up to 131",
    ]
    assert found.notes == [
        "email column `email`: latin1 (latin1_bin): addresses it cannot hold are never looked up"
    ]


def test_the_check_says_when_the_mysql_user_may_not_write_pdf_url(table: Table, db: Any, run_id: str) -> None:
    # GIVEN the development table, and a MySQL user who may only read it
    from tools.devdb import USERS_DDL

    table.create(USERS_DDL)
    database = parse_mysql_url(table.deps.settings.mysql_url).database
    user, password = f"ro_{run_id}", uuid.uuid4().hex
    with db.cursor() as cur:
        cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user, password))
        cur.execute(f"GRANT SELECT ON `{database}`.`{table.name}` TO %s@'%%'", (user,))
    try:
        p = parse_mysql_url(table.deps.settings.mysql_url)
        url = f"mysql://{user}:{password}@{p.host}:{p.port}/{database}"
        client = MysqlClient.from_url(url)
        try:
            found = check_users_table(client, replace(table.deps.settings, mysql_url=url), "b")
        finally:
            client.close()
    finally:
        with db.cursor() as cur:
            cur.execute("DROP USER %s@'%%'", (user,))
    # THEN the check stops on it, naming the table and the columns
    assert found.error is not None
    assert found.error.startswith(f"the MySQL user may not read `id`, `email`, `pdf_url` of `{table.name}`")
    assert found.error.endswith("(MySQL error 1142)")


# --- the lookup over generated tables --------------------------------------------------------------------

# Local parts: RFC 5322 atext (letters, digits, specials), plus Latin-1 accents, Cyrillic and a 4-byte letter.
ATEXT = "abcXYZ019!#$%&'*+-/=?^_`{|}~"
LOCAL = st.text(st.sampled_from([*ATEXT, "é", "É", "ü", "ж", "Ж", "𝕞", "."]), min_size=1, max_size=12)
DOMAIN = st.sampled_from(["example.com", "Example.ORG", "пример.рф", "b.co"])
ADDRESS = st.builds(lambda local, domain: f"{local}@{domain}", LOCAL, DOMAIN)
CHARSETS = {
    "latin1": "latin1_swedish_ci",
    "utf8mb3": "utf8mb3_general_ci",
    "utf8mb4": "utf8mb4_unicode_ci",
    "cp1251": "cp1251_general_ci",
}
ID_TYPES = ["BIGINT", "VARCHAR(40)", "CHAR(36)"]


def case_variants(address: str) -> st.SearchStrategy[str]:
    """The address as a PDF may write it: upper-, lower- or original case, with blanks around."""
    return st.sampled_from([address, address.upper(), address.lower(), f" {address} "])


@st.composite
def tables(draw: Callable[..., Any]) -> tuple[str, str, list[str], list[str]]:
    """(charset, id type, the stored emails (duplicates likely), the candidates looked up)."""
    charset = draw(st.sampled_from(sorted(CHARSETS)))
    id_type = draw(st.sampled_from(ID_TYPES))
    pool = draw(st.lists(ADDRESS, min_size=1, max_size=8, unique=True))
    stored = [a for a in draw(st.lists(st.sampled_from(pool), max_size=10)) if can_hold(charset, a)]
    candidates = draw(st.lists(st.one_of(st.sampled_from(pool).flatmap(case_variants), ADDRESS), max_size=12))
    return charset, id_type, stored, candidates


@pytest.fixture()
def lookup_table(db: Any, settings: Settings, run_id: str) -> Iterator[tuple[Any, str, Settings]]:
    name = f"users_prop_{run_id}"
    yield db, name, settings
    with db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{name}`")


@settings(
    max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(tables())
def test_the_lookup_never_raises_and_finds_exactly_the_rows_equal_but_for_case(
    lookup_table: tuple[Any, str, Settings], drawn: tuple[str, str, list[str], list[str]]
) -> None:
    db, name, s = lookup_table
    charset, id_type, stored, candidates = drawn
    # GIVEN a users table of that charset and id type holding the stored emails (duplicates kept)
    with db.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{name}`")
        auto = " AUTO_INCREMENT" if id_type == "BIGINT" else ""
        cur.execute(
            f"CREATE TABLE `{name}` (id {id_type}{auto} PRIMARY KEY, email VARCHAR(100) NOT NULL, "
            f"pdf_url VARCHAR(200) NULL) DEFAULT CHARSET={charset} COLLATE={CHARSETS[charset]}"
        )
        rows = []
        for n, email in enumerate(stored):
            if id_type == "BIGINT":
                cur.execute(f"INSERT INTO `{name}` (email) VALUES (%s)", (email,))
                rows.append((str(cur.lastrowid), email))
            else:
                user_id = str(uuid.UUID(int=n + 1)) if id_type == "CHAR(36)" else f"id {n}/x y"
                cur.execute(f"INSERT INTO `{name}` (id, email) VALUES (%s, %s)", (user_id, email))
                rows.append((user_id, email))
    ledger = MysqlLedger(MysqlClient.from_url(s.mysql_url), UsersTable(table=name))
    try:
        # WHEN the candidates are looked up
        found = ledger.user_rows.find_by_emails(candidates)
    finally:
        ledger.client.close()
    # THEN every row whose email equals a candidate but for case is found, once, and no other
    wanted = {normalise(c) for c in candidates}
    assert sorted((r.id, r.email) for r in found) == sorted(
        (i, e) for i, e in rows if normalise(e) in wanted
    ), json.dumps({"charset": charset, "stored": stored, "candidates": candidates}, ensure_ascii=False)


def test_a_thousand_candidates_and_a_narrow_table_are_one_lookup_that_never_raises(table: Table) -> None:
    # GIVEN a latin1 table holding one of two thousand candidates, the rest of which it mostly cannot hold
    table.create(
        "CREATE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, email VARCHAR(99) NOT NULL, pdf_url TEXT) "
        "DEFAULT CHARSET=latin1"
    )
    owner = table.add("needle@example.com")
    candidates = [f"{'жё𝕞'[i % 3]}{i}@example.com" for i in range(2000)] + ["NEEDLE@example.com"]
    # WHEN they are looked up
    found = table.deps.users.find_by_emails(candidates)
    # THEN the one row is found
    assert [(r.id, r.email) for r in found] == [(owner, "needle@example.com")]
    with pytest.raises(pymysql.err.OperationalError, match="Illegal mix of collations"):
        # (what the lookup before issue 16 sent MariaDB)
        with table.db.cursor() as cur:
            cur.execute(
                f"SELECT id FROM `{table.name}` WHERE email IN (%s, %s)", ("needle@example.com", CYRILLIC)
            )
