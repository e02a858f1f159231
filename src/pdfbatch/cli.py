"""`pdfbatch`: the operator's command line.

Exit codes scripts can rely on: 0 done (batch COMPLETED), 1 the batch FAILED, 2 bad usage or input,
3 a service is unavailable or an operation failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pdfbatch.config import DEFAULT_ENDPOINT_URL, DEFAULT_MYSQL_URL, DEFAULT_REDIS_URL, parse_mysql_url

EXIT_OK, EXIT_BATCH_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
EXIT_CODES = (
    "exit codes: 0 ok, 1 the batch FAILED, 2 bad usage or input (or no such batch),\n"
    "3 a service is unavailable"
)
STACK_NAME = os.environ.get("PDFBATCH_STACK_NAME", "pdfbatch")


class CliError(Exception):
    """A failure to report as one sentence with an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.code = code


# ------------------------------------------------------------------------------------------------
# environment
# ------------------------------------------------------------------------------------------------


def endpoint_url() -> str | None:
    """AWS_ENDPOINT_URL, defaulting to the local stack; set it empty to target real AWS."""
    value = os.environ.get("AWS_ENDPOINT_URL")
    if value is None:
        return DEFAULT_ENDPOINT_URL
    return value or None


def region() -> str:
    """The AWS region (us-east-1 unless set)."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def _local_credentials() -> None:
    # LocalStack accepts any credentials; make sure boto3 finds some.
    if endpoint_url() and not os.environ.get("AWS_ACCESS_KEY_ID") and not os.environ.get("AWS_PROFILE"):
        os.environ["AWS_ACCESS_KEY_ID"] = "test"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "test"  # noqa: S105 - LocalStack's dummy credentials
    os.environ.setdefault("AWS_DEFAULT_REGION", region())


def mysql_url() -> str:
    """PDFBATCH_MYSQL_URL or the local default."""
    return os.environ.get("PDFBATCH_MYSQL_URL") or DEFAULT_MYSQL_URL


def redis_url() -> str:
    """PDFBATCH_REDIS_URL or the local default."""
    return os.environ.get("PDFBATCH_REDIS_URL") or DEFAULT_REDIS_URL


def check_mysql(create: bool = False) -> None:
    """Fail with one sentence when MySQL is unreachable; optionally create the database and tables."""
    import pymysql

    from pdfbatch.ops import devdb

    p = parse_mysql_url(mysql_url())
    try:
        conn = pymysql.connect(
            host=p.host,
            port=p.port,
            user=p.user,
            password=p.password,
            connect_timeout=3,
            autocommit=True,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as exc:
        raise CliError(
            f"MySQL is not reachable at {p.host}:{p.port} (PDFBATCH_MYSQL_URL): start it, e.g. "
            "`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`, "
            f"or point PDFBATCH_MYSQL_URL at a running server ({exc.args[-1] if exc.args else exc})."
        ) from exc
    if create:
        devdb.create_schema(conn, p)
    conn.close()


def check_redis() -> None:
    """Fail with one sentence when Redis is unreachable."""
    import redis

    try:
        redis.Redis.from_url(redis_url(), socket_connect_timeout=3).ping()
    except redis.exceptions.RedisError as exc:
        raise CliError(
            f"Redis is not reachable at {redis_url()} (PDFBATCH_REDIS_URL): start it, e.g. "
            "`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`, "
            "or point PDFBATCH_REDIS_URL at a running server."
        ) from exc


def api_client() -> Any:
    """An ApiClient for the deployed stack (PDFBATCH_API_URL overrides discovery)."""
    from pdfbatch.ops.api import ApiClient, ApiError, stack_outputs

    url = os.environ.get("PDFBATCH_API_URL")
    if not url:
        _local_credentials()
        try:
            outputs = stack_outputs(STACK_NAME, endpoint_url(), region())
        except ApiError as exc:
            raise CliError(str(exc)) from exc
        url = outputs.get("LocalApiUrl") or outputs["ApiUrl"]
    # The key: the one `stack up` stored for this API (LocalStack), else PDFBATCH_API_KEY.
    return ApiClient(url)


def _console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# ------------------------------------------------------------------------------------------------
# stack
# ------------------------------------------------------------------------------------------------


def stack_up(args: argparse.Namespace) -> int:
    """Start LocalStack if needed, prepare MySQL, deploy or update the stack, print the endpoints."""
    from pdfbatch.ops import localstack
    from pdfbatch.ops.deploy import DeployError, deploy

    console = _console()
    _local_credentials()
    check_mysql(create=True)
    check_redis()
    endpoint = endpoint_url()
    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    if endpoint:
        try:
            localstack.find_python313()
            localstack.ensure_environments(root)
            localstack.start(root, endpoint)
        except localstack.LocalStackError as exc:
            raise CliError(str(exc)) from exc
    try:
        outputs = deploy(
            deploy_params(),
            endpoint_url=endpoint,
            stack_name=STACK_NAME,
            root=root,
            region=region(),
            log=lambda m: console.print(f"[dim]{m}[/dim]"),
        )
    except DeployError as exc:
        raise CliError(f"deploy failed: {exc}") from exc
    api = outputs.get("LocalApiUrl") or outputs.get("ApiUrl")
    if args.json:
        print(json.dumps(outputs, indent=2, sort_keys=True))
    else:
        console.print(f"[bold green]pdfbatch is up[/bold green] (stack {STACK_NAME})")
        console.print(f"  API      {api}")
        console.print(f"  page     {api}  (upload in a browser; its API key: `pdfbatch stack key`)")
        console.print(f"  bucket   s3://{outputs.get('BucketName')}/uploads/")
        console.print(f"  MySQL    {_redact(mysql_url())}")
        console.print(f"  Redis    {redis_url()}")
    return EXIT_OK


def deploy_params() -> Any:
    """What the functions get: the operator's URLs, or PDFBATCH_FUNCTION_* when functions see other hosts."""
    from pdfbatch.ops.deploy import DeployParams

    overrides: dict[str, Any] = {}
    # With docker compose the functions reach MySQL/Redis by service name, the CLI through localhost.
    if os.environ.get("PDFBATCH_FUNCTION_MYSQL_URL"):
        overrides["mysql_url"] = os.environ["PDFBATCH_FUNCTION_MYSQL_URL"]
    if os.environ.get("PDFBATCH_FUNCTION_REDIS_URL"):
        overrides["redis_url"] = os.environ["PDFBATCH_FUNCTION_REDIS_URL"]
    return DeployParams.from_env(**overrides)


