"""End to end on LocalStack: deploy the stack, upload ZIPs the two ways operators do, check every store."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import zipfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import redis
from tools import demo_zip, localstack, samples

from fixtures.stack import REDIS_URL, local_client, run_cli, seed
from pdfbatch.adapters.redis import progress_key
from pdfbatch.api_client import ApiClient

pytestmark = pytest.mark.e2e


def check_batch(stack: dict[str, Any], batch_id: str, corpus: samples.Corpus, status: dict[str, Any]) -> None:
    """S3, MySQL (pdf_url, ledger) and Redis agree with the API and with what each file should be."""
    assert status["status"] == "COMPLETED", status
    pdf_names = [n for n, _ in corpus.entries if samples_is_pdf(n)]
    assert status["totalFiles"] == len(pdf_names)
    files = {f["name"]: f for f in stack["api"].files(batch_id)}
    assert set(files) == {n for n, _ in corpus.entries}
    for name, (outcome, reason) in corpus.expected.items():
        assert (files[name]["outcome"], files[name]["reason"]) == (outcome, reason), name
    twins = sorted(files[n]["outcome"] for n in files if n.startswith("duplicates/"))
    assert twins in ([], ["linked", "skipped_already_exists"])
    # counters == ledger
    counted = Counter(f["outcome"] for f in files.values() if f["kind"] == "pdf")
    for outcome in ("linked", "skipped_no_match", "skipped_already_exists", "failed"):
        assert status[outcome] == counted.get(outcome, 0), outcome
    raw = redis.Redis.from_url(REDIS_URL, decode_responses=True).hgetall(progress_key(batch_id))
    assert int(raw["processed"]) == sum(counted.values()) == len(pdf_names)
    assert int(raw["linked"]) == counted["linked"]
    # MySQL pdf_url points at the final objects, which exist in S3
    s3 = local_client("s3", stack["endpoint"])
    bucket = stack["outputs"]["BucketName"]
    with stack["db"].cursor() as cur:
        for f in files.values():
            if f["outcome"] != "linked":
                continue
            cur.execute("SELECT pdf_url FROM users WHERE id = %s", (f["userId"],))
            assert cur.fetchone()[0] == f"s3://{bucket}/{f['finalKey']}"
            head = s3.head_object(Bucket=bucket, Key=f["finalKey"])
            assert head["ContentLength"] > 0
        cur.execute("SELECT status, total_files FROM pdfbatch_batches WHERE batch_id = %s", (batch_id,))
        assert cur.fetchone() == ("COMPLETED", len(pdf_names))


def samples_is_pdf(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return name.lower().endswith(".pdf") and not name.startswith("__MACOSX/") and not base.startswith(".")


def test_cli_upload_through_presigned_post_links_every_outcome(stack: dict[str, Any], tmp_path: Path) -> None:
    # GIVEN demo users and a ZIP covering every outcome and reason
    corpus = demo_zip.demo_corpus()
    seed(stack["db"], corpus)
    path = tmp_path / "batch.zip"
    corpus.write_zip(path)
    # WHEN the operator runs `pdfbatch upload --wait --json`
    done = run_cli(stack["env"], "upload", str(path), "--wait", "--json")
    # THEN stdout is exactly the final status JSON and every store agrees
    assert done.returncode == 0, done.stderr[-3000:]
    status = json.loads(done.stdout)
    check_batch(stack, status["batchId"], corpus, status)


def test_large_zip_copied_with_aws_cli_arrives_multipart_and_completes(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a ZIP over 8 MB (aws s3 cp sends it as a multipart upload) with résumés of known users
    corpus = samples.Corpus()
    for i in range(40):
        name, email = samples.person(3000 + i)
        corpus.users.append(email)
        corpus.add(f"cv/{i:03d}.pdf", samples.resume(name, email), "linked", "matched")
    corpus.add("media/interview.bin", os.urandom(9 * 1024 * 1024))  # incompressible, ignored
    seed(stack["db"], corpus)
    path = tmp_path / "ops drop.zip"
    corpus.write_zip(path, compression=zipfile.ZIP_STORED)
    assert path.stat().st_size > 8 * 1024 * 1024
    key = f"uploads/manual/{int(time.time())} ops drop.zip"
    # WHEN the operator copies it with the real AWS CLI
    aws = Path(sys.executable).parent / "aws"
    done = subprocess.run(
        [
            str(aws),
            "s3",
            "cp",
            str(path),
            f"s3://{stack['outputs']['BucketName']}/{key}",
            "--endpoint-url",
            stack["endpoint"],
        ],
        env=stack["env"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    # THEN the batch can be found by its key and completes with every file linked
    api: ApiClient = stack["api"]
    deadline = time.monotonic() + 120
    batches: list[dict[str, Any]] = []
    while not batches and time.monotonic() < deadline:
        batches = api.find(key)
        time.sleep(0.5)
    assert len(batches) == 1
    status = api.wait(batches[0]["batchId"], timeout=300)
    check_batch(stack, batches[0]["batchId"], corpus, status)
    assert status["ignored"] == 1


def test_unknown_batch_is_a_json_404(stack: dict[str, Any]) -> None:
    from pdfbatch.api_client import ApiError

    with pytest.raises(ApiError) as info:
        stack["api"].status("0" * 32)
    assert info.value.status == 404
    assert info.value.body["error"] == "not_found"


def _niceness_of(function_name: str) -> set[int]:
    """The niceness of each live process of ``function_name``'s execution environments."""
    found = set()
    for pid, env in localstack.lambda_processes():
        if env["AWS_LAMBDA_FUNCTION_NAME"] == function_name:
            with contextlib.suppress(OSError):  # gone meanwhile
                found.add(os.getpriority(os.PRIO_PROCESS, pid))
    return found


def test_batch_work_yields_the_cpu_to_the_api_on_the_local_stack(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a batch processed and its status polled (environments of both functions are warm now)
    corpus = samples.Corpus()
    corpus.add("nobody.pdf", samples.resume("Nobody", "nobody.nice@example.com"))
    path = tmp_path / "nice.zip"
    corpus.write_zip(path)
    done = run_cli(stack["env"], "upload", str(path), "--wait", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    out = stack["outputs"]
    # THEN the file work ran at niceness 10 and the API at LocalStack's own priority: on two shared cores
    # a poll does not wait behind a batch (on AWS each environment has its own CPU)
    assert _niceness_of(out["ProcessPdfFunctionName"]) == {10}
    assert _niceness_of(out["UnzipFunctionName"]) == {10}
    assert _niceness_of(out["StatusFunctionName"]) == {0}
