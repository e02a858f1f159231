"""bytes -> pages rendered by pdfium -> regions read by the engine, in order -> candidate addresses.

The order is the speed: a résumé names its owner in the header band of page 1, so that band is read
first (~a fifth of a page); then the rest of page 1 (overlapping the band by a line's height, so a line
the band's edge cut is read whole once), then whole pages. The caller stops the reading at the first
page that decides (read whole). Everything here parses untrusted bytes and runs in the worker (worker.py).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Generator
from dataclasses import dataclass

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from pdfbatch.errors import EncryptedPdf, MalformedPdf
from pdfbatch.ocr.engine import Engine, Raster
from pdfbatch.pdf import PDFIUM_LOCK, find_emails

# The header band: the top of page 1 where résumés put name and contact line (Word and LaTeX templates
# end it within the top 2-2.5 inches of 11.7).
HEADER_BAND = 0.22
# The rest of page 1 starts this much (of the page height) above the band's edge: ~25 pt on A4, taller
# than a line of contact text at up to 18 pt, so no line is cut by both reads.
BAND_OVERLAP = 0.03
# A rendered region has at most this many pixels (an A4 page at 300 dpi has 8.7 M): a page with a huge
# media box is rendered at a lower resolution rather than allocating gigabytes.
MAX_PIXELS = 16_000_000
# Scans finer than this are read at this resolution (downsampling costs nothing in accuracy here).
MAX_SCAN_DPI = 400
_MAX_IMAGES = 50  # image objects looked at per page to find the scan's resolution
# At most this many new candidates per region go to one lookup (as for text pages in pdf.py).
MAX_CANDIDATES = 200
# A region with fewer pixels darker than mid-grey than this has no ink to read (a blank sheet, a margin):
# it is not given to the engine, whose thresholding would turn the paper's grain into pages of garbage
# (~10 s for a blank scanned page). A character at 150 dpi has more than this.
MIN_INK_PIXELS = 64
_INK = bytes(1 if v < 128 else 0 for v in range(256))

# Tesseract puts a space on either side of "@" or of a dot where the font draws them with wide side
# bearings (Times, Courier): "ghamilton @ mail.example.co.uk", "sophie .wirth@...". On paper there is no
# gap a reader would take for a space. Left alone, the second would also make the tail "wirth@..." a
# candidate, a fragment that may be someone else's address; joined, the whole address is the candidate.
# Only one space on either side is removed, between characters an address holds, and for a dot only
# where the word after it runs into an "@"; a line break is never joined. (The price: prose such as
# "Lyon. ada@example.com" yields lyon.ada@example.com, which matches nobody: a miss, never a wrong link.)
_AT_GAP = re.compile(r"(?<=[\w.+'-]) ?@ ?(?=[\w-])")
# The same gap after a dot right after the "@" ("example-corp. fr"): without the join the domain has no
# dot and there is no address at all, so joining there cannot turn one address into another.
_DOMAIN_GAP = re.compile(r"(?<=@)([\w-]+)\. (?=[^\W\d_]{2,}\b)")
_DOT_GAP = re.compile(r"(?<=[\w+'-])(?: \. ?|\. )(?=[\w+'-][\w.+'-]*@)")


@dataclass(frozen=True)
class Region:
    """A horizontal slice of one page, as fractions of its height from the top."""

    page: int  # 0-based
    part: str  # "header" | "rest" (of page 1) | "page"
    top: float
    bottom: float


@dataclass(frozen=True)
class RegionRead:
    """What reading one region found: its new candidates (lowercased, in reading order) and costs."""

    region: Region
    candidates: list[str]
    chars: int  # non-space characters the engine read
    render_seconds: float
    ocr_seconds: float
    has_at: bool = False  # the text held an "@": worth a second look if nobody was named
    second_look: bool = False  # this is the region read again at another resolution


@dataclass(frozen=True)
class Opened:
    """The document was opened: how many pages it has."""

    page_count: int


def plan(page_count: int, max_pages: int, header: float = HEADER_BAND) -> list[Region]:
    """The regions to read, in order: page 1's header band and the rest of it, then whole pages up to
    ``max_pages``. A ``header`` of 0 (or 1) reads page 1 whole."""
    pages = min(page_count, max_pages)
    if pages < 1:
        return []
    if 0 < header < 1:
        regions = [Region(0, "header", 0.0, header), Region(0, "rest", max(0.0, header - BAND_OVERLAP), 1.0)]
    else:
        regions = [Region(0, "page", 0.0, 1.0)]
    return regions + [Region(i, "page", 0.0, 1.0) for i in range(1, pages)]


def ocr_text(text: str) -> str:
    """OCR output made ready for the address pattern (see _AT_GAP)."""
    if "@" not in text:
        return text
    return _DOMAIN_GAP.sub(r"\1.", _DOT_GAP.sub(".", _AT_GAP.sub("@", text)))


def candidates(text: str) -> list[str]:
    """The addresses in OCR ``text``, by the same rule as a text layer's (pdf.find_emails)."""
    return find_emails(ocr_text(text))


def has_ink(raster: Raster) -> bool:
    """Whether ``raster`` has enough dark pixels to hold any text (see MIN_INK_PIXELS)."""
    return raster.pixels.translate(_INK).count(1) >= MIN_INK_PIXELS


