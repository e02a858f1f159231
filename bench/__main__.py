"""`python -m bench [--quick] [--sections 1,2,...]`: run the benchmark, print the table, write it."""

from __future__ import annotations

import argparse
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench import cpu, extraction, labelled, matching, report
from bench.report import Row, Target
from bench.sizes import QUICK, RESULTS, Sizes
from pdfbatch.services.report import percentile


@dataclass
class Bench:
    """Accumulates rows and notes while sections run."""

    sizes: Sizes
    log: Callable[[str], None]
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def section(self, name: str, fn: Callable[[], None]) -> None:
        """Run one section; a failure is reported in the table instead of ending the run."""
        self.log(f"== {name}")
        t = time.monotonic()
        try:
            fn()
        except Exception as exc:
            self.failures.append(f"{name}: {type(exc).__name__}: {exc}")
            self.log(traceback.format_exc())
        self.log(f"   {name} took {time.monotonic() - t:.0f} s")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of `make bench`."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny corpora: checks the bench runs, not speed")
    parser.add_argument(
        "--sections", default="1,2,3,4,5,6,7,8,9,10,11,12", help="comma-separated section numbers"
    )
    parser.add_argument("--out", type=Path, default=None, help="where to write the table (markdown)")
    args = parser.parse_args(argv)
    sections = {s.strip() for s in args.sections.split(",") if s.strip()}
    sizes = QUICK if args.quick else Sizes()
    from bench.corpora import OUT as SCRATCH

    out = args.out or (SCRATCH / "quick.md" if args.quick else RESULTS / "latest.md")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    started = time.monotonic()
    bench = Bench(sizes, log)
    if "1" in sections:
        bench.section(
            "1 extraction",
            lambda: bench.rows.extend(
                extraction.run(sizes.extract_resumes, sizes.extract_manuals, sizes.manual_pages)
            ),
        )
        bench.section("1 matching", lambda: bench.rows.extend(matching.run(sizes.extract_resumes)))
        bench.section("1 labelled corpus", lambda: bench.rows.extend(labelled.run(sizes.labelled_rounds)))
    if "12" in sections:
        from bench import trace

        bench.section("12 trace", lambda: bench.rows.extend(trace.run(*sizes.trace, log=log)))
    if "8" in sections:
        from bench import coldstart

        def cold_start() -> None:
            bench.rows.extend(coldstart.run(log, rounds=3 if args.quick else 9))
            bench.notes.extend(coldstart.NOTES)

        bench.section("8 cold start", cold_start)
    if sections & {"2", "3", "4", "5", "6", "7", "10", "11"}:
        from bench import stack as st

        with st.Lease() as lease:
            log(f"LocalStack at {lease.endpoint}; deploying {st.STACK} with `pdfbatch stack up`")
            st.reset_state()
            stack = st.up(lease.endpoint, log)
            _stack_sections(bench, stack, sections)
    if "9" in sections:
        from bench import ocr

        slow = not args.quick  # RapidOCR takes minutes even on a few scans
        bench.section("9 ocr", lambda: bench.rows.extend(ocr.run(sizes.ocr_scans, log=log, slow=slow)[0]))
    report.publish(
        bench.rows,
        out,
        title="pdfbatch benchmark"
        + (" (--quick: tiny corpora, figures are not meaningful)" if args.quick else ""),
        notes=[
            *bench.notes,
            *(f"section failed: {f}" for f in bench.failures),
            *closing_notes(bench.rows),
        ],
        started=started,
    )
    log(f"written to {out}")
    return 1 if bench.failures else 0


