"""`python -m soak` (PYTHONPATH=tests; `make soak [SEED=...] [PDFS=...]`): one chaos soak run.

It leases the LocalStack at PDFBATCH_LOCALSTACK_PORT (default 4566), starting it if needed (and stopping
it afterwards only if it started it and nobody else holds a lease), deploys its own stack, and prints the
faults it injected and the invariants that held. Exit status 0 when every invariant held, 1 otherwise.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tools import localstack

from soak.run import ROOT, Soak, SoakConfig, new_seed


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run the soak, print its summary."""
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=None, help="replay a run (default: a fresh seed)")
    parser.add_argument("--pdfs", type=int, help="PDF entries of the big batch (full: 2000, short: 200)")
    parser.add_argument("--profile", choices=("full", "short"), default="full", help="how many faults")
    parser.add_argument("--timeout", type=float, help="seconds to wait for final batches (full: 1500)")
    parser.add_argument("--stack", default=os.environ.get("PDFBATCH_SOAK_STACK", "pdfbatch-soak"))
    parser.add_argument("--database", default=os.environ.get("PDFBATCH_SOAK_DB", "pdfbatch_soak"))
    parser.add_argument(
        "--redis-db", type=int, default=int(os.environ.get("PDFBATCH_SOAK_REDIS_DB", "12")), help="default 12"
    )
    parser.add_argument("--visibility-timeout", type=int, help="work queue's, seconds (full: 60, short: 30)")
    parser.add_argument("--out", type=Path, help="JSON report (default build/soak/SEED/report.json)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else new_seed()
    options = {
        "stack": args.stack,
        "database": args.database,
        "redis_db": args.redis_db,
        "out": args.out,
    }
    given = {"pdfs": args.pdfs, "timeout": args.timeout, "visibility_timeout": args.visibility_timeout}
    options |= {k: v for k, v in given.items() if v is not None}
    config = SoakConfig.short(seed, **options) if args.profile == "short" else SoakConfig(seed, **options)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    handle = localstack.start(ROOT, lease=True)
    try:
        result = Soak(config, handle.endpoint, say).run()
    finally:
        localstack.release(ROOT)
    print("\n".join(result.summary()), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
