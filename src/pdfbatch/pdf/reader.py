"""The forked reader: a long-lived child of this process that reads documents (pages._Document), one at
a time, so the per-file budget can stop a parse that never ends (the child is killed and replaced), and a
parser crash or memory blow-up costs the child, not this process.

I/O, all of it local: it forks, talks to the child over a socketpair (no /dev/shm on Lambda, so no
multiprocessing.Queue), kills and reaps it; the child reads /proc/self/status and sets RLIMIT_DATA to
cap its memory. No network or storage: the child closes every descriptor it inherited but its end of
the pipe, and never logs.

scan() drives it through _Remote (one document); _Reader is the process, _reader() this thread's one.
"""

from __future__ import annotations

import contextlib
import ctypes
import faulthandler
import gc
import json
import os
import resource
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from multiprocessing.connection import Connection
from typing import Any, NoReturn, TypeVar

from pdfbatch.errors import MalformedPdf, PdfTimeout
from pdfbatch.pdf import pixels
from pdfbatch.pdf.child import Child, cap_memory, raise_failure, reap, send_failure, unreaped
from pdfbatch.pdf.pages import PDFIUM_LOCK, _Document, _Page
from pdfbatch.pdf.pixels import Check, Seen
from pdfbatch.pdf.structure import PdfInfo, logger

# What the reader may allocate beyond what it inherits: text extraction needs tens of MiB, while a page
# of nested form XObjects makes pdfium grow by hundreds of MiB a second (the memory runs out long before
# the time budget does). Sized for the 1 GiB process_pdf function: parent, PDF and reader fit in it.
CHILD_MEMORY_BYTES = 512 * 1024 * 1024
# A reader is replaced after this many documents, so whatever pdfium or the allocator keep never adds up.
READER_MAX_SCANS = 500
# Candidates per pipe message: a page listing 100,000 addresses crosses the pipe in pieces of ~300 KB.
CHUNK = 10_000
# Readers that were killed or retired but not reaped yet: reaped without waiting on the next fork, so
# no scan pays for a process's exit. A zombie holds no memory.
# The tests watch retired readers being reaped through these names.
_unreaped, _reap = unreaped, reap
_readers = threading.local()  # one reader per thread that scans (a Lambda invocation has one)


class _Reader(Child):
    """A forked child that reads PDFs for one thread, one document at a time, until it is killed.

    It is forked once (after pypdf and pdfium were warmed up here) and kept, so a document costs a
    pipe round trip, not a fork. The pipe is a socketpair (no /dev/shm on Lambda, so no
    multiprocessing.Queue). The child closes every descriptor it inherited but its end of the pipe,
    never logs, never touches the parent's connections, and leaves with ``os._exit``.
    """

    def __init__(self) -> None:
        # Under the lock no other thread is inside pdfium while the process is copied, and the child's
        # only thread owns the (reentrant) lock.
        with PDFIUM_LOCK:
            _warm_up()
            super().__init__(_reader_main)
        self.scans = 0


def _reader() -> _Reader:
    reader: _Reader | None = getattr(_readers, "reader", None)
    if reader is None or not reader.alive or reader.scans >= READER_MAX_SCANS:
        if reader is not None:
            reader.retire(kill=False)
        reader = _readers.reader = _Reader()
    reader.scans += 1
    return reader


