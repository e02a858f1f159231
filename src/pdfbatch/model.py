"""Domain values shared by every step of the pipeline."""

from __future__ import annotations

import enum
import hashlib
import json
import re
from dataclasses import dataclass, field

from pdfbatch.errors import InvalidInput


class Outcome(enum.StrEnum):
    """The one final result of a PDF entry."""

    LINKED = "linked"
    SKIPPED_NO_MATCH = "skipped_no_match"
    SKIPPED_ALREADY_EXISTS = "skipped_already_exists"
    FAILED = "failed"


COUNTED_OUTCOMES: tuple[str, ...] = tuple(o.value for o in Outcome)
IGNORED = "ignored"  # entries that are not PDFs: listed, never counted


class Reason(enum.StrEnum):
    """Machine-readable reasons; each belongs to one outcome (see REASON_OUTCOME)."""

    # linked
    MATCHED = "matched"
    # skipped_no_match
    NO_TEXT_LAYER = "no_text_layer"
    NO_EMAIL = "no_email"
    NO_USER = "no_user"
    AMBIGUOUS = "ambiguous"  # the deciding page names two or more users: nobody is linked
    AMBIGUOUS_WRAP = "ambiguous_wrap"  # a line break reads two ways that name different users (or nobody)
    NOT_SHOWN = "not_shown"  # a user's address is in the text layer, but the pixels do not spell it
    OCR_PAGE_LIMIT = "ocr_page_limit"  # a scan whose first OCR pages named nobody, with more pages unread
    # skipped_already_exists
    ALREADY_LINKED = "already_linked"
    # failed
    MALFORMED_PDF = "malformed_pdf"
    ENCRYPTED = "encrypted"
    TIMEOUT = "timeout"
    TOO_LARGE = "too_large"
    ENCRYPTED_ZIP_ENTRY = "encrypted_zip_entry"
    CORRUPT_ENTRY = "corrupt_entry"
    UNSUPPORTED_COMPRESSION = "unsupported_compression"
    GAVE_UP = "gave_up"  # kept failing on every delivery
    MISSING_OBJECT = "missing_object"  # the staged copy was gone (expired or deleted)
    USERS_TABLE_ERROR = "users_table_error"  # the users table cannot be read as configured (never retried)
    ZIP_REPLACED = "zip_replaced"  # the upload was overwritten before this entry was read (no versions)
    NESTED_TOO_DEEP = "nested_too_deep"  # a ZIP inside a nested ZIP: only one level of nesting is read
    # ignored (not counted)
    DIRECTORY = "directory"
    MACOS_METADATA = "macos_metadata"
    HIDDEN_FILE = "hidden_file"
    NOT_PDF = "not_pdf"
    NESTED_ZIP = "nested_zip"  # a ZIP inside the ZIP: its entries are entries of the batch (inner.zip/cv.pdf)


REASON_OUTCOME: dict[str, str] = {
    Reason.MATCHED: Outcome.LINKED,
    Reason.NO_TEXT_LAYER: Outcome.SKIPPED_NO_MATCH,
    Reason.NO_EMAIL: Outcome.SKIPPED_NO_MATCH,
    Reason.NO_USER: Outcome.SKIPPED_NO_MATCH,
    Reason.AMBIGUOUS: Outcome.SKIPPED_NO_MATCH,
    Reason.AMBIGUOUS_WRAP: Outcome.SKIPPED_NO_MATCH,
    Reason.NOT_SHOWN: Outcome.SKIPPED_NO_MATCH,
    Reason.OCR_PAGE_LIMIT: Outcome.SKIPPED_NO_MATCH,
    Reason.ALREADY_LINKED: Outcome.SKIPPED_ALREADY_EXISTS,
    Reason.MALFORMED_PDF: Outcome.FAILED,
    Reason.ENCRYPTED: Outcome.FAILED,
    Reason.TIMEOUT: Outcome.FAILED,
    Reason.TOO_LARGE: Outcome.FAILED,
    Reason.ENCRYPTED_ZIP_ENTRY: Outcome.FAILED,
    Reason.CORRUPT_ENTRY: Outcome.FAILED,
    Reason.UNSUPPORTED_COMPRESSION: Outcome.FAILED,
    Reason.GAVE_UP: Outcome.FAILED,
    Reason.MISSING_OBJECT: Outcome.FAILED,
    Reason.USERS_TABLE_ERROR: Outcome.FAILED,
    Reason.ZIP_REPLACED: Outcome.FAILED,
    Reason.NESTED_TOO_DEEP: Outcome.FAILED,
    Reason.DIRECTORY: IGNORED,
    Reason.MACOS_METADATA: IGNORED,
    Reason.HIDDEN_FILE: IGNORED,
    Reason.NOT_PDF: IGNORED,
    Reason.NESTED_ZIP: IGNORED,
}


