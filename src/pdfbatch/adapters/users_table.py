"""The customer's users table as MySQL holds it: its three columns (read from information_schema),
which addresses its email column can hold, how its values become UserRow fields, and which server
errors mean it is misconfigured rather than down.

Used by adapters/ledger.py (MysqlLedger's Users side), by the fakes that mirror it (tests/fakes.py) and
by `stack up`'s check (tools/users_check.py). Everything but ``users_errors`` and ``read_columns`` is pure.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pymysql

from pdfbatch.config import UsersTable
from pdfbatch.errors import UsersTableError
from pdfbatch.logs import logger
from pdfbatch.ports import UserRow

if TYPE_CHECKING:
    from pdfbatch.adapters.mysql import MysqlClient

# Candidates per IN list: the scan may pass thousands; each statement stays small.
LOOKUP_CHUNK = 500

# MySQL character sets -> the Python codec that holds the same characters. latin1 is MySQL's cp1252
# (handled apart); utf8mb3 and ucs2 hold the Basic Multilingual Plane only; None: every character.
_CODECS: dict[str, str | None] = {
    "ascii": "ascii",
    "big5": "big5",
    "cp1250": "cp1250",
    "cp1251": "cp1251",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "cp850": "cp850",
    "cp852": "cp852",
    "cp866": "cp866",
    "cp932": "cp932",
    "eucjpms": "euc_jp",
    "euckr": "euc_kr",
    "gb18030": None,
    "gb2312": "gb2312",
    "gbk": "gbk",
    "greek": "iso8859_7",
    "hebrew": "iso8859_8",
    "koi8r": "koi8_r",
    "koi8u": "koi8_u",
    "latin2": "iso8859_2",
    "latin5": "iso8859_9",
    "latin7": "iso8859_13",
    "macce": "mac_latin2",
    "macroman": "mac_roman",
    "sjis": "shift_jis",
    "tis620": "tis_620",
    "ujis": "euc_jp",
    "utf16": None,
    "utf16le": None,
    "utf32": None,
    "utf8mb4": None,
    "binary": None,
}
_BMP_ONLY = frozenset({"utf8", "utf8mb3", "ucs2"})
# The five bytes cp1252 leaves undefined, which MySQL's latin1 maps to the C1 controls.
_LATIN1_EXTRA = frozenset("\x81\x8d\x8f\x90\x9d")

_INTEGER_TYPES = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint"})
_CANONICAL_INTEGER = re.compile(r"0|-?[1-9][0-9]*")
_TEXT_TYPES = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY_TYPES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})


def normalise(email: str) -> str:
    """An address as looked up and compared: trimmed, NFC, lowercased (nothing fuzzy)."""
    return unicodedata.normalize("NFC", email.strip()).lower()


def can_hold(charset: str | None, text: str) -> bool:
    """Whether a column of MySQL character set ``charset`` (None: a binary string) can hold ``text``.

    A value it cannot hold can equal no stored value, and sending it makes MySQL refuse the whole
    statement ("Illegal mix of collations"). An unknown character set is trusted with ASCII only.
    """
    try:
        text.encode("utf-8")  # a lone surrogate cannot even be sent
    except UnicodeEncodeError:
        return False
    name = (charset or "binary").lower()
    if name == "latin1":
        return all(c in _LATIN1_EXTRA or _encodes(c, "cp1252") for c in text)
    if name in _BMP_ONLY:
        return all(ord(c) <= 0xFFFF for c in text)
    if name not in _CODECS:
        return text.isascii()
    codec = _CODECS[name]
    return codec is None or _encodes(text, codec)


def _encodes(text: str, codec: str) -> bool:
    try:
        text.encode(codec)
    except UnicodeEncodeError:
        return False
    return True


@dataclass(frozen=True)
class Column:
    """One column of the users table as information_schema.COLUMNS describes it."""

    name: str
    data_type: str  # lowercased: varchar, bigint, char, binary, ...
    charset: str | None  # None for non-character types
    collation: str | None
    max_length: int | None  # CHARACTER_MAXIMUM_LENGTH (characters); None for non-character types

    @property
    def is_text(self) -> bool:
        """A character column (CHAR, VARCHAR, TEXT, ...)."""
        return self.data_type in _TEXT_TYPES

    @property
    def is_binary(self) -> bool:
        """A byte string column (BINARY, VARBINARY, BLOB, ...): compared byte for byte."""
        return self.data_type in _BINARY_TYPES

    @property
    def case_sensitive(self) -> bool:
        """Whether equal-but-for-case values compare unequal (binary strings, _bin and _cs collations)."""
        collation = (self.collation or "").lower()
        return self.is_binary or collation.endswith(("_bin", "_cs")) or "_as_cs" in collation

    def can_hold(self, text: str) -> bool:
        """Whether this column can hold ``text`` (see ``can_hold``)."""
        return can_hold(None if self.is_binary else self.charset, text)

    def can_be_id(self, text: str) -> bool:
        """Whether ``text`` can be a value of this id column as ``id_text`` writes it.

        MySQL compares an integer column with a string by converting the string to a number, so
        ``'7abc'`` and ``'07'`` would find the row of id 7: for integer columns only canonical digits
        are compared at all.
        """
        if self.data_type in _INTEGER_TYPES:
            return _CANONICAL_INTEGER.fullmatch(text) is not None
        return self.can_hold(text)


def id_text(value: object, users: UsersTable) -> str:
    """The id column's value as the domain's text id: integers as decimal digits, strings as they are."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise UsersTableError(
                f"the id column `{users.id_column}` of `{users.table}` (PDFBATCH_USERS_ID_COLUMN) holds "
                "binary values that are not text (a BINARY(16) UUID?): pdfbatch records and compares ids "
                "as text; point it at a text or integer id"
            ) from exc
    return str(value)


