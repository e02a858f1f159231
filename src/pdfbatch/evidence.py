"""Evidence a person can look at (issue 25): a small render of the region that decided a file.

For a file whose deciding page named a user (linked, found already linked, or ambiguous), the page's
region around the address(es) as the page draws them, rendered by pdfium in grey at 2x (144 dpi) and
written as a PNG at ``reports/{batch}/evidence/{index}.png``: the report's prefix, so the same access
(status may presign it), encryption (the bucket's) and lifecycle (the reports rule) hold. The per-file
result, a trace, the upload page and the CSV link it with a presigned GET.

Rendered after the reader decided, in this process, from the bytes it already holds; only the text
lane's files (a scan's text is OCR's, not the PDF's). Nothing of the text is logged.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

SCALE = 2.0  # pixels per point: 144 dpi, enough to read an address
PAD_X, PAD_Y = 18.0, 8.0  # points around the addresses' box
MAX_PIXELS = 600_000  # a region larger than this (a page of addresses) is cut to its first part


def key(batch_id: str, index: int) -> str:
    """Where a file's evidence lives: under its batch's report prefix."""
    return f"reports/{batch_id}/evidence/{index:07d}.png"


def render(data: bytes, page: int, addresses: Sequence[str]) -> bytes | None:
    """A PNG of ``page`` (1-based) around where ``addresses`` are drawn, or None when none is found."""
    import pypdfium2 as pdfium

    from pdfbatch.pdf.pages import PDFIUM_LOCK

    with PDFIUM_LOCK:
        doc = pdfium.PdfDocument(data)
        try:
            if not 1 <= page <= len(doc):
                return None
            pdf_page = doc[page - 1]
            width, height = pdf_page.get_size()
            box = _box(pdf_page, addresses)
            if box is None:
                return None
            left, bottom, right, top = box
            left, bottom = max(0.0, left - PAD_X), max(0.0, bottom - PAD_Y)
            right, top = min(width, right + PAD_X), min(height, top + PAD_Y)
            if (right - left) * (top - bottom) * SCALE * SCALE > MAX_PIXELS:
                bottom = max(bottom, top - MAX_PIXELS / (SCALE * SCALE * (right - left)))
            bitmap = pdf_page.render(
                scale=SCALE,
                crop=(left, bottom, width - right, height - top),
                grayscale=True,
                may_draw_forms=True,
            )
            pixels, w, h, stride = bytes(bitmap.buffer), bitmap.width, bitmap.height, bitmap.stride
        finally:
            doc.close()
    return png_gray(pixels, w, h, stride)


def _box(pdf_page: object, addresses: Sequence[str]) -> tuple[float, float, float, float] | None:
    """The union of the char boxes of each address's first occurrence on the page (page space)."""
    textpage = pdf_page.get_textpage()  # type: ignore[attr-defined]
    boxes: list[tuple[float, float, float, float]] = []
    try:
        for address in addresses:
            searcher = textpage.search(address, match_case=False)
            found = searcher.get_next()
            searcher.close()
            if found:
                start, count = found
                boxes += [textpage.get_charbox(i) for i in range(start, start + count)]
    finally:
        textpage.close()
    if not boxes:
        return None
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def png_gray(pixels: bytes, width: int, height: int, stride: int) -> bytes:
    """An 8-bit greyscale PNG of rows ``stride`` bytes apart (no library: zlib and the format)."""
    rows = b"".join(b"\x00" + pixels[y * stride : y * stride + width] for y in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(rows, 6))
        + chunk(b"IEND", b"")
    )
