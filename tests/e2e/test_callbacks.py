"""Signed callbacks on the local stack (issue 13): a batch uploaded with a callbackUrl on 127.0.0.1
(allow-listed, http, in the e2e stack's settings) is POSTed its summary by deliver_callbacks.

The receiver here is what docs/RESULTS.md shows: it verifies each signature with
pdfbatch.callback_security.verify and the deployment's secret, rejects a signature it saw already (a
replayed request) and a stale one, and
takes each delivery id once. It is down (connection refused) for the first attempt and answers 503 to
the second; the third gets through. `pdfbatch callbacks BATCH` lists the attempts, `--replay` delivers
the same body again under a new delivery id. A receiver that always answers 500 leaves the delivery in
the callback DLQ after PDFBATCH_CALLBACK_ATTEMPTS attempts, each recorded. A ZIP dropped under
uploads/{tenant}/ (no POST /batches, no URL of its own) goes to the tenant's default callback URL.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures.stack import STACK, free_port, local_client, run_cli
from pdfbatch import callback_security

pytestmark = pytest.mark.e2e


class Receiver:
    """An HTTP receiver as a customer would write it: verify, refuse replays and stale signatures."""

    def __init__(self, secret: str, port: int, answers: list[int], tenant: str = "") -> None:
        self.secret = secret
        self.tenant = tenant  # who this receiver is: "" for the admin's batches
        self.port = port
        self.answers = answers
        self.deliveries: dict[str, bytes] = {}  # delivery id -> body, each processed once
        self.signatures: set[str] = set()
        self.log: list[tuple[str | None, int]] = []  # (delivery id, status answered)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.receive(dict(self.headers.items()), body, self.path)
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def receive(self, headers: dict[str, str], body: bytes, path: str = "/") -> int:
        header = headers.get(callback_security.SIGNATURE_HEADER)
        delivery = headers.get(callback_security.DELIVERY_HEADER)
        url = f"http://127.0.0.1:{self.port}{path}"  # its own URL, as registered
        try:
            callback_security.verify(self.secret, header, body, tenant=self.tenant, url=url)
        except callback_security.SignatureError:
            status = 400
        else:
            assert header is not None
            if header in self.signatures:
                status = 409  # the same signature twice: a replayed request
            elif self.answers:
                status = self.answers.pop(0)
            else:
                status = 200
            self.signatures.add(header)
            if status == 200 and delivery is not None:
                self.deliveries.setdefault(delivery, body)
        self.log.append((delivery, status))
        return status

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _secret(stack: dict[str, Any]) -> str:
    sm = local_client("secretsmanager", stack["endpoint"])
    return str(sm.get_secret_value(SecretId=stack["outputs"]["CallbackSecretArn"])["SecretString"])


def _logs(stack: dict[str, Any]) -> dict[str, list[str]]:
    """Every line each of the stack's functions logged (LocalStack keeps them in CloudWatch Logs)."""
    client = local_client("logs", stack["endpoint"])
    out: dict[str, list[str]] = {}
    for group in client.describe_log_groups(logGroupNamePrefix=f"/aws/lambda/{STACK}-")["logGroups"]:
        name = group["logGroupName"]
        pages = client.get_paginator("filter_log_events").paginate(logGroupName=name)
        out[name] = [e["message"] for page in pages for e in page["events"]]
    return out


def _attempts(env: dict[str, str], batch_id: str) -> dict[str, Any]:
    done = run_cli(env, "callbacks", batch_id, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout))


