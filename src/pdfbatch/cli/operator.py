"""`pdfbatch retry|dlq|report|gc`: the operator's own tools, on MySQL, Redis, SQS and S3 directly.

These talk to the stores directly rather than through the REST API: they change batches (reopen
files, move messages, delete unreferenced objects), which the uploaders' API must not offer, and they
need rights the status function does not have (SQS send and receive on both queues). The operator
already holds the MySQL/Redis URLs that `stack up` passes to the functions; `report` needs MySQL
(and the stack's bucket for its orphan count, when reachable).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pdfbatch.cli import common  # STACK_NAME read through it at call time: one place to set it
from pdfbatch.cli.batches import follow
from pdfbatch.cli.common import (
    EXIT_BATCH_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    check_mysql,
    check_redis,
    endpoint_url,
    local_credentials,
    mysql_url,
    region,
    shown,
    stderr_console,
)


@contextmanager
def _service_errors() -> Iterator[None]:
    """Typed pdfbatch errors as one sentence and the documented exit code."""
    from pdfbatch.errors import ConfigError, DependencyUnavailable, InvalidInput, NotFound

    try:
        yield
    except NotFound as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except (InvalidInput, ConfigError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except DependencyUnavailable as exc:
        raise CliError(f"{exc}: check it is running (`pdfbatch stack status`)", EXIT_UNAVAILABLE) from exc


def ops_deps() -> tuple[Any, dict[str, str]]:
    """The pipeline's dependencies as the operator reaches them, and the stack's outputs (queue URLs)."""
    from dataclasses import replace

    from pdfbatch.api_client import ApiError, stack_outputs
    from pdfbatch.bootstrap import build_deps
    from pdfbatch.config import Settings

    local_credentials()
    check_mysql()
    check_redis()
    try:
        outputs = stack_outputs(common.STACK_NAME, endpoint_url(), region())
    except ApiError as exc:
        raise CliError(str(exc)) from exc
    with _service_errors():
        settings = replace(
            Settings.from_env(),  # PDFBATCH_MYSQL_URL / PDFBATCH_REDIS_URL as checked above
            bucket=outputs["BucketName"],
            work_queue_url=outputs["QueueUrl"],
            endpoint_url=endpoint_url(),
            region=region(),
        )
        return build_deps(settings, need_queue="work_queue_url", ensure_schema=False), outputs


def dead_letters(deps: Any, outputs: dict[str, str]) -> Any:
    """The parked work dead letters (recorded failed/gave_up by the DLQ's consumer), what `dlq` works on.

    A stack deployed before the parked queue existed has only its DLQ: that one, then.
    """
    from pdfbatch.adapters.sqs import SqsDeadLetters
    from pdfbatch.bootstrap import boto3_client

    url = outputs.get("ParkedQueueUrl") or outputs["DeadLetterQueueUrl"]
    return SqsDeadLetters(boto3_client("sqs", deps.settings), url)


class LedgerWatch:
    """Polls a batch's status from Redis/MySQL (as the API would answer) for `follow`."""

    def __init__(self, deps: Any) -> None:
        self.deps = deps

    def wait(
        self, batch_id: str, on_update: Any = None, timeout: float = 3600.0, interval: float = 0.5
    ) -> dict[str, Any]:
        """Poll until COMPLETED or FAILED."""
        from pdfbatch.services import views
        from pdfbatch.tenants import ADMIN  # the operator's own database credentials: every batch

        deadline = time.monotonic() + timeout
        while True:
            with _service_errors():
                body = views.batch_status(self.deps, batch_id, caller=ADMIN)
            if on_update:
                on_update(body)
            if body["status"] in ("COMPLETED", "FAILED"):
                return body
            if time.monotonic() > deadline:
                raise CliError(f"batch {batch_id} still {body['status']} after {timeout:.0f} s")
            time.sleep(interval)


def retry_cmd(args: argparse.Namespace) -> int:
    """Reopen and re-send the files of a batch that were not linked (or only the failed ones)."""
    from pdfbatch.services import operations

    deps, _ = ops_deps()
    console = stderr_console()
    with _service_errors():
        report = operations.retry_batch(deps, args.batch_id, failed_only=args.failed_only)
    out: dict[str, Any] = report.as_dict()
    if not args.json:
        kept = ", ".join(f"{k} {v}" for k, v in out["kept"].items()) or "none"
        console.print(
            f"batch {args.batch_id}: reopened {out['reopened']}, re-sent {out['resent']} "
            f"[dim](left as they were: {kept})[/dim]"
        )
    code = EXIT_OK
    if args.wait and report.resent:
        final = follow(LedgerWatch(deps), args.batch_id, console, quiet=args.json, timeout=args.timeout)
        out["status"] = final
        if not args.json:
            print_outcomes(final, console)
        code = EXIT_OK if final["status"] == "COMPLETED" else EXIT_BATCH_FAILED
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    return code


def dlq_cmd(args: argparse.Namespace) -> int:
    """List the work queue's dead letters, or redrive them (reopening files recorded gave_up)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from pdfbatch.services import operations

    deps, outputs = ops_deps()
    dlq = dead_letters(deps, outputs)
    console = stderr_console()
    if not args.redrive:
        with _service_errors():
            listing = operations.list_dead_letters(deps, dlq, limit=args.limit)
        if args.json:
            print(json.dumps(listing, indent=2, sort_keys=True))
            return EXIT_OK
        if not listing["messages"]:
            console.print("the dead-letter queue is empty")
            return EXIT_OK
        table = Table(title=f"dead letters ({len(listing['messages'])} shown)")
        for col in ("batch", "#", "file", "outcome", "reason", "attempts", "receives", "sent"):
            table.add_column(col)
        for m in listing["messages"]:
            table.add_row(
                *(
                    shown(m[k]) if m[k] is not None else "-"
                    for k in ("batchId", "index", "name", "outcome", "reason", "attempts", "receiveCount")
                ),
                shown(m["sentAt"] or "-"),
            )
        console.print(table)
        if listing["messages"]:
            console.print("redrive them with [bold]pdfbatch dlq --redrive[/bold] once the cause is fixed")
        return EXIT_OK

    with _service_errors():
        total = dlq.approximate_count()
        with Progress(
            TextColumn("redrive "),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=args.json,
        ) as bar:
            task = bar.add_task("redrive", total=min(total, args.limit) if args.limit else total)

            def moved(r: Any) -> None:
                bar.update(task, completed=r.resent + r.already_done + r.left)

            report = operations.redrive_dead_letters(deps, dlq, limit=args.limit, on_progress=moved)
    out: dict[str, Any] = report.as_dict()
    if not args.json:
        console.print(
            f"re-sent {report.resent} (reopened {report.reopened}), {report.already_done} already done, "
            f"{report.left} left in the DLQ (malformed or unknown)"
        )
    code = EXIT_OK
    if args.wait:
        out["statuses"] = []
        for batch_id in report.batches:
            final = follow(LedgerWatch(deps), batch_id, console, quiet=args.json, timeout=args.timeout)
            out["statuses"].append(final)
            if not args.json:
                print_outcomes(final, console)
            if final["status"] != "COMPLETED":
                code = EXIT_BATCH_FAILED
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
    return code


def print_outcomes(status: dict[str, Any], console: Any) -> None:
    """One line: the batch's status and per-outcome counts."""
    colour = "green" if status["status"] == "COMPLETED" else "yellow"
    console.print(
        f"batch {status['batchId']}: [bold {colour}]{status['status']}[/bold {colour}]  "
        f"linked {status['linked']}  not matched {status['skipped_no_match']}  "
        f"already linked {status['skipped_already_exists']}  failed {status['failed']}"
    )


def _orphan_count(ledger: Any, batch_id: str) -> int | None:
    """The batch's copies nothing points at, or None when the stack's bucket cannot be reached."""
    from dataclasses import replace

    from pdfbatch.api_client import ApiError, stack_outputs
    from pdfbatch.bootstrap import build_deps
    from pdfbatch.config import Settings
    from pdfbatch.errors import DependencyUnavailable
    from pdfbatch.services import orphans

    local_credentials()
    try:
        outputs = stack_outputs(common.STACK_NAME, endpoint_url(), region())
        settings = replace(
            Settings.from_env(), bucket=outputs["BucketName"], endpoint_url=endpoint_url(), region=region()
        )
        deps = replace(build_deps(settings, ensure_schema=False), ledger=ledger, users=ledger.user_rows)
        return len(orphans.batch_orphans(deps, batch_id))
    except (ApiError, DependencyUnavailable) as exc:
        stderr_console().print(f"orphans not counted: {exc}", markup=False, highlight=False, style="dim")
        return None


def _download_report(batch_id: str, directory: str) -> int:
    """`report --download DIR`: the batch's results.csv and summary.json saved in DIR/BATCH/."""
    from pathlib import Path

    from pdfbatch.services import views

    deps, _ = ops_deps()
    with _service_errors():
        files = views.report_files(deps, batch_id)
    target = Path(directory) / batch_id
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    status = json.loads(files["summary.json"])["status"]
    print(
        json.dumps({"batchId": batch_id, "status": status, "files": sorted(str(target / n) for n in files)})
    )
    return EXIT_BATCH_FAILED if status == "FAILED" else EXIT_OK


def report_cmd(args: argparse.Namespace) -> int:
    """Outcomes, reasons and per-stage latency percentiles of a batch, from the ledger."""
    from rich.table import Table

    from pdfbatch.adapters.ledger import MysqlLedger
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.config import Settings
    from pdfbatch.model import is_batch_id
    from pdfbatch.services import report as reports

    if args.download is not None:
        return _download_report(args.batch_id, args.download)
    check_mysql()
    with _service_errors():
        ledger = MysqlLedger(MysqlClient.from_url(mysql_url()), Settings.from_env().users)
        known = is_batch_id(args.batch_id) and ledger.get_batch(args.batch_id) is not None
        orphans = _orphan_count(ledger, args.batch_id) if known else None
        report = reports.batch_report(ledger, args.batch_id, orphans=orphans)
    code = EXIT_BATCH_FAILED if report["status"] == "FAILED" else EXIT_OK
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return code
    from pdfbatch.model import describe

    console = stderr_console()
    console.print(
        f"batch {report['batchId']}: [bold]{report['status']}[/bold]"
        + (f" ({describe(report['reason'], batch=True)})" if report["reason"] else "")
        + f"  {report['pdfs']} PDFs ({report['ignored']} other entries ignored), "
        f"{report['pending']} pending, {report['retriedFiles']} retried"
        + (f", {report['elapsedSeconds']:.1f} s" if report["elapsedSeconds"] is not None else "")
        + (f", {report['orphans']} orphaned copies (`pdfbatch gc`)" if report["orphans"] else "")
    )
    outcomes = Table(title="outcomes")
    outcomes.add_column("outcome")
    outcomes.add_column("files", justify="right")
    for outcome, n in report["outcomes"].items():
        outcomes.add_row(outcome, str(n))
    console.print(outcomes)
    if report["reasons"]:
        reasons = Table(title="reasons")
        for col in ("outcome", "reason", "files", "meaning"):
            reasons.add_column(col, justify="right" if col == "files" else "left")
        for r in report["reasons"]:
            reasons.add_row(r["outcome"], r["reason"], str(r["files"]), r["meaning"])
        console.print(reasons)
    if report["stagesMs"]:
        stages = Table(title="per-file stage times (ms)")
        for col in ("stage", "files", "p50", "p95", "p99", "max"):
            stages.add_column(col, justify="left" if col == "stage" else "right")
        for stage, s in report["stagesMs"].items():
            stages.add_row(stage, str(s["files"]), *(f"{s[k]:.1f}" for k in ("p50", "p95", "p99", "max")))
        console.print(stages)
    return code


def add_check(sub: Any) -> None:
    """`pdfbatch check`: its sub-parser (added by parser.py in one line)."""
    import argparse

    p = sub.add_parser(
        "check",
        help="prove the pipeline's invariants over batches (after a run, or a soak)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Read the ledger, the live counters, the users' links and S3, and report each invariant\n"
            "(every batch final, one outcome per entry, counters equal to the ledger, each user linked\n"
            "once to an object that exists, no staged leftovers, ...) as held or broken, with examples\n"
            "by id. Check every batch that may link the same users together. --oracle names a JSON file\n"
            "saying which user each PDF (by sha256) names and what each upload held (see\n"
            "pdfbatch.invariants.Oracle); without it those two invariants are not checked."
        ),
        epilog="example:\n  pdfbatch check 3f2c...e9 7a10...42 --json\n\n"
        "exit codes: 0 every invariant held, 1 an invariant is broken (a batch that does not exist is\n"
        "not final), 2 bad usage or input, 3 a service is unavailable",
    )
    p.add_argument("batch_ids", nargs="+", metavar="BATCH")
    p.add_argument("--oracle", help="JSON file: which user each PDF names, what each upload held")
    p.add_argument(
        "--settle-period",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="the stack's SettleSchedule period (default 60, the template's rate(1 minute)): a batch due "
        "for settle twice that long ago and not settled is broken; 0 does not check it",
    )
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.set_defaults(func=check_cmd)


