"""The benchmark's own logic on tiny inputs, so `make bench` does not rot between runs (no timing checks)."""

from __future__ import annotations

from collections import Counter

import pytest
from bench import extraction, matching, pipeline, seed_compare
from bench import ocr as ocr_bench
from bench.cost import PRICE_PER_GB_SECOND, PRICE_PER_REQUEST, per_thousand
from bench.report import Row, Target, render
from bench.stack import Report

from pdfbatch.services.report import percentile


def test_a_missed_target_says_by_how_much() -> None:
    # GIVEN a throughput of 40 against a target of at least 50, and a latency under its ceiling
    slow = Row("2", "throughput", 40.0, "PDFs/s", Target(">=", 50))
    fast = Row("5", "p99", 20.0, "ms", Target("<=", 50, " ms"))
    # WHEN the table is rendered
    text = render([slow, fast], title="t")
    # THEN each verdict is stated with its margin
    assert "**MISSED** (0.80x of target)" in text
    assert "met (60% under)" in text


def test_bench_states_percentiles_by_the_reports_one_nearest_rank_definition() -> None:
    # The bench has no percentile of its own: it reports with pdfbatch report's (nearest rank).
    assert pipeline.percentile is percentile
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([5.0], 99) == 5.0
    assert percentile(list(map(float, range(101))), 99) == 99.0


def test_cost_is_billed_duration_times_configured_memory() -> None:
    # GIVEN two 1 GB invocations of 500 ms and one 256 MB of 1 s, for 2 PDFs
    r = [Report("a", 499.5, 500, 1024, 90), Report("b", 499.5, 500, 1024, 90)]
    s = [Report("c", 999.0, 1000, 256, 60)]
    # WHEN scaled to 1,000 PDFs
    c = per_thousand({"process": r, "status": s}, pdfs=2)
    # THEN GB-s and requests follow, and the price uses the stated rates
    assert c.by_function["process"] == (500.0, 1000.0)
    assert c.by_function["status"] == (125.0, 500.0)
    assert c.usd == 625.0 * PRICE_PER_GB_SECOND + 1500.0 * PRICE_PER_REQUEST


def test_stage_stats_split_text_extraction_from_the_rest() -> None:
    # GIVEN per-file timings as process_pdf logs them (extract includes validation)
    files = [{"download": 4.0, "validate": 2.0, "extract": 5.0, "total": 20.0} for _ in range(3)]
    # WHEN summarised
    stats = pipeline.stage_stats(files)
    # THEN extract is the text extraction only, and the rest of the file's time is "outside"
    assert stats["extract"][:3] == (3.0, 3.0, 3.0)
    assert stats["outside extraction"][0] == 17.0
    assert stats["download"][3] == 3


def test_peak_concurrency_counts_overlapping_invocations() -> None:
    def inv(end: int, ms: float) -> Report:
        return Report("x", ms, int(ms) + 1, 1024, 80, logged_ms=end)

    assert pipeline.peak_concurrency([inv(100, 50), inv(120, 50), inv(300, 50)]) == 2
    assert pipeline.peak_concurrency([inv(100, 10), inv(200, 10)]) == 1


@pytest.mark.slow
def test_extraction_section_runs_on_a_tiny_corpus() -> None:
    # WHEN section 1 runs on two résumés and one three-page manual of each kind
    rows = extraction.run(resumes=2, manuals=1, pages=3)
    # THEN both extractors find every address, and each class has its ratio row
    figures = {r.figure: r for r in rows}
    assert "ours 2/2, pypdf 2/2" in figures["extract résumé: project (pypdfium2, early exit)"].note
    assert figures["extract manual, email p.1: speed-up"].target is not None
    assert figures["extract manual, email last page: speed-up"].target is None
    assert all(r.value is not None and r.value > 0 for r in rows)


def test_seed_ratio_is_the_seeds_median_over_ours() -> None:
    # GIVEN three interleaved rounds each, one of ours slowed by an idle start
    seed, ours = [2.0, 2.4, 2.2], [3.0, 9.0, 2.75]
    # WHEN the ratio is taken
    ratio = seed_compare.ratio_of_medians(seed, ours)
    # THEN it is median over median, so the outlier round does not decide it
    assert ratio == 2.2 / 3.0


def test_seed_ratio_needs_a_round_on_each_side() -> None:
    with pytest.raises(ValueError):
        seed_compare.ratio_of_medians([], [1.0])


