"""Section 11: latency hidden inside each worker (issue 15). The same batch with AWS-typical latency
injected into the functions' S3 and SQS calls (PDFBATCH_INJECT_LATENCY, adapters/latency.py) and
without, with process_pdf's overlap on and off (PDFBATCH_PROCESS_OVERLAP), as ratios of one run."""

from __future__ import annotations

from collections.abc import Callable

from bench import corpora, pipeline
from bench.report import Row, Target
from bench.stack import BenchStack

# (latency injected, overlap on), interleaved so drift on a shared machine hits both sides of a ratio.
CONFIGS = ((False, True), (True, True), (True, False), (False, False))


def run(
    stack: BenchStack, resumes: int, manuals: int, pages: int, log: Callable[[str], None] = print
) -> list[Row]:
    """Throughput of one batch per configuration (after a warm-up batch, since each change of the
    functions' environment starts new execution environments); the stack is left as deployed."""
    path, users = corpora.real_batch_zip(resumes, manuals, pages)
    n = len(users)
    rate: dict[tuple[bool, bool], pipeline.Run] = {}
    try:
        for inject, overlap in CONFIGS:
            stack.set_function_env(
                "process-pdf",
                {
                    "PDFBATCH_INJECT_LATENCY": "1" if inject else None,
                    "PDFBATCH_PROCESS_OVERLAP": str(overlap).lower(),
                },
            )
            stack.set_function_env("unzip", {"PDFBATCH_INJECT_LATENCY": "1" if inject else None})
            stack.seed_users(users)
            pipeline.run_batch(stack, path, n)  # warm-up: new execution environments start
            stack.seed_users(users)
            rate[inject, overlap] = pipeline.run_batch(stack, path, n)
            log(f"   latency {inject}, overlap {overlap}: {rate[inject, overlap].rate:.1f} PDFs/s")
    finally:
        stack.set_function_env(
            "process-pdf", {"PDFBATCH_INJECT_LATENCY": None, "PDFBATCH_PROCESS_OVERLAP": None}
        )
        stack.set_function_env("unzip", {"PDFBATCH_INJECT_LATENCY": None})
    label = f"{resumes} résumés + {manuals} manuals"
    rows = []
    for overlap in (True, False):
        name = "overlap on" if overlap else "overlap off (PDFBATCH_PROCESS_OVERLAP=false)"
        plain, slow = rate[False, overlap], rate[True, overlap]
        rows.append(
            Row(
                "11",
                f"{label}, {name}: throughput, no injected latency",
                plain.rate,
                "PDFs/s",
                note=f"{plain.seconds:.1f} s",
            )
        )
        rows.append(
            Row(
                "11",
                f"{label}, {name}: throughput, AWS latency injected",
                slow.rate,
                "PDFs/s",
                note=f"{slow.seconds:.1f} s",
            )
        )
        rows.append(
            Row(
                "11",
                f"{name}: throughput with injected AWS latency / without",
                slow.rate / plain.rate,
                "x",
                Target(">=", 0.8) if overlap else None,
                "S3 GET 25, PUT 30, COPY 40, other S3 25, SQS 10 ms per request the functions send; "
                "LocalStack's own SQS poller (receive, delete) is not delayed",
            )
        )
    rows.append(
        Row(
            "11",
            "with injected latency: throughput overlap on / off",
            rate[True, True].rate / rate[True, False].rate,
            "x",
            note="what prefetching the next PDF, copying beside the next read and deleting in the "
            "background buy at concurrency 5",
        )
    )
    return rows
