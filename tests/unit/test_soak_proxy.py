"""The soak's TCP proxy (tests/soak/proxy.py) against a local echo server: it forwards, cuts live
connections, refuses new ones for a while and adds latency."""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Iterator

import pytest

from soak.proxy import ChaosProxy


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture()
def proxy() -> Iterator[ChaosProxy]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with ChaosProxy() as p:
        p.add("echo", 0, server.server_address)  # type: ignore[arg-type]
        yield p
    server.shutdown()
    server.server_close()


def connect(proxy: ChaosProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port("echo")), timeout=5)
    sock.settimeout(5)
    return sock


def roundtrip(sock: socket.socket, data: bytes = b"ping") -> bytes:
    sock.sendall(data)
    return sock.recv(4096)


def test_bytes_go_through_both_ways(proxy: ChaosProxy) -> None:
    with connect(proxy) as sock:
        assert roundtrip(sock, b"hello") == b"hello"
    assert proxy.stats("echo").accepted == 1


def test_cut_drops_live_connections_and_new_ones_work(proxy: ChaosProxy) -> None:
    # GIVEN a live connection
    sock = connect(proxy)
    assert roundtrip(sock) == b"ping"
    # WHEN the proxy cuts
    assert proxy.cut("echo") == 1
    # THEN that connection is gone, and a new one works
    with pytest.raises((ConnectionResetError, BrokenPipeError, AssertionError)):
        assert roundtrip(sock) == b"ping"
    sock.close()
    with connect(proxy) as again:
        assert roundtrip(again) == b"ping"
    assert proxy.stats("echo").cut == 1


def test_refuse_closes_the_port_for_a_while(proxy: ChaosProxy) -> None:
    live = connect(proxy)
    assert roundtrip(live) == b"ping"  # accepted and connected upstream
    assert proxy.refuse("echo", 0.5) == 1
    with pytest.raises(ConnectionRefusedError):
        connect(proxy)
    time.sleep(0.8)
    with connect(proxy) as sock:
        assert roundtrip(sock) == b"ping"
    live.close()


def test_latency_delays_each_chunk_then_wears_off(proxy: ChaosProxy) -> None:
    with connect(proxy) as sock:
        proxy.latency("echo", 0.2, seconds=0.6)
        started = time.monotonic()
        assert roundtrip(sock) == b"ping"
        assert time.monotonic() - started >= 0.4  # delayed on the way there and back
        time.sleep(0.6)
        started = time.monotonic()
        assert roundtrip(sock) == b"ping"
        assert time.monotonic() - started < 0.2
