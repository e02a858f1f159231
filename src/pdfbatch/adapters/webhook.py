"""One callback POST, to an address checked beforehand: no second DNS lookup, no redirect followed.

http.client over a socket connected to ``Target.addresses`` (checked by callback_security.check_url): the
name is only sent (Host header, TLS SNI and certificate check), never resolved again, so a DNS answer
that changes between the check and the connection (rebinding) cannot send the request inside.
Standard library only: the deliver_callbacks function's cold start stays that of its other imports.

One deadline per attempt, for connect, TLS, request, status line, headers and body together: a socket
timeout alone bounds each read, and a receiver sending its status line a byte every 2 s would keep an
attempt alive for as long as it liked. A timer shuts the socket down when the deadline passes, which
ends whatever read is blocked; the attempt then reports ``timeout`` like any other, so it is recorded.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from pdfbatch.callback_security import Target


@dataclass(frozen=True)
class PostResult:
    """What one attempt got: an HTTP status, or the class of error that stopped it; and how long it took."""

    status: int | None
    error: str | None
    duration_ms: int

    @property
    def delivered(self) -> bool:
        """2xx: the receiver took it (a 3xx is not followed and counts as a failure)."""
        return self.status is not None and 200 <= self.status < 300


class _Deadline:
    """Shuts down the attempt's socket once ``seconds`` have passed since it was made (see the docstring)."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True
        self._timer.start()

    def watch(self, sock: socket.socket) -> None:
        """The raw socket to shut down at the deadline (already past: at once)."""
        with self._lock:
            self._sock = sock
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            if self._sock is not None:
                _shut(self._sock)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)  # a blocked recv returns at once; close() stays the owner's
    except OSError:
        pass  # not connected (any more): nothing is blocked on it


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, target: Target, address: str, timeout: float, deadline: _Deadline) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self._address = address
        self._deadline = deadline

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)
        self._deadline.watch(self.sock)


class _PinnedHTTPS(http.client.HTTPSConnection):
    def __init__(
        self, target: Target, address: str, timeout: float, context: ssl.SSLContext, deadline: _Deadline
    ) -> None:
        super().__init__(target.host, target.port, timeout=timeout, context=context)
        self._address = address
        self._tls = context
        self._deadline = deadline

    def connect(self) -> None:
        raw = socket.create_connection((self._address, self.port), self.timeout)
        self._deadline.watch(raw)  # the TCP socket under TLS: the handshake is inside the deadline too
        # SNI and the certificate check use the name; the socket is already on the checked address.
        self.sock = self._tls.wrap_socket(raw, server_hostname=self.host)


def post(
    target: Target,
    body: bytes,
    headers: dict[str, str],
    timeout: float = 10.0,
    context: ssl.SSLContext | None = None,
) -> PostResult:
    """POST ``body`` to ``target`` at its first checked address, all of it within ``timeout`` seconds
    (connect to the last byte of the answer read); never raises for a network failure."""
    started = time.monotonic()
    address = target.addresses[0]
    deadline = _Deadline(timeout)
    conn: Any
    if target.scheme == "https":
        conn = _PinnedHTTPS(target, address, timeout, context or ssl.create_default_context(), deadline)
    else:
        conn = _PinnedHTTP(target, address, timeout, deadline)
    sent = {**headers, "Content-Type": "application/json", "Content-Length": str(len(body))}
    sent.setdefault("User-Agent", "pdfbatch-callbacks/1")
    try:
        conn.request("POST", target.path, body=body, headers=sent)
        response = conn.getresponse()
        response.read(64 * 1024)  # drain a little so the connection closes cleanly; the body is not kept
        status: int | None = response.status
        error = None if 200 <= response.status < 300 else f"http_{response.status}"
    except TimeoutError:
        status, error = None, "timeout"
    except ssl.SSLError as exc:
        status, error = None, f"tls:{type(exc).__name__}"
    except (OSError, http.client.HTTPException) as exc:
        status, error = None, type(exc).__name__
    finally:
        deadline.cancel()
        conn.close()
    if deadline.expired and error is not None:
        status, error = None, "timeout"  # whatever the shut-down socket raised, the deadline ended it
    return PostResult(status, error, int((time.monotonic() - started) * 1000))
