"""The argument parser: one sub-command per task, each with its help text and an example."""

from __future__ import annotations

import argparse
from typing import Any

from pdfbatch.cli.batches import files_cmd, find_cmd, list_cmd, status_cmd, upload
from pdfbatch.cli.callbacks import add_callbacks
from pdfbatch.cli.common import EXIT_CODES
from pdfbatch.cli.demo import demo
from pdfbatch.cli.keys import add_keys
from pdfbatch.cli.operator import add_check, dlq_cmd, gc_cmd, report_cmd, retry_cmd
from pdfbatch.cli.stack import stack_down, stack_key, stack_status, stack_up
from pdfbatch.cli.trace import trace_cmd


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

    p = upload_parser = sub.add_parser(
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

    _add_lookups(sub, fmt)

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
        epilog="example:\n  pdfbatch report 3f2c...e9 --json | jq .stagesMs.extract\n"
        "  pdfbatch report 3f2c...e9 --download reports/\n\n" + EXIT_CODES,
    )
    p.add_argument("batch_id")
    p.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    p.add_argument(
        "--download",
        nargs="?",
        const=".",
        metavar="DIR",
        help="save the batch's report file (results.csv, summary.json) in DIR/BATCH/ (default: .)",
    )
    p.set_defaults(func=report_cmd)
    add_callbacks(sub, upload_parser)
    add_check(sub)
    add_keys(sub)

    p = sub.add_parser(
        "gc",
        help="find (and with --delete remove) final PDFs nothing points at",
        formatter_class=fmt,
        description=(
            "process_pdf never deletes a final object: the same PDF of the same user has one key in every\n"
            "batch, so a copy whose link was lost may be the one another batch is linking. This sweep lists\n"
            "the objects under pdfs/ that no linked ledger entry names and whose user does not point at\n"
            "them, older than --older-than (copies being linked are never that old). Dry run by default."
        ),
        epilog="example:\n  pdfbatch gc\n  pdfbatch gc --older-than 2d --delete --json\n\n" + EXIT_CODES,
    )
    p.add_argument("--delete", action="store_true", help="delete the orphans found (default: only list them)")
    p.add_argument(
        "--older-than",
        default="1d",
        help="grace: only objects older than this (seconds, or 90m, 6h, 2d; at least 15m; default 1d)",
    )
    p.add_argument("--json", action="store_true", help="what was found (and deleted) as JSON on stdout")
    p.set_defaults(func=gc_cmd)

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


def _add_lookups(sub: Any, fmt: type[argparse.HelpFormatter]) -> None:
    """`pdfbatch find|list|trace`: which batches, and what became of one document or one person."""
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
        "list",
        help="your recent batches, newest first, with their counts",
        formatter_class=fmt,
        description="A tenant key lists its tenant's batches; the admin key every batch (--tenant: one's).",
        epilog="example:\n  pdfbatch list --status FAILED --since 2026-11-01\n"
        "  pdfbatch list --json --limit 200",
    )
    p.add_argument("--status", choices=("PENDING", "PROCESSING", "COMPLETED", "FAILED"))
    p.add_argument("--since", help="created on or after this date (YYYY-MM-DD, or an ISO date-time; UTC)")
    p.add_argument("--until", help="created up to the end of this date (or before this ISO date-time)")
    p.add_argument("--tenant", help="admin key: only this tenant's batches")
    p.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=list_cmd)

    p = sub.add_parser(
        "trace",
        help="what became of one PDF, or of one person's files, in every batch",
        formatter_class=fmt,
        description=(
            "FILE: every batch entry that held exactly this PDF (it is hashed here; nothing is uploaded).\n"
            "--user: the PDF linked to that user (an id, or an email looked up in the users table) and\n"
            "every file that named them without linking them (ambiguous, already linked, ...), with why.\n"
            "A tenant key sees only its tenant's batches."
        ),
        epilog="example:\n  pdfbatch trace resume.pdf\n  pdfbatch trace --user jane@example.com --json",
    )
    p.add_argument("file", nargs="?", help="the PDF")
    p.add_argument("--user", help="a user id, or an email address")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=trace_cmd)
