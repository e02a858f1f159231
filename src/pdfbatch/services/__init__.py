"""pdfbatch's use cases, one module each, over the ports (docs/ARCHITECTURE.md: which rule lives where).

- ``tally``       counted once, completes once, the ledger wins (every other module leans on it)
- ``batches``     batch ids, upload tokens, creating a batch, ending one that never got its ZIP
- ``staging``     unzip: inspect the ZIP, stage each PDF, queue one message per file
- ``processing``  process_pdf: one staged PDF to one outcome; backoff and giving up
- ``views``       the status API's reads (batch status, files, find by key)
- ``settle``      on a schedule, what a read would settle for batches nobody reads
- ``operations``  the operator's retry, dead letters and redrive
- ``report``      ``pdfbatch report`` and the one percentile definition
- ``gc``          ``pdfbatch gc``: final objects nothing points at, found by checking references

``Deps`` (``deps``) is what they all run on. The names below are re-exported so callers written
against the former single ``services`` module keep working while they move to the new homes. They
are imported on first use (PEP 562), so a function that needs two use cases (status: batches and views)
does not pay for the others' imports (zipfile, the archive reader, metrics) in its cold start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

SUBMODULES = frozenset(
    {"batches", "deps", "gc", "operations", "processing", "report", "staging", "tally", "views"}
)
# Each re-exported name and the module that defines it.
_HOMES = {
    "UPLOAD_GRACE_SECONDS": "pdfbatch.services.batches",
    "UPLOAD_KEY_RE": "pdfbatch.services.batches",
    "Upload": "pdfbatch.services.batches",
    "abandon_upload": "pdfbatch.services.batches",
    "create_batch": "pdfbatch.services.batches",
    "expire_if_abandoned": "pdfbatch.services.batches",
    "new_batch_id": "pdfbatch.services.batches",
    "resolve_batch": "pdfbatch.services.batches",
    "upload_token": "pdfbatch.services.batches",
    "Deps": "pdfbatch.services.deps",
    "fingerprint": "pdfbatch.services.deps",
    "RedriveReport": "pdfbatch.services.operations",
    "RetryReport": "pdfbatch.services.operations",
    "list_dead_letters": "pdfbatch.services.operations",
    "redrive_dead_letters": "pdfbatch.services.operations",
    "reopen_files": "pdfbatch.services.operations",
    "retry_batch": "pdfbatch.services.operations",
    "dead_letter_now": "pdfbatch.services.processing",
    "give_up": "pdfbatch.services.processing",
    "on_failed_attempt": "pdfbatch.services.processing",
    "process_file": "pdfbatch.services.processing",
    "retry_delay": "pdfbatch.services.processing",
    "retry_later": "pdfbatch.services.processing",
    "PERCENTILES": "pdfbatch.services.report",
    "REPORT_STAGES": "pdfbatch.services.report",
    "batch_report": "pdfbatch.services.report",
    "percentile": "pdfbatch.services.report",
    "STAGE_INFLIGHT_BYTES": "pdfbatch.services.staging",
    "StageReport": "pdfbatch.services.staging",
    "stage_zip": "pdfbatch.services.staging",
    "announce": "pdfbatch.services.tally",
    "fail_batch": "pdfbatch.services.tally",
    "batch_status": "pdfbatch.services.views",
    "file_item": "pdfbatch.services.views",
    "find_batches": "pdfbatch.services.views",
    "iter_all_files": "pdfbatch.services.views",
    "list_files": "pdfbatch.services.views",
    "report_files": "pdfbatch.services.views",
    "report_links": "pdfbatch.services.views",
}


def __getattr__(name: str) -> Any:
    """A re-exported name or a submodule, imported the first time it is asked for."""
    if name in SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


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
