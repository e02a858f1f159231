"""The soak's callback receivers on 127.0.0.1: an honest tenant's, one that trickles, one that never answers.

- ``Honest``: verifies each delivery as docs/RESULTS.md's receiver does (its tenant's secret, its tenant,
  its own URL) and answers 200 at once; it records when each batch's summary arrived.
- ``Trickle``: reads the request, then sends its status line one byte every 2 s (issue 24, case 2: each read
  is quick, so only a deadline per attempt ends it).
- ``Silent``: accepts the connection, reads the request and never answers (nor closes) until the soak ends.

Each listens on its own port (the soak stack allows http to 127.0.0.1 on any port, as the e2e stack does).
"""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections import Counter
from typing import Any

from pdfbatch import callback_security


class Honest:
    """An honest tenant's receiver: verified deliveries only, each batch's first arrival time."""

    def __init__(self, tenant: str, secret: str) -> None:
        self.tenant, self.secret = tenant, secret
        self.arrived: dict[str, float] = {}  # batch id -> when its summary first arrived, verified
        self.completed: dict[str, str] = {}  # batch id -> its summary's completedAt
        self.refused = 0  # deliveries that did not verify
        self.errors: list[str] = []  # what the HTTP server reported (a request it could not read, say)
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status = receiver.receive(
                    self.headers.get(callback_security.SIGNATURE_HEADER), body, self.path
                )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass  # one line per request: the deliveries are in ``arrived`` and ``refused``

            def log_error(self, format: str, *args: Any) -> None:
                receiver.errors.append((format % args)[:200])

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = int(self.httpd.server_address[1])
        threading.Thread(target=self.httpd.serve_forever, name="honest-receiver", daemon=True).start()

    @property
    def url(self) -> str:
        """The callback URL batches register (and the receiver verifies against)."""
        return f"http://127.0.0.1:{self.port}/hook"

    def receive(self, signature: str | None, body: bytes, path: str) -> int:
        """Verify and record one delivery; the HTTP status to answer."""
        now = time.time()
        try:
            callback_security.verify(
                self.secret, signature, body, tenant=self.tenant, url=f"http://127.0.0.1:{self.port}{path}"
            )
        except callback_security.SignatureError:
            self.refused += 1
            return 400
        summary = json.loads(body)
        self.arrived.setdefault(str(summary["batchId"]), now)
        self.completed.setdefault(str(summary["batchId"]), str(summary.get("completedAt")))
        return 200

    def close(self) -> None:
        """Stop listening."""
        self.httpd.shutdown()
        self.httpd.server_close()


class _Raw:
    """A listener whose connections a subclass serves by hand (one thread each)."""

    name = "raw"

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self.port = int(self.listener.getsockname()[1])
        self.stop = threading.Event()
        self.requests = 0
        # How each connection ended: "deliverer_left" (it closed at its deadline), "soak_ended", an
        # OSError's class, or "incomplete_request"; a deliverer that never gives up shows as none of them.
        self.ended: Counter[str] = Counter()
        threading.Thread(target=self._accept, name=f"{self.name}-receiver", daemon=True).start()

    @property
    def url(self) -> str:
        """The callback URL batches register."""
        return f"http://127.0.0.1:{self.port}/{self.name}"

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed by close()
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _read_request(self, conn: socket.socket) -> bool:
        conn.settimeout(10)
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = conn.recv(65536)
            if not chunk:
                return False
            got += chunk
        self.requests += 1
        return True

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            try:
                self.ended[self._hold(conn) if self._read_request(conn) else "incomplete_request"] += 1
            except OSError as exc:  # the deliverer reset the connection at its deadline, most likely
                self.ended[type(exc).__name__] += 1

    def _hold(self, conn: socket.socket) -> str:
        """Answer (or not) the request just read; why the connection ended."""
        raise NotImplementedError

    def close(self) -> None:
        """Stop answering and listening; open connections are closed."""
        self.stop.set()
        self.listener.close()


class Trickle(_Raw):
    """Answers 200, one byte every 2 s."""

    name = "trickle"

    def _hold(self, conn: socket.socket) -> str:
        for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
            conn.sendall(bytes([byte]))
            if self.stop.wait(2.0):
                return "soak_ended"
        return "answered"


class Silent(_Raw):
    """Accepts, reads the request, never answers: the connection stays open until the deliverer leaves."""

    name = "silent"

    def _hold(self, conn: socket.socket) -> str:
        conn.settimeout(1.0)
        while not self.stop.is_set():
            try:
                if not conn.recv(4096):
                    return "deliverer_left"  # it closed the connection at its deadline
            except TimeoutError:
                continue
        return "soak_ended"
