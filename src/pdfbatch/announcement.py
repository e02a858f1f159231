"""A batch announced: its report file (results.csv, summary.json) and its completion event.

Pure shaping from ledger rows; ``services/tally.announce`` writes and puts what this module builds.

- results.csv has one row per ledger entry, in entry order, the ledger's values as text. A cell that
  starts with ``= + - @``, a TAB or a CR gets a leading ``'`` (CSV formula injection: a spreadsheet would
  run it), and so does one starting with ``'``; ``cell_value`` undoes that, so a test can prove the
  file equals the ledger row for row.
- The event's detail holds ids, counts and reasons only: never an entry name, an address or PDF text.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from pdfbatch import metrics
from pdfbatch.model import COUNTED_OUTCOMES, BatchStatus
from pdfbatch.ports import BatchRow, FileRow

EVENT_SOURCE = "pdfbatch"
DETAIL_TYPES = {BatchStatus.COMPLETED: "Batch Completed", BatchStatus.FAILED: "Batch Failed"}
REPORT_URL_EXPIRES_SECONDS = 300  # short-lived: every status answer hands out fresh links
STAGE_COLUMNS: tuple[str, ...] = (*metrics.STAGES, "total")
CSV_COLUMNS: tuple[str, ...] = (
    "index",
    "name",
    "kind",
    "outcome",
    "reason",
    "user_id",
    "final_key",
    "sha256",
    "size",
    "attempts",
    "finished_at",
    *(f"{stage}_seconds" for stage in STAGE_COLUMNS),
    "source",
)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def report_keys(batch_id: str) -> dict[str, str]:
    """The report's object keys: {"csv": reports/{id}/results.csv, "summary": reports/{id}/summary.json}."""
    return {"csv": f"reports/{batch_id}/results.csv", "summary": f"reports/{batch_id}/summary.json"}


def neutralise(value: str) -> str:
    """A cell a spreadsheet will show as text: a leading ``'`` before a formula's first character.

    A value that starts with ``'`` itself gets one too (a spreadsheet hides the first quote), so the
    mapping can be undone: without it ``'=x`` in the ledger would read back as ``=x``.
    """
    return "'" + value if value.startswith((*_FORMULA_STARTS, "'")) else value


def cell_value(cell: str) -> str:
    """The ledger's text of a written cell (``neutralise`` undone)."""
    return cell[1:] if cell.startswith("'") else cell


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def csv_row(row: FileRow) -> list[str]:
    """One entry as the ledger holds it, as text, in CSV_COLUMNS' order (before neutralising)."""
    return [
        str(row.index),
        row.name,
        row.kind,
        _text(row.outcome),
        _text(row.reason),
        _text(row.user_id),
        _text(row.final_key),
        _text(row.sha256),
        str(row.size),
        str(row.attempts),
        _text(row.finished_at),
        *(_text(row.timings.get(stage)) for stage in STAGE_COLUMNS),
        _text(source_of(row)),
    ]


def source_of(row: FileRow) -> str | None:
    """The lane that read an entry: its ledger source; "text" for a PDF recorded before the column
    existed or by unzip (never handed to a lane); None while no lane has read it."""
    if row.source:
        return row.source
    return "text" if row.kind == "pdf" and row.outcome is not None else None


def results_csv(rows: Iterable[FileRow]) -> bytes:
    """results.csv: a header and one row per entry, every cell neutralised (UTF-8, CRLF as RFC 4180)."""
    out = io.StringIO(newline="")
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        writer.writerow([neutralise(cell) for cell in csv_row(row)])
    return out.getvalue().encode("utf-8", "surrogateescape")


def read_results_csv(data: bytes) -> list[list[str]]:
    """The rows of a results.csv as the ledger's text (header dropped, ``neutralise`` undone)."""
    reader = csv.reader(io.StringIO(data.decode("utf-8", "surrogateescape"), newline=""))
    rows = list(reader)
    assert rows and tuple(rows[0]) == CSV_COLUMNS, "not a pdfbatch results.csv"
    return [[cell_value(cell) for cell in r] for r in rows[1:]]


def _counts(batch: BatchRow) -> tuple[dict[str, int], dict[str, int]]:
    counts = batch.counts
    outcomes = {o: int(counts.get(o, 0)) for o in COUNTED_OUTCOMES}
    outcomes["processed"] = int(counts.get("processed", sum(outcomes.values())))
    outcomes["ignored"] = int(batch.ignored_files)
    reasons = {k.split(":", 1)[1]: int(v) for k, v in sorted(counts.items()) if k.startswith("reason:") and v}
    return outcomes, reasons


def _span(start: float | None, end: float | None) -> float | None:
    return round(end - start, 3) if start and end and end >= start else None


def _ending(batch: BatchRow) -> dict[str, Any]:
    """What the summary and the event both say of a batch's end: ids, status, counts and reasons."""
    outcomes, reasons = _counts(batch)
    return {
        "batchId": batch.batch_id,
        "status": batch.status,
        "reason": batch.reason,
        "totalFiles": batch.total_files,
        "counts": outcomes,
        "reasons": reasons,
        "completedAt": batch.completed_at,
        "report": report_keys(batch.batch_id),
    }


def summary(batch: BatchRow) -> dict[str, Any]:
    """summary.json: status, counts, reasons, durations and the ZIP the batch was read from."""
    return {
        **_ending(batch),
        "createdAt": batch.created_at,
        "durations": {
            "queuedSeconds": _span(batch.created_at, batch.started_at),
            "unzipSeconds": _span(batch.started_at, batch.unpacked_at),
            "processingSeconds": _span(batch.started_at, batch.completed_at),
            "totalSeconds": _span(batch.created_at, batch.completed_at),
        },
        "upload": {
            "bucket": batch.bucket,
            "key": batch.object_key,
            "versionId": batch.object_version,
            "source": batch.source,
        },
    }


def summary_json(batch: BatchRow) -> bytes:
    """summary.json's bytes (sorted keys: the same ledger row always writes the same bytes)."""
    return json.dumps(summary(batch), sort_keys=True, indent=2).encode("utf-8")


def event_detail(batch: BatchRow) -> dict[str, Any]:
    """The completion event's detail: ids, counts and reasons, nothing a person wrote or is named by.

    ``completedAt`` with ``batchId`` identifies one completion: EventBridge delivers at least once, and
    a batch reopened by ``pdfbatch retry`` completes (and is announced) again.
    """
    return _ending(batch)
