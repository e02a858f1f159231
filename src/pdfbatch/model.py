"""Domain values shared by every step of the pipeline."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field


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
    AMBIGUOUS = "ambiguous"  # the deciding page names two or more users (see pdfbatch.matching)
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
    # ignored (not counted)
    DIRECTORY = "directory"
    MACOS_METADATA = "macos_metadata"
    HIDDEN_FILE = "hidden_file"
    NOT_PDF = "not_pdf"


REASON_OUTCOME: dict[str, str] = {
    Reason.MATCHED: Outcome.LINKED,
    Reason.NO_TEXT_LAYER: Outcome.SKIPPED_NO_MATCH,
    Reason.NO_EMAIL: Outcome.SKIPPED_NO_MATCH,
    Reason.NO_USER: Outcome.SKIPPED_NO_MATCH,
    Reason.AMBIGUOUS: Outcome.SKIPPED_NO_MATCH,
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
    Reason.DIRECTORY: IGNORED,
    Reason.MACOS_METADATA: IGNORED,
    Reason.HIDDEN_FILE: IGNORED,
    Reason.NOT_PDF: IGNORED,
}


# Failed at unzip, before anything was staged: re-running them could only report the staged copy missing.
UNSTAGED_REASONS = frozenset(
    {Reason.TOO_LARGE, Reason.ENCRYPTED_ZIP_ENTRY, Reason.CORRUPT_ENTRY, Reason.UNSUPPORTED_COMPRESSION}
)


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
    user_id: int | None = None
    final_key: str | None = None
    sha256: str | None = None
    detail: dict[str, float] = field(default_factory=dict)


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
        from pdfbatch.errors import InvalidInput

        try:
            batch_id = str(body["batchId"])
            index = int(body["index"])  # type: ignore[call-overload]
            key = str(body["key"])
            bucket = str(body["bucket"])
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput("malformed work message") from exc
        if not is_batch_id(batch_id) or index < 0:
            raise InvalidInput("malformed work message")
        return cls(batch_id=batch_id, index=index, staging_key=key, bucket=bucket)


def staging_key(batch_id: str, index: int) -> str:
    """Where entry ``index`` of a batch is staged: derived from ids only, never from the entry name."""
    return f"staging/{batch_id}/{index:07d}.pdf"


def final_key(user_id: int, sha256: str) -> str:
    """Where a linked PDF lives: one key per user and content, so a re-run rewrites the same object."""
    return f"pdfs/{user_id}/{sha256}.pdf"


# What each reason means to a person reading the results (CLI, upload page, CSV).
REASON_TEXT: dict[str, str] = {
    Reason.MATCHED: "linked to the user whose email address it contains",
    Reason.NO_TEXT_LAYER: "no text found (a scan or image-only PDF)",
    Reason.NO_EMAIL: "no email address found",
    Reason.NO_USER: "email address found, but no user has it",
    Reason.AMBIGUOUS: "names more than one user on the same page, so it was linked to nobody",
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
    Reason.DIRECTORY: "a folder",
    Reason.MACOS_METADATA: "macOS metadata, not a document",
    Reason.HIDDEN_FILE: "a hidden file",
    Reason.NOT_PDF: "not a PDF",
}

BATCH_REASON_TEXT: dict[str, str] = {
    "corrupt_zip": "the upload is not a readable ZIP file",
    "zip_too_large": "the ZIP is larger than the configured maximum",
    "too_many_entries": "the ZIP has more entries than the configured maximum",
    "zip_missing": "the uploaded ZIP was deleted before it could be read",
    "unzip_failed": "unpacking the ZIP failed on every attempt (see the unzip function's logs)",
    "upload_expired": "no ZIP was uploaded for this batch before its upload link expired",
}


def describe(reason: str | None) -> str:
    """A human sentence for a file or batch reason."""
    if not reason:
        return ""
    return REASON_TEXT.get(reason) or BATCH_REASON_TEXT.get(reason) or reason.replace("_", " ")
