"""Signed callbacks on real services: the attempts table on MariaDB, and the deliverer's POSTs to a real
HTTP server on 127.0.0.1 that answers 503, then is down (connection refused), then takes the delivery."""

from __future__ import annotations

import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import pytest

from fixtures import pdfs
from fixtures.pipeline import drain, upload
from fixtures.stack import CALLBACK_PORTS, free_port
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement, callback_security
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.mysql_callbacks import MysqlCallbackLog
from pdfbatch.adapters.webhook import post
from pdfbatch.services import batches, redelivery, staging
from pdfbatch.services import callback_delivery as service
from pdfbatch.services.deps import Deps

pytestmark = pytest.mark.integration

SECRET = "integration-secret"


class Server:
    """A receiver on 127.0.0.1:``port`` that verifies each signature and answers from a script."""

    def __init__(self, port: int, answers: list[int]) -> None:
        self.answers = answers
        self.got: list[dict[str, Any]] = []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ok = True
                try:
                    # this receiver's URL as the request names it (tenant "": the admin's batches)
                    scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
                    url = f"{scheme}://{self.headers['Host']}{self.path}"
                    tenant = self.headers.get(callback_security.TENANT_HEADER, "")
                    callback_security.verify(
                        SECRET,
                        self.headers.get(callback_security.SIGNATURE_HEADER),
                        body,
                        tenant=tenant,
                        url=url,
                    )
                except callback_security.SignatureError:
                    ok = False
                outer.got.append(
                    {
                        "path": self.path,
                        "host": self.headers["Host"],
                        "delivery": self.headers.get(callback_security.DELIVERY_HEADER),
                        "body": body,
                        "verified": ok,
                    }
                )
                status = outer.answers.pop(0) if outer.answers else 200
                self.send_response(status if ok else 400)
                if 300 <= status < 400:
                    self.send_header("Location", f"http://127.0.0.1:{port}/elsewhere")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture()
def cb_deps(deps: Deps) -> Iterator[Deps]:
    """The integration deps (MariaDB ledger, moto S3) with the MariaDB callback log and local settings."""
    log = MysqlCallbackLog(MysqlClient.from_url(deps.settings.mysql_url))
    s = replace(
        deps.settings,
        callback_allow="127.0.0.1/32",
        callback_allow_http=True,
        callback_ports=CALLBACK_PORTS,
        callback_key=SECRET,
        callback_attempts=5,
        callback_retry_base_seconds=1,
        callback_timeout_seconds=3,
    )

    class Visibility:
        def __init__(self) -> None:
            self.delays: list[int] = []

        def send_tasks(self, tasks: Any) -> None:
            raise AssertionError("never sends")

        def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
            self.delays.append(delay_seconds)

    yield replace(deps, settings=s, callbacks=log, callback_queue=Visibility())
    log.client.close()


def test_the_attempts_table_keeps_one_row_per_attempt_and_the_first_url(cb_deps: Deps) -> None:
    log = cb_deps.callbacks
    assert log is not None
    batch_id, delivery_id = batches.new_batch_id(), batches.new_batch_id()
    log.set_url(batch_id, "https://one.example/h?q=1", 1.0)
    log.set_url(batch_id, "https://two.example/", 2.0)
    assert log.url_of(batch_id) == "https://one.example/h?q=1"
    assert log.begin_attempt(batch_id, delivery_id, 1, "first", 10.0)
    assert not log.begin_attempt(batch_id, delivery_id, 1, "first", 11.0)  # a duplicate message's try
    log.finish_attempt(delivery_id, 1, 503, "http_503", 12)
    log.finish_attempt(delivery_id, 1, 200, None, 1)  # only an attempt in flight is written
    assert not log.delivered(delivery_id)
    assert log.begin_attempt(batch_id, delivery_id, 2, "first", 20.0)
    log.finish_attempt(delivery_id, 2, 204, None, 7)
    assert log.delivered(delivery_id)
    rows = log.attempts(batch_id)
    assert [(r.attempt, r.http_status, r.error, r.duration_ms) for r in rows] == [
        (1, 503, "http_503", 12),
        (2, 204, None, 7),
    ]


def test_consumers_racing_for_one_attempt_on_separate_connections_record_it_once(cb_deps: Deps) -> None:
    batch_id, delivery_id = batches.new_batch_id(), batches.new_batch_id()
    logs = [MysqlCallbackLog(MysqlClient.from_url(cb_deps.settings.mysql_url)) for _ in range(6)]
    try:
        with ThreadPoolExecutor(6) as pool:
            won = list(pool.map(lambda lg: lg.begin_attempt(batch_id, delivery_id, 1, "first", 1.0), logs))
    finally:
        for lg in logs:
            lg.client.close()
    assert won.count(True) == 1


