"""A forked child the parent may kill: the parent's side of the PDF reader (pdf/reader.py) and the OCR
worker (ocr/worker.py), which differ only in what the child runs.

The child is forked under the pdfium lock (the caller holds it: no other thread is inside pdfium while
the process is copied), talks over a socketpair (no /dev/shm on Lambda), and is retired by closing its
pipe or, when it may be busy, by SIGKILL. Exit statuses are collected without waiting (``reap``) at the
next fork, so no child stays a zombie for long and no thread ever blocks on one.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import resource
import signal
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, NoReturn

from pdfbatch.errors import EncryptedPdf, MalformedPdf, PdfRejected

unreaped: list[int] = []
unreaped_lock = threading.Lock()


def reap() -> None:
    """Collect the exit status of every retired child that has finished, without waiting for the others."""
    with unreaped_lock:
        for pid in list(unreaped):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid  # reaped elsewhere (someone waited for any child)
            if done:
                unreaped.remove(pid)


class Child:
    """A forked child running ``main(its end of the pipe, the parent's pid, *args)``, until retired.

    The caller holds the pdfium lock while constructing one.
    """

    def __init__(self, main: Callable[..., NoReturn], *args: Any) -> None:
        reap()
        here, there = multiprocessing.Pipe(duplex=True)
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child; its work is observed through the pipe
            main(there, parent, *args)
        there.close()
        self.pid = pid
        self.conn: Connection = here
        self.alive = True

    def __del__(self) -> None:
        # Its thread is gone: the pipe closes with it, which tells the child to exit; the next fork
        # reaps it. (Not retire(): this may run at interpreter exit, with modules half torn down.)
        if self.alive and isinstance(unreaped, list):
            unreaped.append(self.pid)

    def retire(self, kill: bool) -> None:
        """Stop using this child: killed if it may be busy, else told to go by closing its pipe."""
        if not self.alive:
            return
        self.alive = False
        self.conn.close()
        if kill:
            # Unreaped, it exists (a zombie at least) unless some other code waited for any child.
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        with unreaped_lock:
            unreaped.append(self.pid)

    def exit_status(self) -> str:
        """Wait for the (dead) child and describe how it ended."""
        self.alive = False
        self.conn.close()
        _, status = os.waitpid(self.pid, 0)
        if os.WIFSIGNALED(status):
            return f"signal {os.WTERMSIG(status)}"
        return f"exit status {os.waitstatus_to_exitcode(status)}"


def cap_memory(headroom: int) -> None:  # pragma: no cover - runs in the forked child
    """Let this process allocate at most ``headroom`` more bytes (Linux counts heap and anonymous maps
    in RLIMIT_DATA): past it an allocation fails in the child (pdfium aborts, Python raises MemoryError)
    instead of the whole execution environment running out of memory."""
    try:
        with open("/proc/self/status", "rb") as status:
            used_kib = int(re.search(rb"VmData:\s+(\d+)", status.read()).group(1))  # type: ignore[union-attr]
    except (OSError, AttributeError, ValueError):
        return  # not Linux: no cap, the budget still bounds the child
    limit = used_kib * 1024 + headroom
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


# --- how a child's work fails, both sides of the pipe ----------------------------------------------
# The child answers ["rejected", reason, message, retire] for a PDF it refuses (retire: it ran out of
# memory, which may be fragmented past use, so the parent forks a fresh one) or ["error", class name]
# for anything else (the parent retires it and raises). Only these classes cross the pipe.
_REJECTIONS: dict[str, type[PdfRejected]] = {"malformed_pdf": MalformedPdf, "encrypted": EncryptedPdf}


def send_failure(conn: Connection, exc: Exception, who: str) -> bool:  # pragma: no cover - in the child
    """Tell the parent that the child's work raised ``exc``; True when the child may go on serving."""
    if isinstance(exc, PdfRejected):
        conn.send_bytes(json.dumps(["rejected", exc.reason, str(exc), False]).encode())
        return True
    if isinstance(exc, MemoryError):
        conn.send_bytes(json.dumps(["rejected", "malformed_pdf", f"{who} ran out of memory", True]).encode())
        return False
    conn.send_bytes(json.dumps(["error", type(exc).__name__]).encode())
    return False


def raise_failure(child: Child, message: list[Any], who: str) -> NoReturn:
    """Raise what a child's failure ``message`` (from ``send_failure``) says, retiring the child first
    when it cannot go on: its PdfRejected, or a RuntimeError naming the class that failed there."""
    if message[0] == "rejected":
        if message[3]:
            child.retire(kill=True)  # it is on its way out
        raise _REJECTIONS.get(message[1], MalformedPdf)(message[2])
    child.retire(kill=True)
    raise RuntimeError(f"{who} failed with {message[1]}")
