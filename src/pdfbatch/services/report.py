"""``pdfbatch report``: a batch's outcomes, reasons and per-stage latency percentiles, from the ledger.

``percentile`` is the project's one definition (nearest rank); the bench states its latencies with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from pdfbatch import metrics
from pdfbatch.errors import NotFound
from pdfbatch.model import COUNTED_OUTCOMES, describe, is_batch_id
from pdfbatch.ports import Ledger, every_file
from pdfbatch.services.deps import iso

REPORT_STAGES: tuple[str, ...] = (*metrics.STAGES, "total")
PERCENTILES = (50, 95, 99)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of ``values`` (not empty)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def batch_report(ledger: Ledger, batch_id: str, orphans: int | None = None) -> dict[str, Any]:
    """`pdfbatch report`: outcomes, reasons and per-stage p50/p95/p99 (ms), all read from the ledger.

    ``orphans``: the batch's copies nothing points at (``orphans.batch_orphans``), when the bucket was
    reached.
    """
    batch = ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    outcomes: dict[str, int] = {o: 0 for o in COUNTED_OUTCOMES}
    reasons: dict[tuple[str, str], int] = {}
    stage_values: dict[str, list[float]] = {s: [] for s in REPORT_STAGES}
    pending = retried = pdfs = 0
    for row in every_file(ledger, batch_id):
        if row.kind != "pdf":
            continue
        pdfs += 1
        retried += row.attempts > 1
        if row.outcome is None:
            pending += 1
            continue
        outcomes[row.outcome] = outcomes.get(row.outcome, 0) + 1
        key = (row.outcome, row.reason or "")
        reasons[key] = reasons.get(key, 0) + 1
        for stage in REPORT_STAGES:
            if stage in row.timings:
                stage_values[stage].append(float(row.timings[stage]) * 1000)
    stages = {
        stage: {
            "files": len(values),
            **{f"p{p}": round(percentile(values, p), 2) for p in PERCENTILES},
            "max": round(max(values), 2),
        }
        for stage, values in stage_values.items()
        if values
    }
    return {
        "batchId": batch_id,
        "status": batch.status,
        "reason": batch.reason,
        "totalFiles": batch.total_files,
        "ignored": batch.ignored_files,
        "pdfs": pdfs,
        "pending": pending,
        "retriedFiles": retried,
        "outcomes": outcomes,
        "reasons": [
            {"outcome": o, "reason": r, "files": n, "meaning": describe(r)}
            for (o, r), n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
        "stagesMs": stages,
        "orphans": orphans,
        "createdAt": iso(batch.created_at),
        "completedAt": iso(batch.completed_at),
        "elapsedSeconds": round(batch.completed_at - batch.created_at, 3) if batch.completed_at else None,
    }