# Failed at unzip, before anything was staged: re-running them could only report the staged copy missing.
UNSTAGED_REASONS = frozenset(
    {
        Reason.TOO_LARGE,
        Reason.ENCRYPTED_ZIP_ENTRY,
        Reason.CORRUPT_ENTRY,
        Reason.UNSUPPORTED_COMPRESSION,
        Reason.ZIP_REPLACED,
        Reason.NESTED_TOO_DEEP,
    }
)


class Lane(enum.StrEnum):
    """Which reader gave a file its outcome: the text lane (process_pdf) or the OCR lane (ocr_pdf)."""

    TEXT = "text"
    OCR = "ocr"


class BatchReason(enum.StrEnum):
    """Why a batch as a whole ended FAILED (no file of it was, or will be, processed from now on)."""

    CORRUPT_ZIP = "corrupt_zip"  # not a readable ZIP
    ZIP_TOO_LARGE = "zip_too_large"  # over Limits.max_zip_bytes
    TOO_MANY_ENTRIES = "too_many_entries"  # over Limits.max_entries
    ZIP_MISSING = "zip_missing"  # deleted before unzip could read it
    UNZIP_FAILED = "unzip_failed"  # its S3 event failed every unzip attempt (unzip DLQ)
    UPLOAD_EXPIRED = "upload_expired"  # POST /batches, but no ZIP arrived while the link was valid
    ZIP_REPLACED = "zip_replaced"  # overwritten by a later upload before unzip read it (no versions)
    NOT_A_ZIP = "not_a_zip"  # its bytes are not a ZIP (no local header at its start, no end record)


class BatchStatus(enum.StrEnum):
    """Lifecycle of a batch: PENDING (id handed out, nothing unpacked) -> PROCESSING -> final."""

    PENDING = "PENDING"
    PROCESSING = "PROCESSING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


FINAL_STATUSES = frozenset({BatchStatus.COMPLETED, BatchStatus.FAILED})

BATCH_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def is_batch_id(value: str) -> bool:
    """True when ``value`` has the shape of a batch id (32 lowercase hex characters)."""
    return bool(BATCH_ID_RE.fullmatch(value))


