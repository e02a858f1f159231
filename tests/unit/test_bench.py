"""The benchmark's own logic on tiny inputs, so `make bench` does not rot between runs (no timing checks)."""

from __future__ import annotations

from bench import extraction, pipeline
from bench import ocr as ocr_bench
from bench.cost import PRICE_PER_GB_SECOND, PRICE_PER_REQUEST, per_thousand
from bench.report import Row, Target, percentile, render
from bench.stack import Report


def test_a_missed_target_says_by_how_much() -> None:
    # GIVEN a throughput of 40 against a target of at least 50, and a latency under its ceiling
    slow = Row("2", "throughput", 40.0, "PDFs/s", Target(">=", 50))
    fast = Row("5", "p99", 20.0, "ms", Target("<=", 50, " ms"))
    # WHEN the table is rendered
    text = render([slow, fast], title="t")
    # THEN each verdict is stated with its margin
    assert "**MISSED** (0.80x of target)" in text
    assert "met (60% under)" in text


def test_percentile_interpolates_between_ranks() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.5
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


def test_extraction_section_runs_on_a_tiny_corpus() -> None:
    # WHEN section 1 runs on two résumés and one three-page manual of each kind
    rows = extraction.run(resumes=2, manuals=1, pages=3)
    # THEN both extractors find every address, and each class has its ratio row
    figures = {r.figure: r for r in rows}
    assert "ours 2/2, pypdf 2/2" in figures["extract résumé: project (pypdfium2, early exit)"].note
    assert figures["extract manual, email p.1: speed-up"].target is not None
    assert figures["extract manual, email last page: speed-up"].target is None
    assert all(r.value is not None and r.value > 0 for r in rows)


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
