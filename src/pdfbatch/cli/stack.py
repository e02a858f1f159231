"""`pdfbatch stack up|down|status|key`: the local stack, and what the deployed functions are given."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from pdfbatch.cli import common  # STACK_NAME read through it at call time: one place to set it
from pdfbatch.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    check_mysql,
    check_redis,
    dev_tooling,
    endpoint_url,
    local_credentials,
    mysql_url,
    redis_url,
    region,
    stderr_console,
)


def stack_up(args: argparse.Namespace) -> int:
    """Start LocalStack if needed, prepare MySQL, deploy or update the stack, print the endpoints."""
    dev_tooling("stack up")
    from tools import localstack
    from tools.deploy import DeployError, deploy

    console = stderr_console()
    local_credentials()
    check_mysql(create=True)
    check_redis()
    check_users_table(console)
    endpoint = endpoint_url()
    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    if endpoint:
        try:
            localstack.find_python313()
            localstack.ensure_environments(root, endpoint)
            localstack.start(root, endpoint)
        except localstack.LocalStackError as exc:
            raise CliError(str(exc)) from exc
    try:
        outputs = deploy(
            deploy_params(),
            endpoint_url=endpoint,
            stack_name=common.STACK_NAME,
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
        console.print(f"[bold green]pdfbatch is up[/bold green] (stack {common.STACK_NAME})")
        console.print(f"  API      {api}")
        console.print(f"  page     {api}  (upload in a browser; its API key: `pdfbatch stack key`)")
        console.print(f"  bucket   s3://{outputs.get('BucketName')}/uploads/")
        console.print(f"  MySQL    {_redact(mysql_url())}")
        console.print(f"  Redis    {redis_url()}")
    return EXIT_OK


def check_users_table(console: Any) -> None:
    """Fail in one sentence (exit 2) when the configured users table cannot work; print its warnings."""
    from tools.users_check import check_users_table as check

    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.config import Settings
    from pdfbatch.errors import ConfigError, DependencyUnavailable

    try:
        settings = Settings.from_env({**os.environ, "PDFBATCH_MYSQL_URL": mysql_url()})
    except ConfigError as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    # The bucket's name as the template makes it ({stack}-{account}-{region}), to size a PDF URL.
    bucket = deploy_params().bucket_name or f"{common.STACK_NAME}-{'0' * 12}-{region()}"
    client = MysqlClient.from_url(settings.mysql_url)
    try:
        found = check(client, settings, bucket)
    except DependencyUnavailable as exc:
        raise CliError(f"MySQL failed while checking the users table: {exc}") from exc
    finally:
        client.close()
    if found.error:
        raise CliError(f"the users table cannot be used as configured: {found.error}.", EXIT_USAGE)
    for warning in found.warnings:
        console.print(f"[yellow]warning:[/yellow] {warning}")
    for note in found.notes:
        console.print(f"[dim]{note}[/dim]")


def deploy_params() -> Any:
    """What the functions get: the operator's URLs, or PDFBATCH_FUNCTION_* when functions see other hosts."""
    from tools.deploy import DeployParams

    overrides: dict[str, Any] = {}
    # With docker compose the functions reach MySQL/Redis by service name, the CLI through localhost.
    if os.environ.get("PDFBATCH_FUNCTION_MYSQL_URL"):
        overrides["mysql_url"] = os.environ["PDFBATCH_FUNCTION_MYSQL_URL"]
    if os.environ.get("PDFBATCH_FUNCTION_REDIS_URL"):
        overrides["redis_url"] = os.environ["PDFBATCH_FUNCTION_REDIS_URL"]
    return DeployParams.from_env(**overrides)


def stack_down(args: argparse.Namespace) -> int:
    """Stop what `stack up` started (LocalStack and its function processes)."""
    dev_tooling("stack down")
    from tools import localstack

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    # Only the stack on this port (PDFBATCH_LOCALSTACK_PORT / AWS_ENDPOINT_URL): another port's is not ours.
    stopped = localstack.stop(root, endpoint_url())
    stderr_console().print("LocalStack stopped." if stopped else "LocalStack was not running.")
    return EXIT_OK


def stack_status(args: argparse.Namespace) -> int:
    """Is the local stack running?"""
    dev_tooling("stack status")
    from tools import localstack

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    st = localstack.status(root, endpoint_url())
    print(json.dumps(st.__dict__, default=str) if args.json else st)
    return EXIT_OK


def stack_key(args: argparse.Namespace) -> int:
    """Print the REST API's key: the one `stack up` stored for this stack, else PDFBATCH_API_KEY."""
    dev_tooling("stack key")
    from tools import localstack

    from pdfbatch.api_client import read_api_key

    root = localstack.find_root(Path.cwd()) if not args.root else Path(args.root)
    key = read_api_key(root, common.STACK_NAME, endpoint_url()) or os.environ.get("PDFBATCH_API_KEY", "")
    if not key:
        raise CliError(
            f"no API key for stack {common.STACK_NAME}: run `pdfbatch stack up` or set PDFBATCH_API_KEY"
        )
    print(json.dumps({"stackName": common.STACK_NAME, "apiKey": key}) if args.json else key)
    return EXIT_OK


def _redact(url: str) -> str:
    from urllib.parse import urlparse

    p = urlparse(url)
    if p.password:
        return url.replace(f":{p.password}@", ":***@")
    return url
