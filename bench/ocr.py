"""Section 9: OCR engines compared on generated scans (tools.scans): email recovery, seconds per
full page, seconds per résumé whose address is in the header band. `python -m bench.ocr [--quick]`.

Every engine runs through the lane's own reader (pdfbatch.ocr.scan, in this process so its CPU time can
be read): pdfium renders at the engine's resolution, header band of page 1 first, early stop. Wall times
are medians over repeats; CPU seconds (this process and its children) are given beside them, because
the machine is shared and wall time on two busy cores says more about the neighbours than the engine.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from tools import scans

from bench.report import Row, Target
from pdfbatch import ocr
from pdfbatch.ocr.engine import Raster, use_one_thread
from pdfbatch.ocr.read import Region, open_document, render

CHOSEN = "tesseract psm3 >=200dpi"  # the lane's engine (docs/OCR.md says why); its rows carry the targets


class PyTesseract:
    """Debian's tesseract command line (5.3, built with OpenMP) through pytesseract: one process per read."""

    def __init__(self, dpi: int = 200, psm: int = 6) -> None:
        self.dpi, self.psm = dpi, psm
        self.name = f"tesseract CLI psm{psm} {dpi}dpi (pytesseract)"

    def load(self) -> None:
        use_one_thread()  # the child inherits OMP_THREAD_LIMIT=1

    def read(self, raster: Raster) -> str:
        import pytesseract
        from PIL import Image

        size = (raster.width, raster.height)
        image = Image.frombuffer("L", size, raster.pixels, "raw", "L", raster.stride, 1)
        text: str = pytesseract.image_to_string(image, config=f"--psm {self.psm} --dpi {raster.dpi}")
        return text


class Rapid:
    """RapidOCR 3 on onnxruntime, one thread; its PP-OCR models ship in the wheel (no download)."""

    def __init__(self, dpi: int = 150) -> None:
        self.dpi = dpi
        self.name = f"rapidocr onnxruntime >={dpi}dpi"
        self._ocr: object = None

    def load(self) -> None:
        if self._ocr is None:
            from rapidocr import RapidOCR

            self._ocr = RapidOCR(
                params={
                    "Global.log_level": "error",
                    "EngineConfig.onnxruntime.intra_op_num_threads": 1,
                    "EngineConfig.onnxruntime.inter_op_num_threads": 1,
                }
            )

    def read(self, raster: Raster) -> str:
        import numpy as np

        self.load()
        rows = np.frombuffer(raster.pixels, dtype=np.uint8).reshape(raster.height, raster.stride)
        image = np.ascontiguousarray(np.stack([rows[:, : raster.width]] * 3, axis=-1))
        result = self._ocr(image)  # type: ignore[operator]
        return "\n".join(result.txts or ())


@dataclass(frozen=True)
class Contender:
    """An engine to measure; ``subset`` limits slow ones to a few documents per resolution."""

    make: Callable[[], ocr.Engine]
    subset: int | None = None
    needs: str = ""  # what must be installed, said when it is not