def closing_notes(rows: Sequence[Row]) -> list[str]:
    """Why the misses happen and what would close them (figures from this run where they exist)."""
    by = {r.figure: r.value for r in rows}

    def v(figure: str, fmt: str = ".1f") -> str:
        value = by.get(figure)
        return "n/a" if value is None else format(value, fmt)

    notes = [
        "Corpus: résumés (one or two full pages) and 100-page manuals are drawn by fpdf2 with embedded "
        f"{corpora_fonts()} and bold headings, as word processors write them; pypdf reads them in "
        f"{v('extract résumé: pypdf whole document')} ms and "
        f"{v('extract manual, email p.1: pypdf whole document', '.0f')} ms (the issue measured 11.7 and "
        "1061 ms on its corpus). Core-font PDFs (tools.samples, used for the scale runs) parse in ~1 ms and "
        "would make the extraction ratios meaningless.",
        "Extraction: the project's extractor is pypdf's structure and encryption check (the page tree's "
        "/Count, no page walk), then pypdfium2 in pdfbatch.pdf's reader process (isolation from hostile "
        "files): pdfium checks every page of the tree in C (~0.7 ms for 100 pages) and reads page by page. "
        "Each extractor runs over a whole class as a block, blocks alternating for three rounds (timing "
        "them alternately per document penalised the few-ms one: on this VM a short task that follows "
        "0.5 s of other work runs several times slower). Where the project's time goes per document: "
        "pypdf's check ~1.5 ms (its xref verification is half; it stays because pdfium opens some damaged "
        "files without noticing), pdfium's first page ~2.3-3 ms, the hand-off to the reader ~0.25 ms. 4x on "
        "résumés is out of reach with pdfium's text layer: loading the page and its text page alone is "
        "~2.3 ms against pypdf's ~8-9 ms for the whole document.",
        "End to end: the machine's two cores are the limit: LocalStack (S3, SQS, Lambda service, logs) "
        "takes ~40-45% of the CPU of a batch and the function processes ~50% (see the CPU note above). "
        "Every S3 call goes through LocalStack's Python gateway: GET and CopyObject cost ~4-6 ms each "
        "uncontended (concurrency 1 row) and ~15 ms each when five environments compete for two cores, "
        "which is most of the per-file work outside extraction. Per-file work under 15 ms with a download "
        "and a server-side copy is not reachable through LocalStack here (nor as wall time on AWS, where "
        "GET and CopyObject take tens of ms); what it bounds well is CPU: the functions spend ~15 ms of "
        "CPU per PDF. Concurrency 5 on two cores buys ~1.3-1.5x over 1, not 5x: the cap is real (peak "
        "overlap 5, then 1) but the CPU is shared. Repeated runs on this shared machine (other test "
        "suites running) vary by ~+-15%: eight runs of this section gave 40-53 PDFs/s.",
        "Scale: no per-file step grows with the batch (files 9,000-10,000 go as fast as 4,000-5,000); "
        "what differs is the phases. unzip records a ledger row per entry before the first message (so "
        "no file can be lost or finish a half-unpacked batch), and then competes for the two cores with "
        "process_pdf while it stages: in a 10,000-PDF run files were processed at ~40/s while unzip "
        "staged (~70 s) and ~65/s after. On AWS unzip has its own CPU.",
        "Tried while tuning, not kept (within that noise): SQS BatchSize 10 (fewer invocations and SQS "
        "calls, 40-53 PDFs/s against 43-48 with 5) and MaximumBatchingWindow 0 (more, emptier receives: "
        "LocalStack CPU went up). LocalStack's SQS poller backs off on an empty queue (up to 10 s), so the "
        "first PDF of a batch uploaded to an idle stack started 0.2-7.2 s after the upload; the executor "
        "plugin now makes an idle mapping long-poll for one message (sqs_concurrency.py), as AWS's pollers "
        "do: the idle-start row.",
        "Status: a GET /batches/{id} goes API Gateway -> Lambda invoke -> function -> Redis inside "
        "LocalStack; the function itself answers in a few ms (its REPORT durations), the rest is "
        "LocalStack's gateway and invoke path on saturated cores. 20 simultaneous first polls start 20 "
        "execution environments at once (the cold-start row); AWS serves warm polls in ~10-30 ms. "
        "Closing it locally needs cores the batch does not use; on AWS, warm environments (provisioned "
        "concurrency for status) remove the cold-start tail. With 5 pollers (issue 15's row) the function "
        "answers in 4 ms at p50 and ~35 ms at p99 while the round trip is ~0.4 s at p50: the time is in "
        "LocalStack's one Python process (gateway, API Gateway emulation, Lambda invoke and the "
        "environment's response call back into it), which serves the batch's S3 and SQS calls at the same "
        "time. Running the batch's environments at niceness 10 (the local stack's default) cut p99 by "
        "~0.75x at the same batch throughput; the rest is LocalStack's own share of the cores. On AWS, "
        "where API Gateway and Lambda add ~10-30 ms to a warm invoke, p99 would be the function's ~35 ms "
        "plus that: under the 100 ms target.",
        "Memory: an unzip environment holds ~95-100 MB before the ZIP matters: the runtime with boto3 "
        "(~34 MB), the handler's imports (~10 MB, PDF parsers no longer loaded there), S3 and SQS clients "
        "(~20 MB), pymysql and redis (~15-25 MB). Growth from 10 MB to 1 GB was 9-16 MB across runs, "
        "whatever the staging buffer (8 or 32 MiB) and malloc arenas (MALLOC_ARENA_MAX=2 tried): "
        "per-entry bookkeeping (plan, ledger rows, futures) for 1,000 entries and allocator slack. "
        "Under 100 MB at 1 GB needs a lighter client stack (e.g. one botocore session shared by both "
        "clients, no powertools batch module in unzip).",
        "Cost: durations are this machine's (2 cores, LocalStack alongside); on AWS a 1024 MB function "
        "gets ~0.6 vCPU, so billed GB-s per PDF would be of the same order. Status polls, S3, SQS and "
        "CloudWatch Logs are not included.",
    ]
    # A run prints the notes of the sections it measured (each note starts with its subject).
    explains = {
        "Corpus": {"1", "2"},
        "Extraction": {"1"},
        "End to end": {"2"},
        "Scale": {"3"},
        "Tried while tuning": {"2"},
        "Status": {"5"},
        "Memory": {"4"},
        "Cost": {"6"},
    }
    measured = {r.section for r in rows}
    subject = {n: next((v for k, v in explains.items() if n.startswith(k)), measured) for n in notes}
    return [n for n in notes if measured & subject[n]]


