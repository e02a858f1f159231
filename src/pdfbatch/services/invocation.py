"""process_pdf's invocation: the files of one SQS batch, each file's S3 waits hidden behind its
neighbours' work (issue 15). The same outcomes as running them one after another (processing.process_file).

An environment still handles one file at a time on its invocation thread, which alone talks to MySQL and
Redis (a pymysql connection is not thread-safe, and no connection is added per environment). A small
pool only waits on S3 for it:

- **prefetch**: the next message's staged PDF is fetched (GET) while this one is read. Read-only: a
  prefetch that fails fails that file where its own GET would have (NotFound -> missing_object).
- **copy beside the next read**: a matched file's server-side copy runs while the next message is
  opened and read on the invocation thread. The file's link (one transaction with its outcome) is
  recorded only once its copy succeeded, and before the next file is linked; a user that link set is
  read as linked by the next file, whose users were looked up before it (``processing.link_target``).
  Whatever the next file's reading raised is kept and raised by its own message, so Powertools reports
  each message's own failure and the handler backs off each failed message, as before.
- **staged copies deleted together**: the linked files' staged copies go in one DeleteObjects when the
  invocation ends (best effort already, as one DELETE each was), not one request per file.

A worker killed mid-way leaves what a sequential one leaves: a copy without a link (the redelivery
copies to the same key and links), an attempt begun without an outcome (redelivered), or an outcome
recorded and counted before its message was reported (the redelivery finds it). The next message is
read ahead only when this invocation has time for it and for this file's pending copy and link
(``processing.FILE_MARGIN_SECONDS`` more than a file alone), and never when it is the same file (a
duplicate message) or when the event carries one message id twice. ``PDFBATCH_PROCESS_OVERLAP=false``
turns all of it off.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_all
from dataclasses import dataclass
from typing import Any

from pdfbatch.errors import InvalidInput
from pdfbatch.logs import logger
from pdfbatch.model import FileTask, Outcome
from pdfbatch.ports import FileRow
from pdfbatch.services import processing
from pdfbatch.services.deps import Deps
from pdfbatch.services.processing import Read

# A prefetch and a copy in flight at once, and a spare (all S3: the client's pool holds 10).
WORKERS = 3


@functools.cache
def shared_pool() -> ThreadPoolExecutor:
    """The environment's S3 waiters: created on first use (never at import), kept across invocations."""
    return ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="pdfbatch-s3")


@dataclass
class _Ahead:
    """A message read ahead: what its reading returned, or what it raised (raised again by its message)."""

    read: Read | FileRow | None = None
    error: Exception | None = None