@dataclass(frozen=True)
class FileResult:
    """The recorded outcome of one entry."""

    outcome: str
    reason: str
    user_id: str | None = None  # the users row's id as text (an integer id as its decimal digits)
    final_key: str | None = None
    sha256: str | None = None
    detail: dict[str, float] = field(default_factory=dict)
    users_named: int | None = None  # ambiguous: how many users the deciding page named (never who)
    source: str = Lane.TEXT  # the lane that read it (a file handed to the OCR lane keeps "ocr")
    page: int | None = None  # the page (1-based) that decided: linked, already linked, ambiguous
    # Keyed hashes (pdfbatch.named) of the users a file that links nobody named: never who.
    named: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class FileTask:
    """One SQS message: which staged entry of which batch to process."""

    batch_id: str
    index: int
    staging_key: str
    bucket: str

    def to_message(self) -> dict[str, object]:
        """The JSON body sent on the work queue."""
        return {"batchId": self.batch_id, "index": self.index, "key": self.staging_key, "bucket": self.bucket}

    @classmethod
    def from_message(cls, body: dict[str, object]) -> FileTask:
        """Parse a queue message body; raises InvalidInput on a malformed one."""
        try:
            batch_id = str(body["batchId"])
            index = int(body["index"])  # type: ignore[call-overload]
            key = str(body["key"])
            bucket = str(body["bucket"])
        except (KeyError, TypeError, ValueError, OverflowError) as exc:  # Overflow: JSON's Infinity
            raise InvalidInput("malformed work message") from exc
        if not is_batch_id(batch_id) or index < 0:
            raise InvalidInput("malformed work message")
        return cls(batch_id=batch_id, index=index, staging_key=key, bucket=bucket)

    @classmethod
    def from_body(cls, body: str | bytes | None) -> FileTask:
        """Parse an SQS message's raw body, the one parse every consumer uses; InvalidInput when the body
        is not JSON or not a work message."""
        try:
            data = json.loads(body or "")
        except (ValueError, TypeError, RecursionError) as exc:  # RecursionError: nesting past the stack
            raise InvalidInput("malformed work message") from exc
        if not isinstance(data, dict):
            raise InvalidInput("malformed work message")
        return cls.from_message(data)


def upload_key(batch_id: str) -> str:
    """The key POST /batches hands out for a batch's ZIP (its presigned POST may only write there)."""
    return f"uploads/{batch_id}.zip"


def staging_key(batch_id: str, index: int) -> str:
    """Where entry ``index`` of a batch is staged: derived from ids only, never from the entry name."""
    return f"staging/{batch_id}/{index:07d}.pdf"


def final_key(user_id: str, sha256: str) -> str:
    """Where a linked PDF lives: one key per user and content, so a re-run rewrites the same object."""
    return f"pdfs/{key_segment(user_id)}/{sha256}.pdf"


# Ids made only of these are used as they are (integers, UUIDs, most slugs): the key of an integer id
# is the one every earlier release wrote.
_PLAIN_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}")
_KEPT_IN_ENCODED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-")
_MAX_ENCODED = 200


def key_segment(user_id: str) -> str:
    """A user id as one S3 key segment of safe characters only (A-Z a-z 0-9 . - _ !), one-to-one.

    Plain ids (letters, digits, ``.``, ``_``, ``-``; not starting with a dot, so never ``.`` or ``..``;
    up to 128) are kept as they are: integers (negative too), UUIDs. Any other id is ``!`` and its
    UTF-8 bytes, each byte outside letters, digits, ``.`` and ``-`` written ``_xx`` (hex):
    ``john/doe`` -> ``!john_2fdoe``. ``!`` never occurs in a plain id and
    ``_`` always starts an escape, so no two ids share a segment. An encoding longer than 200
    characters becomes ``!!`` and the SHA-256 of the id (``!`` is always escaped, so never ``!!``
    otherwise): S3 keys stay under their 1,024-byte limit whatever the id.
    """
    if _PLAIN_ID.fullmatch(user_id):
        return user_id
    raw = user_id.encode("utf-8", "surrogatepass")
    encoded = "!" + "".join(chr(b) if b in _KEPT_IN_ENCODED else f"_{b:02x}" for b in raw)
    if len(encoded) > _MAX_ENCODED:
        return "!!" + hashlib.sha256(raw).hexdigest()
    return encoded


def user_id_of_segment(segment: str) -> str | None:
    """The user id ``key_segment`` made ``segment`` from, or None (a hashed or foreign segment)."""
    if _PLAIN_ID.fullmatch(segment):
        return segment
    if not segment.startswith("!") or segment.startswith("!!"):
        return None
    out = bytearray()
    rest = segment[1:]
    i = 0
    while i < len(rest):
        ch = rest[i]
        if ch == "_":
            try:
                out.append(int(rest[i + 1 : i + 3], 16))
            except ValueError:
                return None
            i += 3
        elif ord(ch) in _KEPT_IN_ENCODED:
            out.append(ord(ch))
            i += 1
        else:
            return None
    try:
        user_id = out.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return None
    return user_id if key_segment(user_id) == segment else None


