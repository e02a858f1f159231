"""`pdfbatch trace FILE | --user ID`: one document, or one person, across every batch the key may see."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path
from typing import Any

from pdfbatch.cli.common import (
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    CliError,
    api_client,
    shown,
    stderr_console,
)


def sha256_of(path: Path) -> str:
    """The file's SHA-256 (hex), read in 1 MiB blocks: the file itself never leaves this machine."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def trace_cmd(args: argparse.Namespace) -> int:
    """GET /files?sha256= for a local PDF (hashed here), or GET /users/{id}/files for --user."""
    from pdfbatch.api_client import ApiError

    if (args.file is None) == (args.user is None):
        raise CliError("give a PDF file or --user ID (one of them)", EXIT_USAGE)
    if args.file is not None:
        path = Path(args.file)
        if not path.is_file():
            raise CliError(f"{path} is not a file", EXIT_USAGE)
        with path.open("rb") as fh:
            if not fh.read(1024).lstrip(b"\x00\t\n\r\f ").startswith(b"%PDF-"):
                raise CliError(f"{path} is not a PDF (it does not start with %PDF-)", EXIT_USAGE)
        what = f"{path.name} (sha256 {sha256_of(path)[:12]}…)"
    else:
        what = f"user {args.user}"
    client = api_client()
    try:
        body = (
            client.trace_document(sha256_of(path)) if args.file is not None else client.trace_user(args.user)
        )
    except ApiError as exc:
        if exc.status == 404:
            raise CliError(f"{what}: not in any batch this key may see", EXIT_USAGE) from exc
        raise CliError(str(exc), EXIT_USAGE if exc.status == 400 else EXIT_UNAVAILABLE) from exc
    if args.json:
        print(json.dumps(body, indent=2, sort_keys=True))
        return EXIT_OK
    print_trace(what, body["files"], stderr_console(), by_user=args.user is not None)
    return EXIT_OK


def print_trace(what: str, files: list[dict[str, Any]], console: Any, *, by_user: bool = False) -> None:
    """A traced document's (or user's) entries, newest batch first, each with why in words."""
    from rich.table import Table

    from pdfbatch.cli.batches import why

    table = Table(title=shown(what))
    columns = ["batch created", "batch", "#", "file", *(["relation"] if by_user else []), "outcome", "why"]
    for col in (*columns, "page", "lane", "attempts", "finished", "user", "evidence"):
        table.add_column(col)
    for f in files:
        table.add_row(
            shown(f.get("batchCreatedAt") or ""),
            shown(f["batchId"]),
            shown(f["index"]),
            shown(f["name"]),
            *([shown(f.get("relation", ""))] if by_user else []),
            shown(f["outcome"] or "pending"),
            shown(why(f)),
            shown(f.get("page") or ""),
            shown(f.get("source") or ""),
            shown(f["attempts"]),
            shown(f.get("finishedAt") or ""),
            shown(f.get("userId") or ""),
            "yes" if f.get("evidence") else "",
        )
    console.print(table)