class Invocation:
    """One invocation's messages in event order; ``process`` each one in that order (Powertools does)."""

    def __init__(
        self,
        message_ids: Sequence[str],
        tasks: Sequence[FileTask | None],
        *,
        remaining_ms: Callable[[], int] | None = None,
        pool: ThreadPoolExecutor | None = None,
    ) -> None:
        self._tasks = list(tasks)
        # A message id twice (SQS may deliver a message twice, rarely in one event): positions would be
        # ambiguous, so that invocation runs sequentially.
        unique = len(set(message_ids)) == len(message_ids)
        self._position = {m: i for i, m in enumerate(message_ids)} if unique else {}
        self._remaining_ms = remaining_ms
        self._pool = pool
        self._fetches: dict[int, Future[bytes]] = {}
        self._ahead: dict[int, _Ahead] = {}
        self._linked: dict[Any, str] = {}  # users this invocation linked: id -> pdf_url
        self._drops: tuple[Deps, list[FileTask]] | None = None  # linked files: their copies go at the end

    @classmethod
    def of_records(
        cls, records: Iterable[Mapping[str, Any]], remaining_ms: Callable[[], int] | None = None
    ) -> Invocation:
        """The invocation of an SQS event's records (a body that is no work message: None, never read)."""
        ids: list[str] = []
        tasks: list[FileTask | None] = []
        for record in records:
            ids.append(str(record.get("messageId", "")))
            try:
                tasks.append(FileTask.from_body(record.get("body")))
            except InvalidInput:
                tasks.append(None)
        return cls(ids, tasks, remaining_ms=remaining_ms)

    def begun(self, message_id: str) -> bool:
        """Whether this message was read ahead already (its time check was made then)."""
        position = self._position.get(message_id)
        return position is not None and position in self._ahead

    def process(self, deps: Deps, message_id: str, task: FileTask) -> FileRow | None:
        """``processing.process_file(deps, task)``, with its S3 waits overlapped with the next message's.

        Raises what the file's processing raised (its copy's failure included), never the next file's.
        """
        i = self._position.get(message_id)
        if i is None or not deps.settings.process_overlap or self._tasks[i] != task:
            return processing.process_file(deps, task)
        if self._pool is None:
            self._pool = shared_pool()
        ahead = self._ahead.pop(i, None)
        if ahead is not None and ahead.error is not None:
            raise ahead.error
        read = ahead.read if ahead is not None else self._read(deps, i)
        if not isinstance(read, Read):
            return read
        key = processing.link_target(deps, read, self._linked)
        if isinstance(key, FileRow):
            return key
        copy = self._pool.submit(_copy, deps, read, key)
        t = time.monotonic()
        self._read_ahead(deps, i + 1, task)
        # The next file's reading is its own time, not this file's (its stage timings stay comparable).
        read.started += time.monotonic() - t
        read.timings["copy"] = copy.result()  # the copy's own duration; raises what the copy raised
        stored = processing.record_link(deps, read, key, drop=self._drop_later)
        if stored.outcome == Outcome.LINKED and stored.user_id is not None and stored.final_key:
            self._linked[stored.user_id] = deps.settings.pdf_url(stored.final_key)
        return stored

    def close(self) -> None:
        """Delete the linked files' staged copies (one request) and wait for unused prefetches before the
        invocation ends: nothing is left to run in a frozen environment."""
        for fetch in self._fetches.values():
            fetch.cancel()
        if self._drops:  # one DeleteObjects for the invocation's linked files, not a DELETE each
            processing.drop_staged_copies(*self._drops)
            self._drops = None
        wait_all(list(self._fetches.values()))
        self._fetches.clear()
        self._ahead.clear()

    def __enter__(self) -> Invocation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the steps ---------------------------------------------------------------------------------

    def _read(self, deps: Deps, i: int) -> Read | FileRow | None:
        self._prefetch(deps, i + 1)
        try:
            return processing.read_file(deps, self._tasks[i] or _never(), staged=self._staged(deps, i))
        finally:
            self._fetches.pop(i, None)

    def _read_ahead(self, deps: Deps, j: int, current: FileTask) -> None:
        if j >= len(self._tasks):
            return
        task = self._tasks[j]
        if task is None or (task.batch_id, task.index) == (current.batch_id, current.index):
            return
        if self._remaining_ms is not None and not processing.has_time_for_a_file(
            deps.settings, self._remaining_ms() - int(processing.FILE_MARGIN_SECONDS * 1000)
        ):
            return  # its own message checks again, after this file's link (and may release it untried)
        try:
            self._ahead[j] = _Ahead(read=self._read(deps, j))
        except Exception as exc:  # noqa: BLE001 - kept for the next message, which raises it as its own
            self._ahead[j] = _Ahead(error=exc)
        finally:
            logger.append_keys(batch_id=current.batch_id, file_index=current.index)  # back to this file

    def _prefetch(self, deps: Deps, j: int) -> None:
        if j < len(self._tasks) and j not in self._fetches and self._pool is not None:
            task = self._tasks[j]
            if task is not None:
                self._fetches[j] = self._pool.submit(deps.store.get_bytes, task.bucket, task.staging_key)

    def _staged(self, deps: Deps, i: int) -> processing.Staged:
        def staged() -> bytes:
            fetch = self._fetches.get(i)
            if fetch is None:
                task = self._tasks[i] or _never()
                return deps.store.get_bytes(task.bucket, task.staging_key)
            return fetch.result()

        return staged

    def _drop_later(self, deps: Deps, task: FileTask) -> None:
        if self._drops is None:
            self._drops = (deps, [])
        self._drops[1].append(task)


def _copy(deps: Deps, read: Read, key: str) -> float:
    t = time.monotonic()
    deps.store.copy(read.task.bucket, read.task.staging_key, key)
    return time.monotonic() - t


def _never() -> FileTask:
    raise AssertionError("only messages with a work task are read")
