"""Small interfaces the services depend on; adapters/ implement them over real clients."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from pdfbatch.model import FileResult, FileTask


@dataclass(frozen=True)
class UserRow:
    """The three columns pdfbatch needs from the customer's users table (one row; two may share an email)."""

    id: str  # the id column's value as text: an integer id as its decimal digits, a UUID or string as is
    email: str  # as stored
    pdf_url: str | None


@dataclass(frozen=True)
class BatchRow:
    """A batch as recorded in MySQL (the durable summary behind the Redis progress hash)."""

    batch_id: str
    bucket: str
    object_key: str
    source: str  # "api" (POST /batches) or "s3" (dropped with the AWS CLI)
    status: str
    total_files: int | None
    ignored_files: int
    counts: Mapping[str, int]
    reason: str | None
    created_at: float
    updated_at: float
    unpacked_at: float | None
    completed_at: float | None
    started_at: float | None = None  # when unzip began staging (the batch became PROCESSING)
    object_version: str | None = None  # the ZIP's S3 version unzip read (None: unversioned, or not yet)
    announce_started_at: float | None = None  # an announcer's claim (tally.announce); a lease
    announced_at: float | None = None  # report written and completion event put for this final status
    tenant: str | None = None  # the tenant that owns it (tenants.py); None: the admin's only
    settle_at: float | None = None  # when the scheduled settle next has something to do with it


@dataclass(frozen=True)
class FileRow:
    """One entry of a batch in the per-file ledger."""

    batch_id: str
    index: int
    name: str
    kind: str  # "pdf" or "ignored"
    outcome: str | None
    reason: str | None
    user_id: str | None
    final_key: str | None
    sha256: str | None
    size: int
    attempts: int
    created_at: float
    finished_at: float | None
    timings: Mapping[str, float] = field(default_factory=dict)
    users_named: int | None = None  # ambiguous: how many users the deciding page named (never who)
    name_hex: str | None = None  # the name's raw bytes in the ZIP, hex (None for rows older than it)
    # The lane that read it: "text", or "ocr" from the moment process_pdf hands it to the OCR lane
    # (outcome still None: waiting for OCR); None while no lane has decided anything about it.
    source: str | None = None
    page: int | None = None  # the page (1-based) that decided (linked, already linked, ambiguous)


@dataclass(frozen=True)
class TracedFile:
    """One entry found by a trace (its content or a user it names), with what its batch says of it."""

    file: FileRow
    batch_created_at: float
    upload: str  # the batch's object key
    tenant: str | None
    batch_status: str


@dataclass(frozen=True)
class DoneFile:
    """A PDF entry that has its outcome: what rebuilding the progress counters needs."""

    index: int
    outcome: str
    reason: str
    finished_at: float | None


@dataclass(frozen=True)
class LiveProgress:
    """A batch's live counters as the Progress store holds them while they last (status answers from them).

    How they are stored (Redis hash fields, sentinels) is the adapter's business, not the services'.
    """

    status: str | None
    total_files: int | None = None  # None until unzip has inspected the ZIP
    processed: int = 0  # files counted, whatever their outcome
    outcomes: Mapping[str, int] = field(default_factory=dict)  # counted files per outcome (0 when absent)
    reasons: Mapping[str, int] = field(default_factory=dict)  # counted files per reason (zeros are kept)
    ignored: int = 0  # entries that are not PDFs: listed, never counted
    unpacked: bool = False  # every entry staged or recorded: the batch may complete
    reason: str | None = None  # why the batch FAILED (a BatchReason)
    created_at: float | None = None
    updated_at: float | None = None
    started_at: float | None = None
    unpacked_at: float | None = None
    completed_at: float | None = None
    first_done_at: float | None = None  # the first count: the rate (and ETA) is an average from here
    rebuilt_at: float | None = None  # the last rebuild from the ledger, if any
    later_uploads: tuple[str, ...] = ()  # batches of later uploads through this batch's link, oldest first


@dataclass(frozen=True)
class NewEntry:
    """An entry to register in the ledger when a ZIP is unpacked."""

    index: int
    name: str  # decoded for display (archive.decode_name)
    kind: str
    size: int
    outcome: str | None = None
    reason: str | None = None
    name_hex: str | None = None  # the raw name bytes as written in the ZIP, hex


