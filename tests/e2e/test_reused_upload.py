"""End to end on LocalStack: one presigned POST used twice (issue 11, case 1).

The POST policy pins bucket, key, type and size, not single use. The deployed bucket keeps versions,
unzip reads the version each S3 event announced, and the second upload becomes a batch of its own
that the first batch's status names.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures.stack import local_client, run_cli, seed
from pdfbatch.api_client import ApiClient, presigned_post

pytestmark = pytest.mark.e2e


def corpus_of(tag: str, start: int, n: int = 3) -> tuple[samples.Corpus, dict[str, str]]:
    """``n`` résumés of new users, named ``{tag}-{i}.pdf``; returns the corpus and entry -> email."""
    corpus, owners = samples.Corpus(), {}
    for i in range(n):
        name, email = samples.person(start + i)
        corpus.users.append(email)
        corpus.add(f"{tag}-{i}.pdf", samples.resume(name, email), "linked", "matched")
        owners[f"{tag}-{i}.pdf"] = email
    return corpus, owners


def user_ids(stack: dict[str, Any], emails: list[str]) -> dict[str, str]:
    with stack["db"].cursor() as cur:
        cur.execute(f"SELECT email, id FROM users WHERE email IN ({', '.join(['%s'] * len(emails))})", emails)
        return {e: str(i) for e, i in cur.fetchall()}  # the API's userId is the id as text


def assert_linked_as_named(stack: dict[str, Any], batch_id: str, owners: dict[str, str]) -> None:
    """Every entry of the batch is linked to the user whose résumé it is, and to no one else."""
    ids = user_ids(stack, list(owners.values()))
    files = {f["name"]: f for f in stack["api"].files(batch_id)}
    assert set(files) == set(owners)
    for name, email in owners.items():
        assert (files[name]["outcome"], files[name]["userId"]) == ("linked", ids[email]), name


def test_a_presigned_post_used_twice_makes_two_batches_and_the_first_names_the_second(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN a batch from POST /batches and two ZIPs of different people's résumés
    api: ApiClient = stack["api"]
    first, first_owners = corpus_of("first", 6100)
    second, second_owners = corpus_of("second", 6200)
    for corpus in (first, second):
        seed(stack["db"], corpus)
    paths = [tmp_path / "first.zip", tmp_path / "second.zip"]
    first.write_zip(paths[0])
    second.write_zip(paths[1])
    batch = api.create_batch()
    batch_id, key, post = batch["batchId"], batch["key"], batch["upload"]
    # AND the first ZIP posted and processed
    presigned_post(post["url"], post["fields"], paths[0])
    done = api.wait(batch_id, timeout=300)
    assert (done["status"], done["linked"]) == ("COMPLETED", 3)
    # WHEN the same presigned POST is used again, with the second ZIP
    presigned_post(post["url"], post["fields"], paths[1])
    # THEN the second upload is a batch of its own, found by the key, and processed
    deadline = time.monotonic() + 120
    found = api.find(key)
    while len(found) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        found = api.find(key)
    assert [b["batchId"] for b in found][1:] == [batch_id], found
    later = found[0]
    assert later["batchId"] != batch_id and later["source"] == "s3"
    assert api.wait(later["batchId"], timeout=300)["linked"] == 3
    assert_linked_as_named(stack, later["batchId"], second_owners)
    # AND the first batch is unchanged, and its status names the later upload's batch
    status, _ = api.status(batch_id)
    assert (status["status"], status["linked"], status["totalFiles"]) == ("COMPLETED", 3, 3)
    assert status["laterUploads"] == [later["batchId"]]
    assert_linked_as_named(stack, batch_id, first_owners)
    # AND the bucket kept both uploads as versions of the one key
    s3: Any = local_client("s3", stack["endpoint"])
    bucket = stack["outputs"]["BucketName"]
    assert s3.get_bucket_versioning(Bucket=bucket).get("Status") == "Enabled"
    versions = s3.list_object_versions(Bucket=bucket, Prefix=key).get("Versions", [])
    assert len([v for v in versions if v["Key"] == key]) == 2


def test_gc_and_report_see_the_deployed_bucket_and_sweep_nothing_inside_the_grace(
    stack: dict[str, Any],
) -> None:
    # GIVEN the deployed stack after the batches above (every object under pdfs/ made minutes ago)
    # WHEN the operator runs gc as a dry run, and a report of a batch
    done = run_cli(stack["env"], "gc", "--json")
    # THEN gc lists nothing to delete (every copy is inside the default one-day grace) and deletes nothing
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout)
    assert (out["dryRun"], out["deleted"], out["orphans"]) == (True, 0, 0)
    assert out["young"] == out["scanned"] - out["foreign"]
    # AND a grace shorter than a copy-to-link could take is refused as bad usage
    assert run_cli(stack["env"], "gc", "--older-than", "60s").returncode == 2
    # AND report reaches the bucket to count a batch's orphaned copies (none in a batch just created)
    batch_id = stack["api"].create_batch()["batchId"]
    report = run_cli(stack["env"], "report", batch_id, "--json")
    assert report.returncode == 0, report.stderr[-2000:]
    assert json.loads(report.stdout)["orphans"] == 0