def _until(what: Any, timeout: float, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(interval)
    raise AssertionError(f"not within {timeout} s")


def _post(port: int, headers: dict[str, str], body: bytes) -> int:
    req = urllib.request.Request(f"http://127.0.0.1:{port}/hook", data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_callback_receiver_down_at_first_gets_a_signed_delivery_and_a_replay(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    env, conn = stack["env"], stack["db"]
    secret = _secret(stack)
    port = free_port()  # nothing listens yet: the first attempt is refused
    run = uuid.uuid4().hex[:8]
    person = f"callback.{run}@example.com"
    with conn.cursor() as cur:
        cur.execute("INSERT INTO users (email) VALUES (%s)", (person,))
    corpus = samples.Corpus()
    corpus.add("cv.pdf", samples.resume("Callback Person", person))
    corpus.add("notes.txt", b"ignored")
    path = tmp_path / "callback.zip"
    corpus.write_zip(path)
    # GIVEN a batch uploaded with a callbackUrl whose query must never reach a log
    url = f"http://127.0.0.1:{port}/hook?token=secret-{run}"
    done = run_cli(env, "upload", str(path), "--callback-url", url, "--wait", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    batch_id = json.loads(done.stdout)["batchId"]

    # WHEN its first attempt finds nobody listening (read straight from MySQL: the backoff is 1-2 s)
    def recorded() -> list[tuple[int, str | None]]:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT attempt, error FROM pdfbatch_callback_attempts WHERE batch_id = %s "
                "AND duration_ms IS NOT NULL ORDER BY attempt",
                (batch_id,),
            )
            return [(int(r[0]), r[1]) for r in cur.fetchall()]

    first = _until(recorded, timeout=90, interval=0.05)
    assert first[0] == (1, "ConnectionRefusedError"), first
    # THEN the receiver, up now (503 once, then 200), gets the delivery within the backoff
    receiver = Receiver(secret, port, answers=[503])
    try:
        delivered = _until(lambda: receiver.deliveries, timeout=90)
        ((delivery_id, body),) = delivered.items()
        summary = json.loads(body)
        assert (summary["batchId"], summary["status"]) == (batch_id, "COMPLETED")
        assert summary["counts"]["linked"] == 1
        view = _until(lambda: (v := _attempts(env, batch_id))["delivered"] and v, timeout=30)
        rows = [
            (a["deliveryId"], a["kind"], a["attempt"], a["httpStatus"], a["error"]) for a in view["attempts"]
        ]
        refused = len(rows) - 2  # attempts before the receiver came up (1, or 2 if a retry beat it)
        assert refused >= 1, rows
        assert rows == [
            *((delivery_id, "first", n, None, "ConnectionRefusedError") for n in range(1, refused + 1)),
            (delivery_id, "first", refused + 1, 503, "http_503"),
            (delivery_id, "first", refused + 2, 200, None),
        ], rows
        assert view["callback"] == f"http://127.0.0.1:{port}" and f"secret-{run}" not in json.dumps(view)
        # the human table lists them too
        table = run_cli({**env, "COLUMNS": "200"}, "callbacks", batch_id)
        assert (
            table.returncode == 0 and "http_503" in table.stderr and "ConnectionRefusedError" in table.stderr
        )
        # AND a replayed request (its signature seen) and a stale signature are rejected
        seen = next(iter(receiver.signatures))
        headers = {callback_security.SIGNATURE_HEADER: seen, callback_security.DELIVERY_HEADER: delivery_id}
        assert _post(port, headers, body) in (400, 409)
        stale = callback_security.sign(
            secret, body, int(time.time()) - callback_security.DEFAULT_TOLERANCE - 60, tenant="", url=url
        )
        assert _post(port, {callback_security.SIGNATURE_HEADER: stale}, body) == 400
        forged = callback_security.sign("not-the-secret", body, tenant="", url=url)
        assert _post(port, {callback_security.SIGNATURE_HEADER: forged}, body) == 400
        # WHEN the operator replays it THEN the same body arrives under a new delivery id
        replay = run_cli(env, "callbacks", batch_id, "--replay", "--json")
        assert replay.returncode == 0, replay.stderr[-3000:]
        replay_id = json.loads(replay.stdout)["deliveryId"]
        assert replay_id != delivery_id
        _until(lambda: replay_id in receiver.deliveries, timeout=60)
        assert receiver.deliveries[replay_id] == body
        view = _until(
            lambda: (
                (v := _attempts(env, batch_id)) and any(a["kind"] == "replay" for a in v["attempts"]) and v
            ),
            timeout=30,
        )
        assert [(a["kind"], a["httpStatus"]) for a in view["attempts"] if a["deliveryId"] == replay_id] == [
            ("replay", 200)
        ]
        # and nothing more arrives for the first delivery (one 2xx per delivery id)
        time.sleep(3)
        assert [d for d, s in receiver.log if s == 200] == [delivery_id, replay_id]
        # AND no function logged the URL's path or query (the deliverer's lines of this batch are there)
        logs = _logs(stack)
        deliverer = logs[f"/aws/lambda/{STACK}-deliver-callbacks"]
        assert any(batch_id in line and "callback delivered" in line for line in deliverer)
        for group, lines in logs.items():
            text = "\n".join(lines)
            assert f"secret-{run}" not in text and "/hook" not in text, group
    finally:
        receiver.close()


def test_a_private_callback_url_is_refused_at_creation_on_the_stack(stack: dict[str, Any]) -> None:
    from pdfbatch.api_client import ApiError

    with pytest.raises(ApiError) as info:
        stack["api"].request(
            "POST", "/batches", body={"callbackUrl": "http://169.254.169.254/latest/meta-data/"}
        )
    assert info.value.status == 400


def test_a_receiver_that_never_answers_2xx_leaves_the_delivery_in_the_callback_dlq(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    env = stack["env"]
    secret = _secret(stack)
    port = free_port()
    attempts = int(env["PDFBATCH_CALLBACK_ATTEMPTS"])
    receiver = Receiver(secret, port, answers=[500] * (attempts + 5))  # signatures fine, always 500
    try:
        corpus = samples.Corpus()
        corpus.add("notes.txt", b"nothing to link")
        path = tmp_path / "dlq.zip"
        corpus.write_zip(path)
        # GIVEN a batch whose receiver always fails
        done = run_cli(
            env, "upload", str(path), "--callback-url", f"http://127.0.0.1:{port}/in", "--wait", "--json"
        )
        assert done.returncode == 0, done.stderr[-3000:]
        batch_id = json.loads(done.stdout)["batchId"]
        # WHEN every attempt has failed THEN its message is in the callback DLQ, each attempt recorded
        sqs = local_client("sqs", stack["endpoint"])
        dlq = stack["outputs"]["CallbackDeadLetterQueueUrl"]

        def dead_letter() -> dict[str, Any] | None:
            for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, WaitTimeSeconds=1).get(
                "Messages", []
            ):
                body = json.loads(m["Body"])
                if body.get("detail", {}).get("batchId") == batch_id:
                    sqs.delete_message(QueueUrl=dlq, ReceiptHandle=m["ReceiptHandle"])
                    return dict(body)
                sqs.change_message_visibility(
                    QueueUrl=dlq, ReceiptHandle=m["ReceiptHandle"], VisibilityTimeout=0
                )
            return None

        letter = _until(dead_letter, timeout=120, interval=0.5)
        assert letter["detail-type"] == "Batch Completed"
        view = _attempts(env, batch_id)
        assert [(a["attempt"], a["httpStatus"]) for a in view["attempts"]] == [
            (n, 500) for n in range(1, attempts + 1)
        ]
        assert not view["delivered"] and len(receiver.log) == attempts
    finally:
        receiver.close()


def test_a_zip_dropped_under_a_tenants_prefix_is_delivered_to_the_tenants_default_callback(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    from fixtures.openapi import CheckedApiClient

    env = stack["env"]
    secret = _secret(stack)
    port = free_port()
    run = uuid.uuid4().hex[:8]
    tenant = f"dropper-{run}"
    receiver = Receiver(secret, port, answers=[])
    try:
        # GIVEN a tenant whose key the operator created with a default callback URL
        url = f"http://127.0.0.1:{port}/tenant-hook?token=secret-{run}"
        done = run_cli(env, "keys", "create", tenant, "--callback-url", url, "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        created = json.loads(done.stdout)
        assert created["callback"] == f"http://127.0.0.1:{port}"
        # the tenant's receiver verifies with the tenant's own secret, shown this once, not the shared one
        assert created["signingSecret"] and created["signingSecret"] != secret
        receiver.secret, receiver.tenant = created["signingSecret"], tenant
        listed = run_cli(env, "keys", "list", "--json")
        assert listed.returncode == 0 and f"secret-{run}" not in listed.stdout
        assert {k["tenant"]: k["callback"] for k in json.loads(listed.stdout)["keys"]}[tenant] == (
            f"http://127.0.0.1:{port}"
        )
        # WHEN a ZIP is dropped under uploads/{tenant}/ with the AWS CLI's call (no POST /batches)
        corpus = samples.Corpus()
        corpus.add("notes.txt", b"nothing to link")
        corpus.add("cv.pdf", samples.resume("Drop Person", f"nobody-{run}@example.com"))
        path = tmp_path / "drop.zip"
        corpus.write_zip(path)
        key = f"uploads/{tenant}/march {run}.zip"
        local_client("s3", stack["endpoint"]).put_object(
            Bucket=stack["outputs"]["BucketName"], Key=key, Body=path.read_bytes()
        )
        client = CheckedApiClient(stack["outputs"]["LocalApiUrl"], api_key=created["key"])
        (found,) = _until(lambda: client.find(key), timeout=120, interval=0.5)
        batch_id = found["batchId"]
        assert client.wait(batch_id, timeout=300)["status"] == "COMPLETED"
        # THEN the tenant's receiver gets the batch's summary, signed (Receiver keeps verified ones only)
        delivered = _until(lambda: receiver.deliveries, timeout=90)
        ((delivery_id, body),) = delivered.items()
        assert json.loads(body)["batchId"] == batch_id

        # AND the status API (held to its OpenAPI document) shows the host and the delivery, no path
        def shown() -> dict[str, Any] | None:
            body = client.status(batch_id)[0]
            return body if body["callback"]["state"] == "delivered" else None

        status = _until(shown, timeout=30)
        assert status["callback"]["host"] == "127.0.0.1" and "tenant-hook" not in json.dumps(status)
        view = _attempts(env, batch_id)
        assert view["delivered"] and view["callback"] == f"http://127.0.0.1:{port}"
        assert [a["deliveryId"] for a in view["attempts"]] == [delivery_id]
        # AND no function logged the URL's path or query
        for group, lines in _logs(stack).items():
            text = "\n".join(lines)
            assert f"secret-{run}" not in text and "tenant-hook" not in text, group
    finally:
        receiver.close()


class Trickle:
    """A receiver that reads the request, then sends its answer one byte every 2 s (each read is quick)."""

    def __init__(self) -> None:
        import socket

        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.listener.settimeout(0.2)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by close()
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: Any) -> None:
        with conn:
            conn.settimeout(10)
            got = b""
            try:
                while b"\r\n\r\n" not in got:
                    got += conn.recv(65536) or b"\r\n\r\n"
                self.requests += 1
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    conn.sendall(bytes([byte]))
                    if self.stop.wait(2.0):
                        return
            except OSError:
                return  # the deliverer gave up at its deadline

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


def test_four_slow_receivers_do_not_delay_an_honest_tenants_callback(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    from concurrent.futures import ThreadPoolExecutor
    from datetime import datetime

    env, conn = stack["env"], stack["db"]
    secret = _secret(stack)
    slow = [Trickle() for _ in range(4)]
    honest = Receiver(secret, free_port(), answers=[])
    arrived: dict[str, float] = {}
    receive = honest.receive

    def timed(headers: dict[str, str], body: bytes, path: str = "/") -> int:
        status = receive(headers, body, path)
        arrived.setdefault(json.loads(body)["batchId"], time.time())
        return status

    honest.receive = timed  # type: ignore[method-assign]
    corpus = samples.Corpus()
    corpus.add("notes.txt", b"nothing to link")
    path = tmp_path / "small.zip"
    corpus.write_zip(path)

    def upload(url: str) -> str:
        done = run_cli(env, "upload", str(path), "--callback-url", url, "--wait", "--json")
        assert done.returncode == 0, done.stderr[-3000:]
        return str(json.loads(done.stdout)["batchId"])

    def late_of(batch_id: str) -> float:
        body = json.loads(next(b for b in honest.deliveries.values() if json.loads(b)["batchId"] == batch_id))
        at = body["completedAt"]
        ended = float(at) if isinstance(at, int | float) else datetime.fromisoformat(at).timestamp()
        return arrived[batch_id] - ended

    try:
        # GIVEN a deliverer that is warm (two honest deliveries first: a cold start is not what is measured)
        with ThreadPoolExecutor(2) as pool:
            warm = list(pool.map(upload, [f"http://127.0.0.1:{honest.port}/hook"] * 2))
        _until(lambda: all(b in arrived for b in warm), timeout=60, interval=0.05)
        print("warm-up callbacks " + ", ".join(f"{late_of(b):.1f} s" for b in warm) + " after their batch")
        # AND four batches whose receivers trickle their answer, a byte every 2 s, ending with an honest
        # tenant's batch: all five deliveries queued together
        with ThreadPoolExecutor(5) as pool:
            slow_ids = [pool.submit(upload, f"http://127.0.0.1:{t.port}/in") for t in slow]
            time.sleep(0.5)
            honest_id = pool.submit(upload, f"http://127.0.0.1:{honest.port}/hook").result()
            slow_batches = [f.result() for f in slow_ids]
        # WHEN the deliverer works through them
        _until(lambda: honest_id in arrived, timeout=60, interval=0.05)
        # THEN the honest callback came within ~6 s of its batch ending (it was 58 s with one deadline per
        # read and one delivery at a time)
        late = late_of(honest_id)
        print(f"honest callback {late:.1f} s after its batch ended")
        assert late < 6.5, late

        # AND each slow receiver's first attempt ended at the fast lane's deadline, recorded as a timeout
        def first_attempts() -> list[tuple[Any, ...]] | None:
            with conn.cursor() as cur:
                cur.execute(
                    "SELECT batch_id, attempt, error, duration_ms FROM pdfbatch_callback_attempts "
                    "WHERE batch_id IN (%s, %s, %s, %s) AND attempt = 1 AND duration_ms IS NOT NULL",
                    tuple(slow_batches),
                )
                rows = list(cur.fetchall())
            return rows if len(rows) == 4 else None

        rows = _until(first_attempts, timeout=60, interval=0.5)
        assert all(error == "timeout" and duration < 4500 for _, _, error, duration in rows), rows
        assert all(t.requests >= 1 for t in slow)
    finally:
        honest.close()
        for t in slow:
            t.close()