class _Remote:
    """One document read by this thread's reader. After each page that brought candidates the reader
    waits: for "visible" (which of these addresses does a person see? it renders them and answers
    "shown"), then for the verdict, "go" on or "stop", so it never reads past the page that decided
    (before "stop", "evidence" asks for that page's region as a PNG)."""

    def __init__(self, data: bytes, max_pages: int) -> None:
        self._reader = _reader()
        self._awaiting_verdict = False
        self._idle = False  # the reader finished this document and waits for the next
        try:
            self._reader.conn.send_bytes(json.dumps(["scan", max_pages]).encode())
            self._reader.conn.send_bytes(data)
        except OSError:
            # It died since the last document (killed from outside, or retired itself): fork anew.
            self._reader.retire(kill=True)
            self._reader = _reader()
            self._reader.conn.send_bytes(json.dumps(["scan", max_pages]).encode())
            self._reader.conn.send_bytes(data)

    def next(self, timeout: float) -> PdfInfo | _Page | None:
        conn = self._reader.conn
        if self._awaiting_verdict:
            conn.send_bytes(b"go")
            self._awaiting_verdict = False
        deadline = time.monotonic() + max(timeout, 0.0)
        message = self._receive(deadline)
        kind = message[0]
        if kind == "info":
            return PdfInfo(page_count=message[1], encrypted=message[2], version=message[3])
        if kind == "page":
            candidates: list[str] = list(message[1])
            while not message[2]:  # more chunks of this page's candidates follow
                message = self._receive(deadline)
                if message[0] != "page":
                    raise RuntimeError("PDF reader broke off a page")
                candidates.extend(message[1])
            readings: list[list[str | None]] = message[5]
            scan_like = bool(message[6])
            self._awaiting_verdict = bool(candidates or readings or scan_like)
            return _Page(candidates, message[3], message[4], readings, scan_like)
        self._idle = True
        if kind == "end":
            return None
        raise_failure(self._reader, message, "PDF reader")

    def visible(self, emails: Sequence[str], timeout: float) -> list[Check]:
        """What a person sees of each of ``emails`` (users' candidates on the page just read): the ink
        check, then what the pixels spell (pixels.confirm), those that show first, in page order."""
        conn = self._reader.conn
        deadline = time.monotonic() + max(timeout, 0.0)
        self._awaiting_verdict = False  # until it answers, it is busy: close() kills it
        for chunk, last in _chunks(emails):
            conn.send_bytes(json.dumps(["visible", chunk, last]).encode())
        shown: list[Check] = []
        while True:
            message = self._receive(deadline)
            if message[0] != "shown":
                self._reader.retire(kill=True)
                raise RuntimeError(f"PDF reader answered {message[0]!r} to a visibility check")
            shown.extend(Check(email, Seen(seen), read) for email, seen, read in message[1])
            if message[2]:
                self._awaiting_verdict = True
                return shown

    def evidence(self, addresses: Sequence[str], timeout: float) -> bytes | None:
        """The deciding page's region around ``addresses`` as a PNG (pages._Document.evidence), rendered
        by the reader, which still holds the page; b"" when it found none to render (or failed there);
        None when it died or took longer than ``timeout`` (then it is replaced: evidence is best effort,
        never the file's outcome)."""
        if not self._awaiting_verdict:
            return None
        conn = self._reader.conn
        conn.send_bytes(json.dumps(["evidence", list(addresses)]).encode())
        self._awaiting_verdict = False  # until it answers, it is busy: close() kills it
        if not conn.poll(max(timeout, 0.0)):
            return None
        try:
            png = conn.recv_bytes()
        except EOFError:
            return None
        self._awaiting_verdict = True
        return png

    def _receive(self, deadline: float) -> list[Any]:
        conn = self._reader.conn
        if not conn.poll(max(deadline - time.monotonic(), 0.0)):
            raise PdfTimeout("budget spent inside one page or the structure check")
        try:
            message: list[Any] = json.loads(conn.recv_bytes())
        except EOFError:
            raise MalformedPdf(f"the PDF reader died ({self._reader.exit_status()})") from None
        return message

    def close(self) -> None:
        if self._idle or not self._reader.alive:
            return
        if self._awaiting_verdict:
            # A decision, or the lookup failed: the reader waits for us, so it can be told to stop.
            self._reader.conn.send_bytes(b"stop")
            return
        self._reader.retire(kill=True)  # busy inside the document: the budget ran out, or we failed


def confirmed(document: _Document, emails: Sequence[str]) -> list[Check]:
    """The ink check (``document.visible``), then the pixel check (pixels.confirm) on ``emails``."""
    with PDFIUM_LOCK:
        return pixels.confirm(document, emails, document.visible(emails))


T = TypeVar("T")


def _chunks(items: Sequence[T]) -> Iterator[tuple[list[T], bool]]:
    """``items`` in pieces of at most CHUNK, each with whether it is the last (at least one piece)."""
    for start in range(0, max(len(items), 1), CHUNK):
        yield list(items[start : start + CHUNK]), start + CHUNK >= len(items)


