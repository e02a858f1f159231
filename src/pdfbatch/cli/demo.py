"""`pdfbatch demo`: the whole pipeline once, on the local stack, with a generated sample ZIP."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

from pdfbatch.cli.batches import run_upload
from pdfbatch.cli.common import EXIT_USAGE, CliError, mysql_url, stderr_console
from pdfbatch.cli.stack import stack_up


def demo(args: argparse.Namespace) -> int:
    """Bring the stack up, seed users, build a sample ZIP, upload it and show what happened."""
    from pdfbatch.ops import devdb

    demo_zip = _demo_corpus_tool()

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


def _demo_corpus_tool() -> ModuleType:
    """tools/demo_zip: the demo's corpus is drawn by dev tooling (fpdf2), which is not in the wheel, so
    the demo runs from a checkout (`make demo` puts it on sys.path)."""
    try:
        from tools import demo_zip
    except ImportError as exc:
        raise CliError("pdfbatch demo runs from a checkout: run `make demo` there", EXIT_USAGE) from exc
    return demo_zip