# What each reason means to a person reading the results (CLI, upload page, CSV).
REASON_TEXT: dict[str, str] = {
    Reason.MATCHED: "linked to the user whose email address it contains",
    Reason.NO_TEXT_LAYER: "no text found (a scan or image-only PDF)",
    Reason.NO_EMAIL: "no email address found",
    Reason.NO_USER: "email address found, but no user has it",
    Reason.AMBIGUOUS: "names more than one user on the same page, so it was linked to nobody",
    Reason.AMBIGUOUS_WRAP: (
        "an address broken across two lines reads as different users (or as a user and nobody), "
        "so it was linked to nobody"
    ),
    Reason.NOT_SHOWN: (
        "a user's email address is in the file's text, but the page does not show it (what is drawn "
        "there reads otherwise, or nothing), so it was linked to nobody"
    ),
    Reason.OCR_PAGE_LIMIT: "a scan whose first pages (read by OCR, up to the page limit) name no user",
    Reason.ALREADY_LINKED: "the user already has a PDF on file",
    Reason.MALFORMED_PDF: "not a readable PDF (damaged, truncated or another file type)",
    Reason.ENCRYPTED: "password-protected",
    Reason.TIMEOUT: "took too long to read",
    Reason.TOO_LARGE: "too large (over the size or compression limit)",
    Reason.ENCRYPTED_ZIP_ENTRY: "encrypted inside the ZIP",
    Reason.CORRUPT_ENTRY: "damaged inside the ZIP",
    Reason.UNSUPPORTED_COMPRESSION: "compressed with an unsupported method",
    Reason.GAVE_UP: "kept failing after several attempts",
    Reason.MISSING_OBJECT: "the staged copy was gone before it could be read",
    Reason.USERS_TABLE_ERROR: "the users table cannot be read as configured (see the process_pdf logs)",
    Reason.ZIP_REPLACED: (
        "another upload replaced the ZIP before this entry was read (the bucket keeps no versions); "
        "that upload is a batch of its own: upload this ZIP again"
    ),
    Reason.DIRECTORY: "a folder",
    Reason.MACOS_METADATA: "macOS metadata, not a document",
    Reason.HIDDEN_FILE: "a hidden file",
    Reason.NOT_PDF: "not a PDF",
    Reason.NESTED_ZIP: "a ZIP inside the ZIP: the entries in it are listed on their own, as zip/name",
    Reason.NESTED_TOO_DEEP: "a ZIP inside a ZIP inside the ZIP: only one level of nesting is opened",
}

BATCH_REASON_TEXT: dict[str, str] = {
    BatchReason.CORRUPT_ZIP: "the upload is a damaged ZIP file that cannot be read",
    BatchReason.NOT_A_ZIP: "the upload is not a ZIP file (judged by its bytes, whatever its name)",
    BatchReason.ZIP_TOO_LARGE: "the ZIP is larger than the configured maximum",
    BatchReason.TOO_MANY_ENTRIES: "the ZIP has more entries than the configured maximum",
    BatchReason.ZIP_MISSING: "the uploaded ZIP was deleted before it could be read",
    BatchReason.UNZIP_FAILED: "unpacking the ZIP failed on every attempt (see the unzip function's logs)",
    BatchReason.UPLOAD_EXPIRED: "no ZIP was uploaded for this batch before its upload link expired",
    BatchReason.ZIP_REPLACED: (
        "another upload to the same key replaced the ZIP before it could be read (the bucket keeps no "
        "versions); that upload is a batch of its own (see laterUploads): upload this ZIP again"
    ),
}


def describe(reason: str | None, *, batch: bool = False) -> str:
    """A human sentence for a file reason (``batch``: a batch's reason first, where both share a name)."""
    if not reason:
        return ""
    texts = (BATCH_REASON_TEXT, REASON_TEXT) if batch else (REASON_TEXT, BATCH_REASON_TEXT)
    return texts[0].get(reason) or texts[1].get(reason) or reason.replace("_", " ")
