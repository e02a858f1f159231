"""Tenant keys in MySQL (pdfbatch_tenant_keys, created by MysqlClient.ensure_schema): hashes only; and
each tenant's default callback URL and signing secret ids (pdfbatch_tenants: ids, never secrets)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.ports import SigningIds, TenantKey


def _key(row: Mapping[str, Any]) -> TenantKey:
    return TenantKey(
        key_hash=str(row["key_hash"]),
        tenant=str(row["tenant"]),
        created_at=float(row["created_at"]),
        revoked_at=None if row["revoked_at"] is None else float(row["revoked_at"]),
    )


class MysqlTenantKeys:
    """ports.TenantKeys over the ledger's MysqlClient (one connection per execution environment)."""

    def __init__(self, client: MysqlClient, clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self._clock = clock

    def add(self, tenant: str, key_hash: str) -> TenantKey:
        """Store a new key's hash for ``tenant`` (a hash collision of 256-bit keys would be an error)."""
        now = self._clock()
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT INTO pdfbatch_tenant_keys (key_hash, tenant, created_at) VALUES (%s, %s, %s)",
                (key_hash, tenant, now),
            )
        return TenantKey(key_hash, tenant, now, None)

    def tenant_of(self, key_hash: str) -> str | None:
        """The tenant of a live key with this hash (primary key read), or None."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT tenant FROM pdfbatch_tenant_keys WHERE key_hash = %s AND revoked_at IS NULL",
                (key_hash,),
            )
            row = cur.fetchone()
        return None if row is None else str(row["tenant"])

    def is_active(self, tenant: str) -> bool:
        """Whether ``tenant`` holds a live key (index by_tenant)."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM pdfbatch_tenant_keys WHERE tenant = %s AND revoked_at IS NULL LIMIT 1",
                (tenant,),
            )
            return cur.fetchone() is not None

    def revoke(self, tenant: str) -> int:
        """Revoke every live key of ``tenant``; how many (a second revoke finds none: 0)."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_tenant_keys SET revoked_at = %s WHERE tenant = %s AND revoked_at IS NULL",
                (self._clock(), tenant),
            )
            return int(cur.rowcount)

    def list_keys(self) -> list[TenantKey]:
        """Every key row, by tenant and creation time."""
        with self.client.cursor() as cur:
            cur.execute("SELECT * FROM pdfbatch_tenant_keys ORDER BY tenant, created_at")
            rows = cur.fetchall()
        return [_key(r) for r in rows]

    def set_callback(self, tenant: str, url: str | None) -> None:
        """Set (or clear, with None) ``tenant``'s default callback URL: one upsert."""
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT INTO pdfbatch_tenants (tenant, callback_url, updated_at) VALUES (%s, %s, %s) "
                "ON DUPLICATE KEY UPDATE callback_url = VALUES(callback_url), "
                "updated_at = VALUES(updated_at)",
                (tenant, url, self._clock()),
            )

    def callback_of(self, tenant: str) -> str | None:
        """``tenant``'s default callback URL, or None (primary key read)."""
        with self.client.cursor() as cur:
            cur.execute("SELECT callback_url FROM pdfbatch_tenants WHERE tenant = %s", (tenant,))
            row = cur.fetchone()
        return None if row is None or row["callback_url"] is None else str(row["callback_url"])

    def callbacks(self) -> dict[str, str]:
        """Every tenant's default callback URL, by tenant."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT tenant, callback_url FROM pdfbatch_tenants "
                "WHERE callback_url IS NOT NULL ORDER BY tenant"
            )
            rows = cur.fetchall()
        return {str(r["tenant"]): str(r["callback_url"]) for r in rows}

    def signing_ids(self, tenant: str) -> SigningIds | None:
        """``tenant``'s signing secret ids, or None (primary key read)."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT secret_id, previous_secret_id, previous_until FROM pdfbatch_tenants "
                "WHERE tenant = %s",
                (tenant,),
            )
            row = cur.fetchone()
        if row is None or row["secret_id"] is None:
            return None
        until = row["previous_until"]
        return SigningIds(
            str(row["secret_id"]),
            None if row["previous_secret_id"] is None else str(row["previous_secret_id"]),
            None if until is None else float(until),
        )

    def set_signing_ids(self, tenant: str, ids: SigningIds) -> None:
        """Replace ``tenant``'s signing secret ids: one upsert (the default callback URL kept)."""
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT INTO pdfbatch_tenants (tenant, updated_at, secret_id, previous_secret_id, "
                "previous_until) VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
                "updated_at = VALUES(updated_at), secret_id = VALUES(secret_id), "
                "previous_secret_id = VALUES(previous_secret_id), previous_until = VALUES(previous_until)",
                (tenant, self._clock(), ids.current, ids.previous, ids.previous_until),
            )
