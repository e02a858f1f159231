"""What the handlers print: EMF metrics with the expected names, JSON log lines keyed by batch and file.

The handlers run on the in-memory fakes and moto's S3/SQS; stdout is where Lambda (and the local
stack's function log) collects both.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
import time
from typing import Any

import pytest

from fakes import FakeLedger
from fixtures import pdfs
from fixtures.apigw import Context, load_handler
from fixtures.events import s3_event, sqs_event
from fixtures.pipeline import BUCKET, files_by_name, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import metrics as pdf_metrics
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.logs import logger
from pdfbatch.services import staging
from pdfbatch.services.deps import Deps

EMAIL = "observed.person@example.com"
NAME = "Private Person CV.pdf"


def capture_logs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Point the logger (whose handler keeps the stdout of its import time) at capsys's stdout.

    Called in the test body: capsys replaces sys.stdout only while the test itself runs.
    """
    handler = logger.registered_handler
    assert isinstance(handler, logging.StreamHandler)
    monkeypatch.setattr(handler, "stream", sys.stdout)


def waited_event(bodies: list[dict[str, Any]], receive_count: int = 1) -> dict[str, Any]:
    """An SQS event whose messages were sent 1.5 s ago and first received 0.5 s ago."""
    now_ms = int(time.time() * 1000)
    waited = {"SentTimestamp": str(now_ms - 1500), "ApproximateFirstReceiveTimestamp": str(now_ms - 500)}
    return sqs_event(bodies, receive_count, waited)


