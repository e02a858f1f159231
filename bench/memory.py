"""Section 4: peak RSS of the real unzip function for ZIPs of 10 MB, 100 MB and 1 GB.

How it is measured: each ZIP is dropped into uploads/ (as `aws s3 cp` would) so S3 invokes the deployed
unzip function; a configuration change before each drop makes that invocation start a fresh execution
environment. The local executor's bootstrap writes Lambda's REPORT line with `Max Memory Used` from the
process's VmHWM (its peak resident set since it started: imports, clients and this one ZIP). ru_maxrss
is not used because Linux carries it across exec, so it would report LocalStack's own peak. process_pdf
is paused meanwhile (its SQS mapping disabled) and the queued messages are purged after.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench import corpora
from bench.stack import BenchStack, chunks

MiB = 1024 * 1024


@dataclass(frozen=True)
class Peak:
    """One ZIP's unzip invocation."""

    label: str
    zip_bytes: int
    entries: int
    peak_mb: int
    duration_ms: float
    staged: int


def measure(stack: BenchStack, sizes: Sequence[tuple[str, int]], entry_size: int = MiB) -> list[Peak]:
    """Peak RSS of unzip per ZIP size; ZIPs hold stored copies of one ~``entry_size`` PDF."""
    entry = corpora.big_pdf(entry_size)
    peaks: list[Peak] = []
    stack.enable_processing(False)
    try:
        for label, total in sizes:
            path, count = corpora.memory_zip(total, entry)
            peaks.append(_one(stack, label, path, count))
    finally:
        stack.purge_queue()
        stack.enable_processing(True)
    return peaks


def _one(stack: BenchStack, label: str, path: Path, count: int, timeout: float = 600) -> Peak:
    stack.fresh_environment("unzip")
    s3 = stack.client("s3")
    key = f"uploads/bench-memory-{label.replace(' ', '')}-{time.time_ns()}.zip"
    since_ms = int(time.time() * 1000) - 1000
    s3.upload_file(str(path), stack.bucket, key)  # multipart for the big ones, as `aws s3 cp` does
    deadline = time.monotonic() + timeout
    while True:
        reports = stack.reports("unzip", since_ms)
        unpacked = stack.json_lines("unzip", since_ms, "zip unpacked")
        if reports and unpacked:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"unzip did not report for the {label} ZIP within {timeout:.0f} s")
        time.sleep(1)
    report = reports[-1]
    staged = int(unpacked[-1].get("staged", -1))
    batch_id = str(unpacked[-1].get("batch_id", ""))
    _cleanup(stack, key, batch_id)
    return Peak(label, path.stat().st_size, count, report.max_memory_mb, report.duration_ms, staged)


def _cleanup(stack: BenchStack, key: str, batch_id: str) -> None:
    # The staged copies and the upload would otherwise hold GBs in LocalStack's S3 for nothing. The
    # bucket keeps versions (infra/template.yaml), so each version is deleted, not hidden by a marker.
    s3 = stack.client("s3")
    objects: list[dict[str, str]] = []
    paginator = s3.get_paginator("list_object_versions")
    for prefix in [key, f"staging/{batch_id}/"] if batch_id else [key]:
        for page in paginator.paginate(Bucket=stack.bucket, Prefix=prefix):
            for v in page.get("Versions", []) + page.get("DeleteMarkers", []):
                objects.append({"Key": v["Key"], "VersionId": v["VersionId"]})
    for batch in chunks(objects, 1000):
        s3.delete_objects(Bucket=stack.bucket, Delete={"Objects": batch, "Quiet": True})
