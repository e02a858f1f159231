"""process_pdf's use case: one staged PDF to exactly one recorded, counted outcome; and what a failed
delivery does (``on_failed_attempt``: back off with jitter, or give up on the last receive so the
batch still finishes). Two rules keep a batch finishing when the invocation itself dies:
``has_time_for_a_file`` (no file is started that the function's timeout would kill) and
``settle_dead_letter`` (a message that reached the work DLQ anyway is recorded failed/gave_up).
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdfbatch import metrics
from pdfbatch.config import PER_FILE_IO, Settings
from pdfbatch.errors import DependencyUnavailable, NotFound, PdfRejected, UsersTableError
from pdfbatch.logs import logger
from pdfbatch.model import FileResult, FileTask, Lane, Outcome, Reason, final_key
from pdfbatch.ports import FileRow, UserRow
from pdfbatch.services import redelivery, tally
from pdfbatch.services.deps import Deps

if TYPE_CHECKING:
    from pdfbatch.named import KeyRing


@dataclass(frozen=True)
class Verdict:
    """Whom a scanned document is linked to, as processing acts on it (matching.Decision's shape)."""

    reason: str  # MATCHED | AMBIGUOUS | NO_USER | NO_EMAIL | NO_TEXT_LAYER
    user: UserRow | None = None  # MATCHED only
    users_named: int = 0  # distinct users the deciding page named (AMBIGUOUS: 2 or more)
    page: int | None = None  # the page (1-based) that decided (MATCHED, AMBIGUOUS)
    named: tuple[str, ...] = ()  # ids of the users a file that links nobody named (AMBIGUOUS)
    addresses: tuple[str, ...] = ()  # the deciding page's addresses of users: what its evidence shows
    evidence: bytes | None = None  # that region as a PNG by the reader (b"": none; pdf.Scan.evidence)


def process_file(deps: Deps, task: FileTask) -> FileRow | None:
    """Read, match and link one staged PDF; record and count its outcome exactly once.

    Safe to run twice, concurrently, or after a crash at any point: the link and its ledger record
    are one MySQL transaction, the final key is derived from user and content, and counting is a
    set-guarded Lua script. A users table that cannot be queried as configured fails the file at once
    (``users_table_error``): a configuration problem is not an outage, so it is not retried.

    A PDF with no text layer on the pages read goes to the OCR lane when there is one
    (``hand_to_ocr``): no outcome is recorded here, ocr_pdf records it (``process_scan``).
    """
    read = read_file(deps, task)
    return conclude(deps, read) if isinstance(read, Read) else read


def read_file(deps: Deps, task: FileTask, staged: Staged | None = None) -> Read | FileRow | None:
    """process_file up to its link: open the ledger row, begin the attempt, read and decide the staged PDF.

    Returns what ``conclude`` acts on (a ``Read``), or the row when the file needs nothing more (recorded
    here or before, handed to the OCR lane), or None (no row, or recorded by a concurrent delivery).
    ``staged`` gives the staged bytes (services/invocation.py passes a prefetch), default one S3 GET.
    """
    row, done = _open(deps, task, Lane.TEXT)
    if done:
        return row
    assert row is not None
    if row.source == Lane.OCR and deps.ocr_queue is not None:
        # Handed to the OCR lane by an earlier delivery, which may have died before its send: send it
        # again without reading it again (a duplicate in the OCR queue finds the outcome and stops).
        return hand_to_ocr(deps, task, row)
    return _read(deps, task, row, _text_reader(deps), Lane.TEXT, staged)


def process_scan(deps: Deps, task: FileTask, engine: Any) -> FileRow | None:
    """ocr_pdf's use case: read one staged scan by OCR, then link, record and count it as process_file
    does (the same rule, the same ledger row, counted once); ``engine`` is an ``ocr.Engine``.

    A redelivery, a duplicate hand-off or a message for a file recorded meanwhile changes nothing.
    """
    row, done = _open(deps, task, Lane.OCR)
    if done:
        return row
    assert row is not None
    read = _read(deps, task, row, _ocr_reader(deps, engine), Lane.OCR)
    return conclude(deps, read) if isinstance(read, Read) else read


def _open(deps: Deps, task: FileTask, lane: Lane) -> tuple[FileRow | None, bool]:
    """A message's ledger row, and whether the message is done without reading: it has no row
    (dropped) or an outcome already (a redelivery: counted, nothing else changed)."""
    logger.append_keys(batch_id=task.batch_id, file_index=task.index)
    row = deps.ledger.get_file(task.batch_id, task.index)
    if row is None:
        logger.warning("no ledger row for this message; dropped", extra={"lane": str(lane)})
        return None, True
    if row.outcome is not None:
        return _recorded_already(deps, task, row), True
    return row, False


def _recorded_already(deps: Deps, task: FileTask, row: FileRow) -> FileRow:
    # Redelivery (or a crash after recording): make sure it is counted, change nothing else.
    tally.count(deps, row)
    if row.outcome == Outcome.LINKED:
        drop_staged_copy(deps, task)  # the delivery that linked it may have died before deleting it
    logger.info("already recorded; redelivery counted once", extra={"outcome": row.outcome})
    return row


def hand_to_ocr(deps: Deps, task: FileTask, row: FileRow) -> FileRow:
    """Hand a scan to the OCR lane: mark its ledger row ``source = ocr``, then send it to the OCR queue.

    Marked first, sent second, the message deleted only after both: a worker killed between the two
    leaves the work message to come back, and its redelivery finds the mark and sends again (never
    reading or counting it twice). Duplicates in the OCR queue are harmless (the first to record wins,
    the others find the outcome). Nothing is counted: the file has no outcome until ocr_pdf records one.
    """
    assert deps.ocr_queue is not None
    deps.ledger.mark_lane(task.batch_id, task.index, Lane.OCR)
    deps.ocr_queue.send_tasks([task])
    metrics.handed_to_ocr()
    logger.info("no text layer; handed to the OCR lane")
    return dataclasses.replace(row, source=Lane.OCR)


# A reader: the staged bytes -> the verdict and its timings (raises PdfRejected for a file it cannot read).
Reader = Callable[[bytes], tuple[Verdict, dict[str, float]]]


def _text_reader(deps: Deps) -> Reader:
    def read(data: bytes) -> tuple[Verdict, dict[str, float]]:
        scan, verdict = _scan(deps, data)
        return verdict, {
            "validate": getattr(scan, "validate_seconds", 0.0),
            "extract": scan.extract_seconds,
            "match": scan.lookup_seconds,
            "visibility": scan.visibility_seconds,
            "evidence_render": getattr(scan, "evidence_seconds", 0.0),
            "pages": float(scan.pages_read),
        }

    return read


def _ocr_reader(deps: Deps, engine: Any) -> Reader:
    def read(data: bytes) -> tuple[Verdict, dict[str, float]]:
        scan, verdict = _ocr_scan(deps, data, engine)
        return verdict, {
            "extract": scan.ocr_seconds,
            "match": scan.lookup_seconds,
            "pages": float(scan.pages_read),
        }

    return read


@dataclass
class Read:
    """A file read and decided whose outcome is not recorded yet: what ``conclude`` links and records."""

    task: FileTask
    row: FileRow
    attempt: int
    verdict: Verdict
    sha: str
    timings: dict[str, float]
    started: float  # time.monotonic() when its attempt began
    lane: Lane


# The staged PDF's bytes (raises NotFound when the staged copy is gone).
Staged = Callable[[], bytes]


def _read(
    deps: Deps, task: FileTask, row: FileRow, read: Reader, lane: Lane, staged: Staged | None = None
) -> Read | FileRow | None:
    started = time.monotonic()
    attempt = deps.ledger.begin_attempt(task.batch_id, task.index)
    if attempt == 0:  # recorded by a concurrent delivery since get_file: leave the row as it is
        now = deps.ledger.get_file(task.batch_id, task.index)
        return _recorded_already(deps, task, now) if now is not None and now.outcome is not None else None
    timings: dict[str, float] = {}

    t = time.monotonic()
    try:
        data = staged() if staged is not None else deps.store.get_bytes(task.bucket, task.staging_key)
    except NotFound:
        return _finish(deps, task, FileResult(Outcome.FAILED, Reason.MISSING_OBJECT, source=lane), started)
    timings["download"] = time.monotonic() - t  # with a prefetch: only what this file still waited
    sha = hashlib.sha256(data).hexdigest()
    try:
        t = time.monotonic()
        try:
            verdict, read_timings = read(data)
        except PdfRejected as exc:
            timings["extract"] = time.monotonic() - t
            result = FileResult(Outcome.FAILED, exc.reason, sha256=sha, detail=timings, source=lane)
            return _finish(deps, task, result, started)
        timings.update(read_timings)
        if lane == Lane.TEXT and verdict.reason == Reason.NO_TEXT_LAYER and deps.ocr_queue is not None:
            return hand_to_ocr(deps, task, row)
        if lane == Lane.TEXT and verdict.page and verdict.addresses:
            keep_evidence(deps, task, data, verdict, timings)
        return Read(task, row, attempt, verdict, sha, timings, started, lane)
    except UsersTableError as exc:
        return _users_table_failed(deps, task, exc, sha, timings, started, lane)


def keep_evidence(
    deps: Deps, task: FileTask, data: bytes, verdict: Verdict, timings: dict[str, float]
) -> None:
    """Render the deciding region and store it under the batch's report prefix (pdfbatch.evidence),
    before the outcome is recorded, so a recorded ``evidence_bytes`` names an object that exists.

    Best effort: a render or write that fails leaves the file without evidence (logged), never
    changes its outcome."""
    from pdfbatch import evidence

    assert verdict.page is not None
    t = time.monotonic()
    try:
        png = verdict.evidence
        if png is None:  # the reader did not render it (a page read earlier, or it died): from the bytes
            png = evidence.render(data, verdict.page, verdict.addresses)
        if png:
            deps.store.put_bytes(
                deps.settings.bucket, evidence.key(task.batch_id, task.index), png, "image/png"
            )
            timings["evidence_bytes"] = float(len(png))
    except (DependencyUnavailable, pdfium_errors()) as exc:
        logger.warning("evidence not kept", extra={"error": type(exc).__name__})
    timings["evidence"] = time.monotonic() - t


def pdfium_errors() -> type[Exception]:
    """What pdfium raises on a document it cannot render (imported only where evidence is rendered)."""
    import pypdfium2 as pdfium

    error: type[Exception] = pdfium.PdfiumError
    return error


def _users_table_failed(  # noqa: PLR0917
    deps: Deps,
    task: FileTask,
    exc: UsersTableError,
    sha: str,
    timings: dict[str, float],
    started: float,
    lane: Lane,
) -> FileRow:
    logger.error(
        "the users table cannot be queried as configured; file failed without retries",
        extra={
            "problem": exc.problem,
            "mysql_errno": exc.errno,
            "users_table": deps.settings.users.table,
        },
    )
    result = FileResult(Outcome.FAILED, Reason.USERS_TABLE_ERROR, sha256=sha, detail=timings, source=lane)
    return _finish(deps, task, result, started)


def conclude(deps: Deps, read: Read) -> FileRow:
    """Link, record and count what a lane read: the one path text PDFs and scans share.

    The copy to the final key comes before the link: nothing is linked whose object is not there.
    """
    key = link_target(deps, read)
    if isinstance(key, FileRow):
        return key
    t = time.monotonic()
    deps.store.copy(read.task.bucket, read.task.staging_key, key)
    read.timings["copy"] = time.monotonic() - t
    return record_link(deps, read, key)


def link_target(deps: Deps, read: Read, linked: Mapping[Any, str] | None = None) -> str | FileRow:
    """The final key to copy ``read``'s PDF to before linking it, or the row when nothing is to be linked
    (recorded and counted here: it names nobody, or its user has a PDF already).

    ``linked``: users this process linked since ``read``'s users were looked up (id -> pdf_url), so a
    lookup made before that link is read as the link made it (services/invocation.py).
    """
    user = read.verdict.user
    if user is None:
        from pdfbatch.named import ring

        result = unlinked_result(
            read.verdict, read.sha, read.timings, read.lane, ring(deps.settings.named_keys)
        )
        return _finish(deps, read.task, result, read.started)
    if user.pdf_url or (linked is not None and user.id in linked):
        # (An earlier delivery may have copied and died before linking: that copy stays for `pdfbatch gc`.)
        return _finish(deps, read.task, _already_linked(read), read.started)
    return final_key(user.id, read.sha)


def _already_linked(read: Read) -> FileResult:
    assert read.verdict.user is not None
    return FileResult(
        Outcome.SKIPPED_ALREADY_EXISTS,
        Reason.ALREADY_LINKED,
        user_id=read.verdict.user.id,
        sha256=read.sha,
        detail=read.timings,
        source=read.lane,
        page=read.verdict.page,
    )


def record_link(
    deps: Deps, read: Read, key: str, drop: Callable[[Deps, FileTask], None] | None = None
) -> FileRow:
    """After the copy of ``read``'s PDF to ``key`` succeeded: link its user and record the outcome in one
    transaction, count it, and drop its staged copy (``drop``, default ``drop_staged_copy`` inline)."""
    try:
        return _link(deps, read, key, drop or drop_staged_copy)
    except UsersTableError as exc:
        # A table that refuses the statement: the copy stays for `pdfbatch gc` (the same key may be the
        # one this user already points at, from another batch).
        return _users_table_failed(deps, read.task, exc, read.sha, read.timings, read.started, read.lane)


def _link(deps: Deps, read: Read, key: str, drop: Callable[[Deps, FileTask], None]) -> FileRow:
    task, row, timings, lane, user = read.task, read.row, read.timings, read.lane, read.verdict.user
    assert user is not None
    url = deps.settings.pdf_url(key)
    t = time.monotonic()
    linked = FileResult(
        Outcome.LINKED,
        Reason.MATCHED,
        user_id=user.id,
        final_key=key,
        sha256=read.sha,
        detail=timings,
        source=lane,
        page=read.verdict.page,
    )
    won = deps.ledger.link(task.batch_id, task.index, user.id, url, linked)
    timings["update"] = time.monotonic() - t
    if won:
        # The row as link() wrote it, without reading it back (a linked row is never reopened);
        # finished_at is this process's clock, the ledger's differs by the write's duration.
        stored = dataclasses.replace(
            row,
            outcome=str(linked.outcome),
            reason=str(linked.reason),
            user_id=user.id,
            final_key=key,
            sha256=read.sha,
            attempts=read.attempt,
            finished_at=deps.clock(),
            timings=dict(timings),
            source=row.source or str(lane),
            page=read.verdict.page,
        )
        timings["total"] = time.monotonic() - read.started
        _store_timings(deps, stored, timings)
        t = time.monotonic()
        tally.count(deps, stored)
        timings["count"] = time.monotonic() - t
        metrics.file_recorded(stored.outcome or "", stored.reason or "", timings, lane=lane)
        drop(deps, task)
        logger.info(
            "file processed",
            extra={
                "outcome": stored.outcome,
                "reason": stored.reason,
                "lane": str(lane),
                "attempt": read.attempt,
                "timings_ms": _ms(timings),
            },
        )
        return stored
    # Someone else linked this user (another file, or another delivery of this one), or recorded this
    # file. Our copy is left where it is: the same PDF in another batch has the same key, and that
    # batch may be about to link it. Copies nobody points at are swept by `pdfbatch gc` (services/gc).
    return _finish(deps, task, _already_linked(read), read.started)


def drop_staged_copy(deps: Deps, task: FileTask) -> None:
    """Delete a linked file's staged copy: the final object is the copy that counts, and a linked file is
    never run again (retry skips it, reopen refuses it), so one copy of a person's document fewer.

    Safe under at-least-once: the key is this batch entry's own, a redelivery finds the outcome
    recorded before it reads S3 (and deletes the copy again, in case the delivery that linked died
    before deleting it), and a concurrent delivery that finds the copy gone records
    missing_object, which the ledger's first outcome (this link) outranks. Best effort: if the delete
    fails, the bucket's staging/ lifecycle rule expires the copy. Staged copies of files not linked stay
    there for `pdfbatch retry` until that rule expires them.
    """
    try:
        deps.store.delete(task.bucket, task.staging_key)
    except Exception:  # noqa: BLE001 - the link is recorded; a leftover copy only waits for the lifecycle rule
        _left_to_lifecycle(task, exc_info=True)


def drop_staged_copies(deps: Deps, tasks: Sequence[FileTask]) -> None:
    """drop_staged_copy for several linked files in one request per bucket (DeleteObjects): the
    overlapped invocation's files, dropped when it ends. Same safety and the same best effort: a key S3
    refuses, or a request that fails, leaves copies to the lifecycle rule, each logged with its own keys.
    """
    by_bucket: dict[str, list[FileTask]] = {}
    for task in tasks:
        by_bucket.setdefault(task.bucket, []).append(task)
    for bucket, group in by_bucket.items():
        try:
            refused = set(deps.store.delete_many(bucket, [t.staging_key for t in group]))
        except Exception:  # noqa: BLE001 - the links are recorded; leftovers wait for the lifecycle rule
            refused = {t.staging_key for t in group}
        for task in group:
            if task.staging_key in refused:
                _left_to_lifecycle(task)


def _left_to_lifecycle(task: FileTask, exc_info: bool = False) -> None:
    # The file's own keys, said explicitly: an invocation drops its files' copies when it ends, while the
    # logger's appended keys name its last file (services/invocation.py).
    logger.warning(
        "staged copy not deleted; the lifecycle rule will expire it",
        extra={"batch_id": task.batch_id, "file_index": task.index},
        exc_info=exc_info,
    )


def unlinked_result(
    verdict: Verdict,
    sha: str,
    timings: Mapping[str, float],
    lane: Lane = Lane.TEXT,
    ring: KeyRing | None = None,
) -> FileResult:
    """What a document that links nobody is recorded as: skipped_no_match with the verdict's reason;
    an ambiguous one says how many users it named, never who (no user id): the users it named are
    kept only as keyed hashes (``ring``, pdfbatch.named), so a trace by user finds it."""
    detail = dict(timings)
    named = tuple(ring.write_hash(u) for u in verdict.named) if ring else ()
    if verdict.reason == Reason.AMBIGUOUS:
        return FileResult(
            Outcome.SKIPPED_NO_MATCH,
            Reason.AMBIGUOUS,
            sha256=sha,
            detail=detail,
            users_named=verdict.users_named,
            source=lane,
            page=verdict.page,
            named=named,
        )
    return FileResult(
        Outcome.SKIPPED_NO_MATCH, str(verdict.reason), sha256=sha, detail=detail, source=lane, named=named
    )


def _scan(deps: Deps, data: bytes) -> tuple[Any, Verdict]:
    """Read the document until the matching rule decides (pdf.scan over the users table's rows)."""
    # Imported here, not at the top: unzip and status never parse a PDF, and pypdf, pypdfium2 and
    # cryptography cost ~20 MB of resident memory in every execution environment that loads them.
    from pdfbatch import pdf
    from pdfbatch.matching import MatchPolicy

    s = deps.settings
    scan = pdf.scan(
        data,
        deps.users.find_by_emails,
        max_pages=s.limits.max_pages,
        budget_seconds=s.limits.file_budget_seconds,
        policy=MatchPolicy(s.match_policy),
    )
    named = tuple(u.id for u in scan.named)
    verdict = Verdict(
        scan.reason, scan.match, scan.users_named, scan.page, named, scan.addresses, scan.evidence
    )
    return scan, verdict


def _ocr_scan(deps: Deps, data: bytes, engine: Any) -> tuple[Any, Verdict]:
    """Read a scan by OCR (ocr.scan) until a region names a user, then apply the matching rule to that
    region as to a text page: one user -> matched, two or more -> ambiguous (a misread names nobody)."""
    from pdfbatch import ocr
    from pdfbatch.matching import MatchPolicy, decide, normalise

    rows: list[UserRow] = []

    def lookup(emails: Sequence[str]) -> dict[str, UserRow]:
        found = deps.users.find_by_emails(emails)
        rows.extend(found)
        return {normalise(u.email): u for u in found}

    s = deps.settings
    scan = ocr.scan(
        data,
        lookup,
        engine=engine,
        max_pages=s.limits.ocr_max_pages,
        budget_seconds=s.limits.ocr_budget_seconds,
    )
    if scan.reason != Reason.MATCHED:
        return scan, Verdict(scan.reason)
    decision = decide([list(scan.named)], rows, MatchPolicy(s.match_policy), complete=True)
    page = scan.regions[-1].page if scan.regions else None  # the region that named a user
    named = tuple(u.id for u in decision.named)
    return scan, Verdict(decision.reason, decision.user, decision.users_named, page, named)


def _finish(deps: Deps, task: FileTask, result: FileResult, started: float) -> FileRow:
    # tally.record_and_count, its two steps timed apart (update, count) for the file's stage timings;
    # the metrics are emitted once, by the invocation that recorded the outcome.
    timings = dict(result.detail)
    t = time.monotonic()
    stored = deps.ledger.record(task.batch_id, task.index, result)
    timings["update"] = time.monotonic() - t
    timings["total"] = time.monotonic() - started
    ours = (stored.outcome, stored.reason) == (result.outcome, result.reason)
    if ours:
        _store_timings(deps, stored, timings)
    t = time.monotonic()
    tally.count(deps, stored)
    timings["count"] = time.monotonic() - t
    if ours:
        metrics.file_recorded(stored.outcome or "", stored.reason or "", timings, lane=result.source)
    logger.info(
        "file processed",
        extra={
            "outcome": stored.outcome,
            "reason": stored.reason,
            "lane": result.source,
            "timings_ms": _ms(timings),
        },
    )
    return stored


def _store_timings(deps: Deps, stored: FileRow, timings: Mapping[str, float]) -> None:
    # The ledger row was written before its own write could be timed: store the full timings (what
    # `pdfbatch report` and the report file read) before the file is counted, so the ledger row is
    # whole when the count that finishes the batch writes results.csv from it. ("total" is up to
    # here; the count, which may announce the batch, is in the log line and the metrics only.)
    try:
        deps.ledger.set_timings(stored.batch_id, stored.index, timings)
    except DependencyUnavailable as exc:
        # The outcome is recorded and counted already: a redelivery for timings would be waste.
        logger.warning("stage timings not stored", extra={"dependency": exc.dependency})


def _ms(timings: Mapping[str, float]) -> dict[str, float]:
    # Per-file stage timings for the log line (the ledger's copy is written before counting).
    return {k: round(v * 1000, 2) if k != "pages" else v for k, v in timings.items()}


def give_up(deps: Deps, task: FileTask, reason: str = Reason.GAVE_UP) -> FileRow | None:
    """Last delivery failed too: record the file failed so its batch still finishes."""
    row = deps.ledger.get_file(task.batch_id, task.index)
    if row is None:
        return None
    stored = tally.record_and_count(deps, task.batch_id, task.index, FileResult(Outcome.FAILED, reason))
    if stored.reason == reason:
        metrics.file_recorded(stored.outcome or "", stored.reason, {})
    logger.error("file given up after repeated failures", extra={"outcome": stored.outcome})
    return stored


def on_failed_attempt(
    deps: Deps, task: FileTask, receipt_handle: str, receive_count: int, lane: Lane = Lane.TEXT
) -> None:
    """A delivery of ``task`` raised: back it off, or on its last receive record it failed/gave_up.

    Call it while handling the error, then re-raise: anything a retry may fix propagates, so SQS
    redelivers. On the last receive the file is recorded failed/gave_up, so its batch still finishes,
    and the message still fails, so SQS moves it to the DLQ, from where `pdfbatch dlq --redrive` can
    run it again once fixed.
    """
    if receive_count < deps.settings.max_receive_count:
        logger.exception("file attempt failed; will be retried", extra={"receive_count": receive_count})
        redelivery.retry_later(deps, receipt_handle, receive_count, lane=lane)  # exponential backoff
        return
    logger.exception("file failed on its last delivery", extra={"receive_count": receive_count})
    give_up(deps, task)
    redelivery.release_now(
        deps, receipt_handle, lane
    )  # to the DLQ at its next receive, not after the timeout


# --- the invocation's own end ---------------------------------------------------------------------

# What one file may spend outside its extraction budget: its lookups, download, copy and writes take
# about a second together, and a dependency that hangs stops the file at its first call
# (PER_FILE_IO.worst_call_seconds, 26 s), after which reporting the failure may wait as long again
# (the backoff's ChangeMessageVisibility, or give_up's writes). A file is started only with its budget
# and this margin left, so the function's timeout never kills a file half-way (infra/template.yaml
# sizes process_pdf's timeout from the same numbers: tests/unit/test_template.py checks it).
FILE_MARGIN_SECONDS = 2 * PER_FILE_IO.worst_call_seconds() + 3.0


def has_time_for_a_file(settings: Settings, remaining_ms: int, lane: Lane = Lane.TEXT) -> bool:
    """Whether a file started now ends (its lane's budget and margin) before the invocation's timeout."""
    limits = settings.limits
    budget = limits.ocr_budget_seconds if lane == Lane.OCR else limits.file_budget_seconds
    return remaining_ms / 1000.0 >= budget + FILE_MARGIN_SECONDS


def settle_dead_letter(deps: Deps, task: FileTask) -> FileRow | None:
    """A work message reached the DLQ: make sure its file has an outcome, counted once; return the row.

    Normally give_up recorded it on the last receive. When the invocation died then (timeout, out of
    memory, MySQL down), it has none and is recorded failed/gave_up here, so the batch finishes
    without an operator. A file that ends failed/gave_up is parked (``Deps.parked``), where
    `pdfbatch dlq` lists and `--redrive` re-runs it; any other outcome is only counted, and the
    message is done. Raises DependencyUnavailable (the message is retried later) when MySQL, Redis or
    SQS is down. None when the message names no ledger row.
    """
    logger.append_keys(batch_id=task.batch_id, file_index=task.index)
    row = deps.ledger.get_file(task.batch_id, task.index)
    if row is None:
        logger.warning("dead letter with no ledger row; dropped")
        return None
    if row.outcome is None:
        logger.error("dead letter without an outcome: its last delivery died; recorded gave_up")
        row = give_up(deps, task) or row
    else:
        tally.count(deps, row)  # once, whatever counted it before
    if (row.outcome, row.reason) == (Outcome.FAILED, Reason.GAVE_UP):
        if deps.parked is None:
            logger.warning("no parked queue (PDFBATCH_PARKED_QUEUE_URL): `pdfbatch retry` re-runs the file")
        else:
            deps.parked.send_tasks([task])  # recorded first: a crash now parks it twice, never not at all
    logger.info("dead letter settled", extra={"outcome": row.outcome, "reason": row.reason})
    return row
