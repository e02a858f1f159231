"""Tenant keys on the local stack (issue 13): two tenants upload, one through POST /batches and one by an
S3 drop under uploads/{tenant}/; each gets the unknown-id 404 for the other's batch, files and find; the
admin key sees both; a revoked key is refused as a wrong one. Keys are made with `pdfbatch keys`."""

from __future__ import annotations

import io
import json
import time
import uuid
import zipfile
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures.openapi import CheckedApiClient
from fixtures.stack import local_client, run_cli
from pdfbatch.api_client import ApiError, presigned_post

pytestmark = pytest.mark.e2e

UNKNOWN = "0" * 32


def _zip(tmp_path: Path, name: str) -> Path:
    """A ZIP of one résumé naming nobody (skipped_no_match) and one text file (ignored)."""
    person, _ = samples.person(7100)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("cv.pdf", samples.resume(person, f"nobody-{uuid.uuid4().hex[:8]}@example.com"))
        zf.writestr("notes.txt", b"hello")
    path = tmp_path / name
    path.write_bytes(buf.getvalue())
    return path


def _key(stack: dict[str, Any], tenant: str) -> str:
    done = run_cli(stack["env"], "keys", "create", tenant, "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    created = json.loads(done.stdout)
    assert created["tenant"] == tenant
    return str(created["key"])


def _answer(client: CheckedApiClient, path: str, query: dict[str, str] | None = None) -> tuple[int, Any]:
    """(status, body) of a GET, errors included (every answer is held to the OpenAPI document)."""
    try:
        status, _, body = client.request("GET", path, query)
    except ApiError as exc:
        assert exc.status is not None, exc
        return exc.status, exc.body
    return status, body


def test_two_tenants_see_only_their_own_batches_and_the_admin_sees_both(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    url = stack["outputs"]["LocalApiUrl"]
    run = uuid.uuid4().hex[:6]
    acme_name, globex_name = f"acme-{run}", f"globex-{run}"
    # GIVEN two tenants, each with a key made by the operator's CLI
    acme = CheckedApiClient(url, api_key=_key(stack, acme_name))
    globex = CheckedApiClient(url, api_key=_key(stack, globex_name))
    admin: CheckedApiClient = stack["api"]
    # WHEN acme uploads through POST /batches (as the upload page does with its key)
    created = acme.create_batch()
    assert (
        presigned_post(created["upload"]["url"], created["upload"]["fields"], _zip(tmp_path, "a.zip")) < 300
    )
    acme_batch, acme_key = created["batchId"], created["key"]
    # AND a ZIP is dropped under uploads/{globex}/ (as `aws s3 cp` does)
    drop_key = f"uploads/{globex_name}/march {run}.zip"
    s3 = local_client("s3", stack["endpoint"])
    s3.put_object(
        Bucket=stack["outputs"]["BucketName"], Key=drop_key, Body=_zip(tmp_path, "g.zip").read_bytes()
    )
    deadline, found = time.monotonic() + 120, []
    while not found and time.monotonic() < deadline:
        found = globex.find(drop_key)
        time.sleep(0.5)
    assert len(found) == 1, "globex's drop never showed up for globex"
    globex_batch = found[0]["batchId"]
    # THEN both complete, each polled with its own key
    assert acme.wait(acme_batch, timeout=300)["status"] == "COMPLETED"
    assert globex.wait(globex_batch, timeout=300)["status"] == "COMPLETED"
    with stack["db"].cursor() as cur:
        cur.execute(
            "SELECT batch_id, tenant FROM pdfbatch_batches WHERE batch_id IN (%s, %s)",
            (acme_batch, globex_batch),
        )
        assert dict(cur.fetchall()) == {acme_batch: acme_name, globex_batch: globex_name}
    # AND each gets, for the other's batch, exactly the answer to an unknown id: status, files and find
    for client, mine, theirs, their_key in (
        (acme, acme_batch, globex_batch, drop_key),
        (globex, globex_batch, acme_batch, acme_key),
    ):
        for path in ("batches/{}", "batches/{}/files"):
            assert _answer(client, path.format(mine))[0] == 200
            unknown = _answer(client, path.format(UNKNOWN))
            assert unknown[0] == 404
            assert _answer(client, path.format(theirs)) == unknown
        assert client.find(their_key) == []
    # AND the admin key sees both batches, by id and by key
    for batch_id, key in ((acme_batch, acme_key), (globex_batch, drop_key)):
        assert _answer(admin, f"batches/{batch_id}")[0] == 200
        assert _answer(admin, f"batches/{batch_id}/files")[0] == 200
        assert batch_id in {b["batchId"] for b in admin.find(key)}
    # WHEN acme's key is revoked
    done = run_cli(stack["env"], "keys", "revoke", acme_name, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["revoked"] == 1, done.stderr[-2000:]
    # THEN it is refused on every route exactly as a key that never existed, and globex is unaffected
    wrong = CheckedApiClient(url, api_key="pdfbt_" + "A" * 43)
    for path in (f"batches/{acme_batch}", f"batches/{acme_batch}/files"):
        refused = _answer(acme, path)
        assert refused[0] == 403 and refused == _answer(wrong, path)
    assert _answer(acme, "batches", {"key": acme_key}) == _answer(wrong, "batches", {"key": acme_key})
    assert _answer(globex, f"batches/{globex_batch}")[0] == 200