CONTENDERS: tuple[Contender, ...] = (
    Contender(lambda: ocr.Tesseract(dpi=200, psm=3)),
    Contender(lambda: ocr.Tesseract(dpi=200, psm=6)),
    Contender(lambda: ocr.Tesseract(dpi=300, psm=3)),
    Contender(lambda: PyTesseract(dpi=200, psm=6), needs="tesseract"),
    Contender(lambda: Rapid(dpi=150), subset=1),
)


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (pytesseract's runs)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@contextmanager
def timed(into: list[tuple[float, float]]) -> Iterator[None]:
    """Append (wall, cpu) seconds of the block to ``into``."""
    wall, cpu = time.perf_counter(), cpu_seconds()
    yield
    into.append((time.perf_counter() - wall, cpu_seconds() - cpu))


@dataclass
class Measured:
    """One engine's figures over the scan set."""

    engine: str
    found: dict[int, list[bool]] = field(default_factory=dict)  # scan dpi -> recovered per document
    misreads: int = 0  # candidates that were not the document's address (they match nobody)
    page: list[tuple[float, float]] = field(default_factory=list)  # one full page rendered + read
    header: list[tuple[float, float]] = field(default_factory=list)  # a header résumé, scan() to match

    def recovery(self, dpi: int | None = None) -> float:
        """Share of documents whose address scan() found, in %."""
        hits = [h for d, hs in self.found.items() if dpi in (None, d) for h in hs]
        return 100 * sum(hits) / len(hits) if hits else float("nan")


def _median(pairs: Sequence[tuple[float, float]], i: int) -> float:
    return statistics.median(p[i] for p in pairs) if pairs else float("nan")


def measure(engine: ocr.Engine, docs: Sequence[scans.ScanDoc], timing: int, repeats: int) -> Measured:
    """Recovery over ``docs``; full-page and header-résumé times over the first ``timing`` documents of
    each resolution, each repeated ``repeats`` times."""
    engine.load()
    users = {d.email: i for i, d in enumerate(docs)}

    def lookup(candidates: Sequence[str]) -> Mapping[str, int]:
        return {c: users[c] for c in candidates if c in users}

    m = Measured(engine.name)
    timed_per_dpi: dict[int, int] = {}
    for doc in docs:
        result = ocr.scan(doc.data, lookup, engine=engine, isolate=False, budget_seconds=600)
        m.found.setdefault(doc.dpi, []).append(result.email == doc.email)
        m.misreads += sum(r.candidates for r in result.regions) - (result.email == doc.email)
        if timed_per_dpi.get(doc.dpi, 0) >= timing:
            continue
        timed_per_dpi[doc.dpi] = timed_per_dpi.get(doc.dpi, 0) + 1
        pdf = open_document(doc.data)
        try:
            for _ in range(repeats):
                with timed(m.page):
                    engine.read(render(pdf, Region(0, "page", 0.0, 1.0), engine.dpi))
        finally:
            pdf.close()
        if doc.where == "header":
            for _ in range(repeats):
                with timed(m.header):
                    ocr.scan(doc.data, lookup, engine=engine, isolate=False, budget_seconds=600)
    return m


def isolation_overhead(engine: ocr.Engine, doc: scans.ScanDoc, repeats: int = 5) -> float:
    """Median extra wall seconds of a header résumé read through the worker instead of in process."""
    lookup = {doc.email: 1}.get

    def one(isolate: bool) -> float:
        t = time.perf_counter()
        ocr.scan(doc.data, lambda cs: {c: 1 for c in cs if lookup(c)}, engine=engine, isolate=isolate)
        return time.perf_counter() - t

    one(True)  # forks the worker
    pairs = [(one(True), one(False)) for _ in range(repeats)]
    return statistics.median(a - b for a, b in pairs)


def per_dpi_recovery(m: Measured) -> str:
    """e.g. ``150 dpi 92%, 200 dpi 100%, 300 dpi 100%``."""
    return ", ".join(f"{d} dpi {m.recovery(d):.0f}%" for d in sorted(m.found))


def table(results: Sequence[Measured], dpis: Sequence[int]) -> str:
    """The comparison as markdown: engine x scan resolution."""
    lines = [
        "| engine | recovery " + " | ".join(f"{d} dpi" for d in dpis) + " | recovery all | misread "
        "candidates | s / full page (CPU s) | s / header résumé (CPU s) |",
        "|---|" + "---|" * (len(dpis) + 4),
    ]
    for m in results:
        per = " | ".join(f"{m.recovery(d):.0f}% ({len(m.found.get(d, []))})" for d in dpis)
        lines.append(
            f"| {m.engine} | {per} | {m.recovery():.1f}% | {m.misreads} | {_median(m.page, 0):.2f} "
            f"({_median(m.page, 1):.2f}) | {_median(m.header, 0):.2f} ({_median(m.header, 1):.2f}) |"
        )
    return "\n".join(lines)


def run(
    per_dpi: int = 12,
    timing: int = 3,
    repeats: int = 3,
    log: Callable[[str], None] = print,
    slow: bool = True,
) -> tuple[list[Row], str]:
    """Measure every contender that is installed (the slow ones only with ``slow``): the bench's rows and
    the comparison table."""
    docs = scans.scan_set(per_dpi)
    load_before = os.getloadavg()
    results: list[Measured] = []
    missing: list[str] = []
    for contender in CONTENDERS:
        if contender.subset is not None and not slow:
            continue
        if contender.needs and shutil.which(contender.needs) is None:
            missing.append(f"{contender.needs} (apt-get install tesseract-ocr tesseract-ocr-eng)")
            continue
        engine = contender.make()
        subset = [d for i, d in enumerate(docs) if contender.subset is None or i < contender.subset * 3]
        t = time.monotonic()
        try:
            n_timed = min(timing, contender.subset or timing)
            results.append(measure(engine, subset, n_timed, repeats if contender.subset is None else 1))
        except ImportError as exc:
            missing.append(f"{engine.name}: {exc}")
            continue
        log(f"   {engine.name}: {time.monotonic() - t:.0f} s")
    load_after = os.getloadavg()
    chosen = next(m for m in results if m.engine == CHOSEN)
    header_doc = next(d for d in docs if d.where == "header")
    overhead = isolation_overhead(ocr.Tesseract(), header_doc)
    text = table(results, scans.DPIS)
    load = (
        f"load average (1 min) {load_before[0]:.1f} before, {load_after[0]:.1f} after, on "
        f"{os.cpu_count()} CPUs"
    )
    notes = f"{len(docs)} scans ({per_dpi} per resolution); {load}" + (
        f"; not measured: {', '.join(missing)}" if missing else ""
    )
    rows = [
        Row(
            "9",
            f"OCR email recovery, generated scans ({CHOSEN})",
            chosen.recovery(),
            "%",
            Target(">=", 95, " %"),
            f"{len(docs)} scans, ±2°, grain, JPEG 60: {per_dpi_recovery(chosen)}; "
            f"misread candidates {chosen.misreads}",
        ),
        Row(
            "9",
            f"OCR seconds per full page ({CHOSEN})",
            _median(chosen.page, 0),
            "s",
            Target("<=", 1.5, " s"),
            f"render + read of a dense résumé page; CPU {_median(chosen.page, 1):.2f} s; {load}",
        ),
        Row(
            "9",
            f"OCR seconds per résumé with its address in the header band ({CHOSEN})",
            _median(chosen.header, 0),
            "s",
            Target("<=", 0.5, " s"),
            f"scan() to the match; CPU {_median(chosen.header, 1):.2f} s; through the worker "
            f"{overhead * 1000:+.0f} ms",
        ),
    ]
    for m in results:
        if m is not chosen:
            rows.append(
                Row(
                    "9",
                    f"OCR contender {m.engine}: recovery / s per page / s per header résumé",
                    m.recovery(),
                    "%",
                    note=f"{_median(m.page, 0):.2f} s (CPU {_median(m.page, 1):.2f}) per page; "
                    f"{_median(m.header, 0):.2f} s (CPU {_median(m.header, 1):.2f}) per header résumé; "
                    f"{sum(len(v) for v in m.found.values())} scans: {per_dpi_recovery(m)}",
                )
            )
    return rows, f"{text}\n\n{notes}"


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m bench.ocr`: print the comparison."""
    parser = argparse.ArgumentParser(prog="python -m bench.ocr", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="two scans per resolution, no RapidOCR: checks it runs"
    )
    parser.add_argument("--per-dpi", type=int, default=12, help="scans per resolution (150/200/300 dpi)")
    args = parser.parse_args(argv)
    per_dpi = 2 if args.quick else args.per_dpi

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    timing, repeats = (1, 1) if args.quick else (3, 3)
    rows, text = run(per_dpi, timing=timing, repeats=repeats, log=log, slow=not args.quick)
    print(text)
    print()
    for r in rows:
        print(f"{r.figure}: {r.value:.2f} {r.unit} {r.verdict}".rstrip() if r.value is not None else r.figure)
    return 0


if __name__ == "__main__":
    sys.exit(main())
