"""Typed errors: each class says what the caller should do."""

from __future__ import annotations


class PdfBatchError(Exception):
    """Base of every error pdfbatch raises on purpose."""

    code = "error"


class ConfigError(PdfBatchError):
    """A required setting is missing or malformed: fix the environment, do not retry."""

    code = "config_error"


class InvalidInput(PdfBatchError):
    """The caller sent something unusable: reject it, never retry."""

    code = "invalid_input"


class UsersTableError(InvalidInput):
    """The configured users table cannot be queried as configured (a missing table or column, a collation
    that cannot compare, no privilege on it): a configuration problem, never an outage to retry.

    The message names the problem with configuration names only (table and column names, the server's
    error number), never a value from the table or an address.
    """

    code = "users_table_error"

    def __init__(self, problem: str, errno: int | None = None) -> None:
        self.problem = problem
        self.errno = errno
        super().__init__(problem)


class NotFound(PdfBatchError):
    """The thing asked for does not exist (HTTP 404)."""

    code = "not_found"


class Unauthenticated(PdfBatchError):
    """The request carries no API key (HTTP 401)."""

    code = "unauthorized"


class Forbidden(PdfBatchError):
    """The request's API key is not the one configured (HTTP 403)."""

    code = "forbidden"


class TooManyRequests(PdfBatchError):
    """The caller is over a documented limit; it may ask again after ``retry_after`` seconds (HTTP 429)."""

    code = "too_many_requests"

    def __init__(self, message: str, retry_after: int) -> None:
        self.retry_after = max(1, int(retry_after))
        super().__init__(message)


class DependencyUnavailable(PdfBatchError):
    """A service (MySQL, Redis, S3, SQS) failed in a way a retry can fix: let it propagate."""

    code = "dependency_unavailable"

    def __init__(self, dependency: str, detail: str = "") -> None:
        self.dependency = dependency
        super().__init__(f"{dependency} unavailable" + (f": {detail}" if detail else ""))


class ObjectChanged(PdfBatchError):
    """The object is no longer the one a read was pinned to (its ETag no longer matches): never retried."""

    code = "object_changed"


class ProgressMissing(PdfBatchError):
    """The Redis progress hash of a batch has expired or was never written."""

    code = "progress_missing"


# --- PDF reading: each maps to a recorded outcome reason, never retried ---


class PdfRejected(PdfBatchError):
    """The file cannot be read as a PDF; ``reason`` is the ledger reason."""

    reason = "malformed_pdf"

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail or self.reason)


class MalformedPdf(PdfRejected):
    """Not a PDF, or truncated/corrupt (missing header, xref or %%EOF)."""

    reason = "malformed_pdf"


class EncryptedPdf(PdfRejected):
    """The PDF needs a user password to open."""

    reason = "encrypted"


class PdfTimeout(PdfRejected):
    """Reading the PDF exceeded its per-file budget."""

    reason = "timeout"


# --- ZIP reading ---


class ArchiveRejected(PdfBatchError):
    """The ZIP as a whole cannot be processed; ``reason`` (a ``model.BatchReason``) becomes the batch's
    FAILED reason. (This module imports nothing of pdfbatch: every other module may import it.)"""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(detail or reason)


class EntryRejected(PdfBatchError):
    """One ZIP entry cannot be read safely; ``reason`` is its ledger reason (the entry counts as failed)."""

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        super().__init__(detail or reason)