def stored_text(value: object) -> str:
    """A stored email (text, or bytes in a binary column) as text."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", "replace")
    return "" if value is None else str(value)


# Server errors that no retry can fix: the table, its columns or the privileges on it are not what the
# configuration says. Any other error is left to the caller (an outage, retried).
COLLATION_ERRNOS = frozenset({1253, 1267, 1270, 1271})
_NO_TABLE = frozenset({1049, 1146})
_NO_COLUMN = frozenset({1054})
_DENIED = frozenset({1036, 1044, 1142, 1143})
_NOT_UPDATABLE = frozenset({1288, 1393, 1395, 1471})
_BAD_VIEW = frozenset({1356})
_TOO_LONG = frozenset({1406})
_BAD_VALUE = frozenset({1366})
_BAD_QUERY = frozenset({1064})
PERMANENT_ERRNOS = (
    COLLATION_ERRNOS
    | _NO_TABLE
    | _NO_COLUMN
    | _DENIED
    | _NOT_UPDATABLE
    | _BAD_VIEW
    | _TOO_LONG
    | _BAD_VALUE
    | _BAD_QUERY
)


def configuration_problem(errno: int, users: UsersTable) -> UsersTableError | None:
    """The configuration problem a server error number means for queries on the users table, or None.

    The sentence is built from configuration names only (never the server's message, which may quote
    a value).
    """
    t, i, e, p = (f"`{n}`" for n in (users.table, users.id_column, users.email_column, users.pdf_url_column))
    if errno in COLLATION_ERRNOS:
        problem = f"the email column {e} of {t} cannot be compared with the addresses (its collation)"
    elif errno in _NO_TABLE:
        problem = f"the users table {t} (PDFBATCH_USERS_TABLE) does not exist"
    elif errno in _NO_COLUMN:
        problem = (
            f"a configured column is missing from {t}: id {i} (PDFBATCH_USERS_ID_COLUMN), email {e} "
            f"(PDFBATCH_USERS_EMAIL_COLUMN), pdf_url {p} (PDFBATCH_USERS_PDF_URL_COLUMN)"
        )
    elif errno in _DENIED:
        problem = f"the MySQL user may not read {i}, {e}, {p} of {t}, or may not write {p}"
    elif errno in _NOT_UPDATABLE:
        problem = f"{t} is a view whose {p} column cannot be updated"
    elif errno in _BAD_VIEW:
        problem = f"the view {t} refers to a table or column that does not exist"
    elif errno in _TOO_LONG:
        problem = f"the pdf_url column {p} of {t} is too narrow for the PDF URLs"
    elif errno in _BAD_VALUE:
        problem = f"the pdf_url column {p} of {t} cannot hold the PDF URLs (its character set)"
    elif errno in _BAD_QUERY:
        problem = f"the configured names of {t}, {i}, {e}, {p} do not make a valid query"
    else:
        return None
    return UsersTableError(f"{problem} (MySQL error {errno})", errno)


@contextmanager
def users_errors(users: UsersTable) -> Iterator[None]:
    """Server errors that mean the users table is not as configured become UsersTableError (never
    retried); anything else propagates as it is (the cursor makes outages DependencyUnavailable)."""
    try:
        yield
    except pymysql.err.MySQLError as exc:
        errno = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
        problem = configuration_problem(errno, users) if errno is not None else None
        if problem is None:
            raise
        raise problem from exc


@dataclass(frozen=True)
class UsersColumns:
    """The three configured columns of the users table, as information_schema describes them."""

    id: Column
    email: Column
    pdf_url: Column


def read_columns(client: MysqlClient, users: UsersTable) -> UsersColumns:
    """Describe the configured users table's three columns; UsersTableError naming what is missing."""
    schema, _, table = users.table.rpartition(".")
    with client.cursor() as cur, users_errors(users):
        cur.execute(
            "SELECT COLUMN_NAME AS name, DATA_TYPE AS data_type, CHARACTER_SET_NAME AS charset, "
            "COLLATION_NAME AS collation, CHARACTER_MAXIMUM_LENGTH AS max_length "
            "FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = COALESCE(%s, DATABASE()) AND TABLE_NAME = %s",
            (schema or None, table),
        )
        rows = cur.fetchall()
    if not rows:
        raise UsersTableError(
            f"the users table `{users.table}` (PDFBATCH_USERS_TABLE) does not exist, or the MySQL user "
            "has no privilege on it"
        )
    columns = {
        str(r["name"]).lower(): Column(
            name=str(r["name"]),
            data_type=str(r["data_type"]).lower(),
            charset=r["charset"],
            collation=r["collation"],
            max_length=int(r["max_length"]) if r["max_length"] is not None else None,
        )
        for r in rows
    }
    configured = {
        "PDFBATCH_USERS_ID_COLUMN": users.id_column,
        "PDFBATCH_USERS_EMAIL_COLUMN": users.email_column,
        "PDFBATCH_USERS_PDF_URL_COLUMN": users.pdf_url_column,
    }
    missing = [f"`{name}` ({var})" for var, name in configured.items() if name.lower() not in columns]
    if missing:
        raise UsersTableError(
            f"the users table `{users.table}` has no column {' and no column '.join(missing)}"
        )
    return UsersColumns(
        id=columns[users.id_column.lower()],
        email=columns[users.email_column.lower()],
        pdf_url=columns[users.pdf_url_column.lower()],
    )


