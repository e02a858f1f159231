"""`stack up`'s check of the configured users table (PDFBATCH_USERS_*), before anything is deployed.

The functions find out about a misconfigured table only when a file fails `users_table_error`; this
says it first, in one sentence, and warns about what works but will surprise: ids that are not unique,
an email column that compares case-sensitively or has no index, a pdf_url column narrower than a URL.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.users_table import Column, MysqlUsers
from pdfbatch.config import Settings, UsersTable
from pdfbatch.errors import UsersTableError
from pdfbatch.model import final_key

# The longest integer id as text (BIGINT's minimum).
_INTEGER_ID_CHARACTERS = 20
# A plain text id's longest key segment (model.key_segment keeps ids up to this long as they are).
_PLAIN_ID_CHARACTERS = 128
_NUMERIC_TYPES = frozenset(
    {"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "decimal", "numeric"}
)


@dataclass
class UsersCheck:
    """What the check found: ``error`` (deploying would fail every file), warnings and notes."""

    error: str | None = None
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def check_users_table(client: MysqlClient, settings: Settings, bucket: str) -> UsersCheck:
    """Check that the configured table and its three columns are usable; ``bucket`` sizes a PDF URL.

    Errors: the table or a column is missing, a column has a type pdfbatch cannot use, or the MySQL
    user may not read the columns or write pdf_url. Warnings: the id column is neither the primary key
    nor unique, the email column compares case-sensitively or has no index, pdf_url is narrower than a
    URL. Notes: the email column's character set and collation.
    """
    users = settings.users
    found = UsersCheck()
    try:
        columns = MysqlUsers(client, users).probe_users_table()
    except UsersTableError as exc:
        found.error = exc.problem
        return found
    found.error = _type_error(users, columns.id, columns.email, columns.pdf_url)
    if found.error:
        return found
    email = columns.email
    comparison = email.collation or "compared byte for byte"
    narrow = not (email.charset == "utf8mb4" or email.is_binary)
    found.notes.append(
        f"email column `{email.name}`: {email.charset or 'binary'} ({comparison})"
        + (": addresses it cannot hold are never looked up" if narrow else "")
    )
    indexes = _indexes(client, users)
    if not any(unique and cols == [columns.id.name.lower()] for unique, cols in indexes):
        found.warnings.append(
            f"the id column `{columns.id.name}` is neither the primary key nor unique: rows that share an id "
            "are one user to pdfbatch, and are linked together"
        )
    if email.case_sensitive:
        found.warnings.append(
            f"the email column `{email.name}` compares case-sensitively ({email.collation or 'binary'}): an "
            "address is found only when written in the stored case"
        )
    if not any(cols and cols[0] == email.name.lower() for _, cols in indexes):
        found.warnings.append(
            f"the email column `{email.name}` has no index: every lookup reads the whole table"
        )
    deployed = dataclasses.replace(settings, bucket=bucket)
    needed = len(deployed.pdf_url(final_key(_longest_plain_id(columns.id), "0" * 64)))
    width = columns.pdf_url.max_length
    if width is not None and width < needed:
        found.warnings.append(
            f"the pdf_url column `{columns.pdf_url.name}` holds {width} characters, a PDF URL needs up to "
            f"{needed}: longer ones fail as users_table_error"
        )
    return found


def _type_error(users: UsersTable, id_column: Column, email: Column, pdf_url: Column) -> str | None:
    t = users.table
    if id_column.is_binary:
        return (
            f"the id column `{id_column.name}` of `{t}` is a binary string ({id_column.data_type}): pdfbatch "
            "records and compares ids as text or integers"
        )
    if not (email.is_text or email.is_binary):
        return f"the email column `{email.name}` of `{t}` is {email.data_type}, not a text column"
    if not pdf_url.is_text:
        return f"the pdf_url column `{pdf_url.name}` of `{t}` is {pdf_url.data_type}, not a text column"
    return None


def _indexes(client: MysqlClient, users: UsersTable) -> list[tuple[bool, list[str]]]:
    """Each index of the table: (unique, its columns in order, lowercased)."""
    schema, _, table = users.table.rpartition(".")
    with client.cursor() as cur:
        cur.execute(
            "SELECT INDEX_NAME AS name, NON_UNIQUE AS non_unique, COLUMN_NAME AS col "
            "FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s "
            "ORDER BY INDEX_NAME, SEQ_IN_INDEX",
            (schema or None, table),
        )
        rows: list[dict[str, Any]] = list(cur.fetchall())
    by_name: dict[str, tuple[bool, list[str]]] = {}
    for r in rows:
        _, cols = by_name.setdefault(str(r["name"]), (not int(r["non_unique"]), []))
        cols.append(str(r["col"]).lower())
    return list(by_name.values())


def _longest_plain_id(id_column: Column) -> str:
    if id_column.data_type in _NUMERIC_TYPES or id_column.max_length is None:
        return "9" * _INTEGER_ID_CHARACTERS
    return "x" * min(id_column.max_length, _PLAIN_ID_CHARACTERS)
