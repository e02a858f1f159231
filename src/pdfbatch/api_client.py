"""A small client of the pdfbatch REST API (stdlib only): used by the CLI, the e2e tests and the bench.

The API wants its key in x-api-key. An ApiClient given none finds it by itself: the key `pdfbatch stack up`
stored for the stack at that URL (LocalStack, in .localstack/<port>/api-keys/, git-ignored), else
PDFBATCH_API_KEY.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdfbatch.checkout import STATE_DIR, find_checkout, stack_home
from pdfbatch.config import local_port

FINAL = ("COMPLETED", "FAILED")
API_KEYS_DIR = "api-keys"  # under each port's .localstack/<port>/ in the checkout; one JSON file per stack


class ApiError(Exception):
    """The API answered with an error, or could not be reached."""

    def __init__(
        self, message: str, status: int | None = None, body: Any = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.headers = headers or {}  # the answer's headers (Retry-After of a 429 or 503)

    def header(self, name: str) -> str | None:
        """One header of the answer, by name in any case."""
        return next((v for k, v in self.headers.items() if k.lower() == name.lower()), None)


@dataclass
class ApiClient:
    """Calls the status API at ``base_url`` (ending in the stage, e.g. .../v1/)."""

    base_url: str
    api_key: str | None = None  # None: PDFBATCH_API_KEY, else the stored key of the stack at base_url
    timeout: float = 30.0

    def __post_init__(self) -> None:
        if self.api_key is None:
            # The environment's key first: a tenant's key given explicitly must not be overridden by the
            # admin key `stack up` stored on the operator's machine.
            self.api_key = os.environ.get("PDFBATCH_API_KEY") or stored_api_key(self.base_url) or None

    def _url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def request(
        self, method: str, path: str, query: dict[str, str] | None = None, body: Any = None
    ) -> tuple[int, dict[str, str], Any]:
        """One call (``body``: sent as JSON); returns (status, headers, parsed JSON body). ApiError >= 400."""
        url = self._url(path)
        if query:
            from urllib.parse import urlencode

            url += "?" + urlencode({k: v for k, v in query.items() if v is not None})
        headers = {"Accept": "application/json"}
        if self.api_key:
            headers["x-api-key"] = self.api_key
        data = b"" if method == "POST" else None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, method=method, headers=headers)  # noqa: S310
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310
                raw = resp.read()
                return resp.status, dict(resp.headers.items()), json.loads(raw) if raw else None
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode("utf-8", "replace")[:200]
            message = body.get("message") if isinstance(body, dict) else str(body)
            headers = dict(exc.headers.items()) if exc.headers else {}
            raise ApiError(f"{method} {path}: HTTP {exc.code}: {message}", exc.code, body, headers) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise ApiError(f"the pdfbatch API at {self.base_url} is not reachable ({exc})") from exc

    def create_batch(self, callback_url: str | None = None) -> dict[str, Any]:
        """POST /batches (with a callbackUrl: the batch's summary is POSTed there, signed, when it ends)."""
        body = {"callbackUrl": callback_url} if callback_url is not None else None
        return dict(self.request("POST", "batches", body=body)[2])

    def status(self, batch_id: str) -> tuple[dict[str, Any], float | None]:
        """GET /batches/{id}: (body, Retry-After seconds or None)."""
        _, headers, body = self.request("GET", f"batches/{batch_id}")
        retry = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
        return dict(body), float(retry) if retry else None

    def files(self, batch_id: str, outcome: str | None = None) -> Iterator[dict[str, Any]]:
        """Every file of a batch, following the cursor."""
        cursor: str | None = None
        while True:
            query = {"limit": "1000", "cursor": cursor, "outcome": outcome}
            body = self.request("GET", f"batches/{batch_id}/files", {k: v for k, v in query.items() if v})[2]
            yield from body["items"]
            cursor = body.get("nextCursor")
            if not cursor:
                return

    def find(self, key: str) -> list[dict[str, Any]]:
        """GET /batches?key=..."""
        return list(self.request("GET", "batches", {"key": key})[2]["batches"])

    def recent(self, limit: int = 20, **filters: str | None) -> Iterator[dict[str, Any]]:
        """GET /batches without a key: the caller's batches newest first, at most ``limit``, following
        the cursor (filters: status, since, until, tenant)."""
        cursor: str | None = None
        left = limit
        while left > 0:
            query = {**filters, "limit": str(min(left, 100)), "cursor": cursor}
            body = self.request("GET", "batches", {k: v for k, v in query.items() if v})[2]
            items = body["batches"][:left]
            yield from items
            left -= len(items)
            cursor = body.get("nextCursor")
            if not cursor:
                return

    def trace_document(self, sha256: str) -> dict[str, Any]:
        """GET /files?sha256=...: every batch entry that held this PDF."""
        return dict(self.request("GET", "files", {"sha256": sha256})[2])

    def trace_user(self, user: str) -> dict[str, Any]:
        """GET /users/{id}/files: the PDF linked to a user (by id, or by email) and the files naming them."""
        from urllib.parse import quote

        return dict(self.request("GET", f"users/{quote(user, safe='@')}/files")[2])

    def wait(
        self,
        batch_id: str,
        on_update: Callable[[dict[str, Any]], None] | None = None,
        timeout: float = 3600.0,
        interval: float = 0.5,
    ) -> dict[str, Any]:
        """Poll until COMPLETED or FAILED (honouring Retry-After, capped at ``interval``)."""
        deadline = time.monotonic() + timeout
        while True:
            body, retry_after = self.status(batch_id)
            if on_update:
                on_update(body)
            if body["status"] in FINAL:
                return body
            if time.monotonic() > deadline:
                raise ApiError(f"batch {batch_id} still {body['status']} after {timeout:.0f} s")
            time.sleep(min(retry_after or interval, interval))


def presigned_post(
    url: str,
    fields: dict[str, str],
    path: Path,
    on_progress: Callable[[int], None] | None = None,
    chunk: int = 1024 * 1024,
    timeout: float = 600.0,
) -> int:
    """Upload ``path`` through a presigned POST, streamed (never wholly in memory); returns the status."""
    boundary = "pdfbatch-" + secrets.token_hex(12)
    head = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    )
    head += (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{path.name}"\r\n'
        "Content-Type: application/zip\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    size = os.path.getsize(path)

    def body() -> Iterator[bytes]:
        yield head
        sent = 0
        with path.open("rb") as fh:
            while block := fh.read(chunk):
                sent += len(block)
                yield block
                if on_progress:
                    on_progress(sent)
        yield tail

    req = urllib.request.Request(  # noqa: S310
        url,
        data=body(),
        method="POST",
        headers={
            "Content-Type": f"multipart/form-data; boundary={boundary}",
            "Content-Length": str(len(head) + size + len(tail)),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace")
        code = "EntityTooLarge" if "EntityTooLarge" in detail else f"HTTP {exc.code}"
        raise ApiError(f"upload refused by S3: {code}", exc.code) from exc
    except (urllib.error.URLError, OSError) as exc:
        raise ApiError(f"upload failed: {exc}") from exc


def api_key_file(root: Path, stack_name: str, endpoint: str | None = None) -> Path:
    """Where `stack up` keeps the API key of a local stack (on `endpoint`'s port, default the env's)."""
    return stack_home(root.resolve(), local_port(endpoint)) / API_KEYS_DIR / f"{stack_name}.json"


def _read_key_file(path: Path) -> dict[str, str]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}  # missing or unreadable: the caller makes a new key or looks elsewhere
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _write_key_file(path: Path, data: dict[str, str]) -> None:
    """Write the file readable by its owner only, atomically."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=True)
    os.replace(tmp, path)


def local_api_key(root: Path, stack_name: str, key: str | None = None, endpoint: str | None = None) -> str:
    """The API key of a local stack: ``key`` if given, else the stored one, else a new random one."""
    path = api_key_file(root, stack_name, endpoint)
    data = _read_key_file(path)
    chosen = key or data.get("apiKey") or secrets.token_urlsafe(32)
    if data.get("apiKey") != chosen:
        _write_key_file(path, {"stackName": stack_name, "apiKey": chosen})
    return chosen


def read_api_key(root: Path, stack_name: str, endpoint: str | None = None) -> str | None:
    """The key stored for a local stack, or None."""
    return _read_key_file(api_key_file(root, stack_name, endpoint)).get("apiKey") or None


def remember_api_url(root: Path, stack_name: str, api_url: str, endpoint: str | None = None) -> None:
    """Record which URL the stack's key belongs to, so an ApiClient for that URL finds it."""
    path = api_key_file(root, stack_name, endpoint)
    data = _read_key_file(path)
    if data.get("apiKey") and data.get("apiUrl") != api_url:
        _write_key_file(path, {**data, "apiUrl": api_url})


def stored_api_key(base_url: str, root: Path | None = None) -> str | None:
    """The key `stack up` stored for the stack serving ``base_url``, if this checkout deployed it."""
    root = root or find_checkout()
    if root is None:
        return None  # not run from a checkout: no local stacks of ours
    wanted = base_url.rstrip("/")
    for path in sorted((root / STATE_DIR).glob(f"*/{API_KEYS_DIR}/*.json")):
        data = _read_key_file(path)
        if data.get("apiUrl", "").rstrip("/") == wanted and data.get("apiKey"):
            return data["apiKey"]
    return None


def stack_outputs(stack_name: str, endpoint_url: str | None, region: str) -> dict[str, str]:
    """The deployed stack's outputs (plus LocalApiUrl on LocalStack)."""
    import boto3

    kwargs: dict[str, Any] = {"region_name": region}
    if endpoint_url:
        kwargs.update(
            endpoint_url=endpoint_url,
            aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "test"),
            aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "test"),
        )
    cfn = boto3.client("cloudformation", **kwargs)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        stacks = cfn.describe_stacks(StackName=stack_name)["Stacks"]
    except (ClientError, BotoCoreError) as exc:
        raise ApiError(
            f"stack {stack_name!r} is not deployed at {endpoint_url or 'AWS'}: run `pdfbatch stack up` first"
        ) from exc
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", [])}
    if endpoint_url and "ApiId" in outputs:
        outputs["LocalApiUrl"] = f"{endpoint_url.rstrip('/')}/_aws/execute-api/{outputs['ApiId']}/v1/"
    return outputs