class MysqlUsers:
    """The Users port over a MysqlClient: reads the customer's users table (and probes it); linking, which
    writes pdf_url together with the file's outcome, is MysqlLedger.link."""

    def __init__(self, client: MysqlClient, users: UsersTable) -> None:
        self.client = client
        self.users = users
        self._columns: UsersColumns | None = None  # read once, on the first use of the users table
        # Only identifiers are formatted in (validated as plain names in config); values stay %s.
        u = users
        self._sql_find_users = (
            f"SELECT `{u.id_column}` AS id, `{u.email_column}` AS email, `{u.pdf_url_column}` AS pdf_url "
            f"FROM {quote_table(u.table)} WHERE `{u.email_column}` IN ({{placeholders}})"
        )
        self._sql_pdf_url = (
            f"SELECT `{u.pdf_url_column}` AS pdf_url FROM {quote_table(u.table)} WHERE `{u.id_column}` = %s"
        )
        self._sql_probe = (
            f"SELECT `{u.id_column}`, `{u.email_column}`, `{u.pdf_url_column}` "
            f"FROM {quote_table(u.table)} LIMIT 0",
            f"UPDATE {quote_table(u.table)} SET `{u.pdf_url_column}` = `{u.pdf_url_column}` WHERE 1 = 0",
        )

    def find_by_emails(self, emails: Sequence[str]) -> list[UserRow]:
        """Every row whose email equals one of ``emails`` case-insensitively, duplicates included.

        Candidates are normalised (trimmed, NFC, lowercased) and deduplicated, those the email column's
        character set cannot hold are dropped (none can equal a stored value, and MySQL would refuse
        the statement), the rest looked up 500 per statement. The column's collation finds the rows;
        only those whose normalised email is a candidate are kept (a *_general_ci collation also
        equates accents: ``jose`` finds ``josé``). Raises UsersTableError when the table cannot be
        queried as configured.
        """
        column = self.columns().email
        wanted = list(dict.fromkeys(n for n in map(normalise, emails) if n and column.can_hold(n)))
        rows: list[UserRow] = []
        for start in range(0, len(wanted), LOOKUP_CHUNK):
            rows += self._find_chunk(wanted[start : start + LOOKUP_CHUNK])
        return rows

    def _find_chunk(self, chunk: Sequence[str]) -> list[UserRow]:
        try:
            found = self._users_query(
                self._sql_find_users.format(placeholders=", ".join(["%s"] * len(chunk))), chunk
            )
        except UsersTableError as exc:
            if exc.errno not in COLLATION_ERRNOS or len(chunk) == 1:
                raise
            # The character set filter let through a value the server cannot convert after all (a
            # codec mapping that differs from MySQL's): look each up alone and drop the ones refused.
            found = []
            for email in chunk:
                try:
                    found += self._users_query(self._sql_find_users.format(placeholders="%s"), [email])
                except UsersTableError as single:
                    if single.errno not in COLLATION_ERRNOS or email.isascii():
                        raise
                    logger.warning("an address the email column cannot compare was not looked up")
        keep = set(chunk)
        return [
            UserRow(
                id=id_text(r["id"], self.users), email=stored_text(r["email"]), pdf_url=r["pdf_url"] or None
            )
            for r in found
            if normalise(stored_text(r["email"])) in keep
        ]

    def _users_query(self, sql: str, args: Sequence[Any]) -> list[dict[str, Any]]:
        with self.client.cursor() as cur, users_errors(self.users):
            cur.execute(sql, list(args))
            return list(cur.fetchall())

    def columns(self) -> UsersColumns:
        """The three columns as information_schema describes them (read once; a failed read is retried)."""
        if self._columns is None:
            self._columns = read_columns(self.client, self.users)
        return self._columns

    def probe_users_table(self) -> UsersColumns:
        """Describe the three columns, read them and write pdf_url of no row (`stack up`'s check).

        Raises UsersTableError when the table or a column is missing, the MySQL user may not read the
        columns or write pdf_url, or the table is a view that cannot be updated.
        """
        columns = read_columns(self.client, self.users)
        with self.client.cursor() as cur, users_errors(self.users):
            for statement in self._sql_probe:
                cur.execute(statement)
                cur.fetchall()
        return columns

    def pdf_url_of(self, user_id: str) -> str | None:
        """The user's current pdf_url (None when empty or no such user)."""
        if not self.columns().id.can_be_id(user_id):
            return None
        rows = self._users_query(self._sql_pdf_url, [user_id])
        return (rows[0]["pdf_url"] or None) if rows else None


def quote_table(name: str) -> str:
    return ".".join(f"`{part}`" for part in name.split("."))