def test_localstack_request_log_lines_are_counted_per_operation() -> None:
    log = "2026-11-30T14:53:50.545  INFO --- [et.reactor-3] localstack.request"
    lines = [
        f"{log}.http    : POST /_localstack_lambda/x/invocations/y/response => 202",
        f"{log}.aws     : AWS s3.GetObject => 200",
        f"{log}.aws     : AWS s3.GetObject => 200",
        f"{log}.aws     : AWS sqs.DeleteMessage => 200",
    ]
    calls = seed_compare.aws_calls(lines)
    assert calls == {"s3.GetObject": 2, "sqs.DeleteMessage": 1}
    assert seed_compare.describe_calls(calls, 2) == "s3.GetObject 1.00, sqs.DeleteMessage 0.50"


def test_a_pdf_url_resolves_to_its_zip_entry_on_either_side() -> None:
    sha = "ab" * 32
    by_sha = {sha: "resumes/0001.pdf"}
    # pdfbatch keys a linked PDF by its content hash, the seed by the entry's name
    assert seed_compare.linked_entry(f"s3://b/pdfs/7/{sha}.pdf", by_sha) == "resumes/0001.pdf"
    assert seed_compare.linked_entry("s3://seed/pdfs/7/resumes/0002.pdf", by_sha) == "resumes/0002.pdf"
    assert seed_compare.linked_entry("https://elsewhere/cv.pdf", by_sha) is None


def test_a_user_linked_to_someone_elses_file_is_reported() -> None:
    truth = {"a.pdf": "ann@x.test", "b.pdf": "bob@x.test"}
    linked = {"ann@x.test": "a.pdf", "bob@x.test": "a.pdf", "cy@x.test": None}
    assert seed_compare.mislinked(linked, truth) == ["bob@x.test", "cy@x.test"]


def test_seed_section_rows_come_from_interleaved_rounds() -> None:
    # GIVEN two rounds per side of a 2-file batch, both sides linking the two users to their own files
    truth = {"a.pdf": "ann@x.test", "b.pdf": "bob@x.test"}
    links: dict[str, str | None] = {"ann@x.test": "a.pdf", "bob@x.test": "b.pdf"}
    c = seed_compare.Comparison(2, "2 files, tiny PDFs", truth)
    for seed_s, ours_s in ((1.0, 2.0), (3.0, 4.0)):
        c.rounds.append(
            seed_compare.Round(
                "seed", seed_s, Counter({"seed worker (node)": 0.02, "LocalStack": 0.01}), Counter(), links
            )
        )
        calls = Counter({"s3.GetObject": 2, "s3.CopyObject": 2})
        cpu = Counter({"pdfbatch functions": 0.04, "LocalStack": 0.02, "MariaDB": 0.002})
        c.rounds.append(seed_compare.Round("pdfbatch", ours_s, cpu, calls, dict(links), "upload 0.1 s"))
    # WHEN the section's rows are made
    rows, notes = seed_compare.rows_and_notes(c)
    by = {r.figure.removesuffix(", tiny PDFs"): r for r in rows}
    # THEN the ratio is median over median, CPU is per file, and the linking agrees
    assert by["seed's end-to-end time / pdfbatch's (median)"].value == 2.0 / 3.0
    assert by["seed CPU per PDF, all in"].value == 15.0
    assert by["pdfbatch CPU per PDF, all in"].value == 31.0
    assert by["pdfbatch: AWS calls LocalStack logged per PDF"].value == 2.0
    assert "same users" in by["users linked, seed / pdfbatch (last round)"].note
    assert "seed 0, pdfbatch 0" in by["users linked, seed / pdfbatch (last round)"].note
    assert notes[0].startswith("2 files, tiny PDFs: the seed's one node thread was busy 1% of its time")
    assert "pdfbatch kept 0.0 cores busy and spent 2.07x the seed's CPU" in notes[0]
    assert "No other client used LocalStack" in notes[0]


def test_matching_section_runs_on_a_tiny_corpus() -> None:
    # WHEN the cost of issue 16's rule is measured on two résumés
    rows = matching.run(resumes=2, rounds=1)
    # THEN it reports the render check and the extraction ratio, every résumé linked (no timing checks)
    figures = {r.figure: r for r in rows}
    assert "matching: render check per linked résumé" in figures
    assert figures["matching: extraction cost of the rule"].value > 0
    assert "2 linked" in figures["matching: render check per linked résumé"].note


@pytest.mark.slow
def test_ocr_section_measures_an_engine_on_generated_scans() -> None:
    # GIVEN one generated 150-dpi scan and the lane's engine
    docs = ocr_bench.scans.scan_set(1, dpis=(150,))
    # WHEN measured (recovery, one timed document, one repeat)
    m = ocr_bench.measure(ocr_bench.ocr.Tesseract(), docs, timing=1, repeats=1)
    # THEN its resolution has a recovery figure, a page was timed, and the table has the engine's row
    assert sorted(m.found) == [150]
    assert 0 <= m.recovery() <= 100
    assert len(m.page) == 1
    assert f"| {m.engine} | " in ocr_bench.table([m], ocr_bench.scans.DPIS)