def stack_down(args: argparse.Namespace) -> int:
    """Stop what `stack up` started (LocalStack and its function processes)."""
    from pdfbatch.ops import localstack

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    stopped = localstack.stop(root)
    _console().print("LocalStack stopped." if stopped else "LocalStack was not running.")
    return EXIT_OK


def stack_status(args: argparse.Namespace) -> int:
    """Is the local stack running?"""
    from pdfbatch.ops import localstack

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    st = localstack.status(root, endpoint_url())
    print(json.dumps(st.__dict__, default=str) if args.json else st)
    return EXIT_OK


def stack_key(args: argparse.Namespace) -> int:
    """Print the REST API's key: the one `stack up` stored for this stack, else PDFBATCH_API_KEY."""
    from pdfbatch.ops import localstack
    from pdfbatch.ops.api import read_api_key

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    key = read_api_key(root, STACK_NAME) or os.environ.get("PDFBATCH_API_KEY", "")
    if not key:
        raise CliError(f"no API key for stack {STACK_NAME}: run `pdfbatch stack up` or set PDFBATCH_API_KEY")
    print(json.dumps({"stackName": STACK_NAME, "apiKey": key}) if args.json else key)
    return EXIT_OK


def _redact(url: str) -> str:
    from urllib.parse import urlparse

    p = urlparse(url)
    if p.password:
        return url.replace(f":{p.password}@", ":***@")
    return url


# ------------------------------------------------------------------------------------------------
# batches
# ------------------------------------------------------------------------------------------------


def upload(args: argparse.Namespace) -> int:
    """POST /batches, upload through the presigned POST, optionally wait with a progress bar."""
    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"{path} is not a file", EXIT_USAGE)
    return run_upload(path, wait=args.wait, as_json=args.json, timeout=args.timeout)