def check_cmd(args: argparse.Namespace) -> int:
    """Evaluate the invariants over the given batches and print the report."""
    from pathlib import Path

    from pdfbatch.bootstrap import boto3_client
    from pdfbatch.invariants import Oracle, S3Keys, Sources, check
    from pdfbatch.model import is_batch_id

    bad = [b for b in args.batch_ids if not is_batch_id(b)]
    if bad:
        raise CliError(f"not a batch id: {bad[0]!r}", EXIT_USAGE)
    try:
        oracle = Oracle.load(Path(args.oracle)) if args.oracle else None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CliError(f"cannot read the oracle {args.oracle}: {exc}", EXIT_USAGE) from exc
    deps, _ = ops_deps()
    with _service_errors():
        period = args.settle_period if args.settle_period > 0 else None
        sources = Sources.from_deps(deps, S3Keys(boto3_client("s3", deps.settings)), settle_period=period)
        report = check(sources, args.batch_ids, oracle)
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
    else:
        console = stderr_console()
        for line in report.lines():
            console.print(line, markup=False, highlight=False)
        verdict = "every invariant held" if report.ok else f"BROKEN: {', '.join(report.broken())}"
        console.print(f"{len(report.batch_ids)} batches: {verdict}", markup=False, highlight=False)
    return EXIT_OK if report.ok else EXIT_BATCH_FAILED


def gc_cmd(args: argparse.Namespace) -> int:
    """List (and with --delete remove) final objects nothing points at, older than the grace."""
    from pdfbatch.services import orphans

    deps, _ = ops_deps()
    console = stderr_console()
    with _service_errors():
        older_than = orphans.parse_duration(args.older_than)
        report = orphans.sweep(deps, older_than_seconds=older_than, delete=args.delete)
    out = report.as_dict()
    if args.json:
        print(json.dumps(out, indent=2, sort_keys=True))
        return EXIT_OK
    verb = "deleted" if args.delete else "would delete"
    console.print(
        f"{out['scanned']} objects under pdfs/: {out['referenced']} referenced, {out['young']} younger than "
        f"{args.older_than}, {out['foreign']} not pdfbatch's; {verb} {out['orphans']} orphaned copies "
        f"({out['orphanBytes']} bytes)"
    )
    for key in out["keys"][:20]:
        console.print(f"  {key}", markup=False, highlight=False)
    if len(out["keys"]) > 20:
        console.print(f"  ... and {len(out['keys']) - 20} more (--json lists them all)")
    if not args.delete and out["orphans"]:
        console.print("delete them with [bold]pdfbatch gc --delete[/bold]")
    return EXIT_OK
