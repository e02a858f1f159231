"""pdfbatch's use cases, one module each, over the ports (docs/ARCHITECTURE.md: which rule lives where).

- ``tally``       counted once, completes once, the ledger wins (every other module leans on it)
- ``batches``     batch ids, upload tokens, creating a batch, ending one that never got its ZIP
- ``staging``     unzip: inspect the ZIP, stage each PDF, queue one message per file
- ``processing``  process_pdf: one staged PDF to one outcome; backoff and giving up
- ``views``       the status API's reads (batch status, files, find by key)
- ``operations``  the operator's retry, dead letters and redrive
- ``report``      ``pdfbatch report`` and the one percentile definition
- ``gc``          ``pdfbatch gc``: final objects nothing points at, found by checking references

``Deps`` (``deps``) is what they all run on. The names below are re-exported so callers written
against the former single ``services`` module keep working while they move to the new homes.
"""

from __future__ import annotations

from pdfbatch.services.batches import (
    UPLOAD_GRACE_SECONDS,
    UPLOAD_KEY_RE,
    Upload,
    abandon_upload,
    create_batch,
    expire_if_abandoned,
    new_batch_id,
    resolve_batch,
    upload_token,
)
from pdfbatch.services.deps import Deps, fingerprint
from pdfbatch.services.operations import (
    RedriveReport,
    RetryReport,
    list_dead_letters,
    redrive_dead_letters,
    reopen_files,
    retry_batch,
)
from pdfbatch.services.processing import (
    dead_letter_now,
    give_up,
    on_failed_attempt,
    process_file,
    retry_delay,
    retry_later,
)
from pdfbatch.services.report import PERCENTILES, REPORT_STAGES, batch_report, percentile
from pdfbatch.services.staging import STAGE_INFLIGHT_BYTES, StageReport, stage_zip
from pdfbatch.services.tally import announce, fail_batch
from pdfbatch.services.views import (
    batch_status,
    file_item,
    find_batches,
    iter_all_files,
    list_files,
    report_files,
    report_links,
)

__all__ = [
    "PERCENTILES",
    "REPORT_STAGES",
    "STAGE_INFLIGHT_BYTES",
    "UPLOAD_GRACE_SECONDS",
    "UPLOAD_KEY_RE",
    "Deps",
    "RedriveReport",
    "RetryReport",
    "StageReport",
    "Upload",
    "abandon_upload",
    "announce",
    "batch_report",
    "batch_status",
    "create_batch",
    "dead_letter_now",
    "expire_if_abandoned",
    "fail_batch",
    "file_item",
    "find_batches",
    "fingerprint",
    "give_up",
    "iter_all_files",
    "list_dead_letters",
    "list_files",
    "new_batch_id",
    "on_failed_attempt",
    "percentile",
    "process_file",
    "redrive_dead_letters",
    "reopen_files",
    "report_files",
    "report_links",
    "resolve_batch",
    "retry_batch",
    "retry_delay",
    "retry_later",
    "stage_zip",
    "upload_token",
]