def printed(out: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(log lines, EMF blobs) of what the handler printed; every line must be JSON."""
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [x for x in lines if "_aws" not in x], [x for x in lines if "_aws" in x]


def metric_names(blobs: list[dict[str, Any]]) -> set[str]:
    return {m["Name"] for b in blobs for d in b["_aws"]["CloudWatchMetrics"] for m in d["Metrics"]}


def staged_batch(deps: Deps) -> tuple[str, list[dict[str, Any]]]:
    assert isinstance(deps.ledger, FakeLedger)
    deps.ledger.add_user(EMAIL)
    data = make_zip([(NAME, pdfs.resume_pdf("Private Person", EMAIL)), ("other.pdf", pdfs.text_pdf(["x"]))])
    report = staging.stage_zip(deps, upload(deps, data))
    pdf_metrics.metrics.clear_metrics()  # unzip's, flushed by no handler here
    return report.batch_id, sorted(receive_all(deps), key=lambda m: m["index"])


def test_process_pdf_emits_stage_outcome_and_queue_age_metrics_and_keyed_logs(
    deps: Deps, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a staged batch: a résumé of a known user and a PDF without an address
    capture_logs(monkeypatch)
    batch_id, bodies = staged_batch(deps)
    capsys.readouterr()
    # WHEN process_pdf handles both messages
    result = load_handler("process_pdf").handler(waited_event(bodies), Context())
    assert result == {"batchItemFailures": []}
    logs, blobs = printed(capsys.readouterr().out)
    # THEN one EMF blob in the pdfbatch namespace carries every stage, the outcomes and the queue age
    assert {b["_aws"]["CloudWatchMetrics"][0]["Namespace"] for b in blobs} == {"pdfbatch"}
    names = metric_names(blobs)
    assert {
        "DownloadDuration",
        "ValidateDuration",
        "ExtractDuration",
        "MatchDuration",
        "CopyDuration",
        "UpdateDuration",
        "FilesLinked",
        "FilesSkippedNoMatch",
        "QueueAge",
        "FirstReceiveDelay",
    } <= names
    app = next(b for b in blobs if "FilesLinked" in b)
    assert app["FilesLinked"] == [1.0] and app["FilesSkippedNoMatch"] == [1.0]
    assert len(app["QueueAge"]) == 2 and all(age >= 1500 for age in app["QueueAge"])
    assert app["FirstReceiveDelay"] == [1000.0, 1000.0]
    # and every log line is JSON with the batch id and file index, and no personal data
    assert logs
    for line in logs:
        assert line["batch_id"] == batch_id, line
        assert line["file_index"] in (bodies[0]["index"], bodies[1]["index"]), line
    text = json.dumps(logs)
    assert EMAIL not in text and "Private Person" not in text and NAME not in text


def test_last_receive_records_gave_up_emits_it_and_still_fails_the_message(
    deps: Deps, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN S3 keeps failing for the first file
    capture_logs(monkeypatch)
    batch_id, bodies = staged_batch(deps)

    def broken(bucket: str, key: str) -> bytes:
        raise DependencyUnavailable("s3", "SlowDown")

    monkeypatch.setattr(deps.store, "get_bytes", broken)
    released: list[tuple[str, int]] = []
    monkeypatch.setattr(deps.queue, "change_visibility", lambda rh, delay: released.append((rh, delay)))
    capsys.readouterr()
    # WHEN its last delivery fails too
    event = waited_event(bodies[:1], receive_count=deps.settings.max_receive_count)
    result = load_handler("process_pdf").handler(event, Context())
    # THEN the message is reported failed (SQS moves it to the DLQ), made visible at once for that,
    assert result == {"batchItemFailures": [{"itemIdentifier": event["Records"][0]["messageId"]}]}
    assert released == [("rh", 0)]
    # the file is recorded failed/gave_up, and the metrics say so
    row = files_by_name(deps, batch_id)[NAME]
    assert (row.outcome, row.reason) == ("failed", "gave_up")
    logs, blobs = printed(capsys.readouterr().out)
    assert {"FilesFailed", "FilesGaveUp"} <= metric_names(blobs)
    assert all(line["batch_id"] == batch_id and line["file_index"] == row.index for line in logs)


def test_unzip_emits_entries_staged_and_zip_timings(deps: Deps, capsys: pytest.CaptureFixture[str]) -> None:
    data = make_zip([("a.pdf", pdfs.text_pdf(["a"])), ("b.pdf", pdfs.text_pdf(["b"])), ("n.txt", b"x")])
    key = "uploads/drop.zip"
    deps.store.put_bytes(BUCKET, key, data, "application/zip")
    capsys.readouterr()
    load_handler("unzip").handler(s3_event(BUCKET, key, len(data)), Context())
    _, blobs = printed(capsys.readouterr().out)
    app = next(b for b in blobs if "EntriesStaged" in b)
    assert app["EntriesStaged"] == [2.0] and app["EntriesRejected"] == [0.0]
    assert {"ZipInspectDuration", "ZipStageDuration", "ZipTotalDuration"} <= metric_names(blobs)


def test_metrics_flush_without_powertools_namespace_variable(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # GIVEN POWERTOOLS_METRICS_NAMESPACE is not set when the module is first imported
    monkeypatch.delenv("POWERTOOLS_METRICS_NAMESPACE", raising=False)
    fresh = importlib.reload(pdf_metrics)
    try:
        # WHEN a metric is added and flushed
        fresh.file_recorded("failed", "timeout", {"download": 0.002})
        fresh.metrics.flush_metrics()
        _, blobs = printed(capsys.readouterr().out)
        # THEN it lands in the pdfbatch namespace instead of failing the invocation
        assert blobs[0]["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "pdfbatch"
        assert blobs[0]["DownloadDuration"] == [2.0]
    finally:
        monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "pdfbatch")
        importlib.reload(pdf_metrics)


def test_a_staged_copy_not_deleted_is_logged_with_its_own_file_while_the_logger_names_the_next(
    deps: Deps, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the overlapped invocation deleting file 3's staged copy on a background thread, while the
    # logger's keys already name the next file, and S3 refusing the delete
    from pdfbatch.model import FileTask
    from pdfbatch.services import processing

    capture_logs(monkeypatch)

    def refused(bucket: str, key: str) -> None:
        raise DependencyUnavailable("s3", "injected")

    monkeypatch.setattr(deps.store, "delete", refused)
    task = FileTask.from_message({"batchId": "a" * 32, "index": 3, "key": "staging/x/3.pdf", "bucket": "b"})
    logger.append_keys(batch_id="b" * 32, file_index=4)
    try:
        capsys.readouterr()
        # WHEN its delete fails
        processing.drop_staged_copy(deps, task)
    finally:
        logger.remove_keys(["batch_id", "file_index"])
    # THEN the warning names file 3 of its own batch, not the next file
    (line,) = [x for x in printed(capsys.readouterr().out)[0] if "staged copy not deleted" in x["message"]]
    assert (line["batch_id"], line["file_index"]) == ("a" * 32, 3)


def test_staged_copies_not_deleted_together_are_each_logged_with_their_own_keys(
    deps: Deps, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an invocation's three linked files (two batches), S3 refusing one key of the DeleteObjects
    # and then the whole request, while the logger's keys name some other file
    from pdfbatch.model import FileTask
    from pdfbatch.services import processing

    capture_logs(monkeypatch)
    tasks = [
        FileTask.from_message({"batchId": b * 32, "index": i, "key": f"staging/{b}/{i}.pdf", "bucket": "b"})
        for b, i in (("a", 3), ("a", 4), ("c", 1))
    ]
    answers: list[Any] = [["staging/a/4.pdf"], DependencyUnavailable("s3", "injected")]

    def delete_many(bucket: str, keys: Any) -> list[str]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return list(answer)

    monkeypatch.setattr(deps.store, "delete_many", delete_many)
    logger.append_keys(batch_id="e" * 32, file_index=9)
    try:
        capsys.readouterr()
        # WHEN they are dropped together, once with a key refused, once with the request failing
        processing.drop_staged_copies(deps, tasks)
        processing.drop_staged_copies(deps, tasks)
    finally:
        logger.remove_keys(["batch_id", "file_index"])
    # THEN one warning per copy left, each naming its own file; no key, email or text in them
    lines = [x for x in printed(capsys.readouterr().out)[0] if "staged copy not deleted" in x["message"]]
    assert [(x["batch_id"], x["file_index"]) for x in lines] == [
        ("a" * 32, 4),
        ("a" * 32, 3),
        ("a" * 32, 4),
        ("c" * 32, 1),
    ]
    assert not any("staging/" in json.dumps(x) for x in lines)


@pytest.mark.parametrize("function", ["process_pdf", "ocr_pdf"])
def test_a_message_failed_before_any_file_work_is_said_in_the_log(
    function: str, deps: Deps, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a cold start whose dependencies cannot be built (the secrets unreadable)
    from pdfbatch import bootstrap

    capture_logs(monkeypatch)
    _, bodies = staged_batch(deps)

    def unreadable(**kwargs: Any) -> Deps:
        raise DependencyUnavailable("secretsmanager", "injected")

    monkeypatch.setattr(bootstrap, "get_deps", unreadable)
    capsys.readouterr()
    # WHEN a message arrives
    result = load_handler(function).handler(waited_event(bodies[:1]), Context())
    # THEN it fails (SQS shows it again) and the log says why, before any file work
    assert len(result["batchItemFailures"]) == 1
    logs, _ = printed(capsys.readouterr().out)
    said = "dependencies unavailable; message left to its visibility timeout"
    assert any(x["message"] == said for x in logs)