@dataclass(frozen=True)
class StoredVersion:
    """One version of an object as a bucket listing shows it (``version_id`` "null" when unversioned)."""

    key: str
    version_id: str
    size: int
    last_modified: float  # epoch seconds
    is_latest: bool
    is_delete_marker: bool = False


class ObjectStore(Protocol):
    """S3, as the pipeline uses it.

    Reads of an upload are pinned to the object the notification named: ``version_id`` when the bucket
    keeps versions, else ``etag`` (If-Match). A pinned read of an object that changed raises
    ObjectChanged; one whose version is gone raises NotFound.
    """

    def open_reader(
        self,
        bucket: str,
        key: str,
        size: int | None = None,
        *,
        version_id: str | None = None,
        etag: str | None = None,
    ) -> IO[bytes]:
        """A seekable file object over the object, fetched in ranges (each one pinned, see above)."""
        ...

    def head_size(
        self, bucket: str, key: str, *, version_id: str | None = None, etag: str | None = None
    ) -> int:
        """The object's size in bytes; NotFound when it does not exist."""
        ...

    def list_versions(self, bucket: str, prefix: str) -> Iterable[StoredVersion]:
        """Every version (and delete marker) under ``prefix``, by key, newest first within a key."""
        ...

    def get_bytes(self, bucket: str, key: str) -> bytes:
        """The whole object; NotFound when it does not exist."""
        ...

    def put_bytes(self, bucket: str, key: str, data: bytes, content_type: str) -> None:
        """Write an object."""
        ...

    def copy(self, bucket: str, source_key: str, dest_key: str) -> None:
        """Server-side copy within the bucket."""
        ...

    def delete(self, bucket: str, key: str, version_id: str | None = None) -> None:
        """Delete an object, or one version of it for good (no error when absent)."""
        ...

    def delete_many(self, bucket: str, keys: Sequence[str]) -> list[str]:
        """Delete objects, as few requests as S3 allows (absent ones are fine); the keys S3 refused."""
        ...

    def presigned_post(self, bucket: str, key: str, max_bytes: int, expires_in: int) -> dict[str, Any]:
        """A presigned POST whose policy caps the size."""
        ...

    def presigned_get(self, bucket: str, key: str, expires_in: int) -> str:
        """A presigned GET of one object, valid ``expires_in`` seconds."""
        ...


