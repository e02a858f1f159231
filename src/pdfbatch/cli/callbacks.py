"""`pdfbatch callbacks BATCH [--replay]`: a batch's callback attempts, and a new delivery of its summary.

On MySQL directly (the attempts table) and the stack's callback queue (a replay is a message there, as
a completion is), like the other operator commands: the uploaders' API offers neither.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from pdfbatch.cli.common import EXIT_OK, CliError, shown, stderr_console


def add_callbacks(sub: Any, upload: Any) -> None:
    """`pdfbatch callbacks` (its sub-parser) and `upload --callback-url`, added by parser.py in one line."""
    upload.add_argument(
        "--callback-url",
        metavar="URL",
        help="POST the batch's summary here, signed, when it ends (https; see `pdfbatch callbacks`)",
    )
    p = sub.add_parser(
        "callbacks",
        help="a batch's signed callback deliveries: every attempt, or --replay to deliver again",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Every POST of the batch's summary to its callbackUrl: delivery id, attempt, time, HTTP status\n"
            "or error class, duration. --replay queues a new delivery (a new delivery id, the same\n"
            "summary.json body, read from S3: nothing is parsed again)."
        ),
        epilog="example:\n  pdfbatch callbacks 3f2c...e9\n  pdfbatch callbacks 3f2c...e9 --replay --json",
    )
    p.add_argument("batch_id")
    p.add_argument("--replay", action="store_true", help="queue a new delivery of the batch's summary")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=callbacks_cmd)


def callbacks_cmd(args: argparse.Namespace) -> int:
    """List a batch's callback attempts, or queue a replay."""
    from pdfbatch.cli.operator import _service_errors, ops_deps
    from pdfbatch.services import callback_delivery

    deps, outputs = ops_deps()
    if args.replay:
        url = outputs.get("CallbackQueueUrl")
        if not url:
            raise CliError("this stack has no callback queue (deploy it again with `pdfbatch stack up`)")
        from pdfbatch.adapters.sqs import send_json
        from pdfbatch.bootstrap import boto3_client

        sqs = boto3_client("sqs", deps.settings)
        with _service_errors():
            delivery_id = callback_delivery.replay(deps, args.batch_id, lambda m: send_json(sqs, url, m))
        if args.json:
            print(json.dumps({"batchId": args.batch_id, "deliveryId": delivery_id}))
        else:
            stderr_console().print(f"replay queued: delivery {delivery_id}", markup=False, highlight=False)
        return EXIT_OK
    with _service_errors():
        view = callback_delivery.attempts(deps, args.batch_id)
    if args.json:
        print(json.dumps(view, indent=2, sort_keys=True))
        return EXIT_OK
    _print(view)
    return EXIT_OK


def _print(view: dict[str, Any]) -> None:
    from rich.table import Table

    console = stderr_console()
    target = shown(view["callback"]) if view["callback"] else "none"
    state = "delivered" if view["delivered"] else "not delivered"
    console.print(
        f"batch {view['batchId']}: {view['status']}, callback to {target}: {state}",
        markup=False,
        highlight=False,
    )
    table = Table(title="callback attempts")
    for col in ("delivery", "kind", "attempt", "at", "status", "error", "ms"):
        # fold, never an ellipsis: an error class cut short says nothing
        table.add_column(col, justify="right" if col in ("attempt", "ms") else "left", overflow="fold")
    for a in view["attempts"]:
        table.add_row(
            a["deliveryId"][:12],
            a["kind"],
            str(a["attempt"]),
            a["at"] or "",
            str(a["httpStatus"] or ""),
            shown(a["error"] or ""),
            "" if a["durationMs"] is None else str(a["durationMs"]),
        )
    console.print(table)
