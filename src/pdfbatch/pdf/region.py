"""The deciding region as a person sees it: a greyscale PNG of a page around where addresses are drawn
(pdfbatch.evidence stores it; issue 25).

Rendered by pdfium in grey at 2x (144 dpi), annotations and fields as a viewer draws them, with the page's
text page finding the addresses (the first occurrence of each, case-insensitively). The reader renders it
in its child from the page it has just decided on (no second parse of the document: measured, a second
open and text page cost ~3-4 ms CPU per linked résumé); ``evidence.render`` opens the bytes for a page
read earlier. Callers hold PDFIUM_LOCK. I/O: none.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from typing import Any

SCALE = 2.0  # pixels per point: 144 dpi, enough to read an address
PAD_X, PAD_Y = 18.0, 8.0  # points around the addresses' box
MAX_PIXELS = 600_000  # a region larger than this (a page of addresses) is cut to its first part


def png(pdf_page: Any, textpage: Any, addresses: Sequence[str]) -> bytes | None:
    """A PNG of ``pdf_page`` (a pypdfium2 page; ``textpage`` its text page) around where ``addresses``
    are drawn, or None when none is found."""
    width, height = pdf_page.get_size()
    box = _box(textpage, addresses)
    if box is None:
        return None
    left, bottom, right, top = box
    left, bottom = min(max(0.0, left - PAD_X), width), min(max(0.0, bottom - PAD_Y), height)
    right, top = max(min(width, right + PAD_X), left), max(min(height, top + PAD_Y), bottom)
    if right - left < 1 or top - bottom < 1:  # drawn off the page (its box, not its ink, is there)
        return None
    if (right - left) * (top - bottom) * SCALE * SCALE > MAX_PIXELS:
        bottom = max(bottom, top - MAX_PIXELS / (SCALE * SCALE * (right - left)))
    bitmap = pdf_page.render(
        scale=SCALE,
        crop=(left, bottom, width - right, height - top),
        grayscale=True,
        may_draw_forms=True,
    )
    return png_gray(bytes(bitmap.buffer), bitmap.width, bitmap.height, bitmap.stride)


def _box(textpage: Any, addresses: Sequence[str]) -> tuple[float, float, float, float] | None:
    """The union of the char boxes of each address's first occurrence on the page (page space)."""
    boxes: list[tuple[float, float, float, float]] = []
    for address in addresses:
        searcher = textpage.search(address, match_case=False)
        found = searcher.get_next()
        searcher.close()
        if found:
            start, count = found
            boxes += [textpage.get_charbox(i) for i in range(start, start + count)]
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
