"""`pdfbatch upload|status|files|find|list`: batches through the REST API, as an uploader sees them."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pdfbatch.cli.common import (
    EXIT_BATCH_FAILED,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    api_client,
    shown,
    stderr_console,
)


def upload(args: argparse.Namespace) -> int:
    """POST /batches, upload through the presigned POST, optionally wait with a progress bar."""
    path = Path(args.file)
    if not path.is_file():
        raise CliError(f"{path} is not a file", EXIT_USAGE)
    callback_url = getattr(args, "callback_url", None)
    return run_upload(
        path, wait=args.wait, as_json=args.json, timeout=args.timeout, callback_url=callback_url
    )


def run_upload(
    path: Path, *, wait: bool, as_json: bool, timeout: float = 3600.0, callback_url: str | None = None
) -> int:
    """Upload one ZIP and (with ``wait``) follow it to the end; returns the exit code."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

    from pdfbatch.api_client import ApiError, presigned_post

    client = api_client()
    console = stderr_console()
    try:
        batch = client.create_batch(callback_url)
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
    console.print(f"batch [bold]{shown(batch_id)}[/bold] uploaded")
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

    from pdfbatch.api_client import ApiError

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
                description=f"{shown(body['status']).lower():<10}",
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
        f"\nbatch {shown(status['batchId'])}: [bold {colour}]{shown(status['status'])}[/bold {colour}]"
        + (f" ({shown(describe(status.get('reason'), batch=True))})" if status.get("reason") else "")
    )
    table = Table(title="outcomes")
    table.add_column("outcome")
    table.add_column("files", justify="right")
    for outcome in ("linked", "skipped_no_match", "skipped_already_exists", "failed"):
        table.add_row(outcome, str(status[outcome]))
    table.add_row("[dim]ignored (not PDFs)[/dim]", f"[dim]{status.get('ignored', 0)}[/dim]")
    table.add_row("[bold]total PDFs[/bold]", f"[bold]{status.get('totalFiles') or 0}[/bold]")
    console.print(table)
    ocr_lane(status, console)
    later_uploads(status, console)
    if status["status"] != "COMPLETED" or status["processed"] == status["linked"]:
        return
    rows = [f for f in client.files(status["batchId"], outcome="not_linked")]
    not_linked = Table(title="not linked")
    not_linked.add_column("file")
    not_linked.add_column("outcome")
    not_linked.add_column("why")
    for f in rows:
        why_text = f"{shown(why(f))} [dim]({shown(f['reason'])})[/dim]"
        not_linked.add_row(shown(f["name"]), shown(f["outcome"]), why_text)
    console.print(not_linked)


def ocr_lane(status: dict[str, Any], console: Any) -> None:
    """The OCR lane's part of a batch, when it has one: scans waiting for it and read by it."""
    ocr = (status.get("lanes") or {}).get("ocr") or {}
    if ocr.get("waiting") or ocr.get("done"):
        console.print(
            f"scans read by OCR: {shown(ocr.get('done', 0))} done, {shown(ocr.get('waiting', 0))} waiting"
        )


def later_uploads(status: dict[str, Any], console: Any) -> None:
    """Say where later uploads through this batch's link went (each is a batch of its own)."""
    for later in status.get("laterUploads") or []:
        console.print(
            f"[yellow]this batch's upload link was used again:[/yellow] that upload is batch "
            f"[bold]{shown(later)}[/bold] (pdfbatch status {shown(later)})"
        )


def status_cmd(args: argparse.Namespace) -> int:
    """Show one batch's progress."""
    from pdfbatch.api_client import ApiError

    client = api_client()
    try:
        body, _ = client.status(args.batch_id)
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 404 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(body, indent=2, sort_keys=True))
    elif body["status"] in ("COMPLETED", "FAILED"):
        print_summary(client, body, stderr_console())
    else:
        total = body.get("totalFiles") or "?"
        counts = f"{shown(body['processed'])}/{shown(total)} files ({shown(body['percent'])}%)"
        console = stderr_console()
        console.print(f"{shown(body['status'])}: {counts}")
        ocr_lane(body, console)
        later_uploads(body, console)
    return EXIT_BATCH_FAILED if body["status"] == "FAILED" else EXIT_OK


def files_cmd(args: argparse.Namespace) -> int:
    """List per-file results."""
    from rich.table import Table

    from pdfbatch.api_client import ApiError

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
        table.add_row(
            shown(f["index"]),
            shown(f["name"]),
            shown(f["outcome"] or "pending"),
            shown(why(f)),
        )
    stderr_console().print(table)
    return EXIT_OK


def why(item: dict[str, Any]) -> str:
    """A file's reason as a sentence; an ambiguous one says how many users it named (never who)."""
    from pdfbatch.model import describe

    named = item.get("usersNamed")  # absent from an API older than the field
    return describe(item.get("reason")) + (f" ({named} users named)" if named else "")


def find_cmd(args: argparse.Namespace) -> int:
    """Which batches came from an object key (for ZIPs dropped with `aws s3 cp`)."""
    from pdfbatch.api_client import ApiError
    from pdfbatch.display import printable

    try:
        batches = api_client().find(args.key)
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(batches, indent=2))
    else:
        for b in batches:
            print(printable(f"{b['batchId']}  {b['status']:<10}  {b['createdAt']}  {b['source']}"))
    return EXIT_OK


def list_cmd(args: argparse.Namespace) -> int:
    """The caller's recent batches, newest first (GET /batches without a key)."""
    from rich.table import Table

    from pdfbatch.api_client import ApiError

    filters = {"status": args.status, "since": args.since, "until": args.until, "tenant": args.tenant}
    try:
        batches = list(api_client().recent(limit=args.limit, **filters))
    except ApiError as exc:
        raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(batches, indent=2))
        return EXIT_OK
    table = Table()
    for col in ("batch", "status", "created", "upload", "files", "linked", "not linked", "failed"):
        table.add_column(col)
    for b in batches:
        counts = b.get("counts") or {}
        not_linked = (counts.get("skipped_no_match") or 0) + (counts.get("skipped_already_exists") or 0)
        table.add_row(
            shown(b["batchId"]),
            shown(b["status"]) + (f" ({shown(b['reasonText'])})" if b.get("reasonText") else ""),
            shown(b["createdAt"]),
            shown(b["upload"]),
            shown(b["totalFiles"] if b["totalFiles"] is not None else "?"),
            shown(counts.get("linked", "?")),
            shown(not_linked if counts else "?"),
            shown(counts.get("failed", "?")),
        )
    stderr_console().print(table)
    return EXIT_OK
