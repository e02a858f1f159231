"""`pdfbatch`: the operator's command line.

Exit codes scripts can rely on: 0 done (batch COMPLETED), 1 the batch FAILED, 2 bad usage or input,
3 a service is unavailable or an operation failed.

One module per command group: stack.py (stack up/down/status/key), batches.py (upload, status, files,
find: through the REST API), operator.py (retry, dlq, report: on the stores directly) and demo.py;
parser.py builds the argument parser, common.py holds what they share.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pdfbatch.cli.common import EXIT_BATCH_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, api_client
from pdfbatch.cli.parser import build_parser

__all__ = [
    "EXIT_BATCH_FAILED",
    "EXIT_OK",
    "EXIT_UNAVAILABLE",
    "EXIT_USAGE",
    "CliError",
    "api_client",
    "build_parser",
    "main",
]


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
        from pdfbatch.display import printable  # the message may quote an API's answer

        print(f"pdfbatch: {printable(str(exc))}", file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print("pdfbatch: interrupted", file=sys.stderr)
        return 130
    if os.environ.get("PDFBATCH_CLI_TIMING"):
        print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    return code