def corpora_fonts() -> str:
    """Which fonts the realistic documents embed."""
    from bench import corpora

    return corpora.fonts_note().replace("embedded ", "")


def _stack_sections(bench: Bench, stack: object, sections: set[str]) -> None:
    from bench import corpora, memory, pipeline
    from bench.cost import PRICE_PER_GB_SECOND, PRICE_PER_REQUEST, REGION, per_thousand
    from bench.stack import BenchStack

    assert isinstance(stack, BenchStack)
    sizes, rows, notes = bench.sizes, bench.rows, bench.notes
    state: dict[str, object] = {}

    def end_to_end() -> None:
        path, users = corpora.real_batch_zip(sizes.resumes, sizes.manuals, sizes.manual_pages)
        n = len(users)
        label = f"{sizes.resumes} résumés + {sizes.manuals} manuals"
        # A warm-up batch: the first invocations start execution environments (cold starts).
        stack.seed_users(users)
        pipeline.run_batch(stack, path, n)
        stack.seed_users(users)
        before = cpu.snapshot()
        run = pipeline.run_batch(stack, path, n)
        used = cpu.delta(before, cpu.snapshot())
        state["run"] = run
        rows.append(Row("2", f"{label}: upload -> COMPLETED", run.seconds, "s", Target("<=", 320 / 50, " s")))
        rows.append(Row("2", f"{label}: throughput (concurrency 5)", run.rate, "PDFs/s", Target(">=", 50)))
        marks = pipeline.phases(stack, run)
        rows.append(
            Row(
                "2",
                "upload start -> first PDF done",
                marks.get("first PDF done"),
                "s",
                note="ZIP unpacked (every PDF staged and queued) at "
                f"{marks.get('unpacked', float('nan')):.2f} s",
            )
        )
        # The idle start: a batch uploaded to a stack whose work queue has been empty for a while.
        small, small_users = corpora.real_batch_zip(5, 0, 1)
        stack.seed_users(small_users)
        idle = sizes.idle_seconds
        starts = [pipeline.idle_start(stack, small, len(small_users), idle=idle) for _ in range(3)]
        rows.append(
            Row(
                "2",
                f"after {sizes.idle_seconds:.0f} s idle: upload -> first file started, worst of 3",
                max(upload for upload, _ in starts),
                "s",
                Target("<=", 0.5, " s"),
                "rounds: "
                + ", ".join(f"{upload:.2f} s (queue pick-up {queue:.2f} s)" for upload, queue in starts)
                + "; queue pick-up: the ZIP unpacked -> the first process_pdf attempt",
            )
        )
        stats = pipeline.stage_stats(pipeline.file_timings(stack, run))
        for stage in (*pipeline.STAGES, "total"):
            if stage in stats:
                p50, p95, p99, k = stats[stage]
                rows.append(
                    Row(
                        "2",
                        f"stage {stage}: p50 / p95 / p99",
                        p50,
                        "ms",
                        note=f"p95 {p95:.1f}, p99 {p99:.1f} ms; {k} files",
                    )
                )
        if "outside extraction" in stats:
            p50, p95, p99, _ = stats["outside extraction"]
            rows.append(
                Row(
                    "2",
                    "per-file work outside text extraction, median",
                    p50,
                    "ms",
                    Target("<=", 15, " ms"),
                    "total per file minus pypdfium2 text extraction (validation, I/O, SQL, Redis count)",
                )
            )
        process = pipeline.reports_for(stack, "process-pdf", run)
        rows.append(
            Row(
                "2",
                "process_pdf environments / peak overlapping invocations",
                pipeline.peak_concurrency(process),
                "",
                Target("<=", 5),
                f"{len({r.stream for r in process})} environments; {len(process)} invocations",
            )
        )
        state["reports"] = {
            "unzip": pipeline.reports_for(stack, "unzip", run),
            "process_pdf": process,
        }
        total_cpu = sum(used.values())
        share = ", ".join(
            f"{k} {v:.1f} s ({100 * v / total_cpu:.0f}%)"
            for k, v in sorted(used.items(), key=lambda kv: -kv[1])
        )
        notes.append(
            f"CPU during the {n}-PDF batch ({run.seconds:.1f} s wall on 2 cores, "
            f"{total_cpu:.1f} CPU-s): {share}."
        )

        stack.seed_users(users)
        stack.set_process_concurrency(1)
        try:
            one = pipeline.run_batch(stack, path, n)
        finally:
            stack.set_process_concurrency(5)
        process1 = pipeline.reports_for(stack, "process-pdf", one)
        stats1 = pipeline.stage_stats(pipeline.file_timings(stack, one))
        if "outside extraction" in stats1:
            parts = ", ".join(f"{s} {stats1[s][0]:.1f}" for s in pipeline.STAGES if s in stats1)
            rows.append(
                Row(
                    "2",
                    "per-file work outside text extraction, median, process concurrency 1",
                    stats1["outside extraction"][0],
                    "ms",
                    note=f"no contention between environments; stage medians (ms): {parts}",
                )
            )
        rows.append(
            Row(
                "2",
                f"{label}: throughput (process concurrency 1)",
                one.rate,
                "PDFs/s",
                note=f"{one.seconds:.1f} s; peak overlapping invocations "
                f"{pipeline.peak_concurrency(process1)}; concurrency 5 is {run.rate / one.rate:.2f}x this",
            )
        )

    def responsiveness() -> None:
        path, users = corpora.real_batch_zip(sizes.resumes, sizes.manuals, sizes.manual_pages)
        stack.seed_users(users)
        # The first poll of each concurrent poller starts an execution environment of the status
        # function (a cold start): measured apart, so the figure is the API's steady state.
        cold = pipeline.concurrent_polls(stack, sizes.pollers)
        run = pipeline.run_batch(stack, path, len(users), pollers=sizes.pollers)
        lat = run.status_ms
        status = pipeline.reports_for(stack, "status", run)
        handler = [r.duration_ms for r in status]
        rows.append(
            Row(
                "5",
                f"GET /batches/{{id}} p99, {sizes.pollers} pollers during a batch",
                percentile(lat, 99),
                "ms",
                Target("<=", 50, " ms"),
                f"{len(lat)} polls, p50 {percentile(lat, 50):.1f} ms; "
                "each poller waits Retry-After (1 s); "
                + (
                    f"status function's own duration p50 {percentile(handler, 50):.1f}, "
                    f"p99 {percentile(handler, 99):.1f} ms"
                    if handler
                    else ""
                ),
            )
        )
        rows.append(
            Row(
                "5",
                f"GET /batches/{{id}}, first poll of {sizes.pollers} pollers at once, max",
                max(cold),
                "ms",
                note=f"median {percentile(cold, 50):.0f} ms; before the batch; includes the cold "
                "starts of the status environments not already warm from an earlier run",
            )
        )
        rows.append(
            Row(
                "5",
                f"{len(users)}-PDF batch throughput while polled",
                run.rate,
                "PDFs/s",
                note=f"{run.seconds:.1f} s",
            )
        )
        from bench import status_priority

        rows.extend(status_priority.compare(stack, path, users, sizes.priority_rounds, bench.log))

    def scale() -> None:
        from bench import unzip_rate

        most = sizes.scale[1]
        rows.extend(unzip_rate.alone(stack, corpora.scale_zip(most)[0], most, unzip_rate.worker_counts()))
        notes.append(unzip_rate.NOTE)
        rates = []
        for n in sizes.scale:
            path, users = corpora.scale_zip(n)
            stack.seed_users(users)
            run = pipeline.run_batch(stack, path, n, timeout=1200)
            rates.append(run.rate)
            marks = pipeline.phases(stack, run)
            if n == most:
                rows.append(unzip_rate.while_processing(stack, run.batch_id, run.since_ms, n))
            rows.append(
                Row(
                    "3",
                    f"{n:,} small PDFs: throughput",
                    run.rate,
                    "PDFs/s",
                    note=f"{run.seconds:.1f} s; first PDF done at {marks.get('first PDF done', 0):.1f} s, "
                    f"unzip done (all staged and queued) at {marks.get('unpacked', 0):.1f} s",
                )
            )
        small, big = rates
        rows.append(
            Row(
                "3",
                f"throughput at {sizes.scale[1]:,} vs {sizes.scale[0]:,}",
                100 * big / small,
                "%",
                Target(">=", 80, " %"),
                "flat within 20%",
            )
        )

    def mem() -> None:
        peaks = memory.measure(stack, sizes.memory)
        for p in peaks:
            rows.append(
                Row(
                    "4",
                    f"unzip peak RSS, {p.label} ZIP",
                    p.peak_mb,
                    "MB",
                    Target("<=", 100, " MB") if p is peaks[-1] else None,
                    f"{p.entries} PDFs of ~1 MB staged {p.staged}, {p.duration_ms / 1000:.1f} s",
                )
            )
        rows.append(
            Row(
                "4",
                f"unzip peak RSS growth, {peaks[-1].label} vs {peaks[0].label}",
                peaks[-1].peak_mb - peaks[0].peak_mb,
                "MB",
                Target("<=", 10, " MB"),
            )
        )

    def cost() -> None:
        reports = state.get("reports")
        run = state.get("run")
        if not isinstance(reports, dict) or not isinstance(run, pipeline.Run):
            raise RuntimeError("needs section 2's measured invocations")
        c = per_thousand(reports, run.files)
        parts = "; ".join(f"{k} {g:.1f} GB-s, {r:.0f} requests" for k, (g, r) in c.by_function.items())
        rows.append(Row("6", "Lambda GB-seconds per 1,000 PDFs", c.gb_seconds, "GB-s", note=parts))
        rows.append(Row("6", "Lambda requests per 1,000 PDFs", c.requests, "", note="status polls excluded"))
        rows.append(
            Row(
                "6",
                "Lambda price per 1,000 PDFs",
                c.usd,
                "USD",
                note=f"{REGION}: ${PRICE_PER_GB_SECOND}/GB-s, ${PRICE_PER_REQUEST * 1e6:.2f}/1M requests",
            )
        )

    def seed_system() -> None:
        from bench import seed_compare

        more, text = seed_compare.run(
            stack, sizes.resumes, sizes.manuals, sizes.manual_pages, sizes.seed_rounds, bench.log
        )
        rows.extend(more)
        notes.extend(text)

    def ocr_lane() -> None:
        resumes, scans, pages = sizes.lane
        alone, mixed, users = pipeline.lane_zips(resumes, scans, pages, corpora.OUT)
        stack.seed_users(users)
        pipeline.resume_seconds(stack, alone, resumes, resumes)  # warm-up: execution environments start
        stack.seed_users(users)
        t_alone = pipeline.resume_seconds(stack, alone, resumes, resumes)
        stack.seed_users(users)
        t_mixed = pipeline.resume_seconds(stack, mixed, resumes + scans, resumes)
        label = f"{resumes} résumés"
        rows.append(Row("10", f"{label} alone: upload -> last résumé done", t_alone, "s"))
        beside = f"{label} + {scans} {pages}-page scans"
        rows.append(Row("10", f"{beside}: upload -> last résumé done", t_mixed, "s"))
        rows.append(
            Row(
                "10",
                f"résumé throughput beside {scans} {pages}-page scans, ratio to résumés alone",
                t_alone / t_mixed,
                "x",
                Target(">=", 0.9),
                note="scans go to the OCR lane (its own queue, reserved concurrency 2); on this machine both "
                "lanes share two cores with LocalStack, on AWS each function has its own vCPU",
            )
        )
        # Would CPU priority isolate the lanes here? The OCR environments held at niceness 19 (the
        # text lane stays at the local stack's 10), the same pair measured again, then the ratio.
        from bench.status_priority import hold_niceness, service_pids

        stop = threading.Event()
        holder = threading.Thread(
            target=hold_niceness, args=(19, stop, lambda: service_pids("pdfbatch-ocr-pdf")), daemon=True
        )
        holder.start()
        try:
            stack.seed_users(users)
            n_alone = pipeline.resume_seconds(stack, alone, resumes, resumes)
            stack.seed_users(users)
            n_mixed = pipeline.resume_seconds(stack, mixed, resumes + scans, resumes)
        finally:
            stop.set()
            holder.join(timeout=5)
        rows.append(
            Row(
                "10",
                "the same ratio, OCR environments at niceness 19 (the text lane at 10)",
                n_alone / n_mixed,
                "x",
                note=f"{n_alone:.2f} s alone, {n_mixed:.2f} s beside the scans, after the row above; "
                "priority alone does not isolate the lanes here: the scans fill the cycles the résumés' "
                "round trips leave idle, and what sharing two cores then costs (caches, the host's "
                "scheduling) no niceness removes (SCHED_IDLE measured the same, 0.69-0.72)",
            )
        )

    if sections & {"2", "6"}:
        bench.section("2 end to end", end_to_end)
    if "10" in sections:
        bench.section("10 OCR lane isolation", ocr_lane)
    if "7" in sections:
        bench.section("7 the seed system", seed_system)
    if "5" in sections:
        bench.section("5 status under load", responsiveness)
    if "3" in sections:
        bench.section("3 scale", scale)
    if "4" in sections:
        bench.section("4 unzip memory", mem)
    if "6" in sections:
        bench.section("6 cost", cost)
    if "11" in sections:
        from bench import latency

        bench.section(
            "11 latency hidden",
            lambda: rows.extend(
                latency.run(stack, sizes.resumes, sizes.manuals, sizes.manual_pages, bench.log)
            ),
        )


if __name__ == "__main__":
    sys.exit(main())