def run_upload(path: Path, *, wait: bool, as_json: bool, timeout: float = 3600.0) -> int:
    """Upload one ZIP and (with ``wait``) follow it to the end; returns the exit code."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from pdfbatch.ops.api import ApiError, presigned_post

    client = api_client()
    console = _console()
    try:
        batch = client.create_batch()
        size = path.stat().st_size
        with Progress(
            TextColumn("upload  "),
            BarColumn(),
            DownloadColumn(),
            TransferSpeedColumn(),
            console=console,
            transient=as_json,
        ) as bar:
            task = bar.add_task("upload", total=size)
            presigned_post(
                batch["upload"]["url"],
                batch["upload"]["fields"],
                path,
                on_progress=lambda sent: bar.update(task, completed=sent),
            )
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_UNAVAILABLE) from exc
    batch_id = batch["batchId"]
    console.print(f"batch [bold]{batch_id}[/bold] uploaded")
    if not wait:
        if as_json:
            print(json.dumps({"batchId": batch_id}))
        return EXIT_OK
    final = follow(client, batch_id, console, quiet=as_json, timeout=timeout)
    if as_json:
        print(json.dumps(final, indent=2, sort_keys=True))
    else:
        print_summary(client, final, console)
    return EXIT_OK if final["status"] == "COMPLETED" else EXIT_BATCH_FAILED


def follow(
    client: Any, batch_id: str, console: Any, *, quiet: bool = False, timeout: float = 3600.0
) -> dict[str, Any]:
    """A live progress bar until the batch is COMPLETED or FAILED."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from pdfbatch.ops.api import ApiError

    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=console,
        transient=quiet,
    ) as bar:
        task = bar.add_task("waiting ", total=None, counts="")

        def update(body: dict[str, Any]) -> None:
            counts = (
                f"linked {body['linked']}  not matched {body['skipped_no_match']}  "
                f"already linked {body['skipped_already_exists']}  failed {body['failed']}"
            )
            bar.update(
                task,
                description=f"{body['status'].lower():<10}",
                total=body.get("totalFiles"),
                completed=body.get("processed", 0),
                counts=counts,
            )

        try:
            return dict(client.wait(batch_id, on_update=update, timeout=timeout))
        except ApiError as exc:
            raise CliError(str(exc)) from exc


def print_summary(client: Any, status: dict[str, Any], console: Any) -> None:
    """The per-outcome summary and the files that were not linked, with reasons."""
    from rich.table import Table

    from pdfbatch.model import describe

    colour = "green" if status["status"] == "COMPLETED" else "red"
    console.print(
        f"\nbatch {status['batchId']}: [bold {colour}]{status['status']}[/bold {colour}]"
        + (f" ({describe(status.get('reason'))})" if status.get("reason") else "")
    )
    table = Table(title="outcomes")
    table.add_column("outcome")
    table.add_column("files", justify="right")
    for outcome in ("linked", "skipped_no_match", "skipped_already_exists", "failed"):
        table.add_row(outcome, str(status[outcome]))
    table.add_row("[dim]ignored (not PDFs)[/dim]", f"[dim]{status.get('ignored', 0)}[/dim]")
    table.add_row("[bold]total PDFs[/bold]", f"[bold]{status.get('totalFiles') or 0}[/bold]")
    console.print(table)
    if status["status"] != "COMPLETED" or status["processed"] == status["linked"]:
        return
    rows = [f for f in client.files(status["batchId"], outcome="not_linked")]
    not_linked = Table(title="not linked")
    not_linked.add_column("file")
    not_linked.add_column("outcome")
    not_linked.add_column("why")
    for f in rows:
        not_linked.add_row(f["name"], f["outcome"], f"{describe(f['reason'])} [dim]({f['reason']})[/dim]")
    console.print(not_linked)


def status_cmd(args: argparse.Namespace) -> int:
    """Show one batch's progress."""
    from pdfbatch.ops.api import ApiError

    client = api_client()
    try:
        body, _ = client.status(args.batch_id)
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 404 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(body, indent=2, sort_keys=True))
    elif body["status"] in ("COMPLETED", "FAILED"):
        print_summary(client, body, _console())
    else:
        total = body.get("totalFiles") or "?"
        _console().print(f"{body['status']}: {body['processed']}/{total} files ({body['percent']}%)")
    return EXIT_BATCH_FAILED if body["status"] == "FAILED" else EXIT_OK


