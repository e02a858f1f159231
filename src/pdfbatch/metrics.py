"""The one Powertools Metrics of pdfbatch: CloudWatch EMF lines the handlers flush once per invocation.

On AWS, CloudWatch turns the EMF lines of the function log into metrics; on the local stack they stay
in the function log. Services call these helpers where a fact happens (a file recorded, a ZIP
unpacked), so each is emitted once; handlers flush with ``@metrics.log_metrics``.
Metric names are stable: dashboards and alarms use them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.metrics import MetricUnit

NAMESPACE = "pdfbatch"
# Per-file stages timed by process_file, in pipeline order, and their metric names.
STAGES: tuple[str, ...] = ("download", "validate", "extract", "match", "copy", "update")
STAGE_METRICS: dict[str, str] = {stage: f"{stage.capitalize()}Duration" for stage in STAGES}
OUTCOME_METRICS: dict[str, str] = {
    "linked": "FilesLinked",
    "skipped_no_match": "FilesSkippedNoMatch",
    "skipped_already_exists": "FilesSkippedAlreadyExists",
    "failed": "FilesFailed",
}
QUEUE_AGE = "QueueAge"  # ms from SentTimestamp to the start of processing
FIRST_RECEIVE_DELAY = "FirstReceiveDelay"  # ms from SentTimestamp to the first receive
GAVE_UP = "FilesGaveUp"
ENTRIES_STAGED = "EntriesStaged"
ENTRIES_REJECTED = "EntriesRejected"
# Per lane (text: process_pdf, ocr: ocr_pdf): how long a message waited, how long a file took in all.
LANE_METRICS: dict[str, dict[str, str]] = {
    "text": {"age": QUEUE_AGE, "first": FIRST_RECEIVE_DELAY, "duration": "FileDuration"},
    "ocr": {"age": "OcrQueueAge", "first": "OcrFirstReceiveDelay", "duration": "OcrFileDuration"},
}
HANDED_TO_OCR = "FilesHandedToOcr"
ZIP_SECONDS = {"inspect": "ZipInspectDuration", "stage": "ZipStageDuration", "total": "ZipTotalDuration"}


def namespace() -> str:
    """POWERTOOLS_METRICS_NAMESPACE (the template sets it), or ``pdfbatch``: flushing never fails on it."""
    return os.environ.get("POWERTOOLS_METRICS_NAMESPACE") or NAMESPACE


metrics = Metrics(namespace=namespace())


def file_recorded(outcome: str, reason: str, timings: Mapping[str, float], lane: str = "text") -> None:
    """One file got its outcome in this invocation: its outcome count, stage durations and its lane's
    file duration (``total``)."""
    name = OUTCOME_METRICS.get(outcome)
    if name:
        metrics.add_metric(name=name, unit=MetricUnit.Count, value=1)
    if reason == "gave_up":
        metrics.add_metric(name=GAVE_UP, unit=MetricUnit.Count, value=1)
    for stage, metric in STAGE_METRICS.items():
        if stage in timings:
            value = round(timings[stage] * 1000, 3)
            metrics.add_metric(name=metric, unit=MetricUnit.Milliseconds, value=value)
    if "total" in timings and lane in LANE_METRICS:
        value = round(timings["total"] * 1000, 3)
        metrics.add_metric(name=LANE_METRICS[lane]["duration"], unit=MetricUnit.Milliseconds, value=value)


def handed_to_ocr() -> None:
    """process_pdf sent a file with no text layer to the OCR lane."""
    metrics.add_metric(name=HANDED_TO_OCR, unit=MetricUnit.Count, value=1)


def queue_age(now: float, sent_ms: str | None, first_received_ms: str | None, lane: str = "text") -> None:
    """How long a message of ``lane`` waited, from SQS's SentTimestamp and ApproximateFirstReceiveTimestamp
    (ms): QueueAge for the work queue, OcrQueueAge for the OCR lane's."""
    names = LANE_METRICS[lane]
    sent = _epoch_ms(sent_ms)
    if sent is None:
        return
    metrics.add_metric(name=names["age"], unit=MetricUnit.Milliseconds, value=max(0.0, now * 1000 - sent))
    first = _epoch_ms(first_received_ms)
    if first is not None:
        delay = max(0.0, first - sent)
        metrics.add_metric(name=names["first"], unit=MetricUnit.Milliseconds, value=delay)


def _epoch_ms(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def zip_unpacked(staged: int, rejected: int, seconds: Mapping[str, float]) -> None:
    """One unzip run: entries staged and rejected, and how long inspecting and staging took."""
    metrics.add_metric(name=ENTRIES_STAGED, unit=MetricUnit.Count, value=staged)
    metrics.add_metric(name=ENTRIES_REJECTED, unit=MetricUnit.Count, value=rejected)
    for key, metric in ZIP_SECONDS.items():
        if key in seconds:
            value = round(seconds[key] * 1000, 3)
            metrics.add_metric(name=metric, unit=MetricUnit.Milliseconds, value=value)
