"""The deployed REST API: the key on every route but the page and its description, answers as documented."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest

from fixtures.openapi import SPEC_FILE, CheckedApiClient, check_response
from pdfbatch.api_client import ApiError

pytestmark = pytest.mark.e2e

UNKNOWN = "0" * 32
PROTECTED = [
    ("POST", "batches", None, 201),
    ("GET", "batches", {"key": "uploads/nothing.zip"}, 200),
    ("GET", f"batches/{UNKNOWN}", None, 404),
    ("GET", f"batches/{UNKNOWN}/files", None, 404),
]


def fetch(url: str) -> tuple[int, dict[str, str], bytes]:
    """GET without any key, as a browser opening the page does."""
    with urllib.request.urlopen(url, timeout=30) as resp:
        return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()


@pytest.mark.parametrize(("method", "path", "query", "with_key"), PROTECTED)
def test_every_protected_route_wants_the_right_key(
    stack: dict[str, Any], method: str, path: str, query: dict[str, str] | None, with_key: int
) -> None:
    url = stack["outputs"]["LocalApiUrl"]
    for key, status, code in (("", 401, "unauthorized"), ("wrong-key-but-long-enough", 403, "forbidden")):
        with pytest.raises(ApiError) as info:
            CheckedApiClient(url, api_key=key).request(method, path, query)
        assert (info.value.status, info.value.body["error"]) == (status, code), key
    # with the stored key (found by the client itself) the route answers
    try:
        status = stack["api"].request(method, path, query)[0]
    except ApiError as exc:
        status = exc.status
    assert status == with_key


def test_the_page_and_the_openapi_document_are_served_without_a_key(stack: dict[str, Any]) -> None:
    url = stack["outputs"]["LocalApiUrl"]
    status, headers, body = fetch(url)
    assert status == 200 and headers["content-type"].startswith("text/html")
    assert "script-src 'sha256-" in headers["content-security-policy"]
    assert b"<title>pdfbatch" in body
    status, headers, body = fetch(url + "openapi.json")
    assert status == 200 and json.loads(body) == json.loads(SPEC_FILE.read_text())
    check_response("GET", "/openapi.json", status, json.loads(body), headers)


def test_a_new_batch_is_pending_and_says_when_to_poll_again(stack: dict[str, Any]) -> None:
    created = stack["api"].create_batch()
    body, retry_after = stack["api"].status(created["batchId"])
    assert body["status"] == "PENDING" and retry_after == 1.0
    assert body["durations"]["queuedSeconds"] is None