def files_cmd(args: argparse.Namespace) -> int:
    """List per-file results."""
    from rich.table import Table

    from pdfbatch.model import describe
    from pdfbatch.ops.api import ApiError

    client = api_client()
    try:
        rows = list(client.files(args.batch_id, outcome=args.outcome))
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status in (400, 404) else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    table = Table()
    for col in ("#", "file", "outcome", "reason"):
        table.add_column(col)
    for f in rows:
        table.add_row(str(f["index"]), f["name"], f["outcome"] or "pending", describe(f["reason"]))
    _console().print(table)
    return EXIT_OK


def find_cmd(args: argparse.Namespace) -> int:
    """Which batches came from an object key (for ZIPs dropped with `aws s3 cp`)."""
    from pdfbatch.ops.api import ApiError

    try:
        batches = api_client().find(args.key)
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(batches, indent=2))
    else:
        for b in batches:
            print(f"{b['batchId']}  {b['status']:<10}  {b['createdAt']}")
    return EXIT_OK


# ------------------------------------------------------------------------------------------------
# operations: retry, dlq, report (MySQL, Redis and SQS directly, as the operator's own tools)
# ------------------------------------------------------------------------------------------------
# These talk to the stores directly rather than through the REST API: they change batches (reopen
# files, move messages), which the uploaders' API must not offer, and they need rights the status
# function does not have (SQS send and receive on both queues). The operator already holds the
# MySQL/Redis URLs that `stack up` passes to the functions; `report` needs MySQL only.


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

    from pdfbatch.bootstrap import build_deps
    from pdfbatch.config import Settings
    from pdfbatch.ops.api import ApiError, stack_outputs

    _local_credentials()
    check_mysql()
    check_redis()
    try:
        outputs = stack_outputs(STACK_NAME, endpoint_url(), region())
    except ApiError as exc:
        raise CliError(str(exc)) from exc
    with _service_errors():
        settings = replace(
            Settings.from_env(),  # PDFBATCH_MYSQL_URL / PDFBATCH_REDIS_URL as checked above
            bucket=outputs["BucketName"],
            queue_url=outputs["QueueUrl"],
            endpoint_url=endpoint_url(),
            region=region(),
        )
        return build_deps(settings, need_queue=True, ensure_schema=False), outputs


def dead_letters(deps: Any, outputs: dict[str, str]) -> Any:
    """The work queue's DLQ."""
    from pdfbatch.adapters.sqs import SqsDeadLetters
    from pdfbatch.bootstrap import boto3_client

    return SqsDeadLetters(boto3_client("sqs", deps.settings), outputs["DeadLetterQueueUrl"])


class LedgerWatch:
    """Polls a batch's status from Redis/MySQL (as the API would answer) for `follow`."""

    def __init__(self, deps: Any) -> None:
        self.deps = deps

    def wait(
        self, batch_id: str, on_update: Any = None, timeout: float = 3600.0, interval: float = 0.5
    ) -> dict[str, Any]:
        """Poll until COMPLETED or FAILED."""
        from pdfbatch import services

        deadline = time.monotonic() + timeout
        while True:
            with _service_errors():
                body = services.batch_status(self.deps, batch_id)
            if on_update:
                on_update(body)
            if body["status"] in ("COMPLETED", "FAILED"):
                return body
            if time.monotonic() > deadline:
                raise CliError(f"batch {batch_id} still {body['status']} after {timeout:.0f} s")
            time.sleep(interval)


def retry_cmd(args: argparse.Namespace) -> int:
    """Reopen and re-send the files of a batch that were not linked (or only the failed ones)."""
    from pdfbatch import services

    deps, _ = ops_deps()
    console = _console()
    with _service_errors():
        report = services.retry_batch(deps, args.batch_id, failed_only=args.failed_only)
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

    from pdfbatch import services

    deps, outputs = ops_deps()
    dlq = dead_letters(deps, outputs)
    console = _console()
    if not args.redrive:
        with _service_errors():
            listing = services.list_dead_letters(deps, dlq, limit=args.limit)
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
                    str(m[k]) if m[k] is not None else "-"
                    for k in ("batchId", "index", "name", "outcome", "reason", "attempts", "receiveCount")
                ),
                m["sentAt"] or "-",
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

            report = services.redrive_dead_letters(deps, dlq, limit=args.limit, on_progress=moved)
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


