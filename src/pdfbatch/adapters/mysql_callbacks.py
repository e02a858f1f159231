"""ports.CallbackLog over the ledger's MySQL connection (tables pdfbatch_callbacks and
pdfbatch_callback_attempts, created by MysqlClient.ensure_schema)."""

from __future__ import annotations

from typing import Any

from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.ports import CallbackAttempt


class MysqlCallbackLog:
    """A batch's callback URL and its delivery attempts; each write is one idempotent statement."""

    def __init__(self, client: MysqlClient) -> None:
        self.client = client

    def set_url(self, batch_id: str, url: str, created_at: float) -> None:
        """Store the URL; a batch keeps the first one (INSERT IGNORE)."""
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT IGNORE INTO pdfbatch_callbacks (batch_id, url, created_at) VALUES (%s, %s, %s)",
                (batch_id, url, created_at),
            )

    def url_of(self, batch_id: str) -> str | None:
        """The batch's callback URL, or None."""
        with self.client.cursor() as cur:
            cur.execute("SELECT url FROM pdfbatch_callbacks WHERE batch_id = %s", (batch_id,))
            row = cur.fetchone()
        return str(row["url"]) if row else None

    def begin_attempt(
        self, batch_id: str, delivery_id: str, attempt: int, kind: str, started_at: float
    ) -> bool:
        """INSERT IGNORE on (delivery_id, attempt): of two consumers of one delivery's copies, one wins."""
        with self.client.cursor() as cur:
            cur.execute(
                "INSERT IGNORE INTO pdfbatch_callback_attempts "
                "(delivery_id, attempt, batch_id, kind, started_at) VALUES (%s, %s, %s, %s, %s)",
                (delivery_id, attempt, batch_id, kind, started_at),
            )
            return bool(cur.rowcount == 1)

    def finish_attempt(
        self, delivery_id: str, attempt: int, http_status: int | None, error: str | None, duration_ms: int
    ) -> None:
        """What the attempt got (only an attempt still in flight is written)."""
        with self.client.cursor() as cur:
            cur.execute(
                "UPDATE pdfbatch_callback_attempts SET http_status = %s, error = %s, duration_ms = %s "
                "WHERE delivery_id = %s AND attempt = %s AND duration_ms IS NULL",
                (http_status, error, duration_ms, delivery_id, attempt),
            )

    def delivered(self, delivery_id: str) -> bool:
        """Whether an attempt of this delivery got a 2xx."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT 1 FROM pdfbatch_callback_attempts WHERE delivery_id = %s "
                "AND http_status BETWEEN 200 AND 299 LIMIT 1",
                (delivery_id,),
            )
            return cur.fetchone() is not None

    def attempts(self, batch_id: str) -> list[CallbackAttempt]:
        """Every attempt of the batch's deliveries, oldest first."""
        with self.client.cursor() as cur:
            cur.execute(
                "SELECT * FROM pdfbatch_callback_attempts WHERE batch_id = %s ORDER BY started_at, attempt",
                (batch_id,),
            )
            rows = cur.fetchall()
        return [_attempt(r) for r in rows]


def _attempt(row: dict[str, Any]) -> CallbackAttempt:
    return CallbackAttempt(
        batch_id=row["batch_id"],
        delivery_id=row["delivery_id"],
        attempt=int(row["attempt"]),
        kind=row["kind"],
        started_at=float(row["started_at"]),
        duration_ms=row["duration_ms"],
        http_status=row["http_status"],
        error=row["error"],
    )
