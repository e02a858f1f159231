"""A TCP proxy the soak controls, between the deployed functions and MariaDB/Redis.

One listening port per upstream, served by an asyncio loop on a background thread. From any thread:
``cut`` aborts every live connection (the client sees a reset mid-query), ``refuse`` closes the port for
N seconds (connects get ECONNREFUSED, then it listens again) and ``latency`` delays every chunk it
forwards for a while. The functions reach MySQL and Redis only through it: the soak deploys its stack
with PDFBATCH_MYSQL_URL / PDFBATCH_REDIS_URL naming these ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

_CHUNK = 64 * 1024


@dataclass(eq=False)  # hashed by identity: kept in a set of live connections
class _Pair:
    """One proxied connection: the client's side and the upstream's."""

    client: asyncio.StreamWriter
    upstream: asyncio.StreamWriter

    def abort(self) -> None:
        for writer in (self.client, self.upstream):
            writer.transport.abort()


@dataclass
class Stats:
    """What happened on one upstream's port."""

    accepted: int = 0
    live: int = 0
    cut: int = 0  # connections aborted by cut() or refuse()
    upstream_errors: int = 0  # the real server refused or dropped us
    cancelled: int = 0  # connections still open when close() cancelled them


@dataclass
class _Upstream:
    name: str
    host: str
    port: int
    target: tuple[str, int]
    server: asyncio.base_events.Server | None = None
    pairs: set[_Pair] = field(default_factory=set)
    delay: float = 0.0
    delay_until: float = 0.0
    reopen: asyncio.TimerHandle | None = None
    stats: Stats = field(default_factory=Stats)


class ChaosProxy:
    """Forwards 127.0.0.1:<port> to each upstream; faults on demand. Use as a context manager."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="chaos-proxy", daemon=True)
        self._upstreams: dict[str, _Upstream] = {}

    # --- control, from any thread ----------------------------------------------------------------------

    def __enter__(self) -> ChaosProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def add(self, name: str, port: int, target: tuple[str, int]) -> int:
        """Listen on ``port`` (0: any free one) and forward to ``target``; return the port bound."""
        up = _Upstream(name, self.host, port, target)
        self._upstreams[name] = up
        self._call(self._listen(up))
        return up.port

    def port(self, name: str) -> int:
        """The port an upstream listens on."""
        return self._upstreams[name].port

    def cut(self, name: str) -> int:
        """Abort every live connection to ``name``; return how many."""
        return int(self._call(self._cut(self._upstreams[name])))

    def refuse(self, name: str, seconds: float) -> int:
        """Stop listening for ``seconds`` (live connections are cut too); return how many were cut."""
        return int(self._call(self._refuse(self._upstreams[name], seconds)))

    def latency(self, name: str, delay: float, seconds: float) -> None:
        """Delay each forwarded chunk by ``delay`` seconds, for the next ``seconds``."""
        up = self._upstreams[name]
        up.delay, up.delay_until = delay, time.monotonic() + seconds

    def stats(self, name: str) -> Stats:
        """Counts for one upstream (live connections now)."""
        up = self._upstreams[name]
        up.stats.live = len(up.pairs)
        return up.stats

    def close(self) -> None:
        """Close every port and connection and stop the loop."""
        if not self._thread.is_alive():
            return
        for up in self._upstreams.values():
            self._call(self._shutdown(up))
        self._call(self._drain())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    async def _drain(self) -> None:
        # The connections' tasks end on their own once aborted; wait for them rather than leave them
        # pending when the loop stops.
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # --- on the loop -----------------------------------------------------------------------------------

    async def _listen(self, up: _Upstream) -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # Cancelled by close()'s drain: the end of the run, not an error worth a traceback on stderr;
            # counted, so a cancellation before the end would show in the run's proxy figures.
            try:
                await self._serve(up, reader, writer)
            except asyncio.CancelledError:
                up.stats.cancelled += 1

        up.server = await asyncio.start_server(handle, up.host, up.port, reuse_address=True)
        up.port = int(up.server.sockets[0].getsockname()[1])

    async def _cut(self, up: _Upstream) -> int:
        pairs = list(up.pairs)
        for pair in pairs:
            pair.abort()
        up.pairs.clear()
        up.stats.cut += len(pairs)
        return len(pairs)

    async def _refuse(self, up: _Upstream, seconds: float) -> int:
        if up.server is not None:
            up.server.close()  # stops listening now; no wait_closed: live connections are ours to cut
            up.server = None
        if up.reopen is not None:
            up.reopen.cancel()
        up.reopen = self._loop.call_later(seconds, lambda: self._loop.create_task(self._relisten(up)))
        return await self._cut(up)

    async def _relisten(self, up: _Upstream) -> None:
        # The port was ours a moment ago; should anything grab it meanwhile, keep trying (and say so).
        for _ in range(50):
            try:
                await self._listen(up)
                return
            except OSError:
                up.stats.upstream_errors += 1
                await asyncio.sleep(0.1)
        raise RuntimeError(f"chaos proxy could not listen on port {up.port} again")

    async def _shutdown(self, up: _Upstream) -> None:
        if up.reopen is not None:
            up.reopen.cancel()
        if up.server is not None:
            up.server.close()
            up.server = None
        await self._cut(up)

    async def _serve(self, up: _Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up.stats.accepted += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*up.target)
        except OSError:
            up.stats.upstream_errors += 1
            writer.transport.abort()
            return
        pair = _Pair(writer, up_writer)
        up.pairs.add(pair)
        try:
            await asyncio.gather(self._pump(up, reader, up_writer), self._pump(up, up_reader, writer))
        finally:
            up.pairs.discard(pair)
            pair.abort()

    async def _pump(self, up: _Upstream, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # Either side closing (or being aborted) ends both directions: these protocols never half-close.
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while chunk := await reader.read(_CHUNK):
                if up.delay and time.monotonic() < up.delay_until:
                    await asyncio.sleep(up.delay)
                writer.write(chunk)
                await writer.drain()
        writer.transport.abort()