def report_cmd(args: argparse.Namespace) -> int:
    """Outcomes, reasons and per-stage latency percentiles of a batch, from the ledger."""
    from rich.table import Table

    from pdfbatch import services
    from pdfbatch.adapters.mysql import MysqlClient, MysqlLedger
    from pdfbatch.config import Settings

    check_mysql()
    with _service_errors():
        ledger = MysqlLedger(MysqlClient.from_url(mysql_url()), Settings.from_env().users)
        report = services.batch_report(ledger, args.batch_id)
    code = EXIT_BATCH_FAILED if report["status"] == "FAILED" else EXIT_OK
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
        return code
    from pdfbatch.model import describe

    console = _console()
    console.print(
        f"batch {report['batchId']}: [bold]{report['status']}[/bold]"
        + (f" ({describe(report['reason'])})" if report["reason"] else "")
        + f"  {report['pdfs']} PDFs ({report['ignored']} other entries ignored), "
        f"{report['pending']} pending, {report['retriedFiles']} retried"
        + (f", {report['elapsedSeconds']:.1f} s" if report["elapsedSeconds"] is not None else "")
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


# ------------------------------------------------------------------------------------------------
# demo
# ------------------------------------------------------------------------------------------------


def demo(args: argparse.Namespace) -> int:
    """Bring the stack up, seed users, build a sample ZIP, upload it and show what happened."""
    from pdfbatch.ops import devdb, samples

    console = _console()
    stack_up(argparse.Namespace(root=args.root, json=False))
    corpus = samples.demo_corpus()
    devdb.seed_users(mysql_url(), corpus.users, corpus.linked_users)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    corpus.write_zip(out)
    pdf_count = sum(1 for n, _ in corpus.entries if n.lower().endswith(".pdf") and "__MACOSX" not in n)
    console.print(
        f"\nsample ZIP {out} ({out.stat().st_size // 1024} KiB): {pdf_count} PDFs of "
        f"{len(corpus.entries)} entries; {len(corpus.users) + len(corpus.linked_users)} demo users seeded"
    )
    return run_upload(out, wait=True, as_json=False)


# ------------------------------------------------------------------------------------------------
# entry point
# ------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (one sub-command per task)."""
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(
        prog="pdfbatch",
        formatter_class=fmt,
        description="Turn a ZIP of PDFs into linked user records.",
        epilog="example:\n  pdfbatch stack up\n  pdfbatch upload resumes.zip --wait\n\n"
        "exit codes: 0 ok, 1 batch FAILED, 2 bad usage or input, 3 service unavailable",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    stack = sub.add_parser(
        "stack",
        help="start, deploy or stop the stack",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch stack up\n  pdfbatch stack down",
    )
    stack_sub = stack.add_subparsers(dest="action", required=True)
    for name, fn, text in (
        ("up", stack_up, "start LocalStack if needed and deploy (idempotent)"),
        ("down", stack_down, "stop what `up` started"),
        ("status", stack_status, "is the local stack running?"),
        ("key", stack_key, "print the API key (for the upload page or curl's x-api-key)"),
    ):
        p = stack_sub.add_parser(name, help=text)
        p.add_argument("--root", help="the pdfbatch checkout (default: found from the current folder)")
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        p.set_defaults(func=fn)

    p = sub.add_parser(
        "upload",
        help="upload a ZIP of PDFs",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch upload batch.zip --wait --json > result.json",
    )
    p.add_argument("file", help="the ZIP file")
    p.add_argument("--wait", action="store_true", help="show progress until COMPLETED or FAILED")
    p.add_argument("--json", action="store_true", help="print the final status JSON on stdout, nothing else")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait (default 3600)")
    p.set_defaults(func=upload)

    p = sub.add_parser(
        "status",
        help="progress of a batch",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch status 3f2c...e9 --json",
    )
    p.add_argument("batch_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=status_cmd)

    p = sub.add_parser(
        "files",
        help="per-file results of a batch",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch files 3f2c...e9 --outcome not_linked --json",
    )
    p.add_argument("batch_id")
    p.add_argument(
        "--outcome",
        help="linked, skipped_no_match, skipped_already_exists, failed, ignored, not_linked or pending",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=files_cmd)

    p = sub.add_parser(
        "find",
        help="batches created from an object key",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch find uploads/march.zip",
    )
    p.add_argument("key")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=find_cmd)

    p = sub.add_parser(
        "retry",
        help="run a batch's files again from staging (e.g. after fixing a user's email)",
        formatter_class=fmt,
        description=(
            "Reopen the files of a batch and send them through process_pdf again, counted once.\n\n"
            "By default every file that was not linked is re-run (no match, already linked, failed),\n"
            "and files still pending are re-sent. Linked files are never re-run: their user already\n"
            "points at them. Files refused at unzip (too large, encrypted or damaged entries) were never\n"
            "staged and are left as they are. Staged copies expire (StagingExpirationDays, 7): a file\n"
            "retried later ends failed/missing_object. Safe to run again."
        ),
        epilog="example:\n  pdfbatch retry 3f2c...e9 --failed-only --wait\n\n" + EXIT_CODES,
    )
    p.add_argument("batch_id")
    p.add_argument("--failed-only", action="store_true", help="re-run only files whose outcome is failed")
    p.add_argument("--wait", action="store_true", help="show progress until the batch is COMPLETED again")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait (default 3600)")
    p.add_argument("--json", action="store_true", help="what was reopened and re-sent, as JSON on stdout")
    p.set_defaults(func=retry_cmd)

    p = sub.add_parser(
        "dlq",
        help="list or redrive the work queue's dead letters",
        formatter_class=fmt,
        description=(
            "A message that failed on every delivery ends in the dead-letter queue, its file recorded\n"
            "failed/gave_up so the batch could finish. Without options: list them (they stay queued).\n"
            "--redrive: reopen each such file (un-counted, batch PROCESSING again) and send it back to\n"
            "the work queue; fix the cause first."
        ),
        epilog="example:\n  pdfbatch dlq\n  pdfbatch dlq --redrive --wait\n\n" + EXIT_CODES,
    )
    p.add_argument("--redrive", action="store_true", help="send the messages back to the work queue")
    p.add_argument("--limit", type=int, default=1000, help="at most this many messages (default 1000)")
    p.add_argument("--wait", action="store_true", help="with --redrive: follow the batches to the end")
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait per batch (default 3600)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=dlq_cmd)

    p = sub.add_parser(
        "report",
        help="outcomes, reasons and per-stage p50/p95/p99 of a batch",
        formatter_class=fmt,
        description="Read from the ledger (MySQL), so it works long after the live counters expired.",
        epilog="example:\n  pdfbatch report 3f2c...e9 --json | jq .stagesMs.extract\n\n" + EXIT_CODES,
    )
    p.add_argument("batch_id")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.set_defaults(func=report_cmd)

    p = sub.add_parser(
        "demo",
        help="run the whole thing on the local stack with a sample ZIP",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch demo",
    )
    p.add_argument("--root", help="the pdfbatch checkout (default: found from the current folder)")
    p.add_argument("--out", default="build/demo/sample-batch.zip", help="where to write the sample ZIP")
    p.set_defaults(func=demo)
    return parser


@contextmanager
def _library_logs_to_stderr() -> Iterator[None]:
    """The services' JSON log lines are for Lambda: here they go to stderr (warnings and up), so stdout
    stays the --json document alone. Restored afterwards (main() may run inside another program)."""
    import logging

    from pdfbatch.logs import logger

    handler = logger.registered_handler
    stream = handler.setStream(sys.stderr) if isinstance(handler, logging.StreamHandler) else None
    level = logger.log_level
    logger.setLevel(os.environ.get("PDFBATCH_CLI_LOG_LEVEL") or "WARNING")
    try:
        yield
    finally:
        logger.setLevel(level)
        if stream is not None and isinstance(handler, logging.StreamHandler):
            handler.stream = stream  # no flush: a captured stream may be closed by now


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors become one sentence on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        with _library_logs_to_stderr():
            code = int(args.func(args))
    except CliError as exc:
        print(f"pdfbatch: {exc}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("pdfbatch: interrupted", file=sys.stderr)
        return 130
    if os.environ.get("PDFBATCH_CLI_TIMING"):
        print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
