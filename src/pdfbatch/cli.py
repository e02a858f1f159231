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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pdfbatch.config import DEFAULT_ENDPOINT_URL, DEFAULT_MYSQL_URL, DEFAULT_REDIS_URL, parse_mysql_url

EXIT_OK, EXIT_BATCH_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
STACK_NAME = os.environ.get("PDFBATCH_STACK_NAME", "pdfbatch")

USERS_DDL = (
    "CREATE TABLE IF NOT EXISTS {table} (id BIGINT AUTO_INCREMENT PRIMARY KEY, "
    "email VARCHAR(320) NOT NULL UNIQUE, pdf_url VARCHAR(1024) NULL) "
    "DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci"
)


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

    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.config import Settings

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
        users = Settings.from_env().users
        table = ".".join(f"`{part}`" for part in users.table.split("."))
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{p.database}` CHARACTER SET utf8mb4")
            cur.execute(f"USE `{p.database}`")
            if users == type(users)():  # the development schema only for the default names
                cur.execute(USERS_DDL.format(table=table))
        MysqlClient(p).ensure_schema()
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
# demo
# ------------------------------------------------------------------------------------------------


def seed_users(emails: Sequence[str], linked: Sequence[str]) -> None:
    """Insert demo users (their pdf_url reset, so a re-run shows the same outcomes)."""
    import pymysql

    p = parse_mysql_url(mysql_url())
    conn = pymysql.connect(
        host=p.host,
        port=p.port,
        user=p.user,
        password=p.password,
        database=p.database,
        autocommit=True,
        charset="utf8mb4",
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO users (email, pdf_url) VALUES (%s, NULL) ON DUPLICATE KEY UPDATE pdf_url = NULL",
            [(e,) for e in emails],
        )
        cur.executemany(
            "INSERT INTO users (email, pdf_url) VALUES (%s, %s) "
            "ON DUPLICATE KEY UPDATE pdf_url = VALUES(pdf_url)",
            [(e, "s3://legacy-archive/cv/on-file.pdf") for e in linked],
        )
    conn.close()


def demo(args: argparse.Namespace) -> int:
    """Bring the stack up, seed users, build a sample ZIP, upload it and show what happened."""
    from pdfbatch.ops import samples

    console = _console()
    stack_up(argparse.Namespace(root=args.root, json=False))
    corpus = samples.demo_corpus()
    seed_users(corpus.users, corpus.linked_users)
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
        "demo",
        help="run the whole thing on the local stack with a sample ZIP",
        formatter_class=fmt,
        epilog="example:\n  pdfbatch demo",
    )
    p.add_argument("--root", help="the pdfbatch checkout (default: found from the current folder)")
    p.add_argument("--out", default="build/demo/sample-batch.zip", help="where to write the sample ZIP")
    p.set_defaults(func=demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; errors become one sentence on stderr and an exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
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