def scan_dpi(page: pdfium.PdfPage) -> float | None:
    """The resolution of the largest image on ``page`` (a scanner's page image), None without one."""
    best: tuple[float, float] | None = None
    for count, image in enumerate(page.get_objects(filter=[pdfium_c.FPDF_PAGEOBJ_IMAGE], max_depth=1)):
        if count >= _MAX_IMAGES:
            break
        left, bottom, right, top = image.get_bounds()
        area = (right - left) * (top - bottom)
        dpi = image.get_metadata().horizontal_dpi
        if dpi > 0 and (best is None or area > best[0]):
            best = (area, dpi)
    return best[1] if best else None


def render_dpi(engine_dpi: int, scanned_at: float | None) -> float:
    """The resolution to render at: the scan's own times the smallest whole factor that reaches
    ``engine_dpi`` (150 -> 300, 200 -> 200 for an engine wanting 200), so the scan's pixels are never
    resampled by an odd factor, which blurs strokes (a 200-dpi scan read at 300 turned "n+" into "nt+");
    ``engine_dpi`` for pages that are not scans, or scans finer than MAX_SCAN_DPI (read at that)."""
    if scanned_at is None or scanned_at < 50:
        return engine_dpi
    if scanned_at > MAX_SCAN_DPI:
        return MAX_SCAN_DPI
    # Scanners scan at whole dpi; the image's own figure is a hair off (2481 px across A4's 595.28 pt is
    # 300.08 dpi), and rendering at that made pdfium's bitmap a pixel wider than the image, resampled by
    # 1.0004: enough blur for "hedywilson1976@example-corp.fr" to read "hedywilson1 976@example-corp. fr".
    native = round(scanned_at)
    return float(native * math.ceil(engine_dpi / native))


def render(doc: pdfium.PdfDocument, region: Region, dpi: int, exact: float | None = None) -> Raster:
    """``region`` of its page rendered in greyscale for an engine wanting ``dpi`` (see render_dpi), or at
    ``exact`` dpi; lower if the page is huge."""
    try:
        page = doc[region.page]
    except pdfium.PdfiumError as exc:
        raise MalformedPdf(f"page {region.page + 1} cannot be loaded") from exc
    try:
        width, height = page.get_size()
        if width <= 0 or height <= 0:
            raise MalformedPdf(f"page {region.page + 1} has no area")
        scale = (exact or render_dpi(dpi, scan_dpi(page))) / 72
        pixels = width * height * (region.bottom - region.top) * scale * scale
        if pixels > MAX_PIXELS:
            scale *= math.sqrt(MAX_PIXELS / pixels)
        # crop: what to cut off each side, in points (left, bottom, right, top)
        crop = (0.0, height * (1 - region.bottom), 0.0, height * region.top)
        bitmap = page.render(
            scale=scale, crop=crop, grayscale=True, force_bitmap_format=pdfium_c.FPDFBitmap_Gray
        )
        try:
            return Raster(bitmap.width, bitmap.height, bitmap.stride, bytes(bitmap.buffer), round(scale * 72))
        finally:
            bitmap.close()
    except pdfium.PdfiumError as exc:
        raise MalformedPdf(f"page {region.page + 1} cannot be rendered") from exc
    finally:
        page.close()


def open_document(data: bytes) -> pdfium.PdfDocument:
    """The document opened by pdfium (MalformedPdf / EncryptedPdf when it cannot be)."""
    try:
        return pdfium.PdfDocument(data, password=None)
    except pdfium.PdfiumError as exc:
        if exc.err_code in (pdfium_c.FPDF_ERR_PASSWORD, pdfium_c.FPDF_ERR_SECURITY):
            raise EncryptedPdf("pdfium needs a password") from exc
        raise MalformedPdf("pdfium cannot open the document") from exc


# What the caller sends back (generator.send) after a region to have it read again (see read_regions).
AGAIN = "again"


def second_look_dpi(dpi: float) -> float:
    """The other resolution a region is read at when its first reading showed an "@" but named nobody:
    Tesseract's misreads depend on the scale (at 200 dpi "ada.perl man47", at 300 "ada.perlman47")."""
    return dpi * 1.5 if dpi < 300 else dpi * 2 / 3


def read_regions(
    data: bytes, engine: Engine, *, max_pages: int, header: float = HEADER_BAND
) -> Generator[Opened | RegionRead, str | None, None]:
    """Open ``data``, then read each planned region and yield its new candidates; the caller stops
    early by closing the generator, or sends AGAIN to have the region just yielded read once more at
    second_look_dpi (only regions whose text held an "@")."""
    with PDFIUM_LOCK:
        doc = open_document(data)
    try:
        with PDFIUM_LOCK:
            page_count = len(doc)
        if page_count < 1:
            raise MalformedPdf("no pages")
        yield Opened(page_count)
        seen: set[str] = set()
        for region in plan(page_count, max_pages, header):
            dpi: float | None = None
            for look in (0, 1):
                started = time.perf_counter()
                with PDFIUM_LOCK:
                    raster = render(doc, region, engine.dpi, dpi)
                rendered = time.perf_counter()
                text = engine.read(raster) if has_ink(raster) else ""
                done = time.perf_counter()
                fresh = [e for e in candidates(text) if e not in seen][:MAX_CANDIDATES]
                seen.update(fresh)
                chars = sum(1 for c in text if not c.isspace())
                has_at = "@" in text and look == 0
                read = RegionRead(
                    region, fresh, chars, rendered - started, done - rendered, has_at, look == 1
                )
                verdict = yield read
                if verdict != AGAIN or not has_at:
                    break
                dpi = second_look_dpi(raster.dpi)
    finally:
        with PDFIUM_LOCK:
            doc.close()