def _minimal_pdf(line: str) -> bytes:
    """A one-page PDF showing ``line`` in Helvetica (the standard font most text PDFs use)."""
    stream = b"BT /F1 11 Tf 50 780 Td (" + line.encode("ascii") + b") Tj ET"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


_warmed = False


def _warm_up() -> None:
    """Read one small PDF here, once: what pypdf and pdfium load on first use (modules, standard-font
    tables) is then inherited by every reader instead of being loaded again by each."""
    global _warmed
    if not _warmed:
        document = _Document(_minimal_pdf("warm.up@example.com"), 1)
        try:
            for _ in document.pages():
                confirmed(document, ["warm.up@example.com"])
        finally:
            document.close()
        _warmed = True


def _reader_main(conn: Connection, parent: int) -> NoReturn:  # pragma: no cover - runs in the forked child
    """The reader: for each ("scan", max_pages) and document, stream its events; exit at end of file.

    Never returns and never logs (the logging and stdout locks it inherited may have been held by
    threads that did not survive the fork).
    """
    try:
        gc.freeze()  # the collector never walks (so never copies) the objects inherited from the parent
        logger.disabled = True  # the package's one logger (structure.py counts pypdf warnings on it)
        faulthandler.disable()  # a crash is reported by the parent (the signal), not dumped on stderr
        # Killed with the thread that forked it (Linux), so a parent killed mid-document (the Lambda
        # timeout) does not leave it running; elsewhere the pipe's end of file still ends it.
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:
            os._exit(0)  # it died before the line above could take effect
        keep = conn.fileno()
        # Inherited sockets (MySQL, Redis, other threads' readers) must not stay open through this process,
        # nor the log pipes it never writes to (whoever reads them waits for their last writer).
        os.closerange(3, keep)
        os.closerange(keep + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        cap_memory(CHILD_MEMORY_BYTES)
        with contextlib.suppress(EOFError):  # the parent closed the pipe: retired, or gone
            while _read_one(conn):
                continue
    finally:
        os._exit(0)


def _read_one(conn: Connection) -> bool:  # pragma: no cover - runs in the forked child
    """Read one document for the parent; False when this reader must not be used again."""
    max_pages = json.loads(conn.recv_bytes())[1]
    data = conn.recv_bytes()
    document: _Document | None = None
    try:
        document = _Document(data, max_pages)
        info = document.info
        conn.send_bytes(json.dumps(["info", info.page_count, info.encrypted, info.version]).encode())
        last: _Page | None = None  # pages without candidates are only told about at the end (fewer messages)
        for page in document.pages():
            last = page
            if not page.candidates and not page.readings and not page.scan_like:
                continue
            last = None
            for chunk, final in _chunks(page.candidates):
                readings = page.readings if final else []
                message = ["page", chunk, final, page.any_text, page.pages_read, readings, page.scan_like]
                conn.send_bytes(json.dumps(message).encode())
            if not _answer(conn, document):
                return True
        if last is not None:
            conn.send_bytes(
                json.dumps(["page", [], True, last.any_text, last.pages_read, [], False]).encode()
            )
        conn.send_bytes(b'["end"]')
        return True
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
        return send_failure(conn, exc, "the PDF reader")
    finally:
        if document is not None:
            document.close()


def _answer(conn: Connection, document: _Document) -> bool:  # pragma: no cover - runs in the child
    """Serve the parent's visibility checks (and, once it decided on this page, its evidence render) on the
    page just sent; then True to go on, False to stop."""
    asked: list[str] = []
    while True:
        message = conn.recv_bytes()
        if message == b"go":
            return True
        if message == b"stop":
            return False
        request = json.loads(message)
        if request[0] == "evidence":
            png: bytes | None = None
            with contextlib.suppress(Exception):  # best effort: no evidence, never the file's outcome
                png = document.evidence(request[1])
            conn.send_bytes(png or b"")
            continue
        asked.extend(request[1])
        if request[2]:
            checks = [[c.email, c.seen.value, c.read] for c in confirmed(document, asked)]
            for chunk, final in _chunks(checks):
                conn.send_bytes(json.dumps(["shown", chunk, final]).encode())
            asked = []
