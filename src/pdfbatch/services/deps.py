"""What every use case runs on: ``Deps`` (the ports, built once by bootstrap) and two shared formats.

The sibling modules of ``pdfbatch.services`` all import this one and it imports none of them, so no
import cycle can form between use cases.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from pdfbatch.config import Settings
from pdfbatch.ports import (
    CallbackLog,
    Events,
    Ledger,
    MessageQueue,
    ObjectStore,
    Progress,
    TenantKeys,
    Users,
    WorkQueue,
)


@dataclass
class Deps:
    """Everything the services touch, built once per execution environment by bootstrap."""

    settings: Settings
    store: ObjectStore
    ledger: Ledger
    users: Users
    progress: Progress
    queue: WorkQueue | None = None  # the work queue: unzip sends, process_pdf backs off
    clock: Callable[[], float] = time.time
    parked: WorkQueue | None = None  # where work dead letters recorded gave_up wait for `dlq --redrive`
    events: Events | None = None  # EventBridge's default bus (completion events); None: not announced
    callbacks: CallbackLog | None = None  # callback URLs and delivery attempts; None: callbacks refused
    tenants: TenantKeys | None = None  # tenant keys (tenants.py); None: no tenants, only the admin key
    ocr_queue: WorkQueue | None = None  # the OCR lane's queue (process_pdf sends, ocr_pdf backs off)
    callback_queue: MessageQueue | None = None  # the callback queue (fast lane): deliver_callbacks backs off
    slow_callbacks: MessageQueue | None = None  # the slow callback lane's queue; None: one lane only


def fingerprint(value: str) -> str:
    """A short, stable hash for correlating personal data (names, emails) in logs without logging it."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def iso(ts: float | None) -> str | None:
    """Epoch seconds as the API writes times (ISO 8601, UTC, milliseconds); None for "not yet"."""
    if not ts:
        return None
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