def _finished_batch(deps: Deps, url: str) -> tuple[str, service.Delivery]:
    created = batches.create_batch(deps, callback_url=url)
    data = make_zip([("cv.pdf", pdfs.text_pdf(["no address"])), ("n.txt", b"x")])
    staging.stage_zip(deps, upload(deps, data, key=created["key"]))
    drain(deps)
    batch = deps.ledger.get_batch(created["batchId"])
    assert batch is not None and batch.status == "COMPLETED"
    event = {"source": "pdfbatch", "detail": {"batchId": batch.batch_id, "completedAt": batch.completed_at}}
    return batch.batch_id, service.parse_message(json.dumps(event))


def test_a_receiver_down_for_the_first_attempts_gets_the_delivery_verified(cb_deps: Deps) -> None:
    port = free_port()
    batch_id, message = _finished_batch(cb_deps, f"http://127.0.0.1:{port}/hook?token=t1")
    summary = cb_deps.store.get_bytes(cb_deps.settings.bucket, announcement.report_keys(batch_id)["summary"])
    # attempt 1: the server answers 503
    with Server(port, [503]) as first:
        with pytest.raises(service.DeliveryFailed, match="http_503"):
            service.deliver(cb_deps, message, 1, "rh")
    # attempt 2: nothing listens (connection refused)
    with pytest.raises(service.DeliveryFailed, match="ConnectionRefusedError"):
        service.deliver(cb_deps, message, 2, "rh")
    # attempt 3: up again, takes it
    with Server(port, [200]) as up:
        assert service.deliver(cb_deps, message, 3, "rh") == "delivered"
        # a fourth copy of the message changes nothing
        assert service.deliver(cb_deps, message, 4, "rh") == "already_delivered"
    got = first.got + up.got
    assert [g["verified"] for g in got] == [True, True]
    assert all(g["body"] == summary and g["path"] == "/hook?token=t1" for g in got)
    assert {g["delivery"] for g in got} == {message.delivery_id}
    queue: Any = cb_deps.callback_queue
    assert queue.delays[-2:] == [1, 2]
    log = cb_deps.callbacks
    assert log is not None
    assert [(a.attempt, a.http_status, a.error) for a in log.attempts(batch_id)] == [
        (1, 503, "http_503"),
        (2, None, "ConnectionRefusedError"),
        (3, 200, None),
    ]
    assert all(a.duration_ms is not None and a.duration_ms >= 0 for a in log.attempts(batch_id))


def test_the_post_connects_to_the_checked_address_and_never_looks_the_name_up_again() -> None:
    port = free_port()
    # "rebind.invalid" resolves nowhere: only the checked address can have been connected to
    target = callback_security.Target("http", "rebind.invalid", port, "/in", ("127.0.0.1",))
    with Server(port, [204]) as server:
        signed = callback_security.sign(SECRET, b"{}", tenant="", url=f"http://rebind.invalid:{port}/in")
        headers = {callback_security.SIGNATURE_HEADER: signed, callback_security.DELIVERY_HEADER: "d"}
        result = post(target, b"{}", headers, timeout=3)
    assert result.status == 204 and result.delivered
    assert server.got[0]["host"] == f"rebind.invalid:{port}"


def test_a_redirect_is_not_followed_and_a_silent_server_times_out() -> None:
    port = free_port()
    target = callback_security.Target("http", "127.0.0.1", port, "/", ("127.0.0.1",))
    with Server(port, [302]) as server:
        signed = callback_security.sign(SECRET, b"{}", tenant="", url=f"http://127.0.0.1:{port}/")
        result = post(target, b"{}", {callback_security.SIGNATURE_HEADER: signed}, timeout=3)
    assert (result.status, result.error, result.delivered) == (302, "http_302", False)
    assert len(server.got) == 1
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        quiet = callback_security.Target("http", "127.0.0.1", silent.getsockname()[1], "/", ("127.0.0.1",))
        result = post(quiet, b"{}", {}, timeout=0.5)
    assert result.status is None and result.error == "timeout"


def test_the_fake_callback_log_matches_the_mysql_one(cb_deps: Deps) -> None:
    from fakes import FakeCallbackLog

    mysql, fake = cb_deps.callbacks, FakeCallbackLog()
    assert mysql is not None
    batch_id, d1, d2 = batches.new_batch_id(), batches.new_batch_id(), batches.new_batch_id()

    def run(log: Any) -> list[Any]:
        out: list[Any] = []
        log.set_url(batch_id, "https://a.example/?x=1", 1.0)
        log.set_url(batch_id, "https://b.example/", 2.0)
        out.append(log.url_of(batch_id))
        out.append(log.url_of("0" * 32))
        out.append(log.begin_attempt(batch_id, d1, 1, "first", 10.0))
        out.append(log.begin_attempt(batch_id, d1, 1, "first", 10.5))
        log.finish_attempt(d1, 1, None, "timeout", 10_000)
        log.finish_attempt(d1, 1, 200, None, 1)
        out.append(log.begin_attempt(batch_id, d1, 2, "first", 20.0))
        log.finish_attempt(d1, 2, 299, None, 3)
        out.append(log.begin_attempt(batch_id, d2, 1, "replay", 30.0))  # left in flight
        log.finish_attempt(d2, 7, 200, None, 3)  # no such attempt: nothing
        out.append((log.delivered(d1), log.delivered(d2)))
        out.append(log.attempts(batch_id))
        return out

    assert run(mysql) == run(fake)


