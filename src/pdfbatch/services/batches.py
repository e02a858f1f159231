"""Batch identity: unguessable ids, the upload token that makes duplicates one batch, and how batches
begin (POST /batches, a ZIP dropped in uploads/) and end without their ZIP (unzip gave up, no upload).

Every upload is its own batch. ``uploads/{id}.zip`` belongs to batch ``id`` only for the first upload
to claim it (``pdfbatch_uploads``: one upload per batch); an upload reusing that presigned POST later
gets a fresh batch, listed in the first batch's ``laterUploads``. A batch ended ``upload_expired`` is
revived when its upload does arrive: the one final status that may change, because nothing was ever
processed in it and the user is polling that id.

Every batch has one owner, fixed when its row is created (``owner_of``; tenants.py): the tenant whose
key made it with POST /batches, the owner of the batch whose link a later upload reused, the tenant of
a ZIP dropped under ``uploads/{tenant}/`` if that tenant holds a live key when the upload is first
seen, and otherwise the admin (None). A duplicate notification finds the row and leaves its owner.
A tenant's new batch without a callbackUrl of its own keeps the tenant's default callback URL, fixed
at creation like the owner (services/callback_delivery.keep_default).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from typing import Any

from pdfbatch.errors import TooManyRequests
from pdfbatch.logs import logger
from pdfbatch.model import FINAL_STATUSES, BatchReason, BatchStatus, upload_key
from pdfbatch.ports import BatchRow
from pdfbatch.services import tally
from pdfbatch.services.deps import Deps, iso
from pdfbatch.tenants import ADMIN, Caller, drop_tenant

# An upload that started just before its link expired may still be arriving: wait this long after.
UPLOAD_GRACE_SECONDS = 3600
UPLOAD_KEY_RE = re.compile(r"^uploads/([0-9a-f]{32})\.zip$")


@dataclass(frozen=True)
class Upload:
    """One S3 ObjectCreated record: the object, and what pins reads to the version it announced."""

    bucket: str
    key: str
    size: int | None
    sequencer: str | None = None
    version_id: str | None = None  # set when the bucket keeps versions: reads ask for exactly this one
    etag: str | None = None  # otherwise reads carry If-Match on it, and a replaced object fails them


def new_batch_id() -> str:
    """128 random bits as 32 hex characters: unguessable."""
    return secrets.token_hex(16)


def upload_token(upload: Upload) -> str:
    """What makes two S3 notifications the same upload: bucket, key, sequencer and version (or ETag).

    A duplicated notification carries the same sequencer and version, so it resolves to the same
    batch; another upload to the same key has another version (S3 gives each upload its own sequencer
    too, but LocalStack sends one constant sequencer for every event, and the version tells them apart).
    """
    version = upload.version_id or upload.etag or ""
    raw = f"{upload.bucket}\x00{upload.key}\x00{upload.sequencer or ''}\x00{version}"
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def resolve_batch(deps: Deps, upload: Upload) -> tuple[str, str]:
    """(batch id, source) of an upload: the batch its key names if this upload claimed it first, or a
    random one claimed for the upload.

    The ledger maps the upload's token to its batch, so every duplicate notification finds the same
    batch. ``uploads/{id}.zip`` (POST /batches) maps to ``id`` for the first upload only; any other
    upload, like a ZIP dropped straight into uploads/, gets a fresh 128-bit id that cannot be worked
    out from the bucket, key or sequencer.
    """
    match = UPLOAD_KEY_RE.fullmatch(upload.key)
    named = match.group(1) if match else None
    batch_id = deps.ledger.batch_for_upload(upload_token(upload), new_batch_id(), named)
    return batch_id, "api" if batch_id == named else "s3"


def claim_batch(deps: Deps, upload: Upload) -> BatchRow:
    """The batch row of an upload, created if new (PROCESSING); what unzip and its failure path start from.

    A batch that expired waiting for this very upload is revived; a later upload through a batch's
    link is noted on that batch (``laterUploads``), so whoever polls it learns where the upload went.
    """
    batch_id, source = resolve_batch(deps, upload)
    logger.append_keys(batch_id=batch_id)
    batch = deps.ledger.get_batch(batch_id)
    if batch is None:
        owner = owner_of(deps, upload)
        # Before the row: a retry after a crash between the two still finds no row, and keeps it then.
        _keep_default_callback(deps, batch_id, owner)
        batch = deps.ledger.create_batch(
            batch_id, upload.bucket, upload.key, source, BatchStatus.PROCESSING, owner
        )
    if (batch.status, batch.reason, batch.total_files) == (
        BatchStatus.FAILED,
        BatchReason.UPLOAD_EXPIRED,
        None,
    ):
        batch = _revive(deps, batch)
    match = UPLOAD_KEY_RE.fullmatch(upload.key)
    reused = match.group(1) if match and match.group(1) != batch_id else None
    if reused is not None:
        deps.progress.note_later_upload(reused, batch_id)
        logger.warning("upload link used again: this upload is a batch of its own", extra={"first": reused})
    return batch


def owner_of(deps: Deps, upload: Upload) -> str | None:
    """The tenant a new batch of ``upload`` belongs to (None: the admin only).

    ``uploads/{id}.zip``: the owner of batch ``id`` (a later upload through its link stays with whoever
    was given the link). ``uploads/{tenant}/...``: that tenant while it holds a live key; an unknown or
    revoked tenant's prefix is the admin's alone (a wrong owner would show files to the wrong tenant,
    a missing one only hides them until the admin looks). Any other key: the admin's.
    """
    match = UPLOAD_KEY_RE.fullmatch(upload.key)
    if match is not None:
        named = deps.ledger.get_batch(match.group(1))
        return named.tenant if named is not None else None
    tenant = drop_tenant(upload.key)
    if tenant is not None and deps.tenants is not None and deps.tenants.is_active(tenant):
        return tenant
    return None


def _keep_default_callback(deps: Deps, batch_id: str, owner: str | None) -> None:
    """A new batch of a tenant with a default callback URL keeps it.

    (services/callback_delivery.keep_default)
    """
    if owner is None or deps.tenants is None:
        return  # the admin's batches have no default; no import on the way
    from pdfbatch.services import callback_delivery

    callback_delivery.keep_default(deps, batch_id, owner)


def _revive(deps: Deps, batch: BatchRow) -> BatchRow:
    """The upload of a batch ended upload_expired arrived after all: the batch runs (PROCESSING) again."""
    if deps.ledger.revive_expired(batch.batch_id, BatchReason.UPLOAD_EXPIRED):
        tally.rebuild_progress(deps, batch.batch_id, replace=True)  # FAILED in Redis too: the ledger wins
        logger.warning("the upload of an expired batch arrived; batch revived")
    return deps.ledger.get_batch(batch.batch_id) or batch


def create_batch(deps: Deps, caller: Caller = ADMIN, callback_url: str | None = None) -> dict[str, Any]:
    """POST /batches: a new batch id (owned by the caller's tenant) and a presigned POST for its ZIP.

    ``callback_url`` (optional) is checked before anything is written (InvalidInput: nothing created)
    and kept for the batch: its summary is POSTed there, signed, once it ends (services/callback_delivery.py).
    Without one, the batch keeps its tenant's default callback URL, if it has one now.
    """
    s = deps.settings
    if callback_url is not None:
        from pdfbatch.services import callback_delivery

        callback_delivery.check(s, callback_url)
    now = deps.clock()
    _check_pending(deps, caller, now)
    batch_id = new_batch_id()
    key = upload_key(batch_id)
    # The batch row is the last write: a POST that fails before it (503, its client tries again with a
    # new id) leaves no PENDING batch nobody knows. What it may leave, a callback row and a live hash
    # under an id nobody has, is never read (reads start at the batch row) and the hash expires.
    if callback_url is not None:
        callback_delivery.register(deps, batch_id, callback_url)
    else:
        _keep_default_callback(deps, batch_id, caller.tenant)
    deps.progress.init_batch(batch_id, BatchStatus.PENDING, None, now)
    upload = deps.store.presigned_post(s.bucket, key, s.upload_max_bytes, s.upload_url_expires_seconds)
    # Settle has nothing to do with it until its link and grace are over (services/settle.py).
    due = now + s.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS
    pending = BatchStatus.PENDING
    deps.ledger.create_batch(batch_id, s.bucket, key, "api", pending, caller.tenant, settle_at=due)
    logger.info("batch created", extra={"batch_id": batch_id})
    return {
        "batchId": batch_id,
        "key": key,
        "upload": {"url": upload["url"], "fields": upload["fields"]},
        "maxBytes": s.upload_max_bytes,
        "expiresAt": iso(now + s.upload_url_expires_seconds),
    }


def _check_pending(deps: Deps, caller: Caller, now: float) -> None:
    """TooManyRequests when the caller's tenant already has max_pending_batches waiting for an upload.

    Retry-After: until the oldest of them ends upload_expired (its link and grace over, and a settle
    run), or sooner if an upload arrives. One indexed COUNT (by_tenant_status).
    """
    most = deps.settings.max_pending_batches
    if most <= 0:
        return
    count, oldest = deps.ledger.pending_batches(caller.tenant)
    if count < most:
        return
    s = deps.settings
    ends = (oldest if oldest is not None else now) + s.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS
    logger.warning("POST /batches refused: too many batches waiting for an upload", extra={"count": count})
    raise TooManyRequests(
        f"{count} batches are waiting for their upload (at most {most}): upload to them, or ask again "
        "after Retry-After seconds",
        retry_after=int(max(1.0, ends - now + 60.0)),  # + one settle run
    )


def abandon_upload(deps: Deps, upload: Upload, reason: BatchReason = BatchReason.UNZIP_FAILED) -> str:
    """unzip gave up on an upload (its event reached the unzip DLQ): the batch ends FAILED with ``reason``.

    The batch row is created if unzip died before creating it. A batch already final, or one an
    earlier run unpacked completely (its workers finish it), is left as it is. Returns the status.
    """
    batch = claim_batch(deps, upload)
    batch_id = batch.batch_id
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

    The status read and the settle schedule (services/settle.py) call it. True if ended.
    An upload that has claimed the batch (its unzip may be being retried) keeps it from expiring; one
    arriving later still revives it (``claim_batch``). MySQL first, so the ledger decides the race.
    """
    if batch.status != BatchStatus.PENDING or not _upload_expired(deps, batch.created_at):
        return False
    counts = deps.ledger.outcome_counts(batch.batch_id)
    if not deps.ledger.expire_unclaimed(batch.batch_id, BatchReason.UPLOAD_EXPIRED, counts):
        return False
    deps.progress.fail(batch.batch_id, BatchReason.UPLOAD_EXPIRED, deps.clock())
    now = deps.ledger.get_batch(batch.batch_id)
    if now is not None and now.status != BatchStatus.FAILED:
        # Its upload arrived and revived it between our two writes: Redis follows the ledger again.
        tally.rebuild_progress(deps, batch.batch_id, replace=True)
        return False
    logger.info("batch failed: no upload arrived", extra={"batch_id": batch.batch_id})
    tally.announce(deps, batch.batch_id)
    return True


def _upload_expired(deps: Deps, created_at: float) -> bool:
    s = deps.settings
    return deps.clock() > created_at + s.upload_url_expires_seconds + UPLOAD_GRACE_SECONDS
