"""The development users table: its DDL, what `pdfbatch stack up` creates, and the demo's users.

A real deployment brings its own users table (PDFBATCH_USERS_*); the pipeline only reads and links it.
On a development server with the default names, this is the table `stack up` creates and the tests use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pymysql

from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.config import MysqlParams, Settings, parse_mysql_url

USERS_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
    "email VARCHAR(320) NOT NULL UNIQUE, pdf_url VARCHAR(1024) NULL) "
    "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)


def create_schema(conn: pymysql.connections.Connection[Any], p: MysqlParams) -> None:
    """Create the database, the users table (default names only) and the pipeline's own tables."""
    users = Settings.from_env().users
    table = ".".join(f"`{part}`" for part in users.table.split("."))
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS `{p.database}` CHARACTER SET utf8mb4")
        cur.execute(f"USE `{p.database}`")
        if users == type(users)():  # the development schema only for the default names
            cur.execute(USERS_DDL.format(table=table))
    MysqlClient(p).ensure_schema()


def seed_users(mysql_url: str, emails: Sequence[str], linked: Sequence[str]) -> None:
    """Insert demo users (their pdf_url reset, so a re-run shows the same outcomes)."""
    p = parse_mysql_url(mysql_url)
    conn = pymysql.connect(
        host=p.host,
        port=p.port,
        user=p.user,
        password=p.password,
        database=p.database,
        autocommit=True,
        charset="utf8mb4",
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO users (email, pdf_url) VALUES (%s, NULL) ON DUPLICATE KEY UPDATE pdf_url = NULL",
            [(e,) for e in emails],
        )
        cur.executemany(
            "INSERT INTO users (email, pdf_url) VALUES (%s, %s) "
            "ON DUPLICATE KEY UPDATE pdf_url = VALUES(pdf_url)",
            [(e, "s3://legacy-archive/cv/on-file.pdf") for e in linked],
        )
    conn.close()
