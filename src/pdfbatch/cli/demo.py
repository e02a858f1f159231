"""`pdfbatch demo`: the whole pipeline once, on the local stack, with a generated sample ZIP."""

from __future__ import annotations

import argparse
from pathlib import Path

from pdfbatch.cli.batches import run_upload
from pdfbatch.cli.common import dev_tooling, mysql_url, stderr_console
from pdfbatch.cli.stack import stack_up


def demo(args: argparse.Namespace) -> int:
    """Bring the stack up, seed users, build a sample ZIP, upload it and show what happened."""
    # The demo's corpus is drawn by dev tooling (fpdf2), and its users are seeded by it: from a checkout.
    dev_tooling("demo", "run `make demo` there")
    from tools import demo_zip, devdb

    console = stderr_console()
    stack_up(argparse.Namespace(root=args.root, json=False))
    corpus = demo_zip.demo_corpus()
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