def _self_signed(tmp: Any, name: str) -> tuple[str, str]:
    """A key and a self-signed certificate for DNS name ``name`` (files under ``tmp``)."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_path, cert_path = tmp / f"{name}.key", tmp / f"{name}.pem"
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(key_path), str(cert_path)


def test_https_sends_the_name_as_sni_and_checks_the_certificate_against_it(tmp_path: Any) -> None:

    port = free_port()
    key, cert = _self_signed(tmp_path, "receiver.test")
    server = Server(port, [200, 200])
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)
    names: list[str | None] = []
    served.sni_callback = lambda sock, name, ctx: names.append(name)  # type: ignore[assignment,misc,return-value]
    server.httpd.socket = served.wrap_socket(server.httpd.socket, server_side=True)
    trusted = ssl.create_default_context(cafile=cert)
    body = b"{}"
    headers = {
        callback_security.SIGNATURE_HEADER: callback_security.sign(
            SECRET, body, tenant="", url=f"https://receiver.test:{port}/"
        )
    }
    with server:
        # connected to 127.0.0.1, but TLS speaks to receiver.test: SNI and certificate name agree
        ok = post(
            callback_security.Target("https", "receiver.test", port, "/", ("127.0.0.1",)),
            body,
            headers,
            3,
            trusted,
        )
        # the same address under another name: the certificate does not name it, nothing is sent
        wrong = post(
            callback_security.Target("https", "other.test", port, "/", ("127.0.0.1",)),
            body,
            headers,
            3,
            trusted,
        )
    assert ok.status == 200 and ok.delivered
    assert wrong.status is None and wrong.error is not None and wrong.error.startswith("tls:")
    assert names[0] == "receiver.test" and "other.test" in names
    assert len(server.got) == 1 and server.got[0]["host"] == f"receiver.test:{port}"


class Trickle:
    """A receiver on 127.0.0.1 that reads the request, then sends its answer one byte every ``every`` s."""

    def __init__(self, every: float = 2.0) -> None:
        self.every = every
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.requests = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                got = b""
                while b"\r\n\r\n" not in got:
                    got += conn.recv(65536)
                self.requests += 1
                try:
                    for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                        conn.sendall(bytes([byte]))
                        if self.stop.wait(self.every):
                            return
                except OSError:
                    continue  # the client gave up: next one

    def __enter__(self) -> Trickle:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.listener.close()


def test_a_receiver_trickling_its_status_line_is_cut_at_the_attempt_deadline() -> None:
    # GIVEN a receiver that sends its status line one byte every 2 s (each read well inside any timeout)
    with Trickle(every=2.0) as slow:
        target = callback_security.Target("http", "127.0.0.1", slow.port, "/", ("127.0.0.1",))
        # WHEN one POST is made with a 3 s deadline
        started = time.monotonic()
        result = post(target, b"{}", {}, timeout=3)
        took = time.monotonic() - started
    # THEN it ends at the deadline (not at the 40 s the answer would take), as a timeout
    assert (result.status, result.error, result.delivered) == (None, "timeout", False)
    assert 2.9 <= took < 4.0
    assert 2900 <= result.duration_ms < 4000


def test_an_attempt_cut_at_its_deadline_is_recorded_and_retried_later(cb_deps: Deps) -> None:
    # GIVEN a finished batch whose receiver trickles its answer, and a 3 s deadline per attempt
    with Trickle(every=2.0) as slow:
        batch_id, message = _finished_batch(cb_deps, f"http://127.0.0.1:{slow.port}/hook")
        # WHEN its first attempt runs
        started = time.monotonic()
        with pytest.raises(service.DeliveryFailed, match="timeout"):
            service.deliver(cb_deps, message, 1, "rh")
        took = time.monotonic() - started
    # THEN the attempt ended at its deadline, its outcome is recorded (counted, reason timeout), and the
    # next attempt is scheduled after the backoff
    assert took < 4.5
    log = cb_deps.callbacks
    assert log is not None
    rows = log.attempts(batch_id)
    assert [(a.attempt, a.http_status, a.error) for a in rows] == [(1, None, "timeout")]
    assert rows[0].duration_ms is not None and 2900 <= rows[0].duration_ms < 4500
    queue: Any = cb_deps.callback_queue
    assert queue.delays == [redelivery.callback_retry_delay(cb_deps.settings, 1)]
    state = service.state_of(f"http://127.0.0.1:{slow.port}/hook", rows)
    assert (state["state"], state["attempts"], state["lastError"]) == ("failing", 1, "timeout")
