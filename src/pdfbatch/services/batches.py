"""Batch identity: unguessable ids, the upload token that makes duplicates one batch, and how batches
begin (POST /batches, a ZIP dropped in uploads/) and end without their ZIP (unzip gave up, no upload).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

from pdfbatch.logs import logger
from pdfbatch.model import FINAL_STATUSES, BatchReason, BatchStatus
from pdfbatch.ports import BatchRow
from pdfbatch.services import tally
from pdfbatch.services.deps import Deps, iso

# An upload that started just before its link expired may still be arriving: wait this long after.
UPLOAD_GRACE_SECONDS = 3600
UPLOAD_KEY_RE = re.compile(r"^uploads/([0-9a-f]{32})\.zip$")


@dataclass(frozen=True)
class Upload:
    """One S3 ObjectCreated record."""

    bucket: str
    key: str
    size: int | None
    sequencer: str | None = None
    version_id: str | None = None


def new_batch_id() -> str:
    """128 random bits as 32 hex characters: unguessable."""
    return secrets.token_hex(16)


def upload_token(upload: Upload) -> str:
    """What makes two S3 notifications the same upload: bucket, key and sequencer (or version).

    A duplicated notification carries the same sequencer, so it resolves to the same batch.
    """
    token = upload.sequencer or upload.version_id or ""
    raw = f"{upload.bucket}\x00{upload.key}\x00{token}".encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()


def resolve_batch(deps: Deps, upload: Upload) -> tuple[str, str]:
    """(batch id, source) of an uploaded object: the API's id, or a random one claimed for the upload.

    A ZIP dropped straight into uploads/ gets a fresh 128-bit id the first time its notification is
    seen; the ledger maps the upload's token to it, so every duplicate finds the same batch, and the
    id cannot be worked out from the bucket, key or sequencer.
    """
    match = UPLOAD_KEY_RE.fullmatch(upload.key)
    if match:
        return match.group(1), "api"
    return deps.ledger.batch_for_upload(upload_token(upload), new_batch_id()), "s3"


def create_batch(deps: Deps) -> dict[str, Any]:
    """POST /batches: a new batch id and a presigned POST that uploads its ZIP."""
    s = deps.settings
    batch_id = new_batch_id()
    key = f"uploads/{batch_id}.zip"
    now = deps.clock()
    deps.ledger.create_batch(batch_id, s.bucket, key, "api", BatchStatus.PENDING)
    deps.progress.init_batch(batch_id, BatchStatus.PENDING, None, now)
    upload = deps.store.presigned_post(s.bucket, key, s.upload_max_bytes, s.upload_url_expires_seconds)
    logger.info("batch created", extra={"batch_id": batch_id})
    return {
        "batchId": batch_id,
        "key": key,
        "upload": {"url": upload["url"], "fields": upload["fields"]},
        "maxBytes": s.upload_max_bytes,
        "expiresAt": iso(now + s.upload_url_expires_seconds),
    }


def abandon_upload(deps: Deps, upload: Upload, reason: BatchReason = BatchReason.UNZIP_FAILED) -> str:
    """unzip gave up on an upload (its event reached the unzip DLQ): the batch ends FAILED with ``reason``.

    The batch row is created if unzip died before creating it. A batch already final, or one an
    earlier run unpacked completely (its workers finish it), is left as it is. Returns the status.
    """
    batch_id, source = resolve_batch(deps, upload)
    logger.append_keys(batch_id=batch_id)
    batch = deps.ledger.create_batch(batch_id, upload.bucket, upload.key, source, BatchStatus.PROCESSING)
    if batch.status in FINAL_STATUSES:
        logger.info("failed unzip event for a finished batch ignored", extra={"status": batch.status})
        return batch.status
    if batch.unpacked_at is not None and batch.total_files is not None:
        status = tally.mark_unpacked(deps, batch_id, batch.total_files)
        logger.info("failed unzip event for an unpacked batch ignored", extra={"status": status})
        return status
    tally.restore_if_expired(deps, batch_id)  # so the live counters show what workers already did
    tally.fail_batch(deps, batch_id, reason)
    logger.error("unzip gave up on this upload; batch failed", extra={"reason": reason})
    return BatchStatus.FAILED


def expire_if_abandoned(deps: Deps, batch: BatchRow) -> bool:
    """End a POST /batches batch nobody uploaded to: FAILED upload_expired, once its link is long expired.

    The status read calls it (no scheduler needed: nobody waits on a batch nobody reads). True if ended.
    """
    if batch.status != BatchStatus.PENDING or not _upload_expired(deps, batch.created_at):
        return False
    # Nobody uploaded to the presigned POST: the batch ends rather than waiting forever.
    tally.fail_batch(deps, batch.batch_id, BatchReason.UPLOAD_EXPIRED)
    logger.info("batch failed: no upload arrived", extra={"batch_id": batch.batch_id})
    return True


def _upload_expired(deps: Deps, created_at: float) -> bool:
    s = deps.settings
    return deps.clock() > created_at + s.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS
