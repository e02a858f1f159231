"""The OCR worker: a forked child that renders and reads scans, so the per-file budget can kill it.

One region costs a second of OCR and a hostile page can make pdfium or the engine run much longer, which
no in-process check can interrupt. So, as for text (pdf.py's reader), the reading runs in a long-lived
child, forked after the engine's model was loaded (every worker inherits it: a fork costs milliseconds,
a model load ~0.5 s), talking over a socketpair (no /dev/shm on Lambda). Past the budget the parent
kills it with SIGKILL and forks another for the next file. The child closes every inherited descriptor
but its pipe, never logs, caps its own memory and dies with the thread that forked it.

The parent's side (fork under the pdfium lock, the pipe, retiring, reaping) and the memory cap are
pdf/child.py's, shared with the text reader (pdf/reader.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import json
import logging
import os
import resource
import signal
import threading
from dataclasses import asdict
from multiprocessing.connection import Connection
from typing import NoReturn

from pdfbatch.errors import MalformedPdf, PdfTimeout
from pdfbatch.ocr.engine import Engine
from pdfbatch.ocr.read import AGAIN, Opened, Region, RegionRead, read_regions
from pdfbatch.pdf import PDFIUM_LOCK
from pdfbatch.pdf.child import Child, cap_memory, raise_failure, send_failure

logger = logging.getLogger(__name__)

# What a worker may allocate beyond what it inherits: a 300-dpi page and tesseract's working images take
# ~150 MB; the rest is headroom for an odd page, well inside a 2 GB OCR function.
WORKER_MEMORY_BYTES = 1024 * 1024 * 1024
# A worker is replaced after this many documents, so whatever pdfium, leptonica or the allocator keep
# never adds up.
WORKER_MAX_DOCUMENTS = 200

_workers = threading.local()  # one worker per thread that reads scans (a Lambda invocation has one)


class Worker(Child):
    """A forked child reading scans with ``engine`` for one thread, one document at a time."""

    def __init__(self, engine: Engine, memory_bytes: int = WORKER_MEMORY_BYTES) -> None:
        engine.load()  # here, before the fork: every worker inherits the loaded model
        with PDFIUM_LOCK:  # no other thread is inside pdfium while the process is copied
            super().__init__(_worker_main, engine, memory_bytes)
        self.engine = engine
        self.documents = 0


def worker_for(engine: Engine) -> Worker:
    """This thread's worker for ``engine`` (forked on first use, after a kill, or when worn out)."""
    worker: Worker | None = getattr(_workers, "worker", None)
    fresh = worker is not None and worker.alive and worker.engine is engine
    if worker is None or not fresh or worker.documents >= WORKER_MAX_DOCUMENTS:
        if worker is not None:
            worker.retire(kill=False)
        worker = _workers.worker = Worker(engine)
    worker.documents += 1
    return worker


class Remote:
    """One document read by this thread's worker, region by region; after each region the worker waits
    for "go" or "stop", so it never reads past the region that decided."""

    def __init__(self, data: bytes, engine: Engine, max_pages: int, header: float) -> None:
        self._worker = worker_for(engine)
        self._awaiting = False
        self._idle = False
        request = json.dumps(["read", max_pages, header]).encode()
        try:
            self._worker.conn.send_bytes(request)
            self._worker.conn.send_bytes(data)
        except OSError:  # it died since the last document: fork anew
            self._worker.retire(kill=True)
            self._worker = worker_for(engine)
            self._worker.conn.send_bytes(request)
            self._worker.conn.send_bytes(data)

    def next(self, timeout: float, again: bool = False) -> Opened | RegionRead | None:
        """The next event (``again``: the last region read once more), waiting at most ``timeout``
        seconds (PdfTimeout after that)."""
        conn = self._worker.conn
        if self._awaiting:
            conn.send_bytes(b"again" if again else b"go")
            self._awaiting = False
        if not conn.poll(max(timeout, 0.0)):
            raise PdfTimeout("OCR budget spent inside one region")
        try:
            message = json.loads(conn.recv_bytes())
        except EOFError:
            raise MalformedPdf(f"the OCR worker died ({self._worker.exit_status()})") from None
        kind = message[0]
        if kind == "opened":
            return Opened(message[1])
        if kind == "region":
            self._awaiting = True
            return RegionRead(Region(**message[1]), *message[2:])
        self._idle = True
        if kind == "end":
            return None
        raise_failure(self._worker, message, "OCR worker")

    def close(self) -> None:
        """Leave the worker ready for the next document, or kill it if it is still busy with this one."""
        if self._idle or not self._worker.alive:
            return
        if self._awaiting:
            self._worker.conn.send_bytes(b"stop")
            return
        self._worker.retire(kill=True)  # inside a region: the budget ran out, or the caller failed


def _worker_main(  # pragma: no cover - runs in the forked child
    conn: Connection, parent: int, engine: Engine, memory_bytes: int
) -> NoReturn:
    """The worker: for each request and document, stream its events; exit at end of file. Never
    returns, never logs (locks inherited from other threads may be held forever)."""
    try:
        gc.freeze()
        logger.disabled = True
        faulthandler.disable()
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(0)
        keep = conn.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        cap_memory(memory_bytes)
        with contextlib.suppress(EOFError):
            while _read_one(conn, engine):
                continue
    finally:
        os._exit(0)


def _read_one(conn: Connection, engine: Engine) -> bool:  # pragma: no cover - runs in the forked child
    """Read one document for the parent; False when this worker must not be used again."""
    _, max_pages, header = json.loads(conn.recv_bytes())
    data = conn.recv_bytes()
    events = read_regions(data, engine, max_pages=max_pages, header=header)
    try:
        verdict: str | None = None
        while True:
            try:
                event = events.send(verdict)
            except StopIteration:
                break
            verdict = None
            if isinstance(event, Opened):
                conn.send_bytes(json.dumps(["opened", event.page_count]).encode())
                continue
            fields = [asdict(event.region), event.candidates, event.chars, event.render_seconds]
            fields += [event.ocr_seconds, event.has_at, event.second_look]
            conn.send_bytes(json.dumps(["region", *fields]).encode())
            answer = conn.recv_bytes()
            if answer == b"stop":
                return True
            verdict = AGAIN if answer == b"again" else None
        conn.send_bytes(b'["end"]')
        return True
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        return send_failure(conn, exc, "the OCR worker")
    finally:
        events.close()