class Events(Protocol):
    """EventBridge's default bus, as completion events are put on it."""

    def put_event(self, source: str, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event; raise DependencyUnavailable unless EventBridge accepted it."""
        ...


class WorkQueue(Protocol):
    """The SQS work queue."""

    def send_tasks(self, tasks: Sequence[FileTask]) -> None:
        """Send one message per task (SendMessageBatch, 10 per call); raise when any is not accepted."""
        ...

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        """Make a received message visible again after ``delay_seconds`` (0: now); ChangeMessageVisibility."""
        ...


class MessageQueue(Protocol):
    """A queue of JSON messages (the slow callback lane): send one, back a received one off."""

    def send_json(self, message: Mapping[str, Any], delay_seconds: int = 0) -> None:
        """Send one JSON message, delivered after ``delay_seconds`` (at most 900, SQS's limit)."""
        ...

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        """Make a received message visible again after ``delay_seconds`` (0: now); ChangeMessageVisibility."""
        ...


class Users(Protocol):
    """Read access to the customer's users table."""

    def find_by_emails(self, emails: Sequence[str]) -> list[UserRow]:
        """Every row whose email equals one of ``emails`` case-insensitively, duplicates included.

        Any number of candidates (the adapter chunks them); candidates the email column's character
        set cannot hold are not looked up (no stored email can equal them). Order free. Raises
        UsersTableError when the table cannot be queried as configured.
        """
        ...

    def pdf_url_of(self, user_id: str) -> str | None:
        """The user's current pdf_url."""
        ...


class Ledger(Protocol):
    """Durable per-batch and per-file records in MySQL."""

    def create_batch(
        self,
        batch_id: str,
        bucket: str,
        key: str,
        source: str,
        status: str,
        tenant: str | None = None,
        *,
        settle_at: float | None = None,
    ) -> BatchRow:
        """Insert the batch (owned by ``tenant``, None: the admin; due for settle at ``settle_at``,
        default now) if new; return the row as stored (existing rows are left alone, their owner too)."""
        ...

    def get_batch(self, batch_id: str) -> BatchRow | None:
        """The batch row, or None."""
        ...

    def find_batches(self, key: str, tenant: str | None = None) -> list[BatchRow]:
        """Batches created from an object key, newest first; only ``tenant``'s when one is given."""
        ...

    def recent_batches(
        self,
        tenant: str | None = None,
        *,
        limit: int = 20,
        before: tuple[float, str] | None = None,
        status: str | None = None,
        since: float | None = None,
        until: float | None = None,
    ) -> list[BatchRow]:
        """Batches newest first (created_at, then batch_id, descending), at most ``limit``; only
        ``tenant``'s when one is given. ``before``: the (created_at, batch_id) of the last row of the
        previous page; ``status``: only that status; ``since``/``until``: created_at in [since, until)."""
        ...

    def batch_for_upload(self, token: str, candidate_id: str, preferred_id: str | None = None) -> str:
        """The batch an upload token claimed first; else ``preferred_id`` unless another upload claimed
        it, else ``candidate_id``. Each batch is claimed by one upload at most."""
        ...

    def expire_unclaimed(self, batch_id: str, reason: str, counts: Mapping[str, int]) -> bool:
        """End a PENDING batch FAILED with ``reason`` unless an upload has claimed it; True if it did."""
        ...

    def revive_expired(self, batch_id: str, reason: str) -> bool:
        """A batch FAILED with ``reason`` before anything was unpacked goes back to PROCESSING, summary
        cleared (its upload arrived after all); True if it did. The one final status that may change."""
        ...

    def start_batch(
        self, batch_id: str, total_files: int, ignored_files: int, object_version: str | None = None
    ) -> None:
        """Record the inspected totals (and the ZIP version read) and move a non-final batch to PROCESSING."""
        ...

    def mark_unpacked(self, batch_id: str) -> None:
        """Record that every entry has been staged or recorded."""
        ...

    def finish_batch(self, batch_id: str, status: str, counts: Mapping[str, int], reason: str | None) -> None:
        """Write the final status and summary (idempotent; a final status is never changed)."""
        ...

    def due_batches(
        self, now: float, created_after: float, after: tuple[float, str] | None, limit: int
    ) -> list[BatchRow]:
        """Batches not announced yet whose ``settle_at`` is past ``now``, created after ``created_after``,
        by (settle_at, batch_id) after the cursor ``after``, at most ``limit``."""
        ...

    def defer_settle(self, batch_id: str, seen: float | None, until: float) -> None:
        """Move the batch's ``settle_at`` to ``until`` if it is still ``seen`` (no writer moved it since)."""
        ...

    def pending_batches(self, tenant: str | None) -> tuple[int, float | None]:
        """How many of ``tenant``'s batches are PENDING (created, no upload yet), and the oldest's
        created_at."""
        ...

    def claim_announcement(self, batch_id: str, lease_seconds: float) -> BatchRow | None:
        """Claim announcing a final, unannounced batch unless another claim younger than the lease holds;
        the row as claimed (its ``announce_started_at`` is the claim), or None."""
        ...

    def mark_announced(self, batch_id: str, claimed_at: float) -> bool:
        """Record that the claim ``claimed_at`` announced the batch; False if the claim was lost."""
        ...

    def add_entries(self, batch_id: str, entries: Iterable[NewEntry]) -> None:
        """Register entries (idempotent: existing rows are kept)."""
        ...

    def get_file(self, batch_id: str, index: int) -> FileRow | None:
        """One entry's row, or None."""
        ...

    def begin_attempt(self, batch_id: str, index: int) -> int:
        """Count a processing attempt; return the attempt number (0: no such row, or already recorded)."""
        ...

    def record(self, batch_id: str, index: int, result: FileResult) -> FileRow:
        """Record the outcome unless one is already recorded; return the row as stored."""
        ...

    def link(self, batch_id: str, index: int, user_id: str, pdf_url: str, result: FileResult) -> bool:
        """In one transaction set users.pdf_url where still empty and record ``result``; False if taken."""
        ...

    def list_files(
        self, batch_id: str, after_index: int, limit: int, outcome: str | None = None
    ) -> list[FileRow]:
        """Entries of a batch in index order, after a cursor."""
        ...

    def outcome_counts(self, batch_id: str) -> dict[str, int]:
        """Counts by outcome and by ``reason:<r>`` from the ledger (processed = sum of counted outcomes)."""
        ...

    def done_indices(self, batch_id: str) -> list[int]:
        """Indices of PDF entries that already have an outcome."""
        ...

    def set_timings(self, batch_id: str, index: int, timings: Mapping[str, float]) -> None:
        """Replace the per-stage timings of a recorded entry (the last stage is timed after its write)."""
        ...

    def reopen_batch(self, batch_id: str) -> bool:
        """A COMPLETED batch goes back to PROCESSING (summary cleared); True if it was COMPLETED."""
        ...

    def reopen_file(self, batch_id: str, index: int, outcome: str, reason: str) -> bool:
        """Clear a recorded, not linked outcome if it is still ``outcome``/``reason``; True if cleared.

        The attempt count is kept, so it stays the number of times the file was ever tried.
        """
        ...

    def mark_lane(self, batch_id: str, index: int, lane: str) -> None:
        """Note that a file without an outcome is handed to ``lane`` (its source); no-op once recorded."""
        ...

    def lane_counts(self, batch_id: str, lane: str) -> dict[str, int]:
        """PDF entries of ``lane``: {"waiting": without an outcome yet, "done": recorded}."""
        ...

    def done_files(self, batch_id: str) -> list[DoneFile]:
        """Every PDF entry with an outcome, read at one instant (counts and indices must agree)."""
        ...

    def linked_keys(self, sha256s: Sequence[str]) -> set[str]:
        """The final keys of linked entries whose content is one of ``sha256s`` (what gc must keep)."""
        ...

    def files_by_sha(self, sha256: str, tenant: str | None = None, limit: int = 100) -> list[TracedFile]:
        """Every entry whose content is ``sha256``, newest batch first (then entry order), at most
        ``limit``; only ``tenant``'s batches when one is given (by_sha: no scan of the ledger)."""
        ...

    def files_of_user(
        self, user_id: str, named: Sequence[bytes], tenant: str | None = None, limit: int = 100
    ) -> list[TracedFile]:
        """Every entry recorded with ``user_id`` (linked, already linked) or that recorded one of the
        keyed hashes ``named`` (it named the user, linking nobody), ordered as files_by_sha."""
        ...


class Progress(Protocol):
    """Live progress counters in Redis."""

    def init_batch(
        self, batch_id: str, status: str, total_files: int | None, now: float, ignored: int = 0
    ) -> None:
        """Create the hash if missing (counters at 0) or set status/total on a non-final one."""
        ...

    def count(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Count one file once; return (newly counted, status). Raises ProgressMissing when expired."""
        ...

    def mark_unpacked(self, batch_id: str, total_files: int, now: float) -> str:
        """Unpacking is done; return the status (COMPLETED when every file is already counted)."""
        ...

    def fail(self, batch_id: str, reason: str, now: float) -> None:
        """Mark the batch FAILED with a reason."""
        ...

    def get(self, batch_id: str) -> LiveProgress | None:
        """The batch's live counters, or None when missing (expired, or never written)."""
        ...

    def rebuild(self, batch_id: str, live: LiveProgress, done: Sequence[int], replace: bool = False) -> bool:
        """Recreate expired counters from a ledger snapshot unless they exist (or ``replace``); True if done.

        ``done`` are the indices counted so far: a later count of one of them changes nothing.
        """
        ...

    def uncount(self, batch_id: str, index: int, outcome: str, reason: str, now: float) -> tuple[bool, str]:
        """Undo count(): (was it counted, status); COMPLETED is PROCESSING again. ProgressMissing if gone."""
        ...

    def note_later_upload(self, batch_id: str, later_id: str) -> bool:
        """Add ``later_id`` to the batch's later uploads (once); False when its counters are gone."""
        ...


@dataclass(frozen=True)
class DeadLetter:
    """One message received from a dead-letter queue."""

    message_id: str
    receipt_handle: str
    body: str
    receive_count: int
    sent_at: float | None  # epoch seconds


class DeadLetters(Protocol):
    """The work queue's dead-letter queue, as the operator's commands use it."""

    def approximate_count(self) -> int:
        """Messages in the queue (SQS's approximate count, visible or not)."""
        ...

    def receive(self, max_messages: int, visibility_timeout: int) -> list[DeadLetter]:
        """Up to ``max_messages`` (at most 10) messages, hidden for ``visibility_timeout`` seconds."""
        ...

    def release(self, letters: Sequence[DeadLetter]) -> None:
        """Make received messages visible again at once."""
        ...

    def delete(self, letters: Sequence[DeadLetter]) -> None:
        """Delete received messages."""
        ...


@dataclass(frozen=True)
class CallbackAttempt:
    """One POST of a batch's callback (never its URL or body): who, which try, when, what came back."""

    batch_id: str
    delivery_id: str  # the same on every retry of one delivery; a replay is a new delivery
    attempt: int  # 1, 2, ...: the SQS receive of that delivery's message
    kind: str  # "first" (the batch's completion) or "replay" (`pdfbatch callbacks --replay`)
    started_at: float
    duration_ms: int | None  # None: in flight, or its deliverer died before recording the answer
    http_status: int | None
    error: str | None  # "http_503", "timeout", "ConnectionRefusedError", "blocked_address", "unresolved", ...


class CallbackLog(Protocol):
    """Where a batch's callback URL is kept and every delivery attempt recorded (MySQL)."""

    def set_url(self, batch_id: str, url: str, created_at: float) -> None:
        """Store the batch's callback URL (first one kept)."""
        ...

    def url_of(self, batch_id: str) -> str | None:
        """The batch's callback URL, or None."""
        ...

    def begin_attempt(
        self, batch_id: str, delivery_id: str, attempt: int, kind: str, started_at: float
    ) -> bool:
        """Record an attempt as started; False when that (delivery, attempt) is recorded already."""
        ...

    def finish_attempt(
        self, delivery_id: str, attempt: int, http_status: int | None, error: str | None, duration_ms: int
    ) -> None:
        """Record what an attempt got."""
        ...

    def delivered(self, delivery_id: str) -> bool:
        """Whether an attempt of this delivery got a 2xx."""
        ...

    def attempts(self, batch_id: str) -> list[CallbackAttempt]:
        """Every attempt of the batch's deliveries, oldest first."""
        ...


@dataclass(frozen=True)
class TenantKey:
    """One tenant key as stored: never the key itself, only its hash (shown as a short id)."""

    key_hash: str
    tenant: str
    created_at: float
    revoked_at: float | None


@dataclass(frozen=True)
class SigningIds:
    """A tenant's signing secret ids (pdfbatch_tenants): the secret is derived from one and the
    deployment's root (callback_security.tenant_secret), so no secret is stored. ``previous`` still signs
    until ``previous_until`` (a rotation's overlap)."""

    current: str
    previous: str | None = None
    previous_until: float | None = None


class TenantKeys(Protocol):
    """The tenant keys table (MySQL): hashes of keys, each with its tenant and whether it is revoked."""

    def add(self, tenant: str, key_hash: str) -> TenantKey:
        """Store a new key's hash for ``tenant``."""
        ...

    def tenant_of(self, key_hash: str) -> str | None:
        """The tenant of a live (not revoked) key with this hash, or None: one indexed read."""
        ...

    def is_active(self, tenant: str) -> bool:
        """Whether ``tenant`` holds at least one live key."""
        ...

    def revoke(self, tenant: str) -> int:
        """Revoke every live key of ``tenant``; how many were revoked (0: none, or already revoked)."""
        ...

    def list_keys(self) -> list[TenantKey]:
        """Every key row, by tenant and creation time."""
        ...

    def set_callback(self, tenant: str, url: str | None) -> None:
        """Set ``tenant``'s default callback URL (checked by the caller), or clear it with None."""
        ...

    def callback_of(self, tenant: str) -> str | None:
        """``tenant``'s default callback URL, or None: one primary key read."""
        ...

    def callbacks(self) -> dict[str, str]:
        """Every tenant's default callback URL, by tenant (`keys list`)."""
        ...

    def signing_ids(self, tenant: str) -> SigningIds | None:
        """``tenant``'s signing secret ids, None when it has none (made before issue 24): one read."""
        ...

    def set_signing_ids(self, tenant: str, ids: SigningIds) -> None:
        """Replace ``tenant``'s signing secret ids (`keys create`, `keys rotate-secret`)."""
        ...


FILES_PAGE = 1000  # ledger rows per read when a whole batch is walked


def every_file(
    ledger: Ledger, batch_id: str, outcome: str | None = None, page: int = FILES_PAGE
) -> Iterator[FileRow]:
    """Every entry of a batch in index order (``outcome`` filters as ``list_files`` does), read a page at
    a time after the last index seen: the one paging loop over a batch's ledger rows."""
    after = -1
    while True:
        rows = ledger.list_files(batch_id, after, page, outcome)
        yield from rows
        if len(rows) < page:
            return
        after = rows[-1].index
