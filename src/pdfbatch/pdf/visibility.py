"""Whether a person sees a glyph (the rule "visible"), in two steps of very different cost.

GlyphChecks.visible, per glyph of every address found (a few pdfium calls each, cached per text
object): not drawn in an invisible render mode (3, or 7: clip only), with a colour whose alpha is not
zero, at an effective size of at least MIN_SIZE points (font size times the text matrix), and inside
the page's visible area (the crop box within the media box).

shows, per address that belongs to a user only: what the cheap checks cannot know (white on white,
under an opaque shape drawn later, clipped away, transparent) is seen by rendering just the address's
box twice, with its text and with its text objects switched to invisible, annotations and form fields
drawn as a viewer draws them. Every glyph must change enough pixels of what is drawn under it: the
page's own background, not an assumed white.

draw_form_fields puts the values of a page's filled form fields and its free-text annotations into its
content (pdfium flattens their appearances on this in-memory copy), so they are read and checked as
text; annotations a viewer never draws (Hidden, NoView) are removed first.

Callers hold PDFIUM_LOCK.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

Box = tuple[float, float, float, float]  # left, bottom, right, top; page space

MIN_SIZE = 4.0  # points: smaller text is not something a person reads
_CONTRAST = 64  # a pixel shows ink where the text changes a colour channel by at least this (of 255)
_INK_SHARE = 0.1  # a glyph shows when at least this share of its box (at least one pixel) shows ink
_PIXELS_PER_EM = 12.0  # render scale: the tallest glyph box about this many pixels high
_THIN_PIXELS = 1.5  # and the thinnest at least this many
_MAX_BITMAP_PIXELS = 4_000_000
_HIDDEN_MODES = (pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE, pdfium_c.FPDF_TEXTRENDERMODE_CLIP)
_STROKED_MODES = (1, 2, 5, 6)  # stroke, fill+stroke, and the same adding to the clip path
_FILLED_MODES = (-1, 0, 2, 4, 6)  # -1: unknown, drawn as fill
_BOUNDS_SLACK = 0.5  # points a glyph may stick out of the visible area (rounding in producers)
_SUBPIXEL = 256
_HIGH_BITS = bytes(1 if value >= 64 else 0 for value in range(256))  # XOR >= 64: may differ by 64


# FPDFText_GetTextObject answering the object's address as an int: the glyphs of one object share their
# checks, and ctypes.cast on every glyph's pointer would cost more than the call.
_text_object_address = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int)(
    ctypes.cast(pdfium_c.FPDFText_GetTextObject, ctypes.c_void_p).value or 0
)


class GlyphChecks:
    """The cheap checks for one page's glyphs; text object attributes are read once per object."""

    def __init__(self, page: pdfium.PdfPage, textpage: pdfium.PdfTextPage) -> None:
        self._textpage = textpage.raw
        self._textpage_address = ctypes.cast(textpage.raw, ctypes.c_void_p)
        bounds = pdfium_c.FS_RECTF()
        if not pdfium_c.FPDF_GetPageBoundingBox(page.raw, bounds):
            width, height = page.get_size()
            bounds.left, bounds.bottom, bounds.right, bounds.top = 0.0, 0.0, width, height
        self._bounds = (bounds.left, bounds.bottom, bounds.right, bounds.top)
        self._objects: dict[int | None, bool] = {}
        self._box = [ctypes.c_double() for _ in range(4)]
        self.boxes: dict[int, Box] = {}  # tight box of every glyph checked (for the render check)
        self.objects: dict[int, int] = {}  # its text object's address

    def visible(self, index: int) -> bool:
        """Whether glyph ``index`` passes every check that needs no rendering."""
        textpage = self._textpage
        key = _text_object_address(self._textpage_address, index)
        drawn = self._objects.get(key)
        if drawn is None:
            handle = pdfium_c.FPDFText_GetTextObject(textpage, index)
            drawn = self._objects[key] = bool(key) and self._drawn(handle, index)
        if not drawn:
            return False
        left, right, bottom, top = self._box
        if not pdfium_c.FPDFText_GetCharBox(textpage, index, left, right, bottom, top):
            return False
        box = (left.value, bottom.value, right.value, top.value)
        self.boxes[index], self.objects[index] = box, key
        x0, y0, x1, y1 = self._bounds
        slack = _BOUNDS_SLACK
        return bool(
            box[0] >= x0 - slack and box[2] <= x1 + slack and box[1] >= y0 - slack and box[3] <= y1 + slack
        )

    def drawn(self, index: int) -> bool:
        """Whether glyph ``index``'s text object is drawn (``visible`` without the glyph's own box)."""
        key = _text_object_address(self._textpage_address, index)
        drawn = self._objects.get(key)
        if drawn is None:
            handle = pdfium_c.FPDFText_GetTextObject(self._textpage, index)
            drawn = self._objects[key] = bool(key) and self._drawn(handle, index)
        return drawn

    def _drawn(self, handle: pdfium_c.FPDF_PAGEOBJECT, index: int) -> bool:
        textpage = self._textpage
        mode = pdfium_c.FPDFTextObj_GetTextRenderMode(handle)
        if mode in _HIDDEN_MODES:
            return False
        r, g, b, a = (ctypes.c_uint() for _ in range(4))
        filled = mode in _FILLED_MODES and (
            not pdfium_c.FPDFText_GetFillColor(textpage, index, r, g, b, a) or a.value > 0
        )
        stroked = mode in _STROKED_MODES and (
            not pdfium_c.FPDFText_GetStrokeColor(textpage, index, r, g, b, a) or a.value > 0
        )
        if not (filled or stroked):
            return False
        matrix = pdfium_c.FS_MATRIX()
        scale = 1.0
        if pdfium_c.FPDFText_GetMatrix(textpage, index, matrix):
            scale = math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c))
        return bool(pdfium_c.FPDFText_GetFontSize(textpage, index) * scale >= MIN_SIZE)

    def veiled(self, index: int) -> bool:
        """Whether glyph ``index`` paints no ink of its own only because it is a clip (render mode 7) or
        filled with a transparent colour, at a readable size inside the visible area: what CSS
        ``background-clip: text`` prints, the ink drawn by a gradient through the glyphs (on_ink)."""
        handle = pdfium_c.FPDFText_GetTextObject(self._textpage, index)
        if not handle:
            return False
        mode = pdfium_c.FPDFTextObj_GetTextRenderMode(handle)
        r, g, b, a = (ctypes.c_uint() for _ in range(4))
        transparent = (
            mode == 0 and pdfium_c.FPDFText_GetFillColor(self._textpage, index, r, g, b, a) and a.value == 0
        )
        if mode != pdfium_c.FPDF_TEXTRENDERMODE_CLIP and not transparent:
            return False
        matrix = pdfium_c.FS_MATRIX()
        scale = 1.0
        if pdfium_c.FPDFText_GetMatrix(self._textpage, index, matrix):
            scale = math.sqrt(abs(matrix.a * matrix.d - matrix.b * matrix.c))
        if pdfium_c.FPDFText_GetFontSize(self._textpage, index) * scale < MIN_SIZE:
            return False
        left, right, bottom, top = self._box
        if not pdfium_c.FPDFText_GetCharBox(self._textpage, index, left, right, bottom, top):
            return False
        box = (left.value, bottom.value, right.value, top.value)
        self.boxes[index] = box
        x0, y0, x1, y1 = self._bounds
        slack = _BOUNDS_SLACK
        return bool(
            box[0] >= x0 - slack and box[2] <= x1 + slack and box[1] >= y0 - slack and box[3] <= y1 + slack
        )


# A veiled glyph (GlyphChecks.veiled) sits on ink when at least this share of its box differs clearly from
# the box's commonest colour (strokes of a letter cover ~15-30% of its box).
_ON_INK_SHARE = 0.05


def on_ink(page: pdfium.PdfPage, checks: GlyphChecks, glyphs: Sequence[int]) -> bool:
    """Whether every glyph of ``glyphs`` (veiled: no ink of its own) has ink drawn in its box by something
    else, as a gradient shows through glyphs used as a clip or a mask. Then the page's text is not what
    it shows (only the pixels say what a person reads there): the page is read by OCR."""
    boxes = [checks.boxes[i] for i in glyphs]
    if not boxes:
        return False
    em = max(top - bottom for _, bottom, _, top in boxes)
    scale = min(8.0, max(1.0, _PIXELS_PER_EM / max(em, 0.1)))
    page_w, page_h = page.get_size()
    size = (round(page_w * scale), round(page_h * scale))
    to_pixels = _PageToPixels(page.raw, size)
    union = (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
    x0, y0, x1, y1 = to_pixels.rect(union, pad=0)
    x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, size[0]), min(y1, size[1])
    if x1 <= x0 or y1 <= y0 or (x1 - x0) * (y1 - y0) > _MAX_BITMAP_PIXELS:
        return False
    width, height = x1 - x0, y1 - y0
    pixels = _render(page, (x0, y0, width, height, size))
    grey = bytes((pixels[i] + pixels[i + 1] + pixels[i + 2]) // 3 for i in range(0, len(pixels), 4))
    paper = max(range(256), key=grey.count) if len(grey) <= 4096 else _commonest(grey)
    for box in boxes:
        gx0, gy0, gx1, gy1 = to_pixels.rect(box, pad=0)
        gx0, gy0 = min(max(gx0 - x0, 0), width - 1), min(max(gy0 - y0, 0), height - 1)
        gx1, gy1 = min(max(gx1 - x0, gx0 + 1), width), min(max(gy1 - y0, gy0 + 1), height)
        inked = sum(
            1
            for y in range(gy0, gy1)
            for v in grey[y * width + gx0 : y * width + gx1]
            if abs(v - paper) >= _CONTRAST
        )
        if inked < max(1, int(_ON_INK_SHARE * (gx1 - gx0) * (gy1 - gy0))):
            return False
    return True


def _commonest(grey: bytes) -> int:
    counts = [0] * 256
    for v in grey:
        counts[v] += 1
    return max(range(256), key=counts.__getitem__)


def shows(
    page: pdfium.PdfPage, textpage: pdfium.PdfTextPage, checks: GlyphChecks, glyphs: Sequence[int]
) -> bool:
    """Whether every glyph of ``glyphs`` (which passed ``checks``) shows ink against what the page draws
    under it.

    Renders the glyphs' bounding box twice (a few thousand pixels): as a viewer shows it, and with the
    glyphs' text objects invisible (objects that also clip keep clipping: mode 7). A glyph shows when
    enough pixels of its box differ by a clear contrast.
    """
    boxes = [checks.boxes[i] for i in glyphs]
    if not boxes:
        return False
    em = max(top - bottom for _, bottom, _, top in boxes)
    # A glyph as thin as an underscore (LibreOffice draws it under half a point) needs pixels of its
    # own, or its anti-aliased ink spread over two rows shows no pixel of clear contrast.
    thinnest = min(top - bottom for _, bottom, _, top in boxes)
    scale = min(8.0, max(1.0, _PIXELS_PER_EM / max(em, 0.1), _THIN_PIXELS / max(thinnest, 0.05)))
    union = (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )
    page_w, page_h = page.get_size()
    while True:
        size = (round(page_w * scale), round(page_h * scale))
        to_pixels = _PageToPixels(page.raw, size)
        x0, y0, x1, y1 = to_pixels.rect(union, pad=2)
        x0, y0 = max(x0, 0), max(y0, 0)
        x1, y1 = min(x1, size[0]), min(y1, size[1])
        if x1 <= x0 or y1 <= y0:
            return False
        if (x1 - x0) * (y1 - y0) <= _MAX_BITMAP_PIXELS or scale <= 0.25:
            break
        scale /= 2
    frame = (x0, y0, x1 - x0, y1 - y0, size)
    with_text = _render(page, frame)
    handles = {}
    for index in glyphs:
        key = checks.objects[index]
        if key not in handles:
            handles[key] = pdfium_c.FPDFText_GetTextObject(textpage.raw, index)
    modes = {key: pdfium_c.FPDFTextObj_GetTextRenderMode(handle) for key, handle in handles.items()}
    try:
        for key, handle in handles.items():
            hidden = pdfium_c.FPDF_TEXTRENDERMODE_CLIP if modes[key] >= 4 else 3
            pdfium_c.FPDFTextObj_SetTextRenderMode(handle, hidden)
        without_text = _render(page, frame)
    finally:
        for key, handle in handles.items():
            pdfium_c.FPDFTextObj_SetTextRenderMode(handle, modes[key])
    if with_text == without_text:
        return False
    flags = _candidate_bytes(with_text, without_text)
    width, height = x1 - x0, y1 - y0
    for box in boxes:
        gx0, gy0, gx1, gy1 = to_pixels.rect(box, pad=0)
        gx0, gy0 = min(max(gx0 - x0, 0), width - 1), min(max(gy0 - y0, 0), height - 1)
        gx1, gy1 = min(max(gx1 - x0, gx0 + 1), width), min(max(gy1 - y0, gy0 + 1), height)
        need = max(1, int(_INK_SHARE * (gx1 - gx0) * (gy1 - gy0)))
        if not _ink(with_text, without_text, flags, width * 4, (gx0, gy0, gx1, gy1), need):
            return False
    return True


# Annotation flags (PDF 32000-1, 12.5.3): a viewer never draws a Hidden or NoView annotation on screen.
_HIDDEN_FLAG, _NO_VIEW_FLAG = 2, 32
# Annotations whose appearance a viewer draws as text on the page: their text is read like the page's.
_DRAWN_TEXT = (pdfium_c.FPDF_ANNOT_WIDGET, pdfium_c.FPDF_ANNOT_FREETEXT)


def draw_form_fields(doc: pdfium.PdfDocument, page: pdfium.PdfPage) -> bool:
    """Flatten the page's form fields and free-text annotations into its content, as a viewer draws
    them; True when the page changed (reload it).

    Annotations a viewer never draws (Hidden or NoView) are removed first, on this in-memory copy: pdfium's
    FLAT_NORMALDISPLAY skips only Hidden and Invisible ones, and would bake a NoView one into the page.
    """
    raw = page.raw
    drawn_text = removed = False
    for index in reversed(range(pdfium_c.FPDFPage_GetAnnotCount(raw))):
        annot = pdfium_c.FPDFPage_GetAnnot(raw, index)
        if not annot:
            continue
        try:
            subtype = pdfium_c.FPDFAnnot_GetSubtype(annot)
            never_drawn = pdfium_c.FPDFAnnot_GetFlags(annot) & (_HIDDEN_FLAG | _NO_VIEW_FLAG)
        finally:
            pdfium_c.FPDFPage_CloseAnnot(annot)
        if never_drawn:
            removed = bool(pdfium_c.FPDFPage_RemoveAnnot(raw, index)) or removed
        elif subtype in _DRAWN_TEXT:
            drawn_text = True
    if not drawn_text:
        return removed
    flattened = pdfium_c.FPDFPage_Flatten(raw, pdfium_c.FLAT_NORMALDISPLAY) == pdfium_c.FLATTEN_SUCCESS
    return flattened or removed


class _PageToPixels:
    """Page space -> pixels of the page rendered at ``size`` (pdfium's display matrix, any /Rotate)."""

    def __init__(self, page: pdfium_c.FPDF_PAGE, size: tuple[int, int]) -> None:
        # pdfium answers in whole device pixels: ask at 256 times the size for the affine map's terms.
        big = (size[0] * _SUBPIXEL, size[1] * _SUBPIXEL)
        dx, dy = ctypes.c_int(), ctypes.c_int()
        points = []
        for x, y in ((0.0, 0.0), (1000.0, 0.0), (0.0, 1000.0)):
            pdfium_c.FPDF_PageToDevice(page, 0, 0, big[0], big[1], 0, x, y, dx, dy)
            points.append((dx.value / _SUBPIXEL, dy.value / _SUBPIXEL))
        (ex, ey), (px, py), (qx, qy) = points
        self._m = ((px - ex) / 1000, (qx - ex) / 1000, ex, (py - ey) / 1000, (qy - ey) / 1000, ey)

    @property
    def upright(self) -> bool:
        """Whether page x runs left to right across the pixels and y only down them (no /Rotate)."""
        a, c, _, b, _, _ = self._m
        return a > 0 and c == 0 and b == 0

    def across(self, x: float) -> float:
        """The pixel column of page-space ``x`` (an upright page: any y)."""
        a, _, e, _, _, _ = self._m
        return a * x + e

    def rect(self, box: tuple[float, float, float, float], pad: int) -> tuple[int, int, int, int]:
        """The pixel rectangle covering ``box`` (left, bottom, right, top in page space), padded."""
        a, c, e, b, d, f = self._m
        if c == 0 and b == 0:  # no /Rotate (or 180): x maps to x, y to y
            xa, xb = a * box[0] + e, a * box[2] + e
            ya, yb = d * box[1] + f, d * box[3] + f
            xs, ys = (xa, xb) if xa <= xb else (xb, xa), (ya, yb) if ya <= yb else (yb, ya)
            return (
                math.floor(xs[0]) - pad,
                math.floor(ys[0]) - pad,
                math.ceil(xs[1]) + pad,
                math.ceil(ys[1]) + pad,
            )
        corners = [(x, y) for x in (box[0], box[2]) for y in (box[1], box[3])]
        px = [a * x + c * y + e for x, y in corners]
        py = [b * x + d * y + f for x, y in corners]
        return (
            math.floor(min(px)) - pad,
            math.floor(min(py)) - pad,
            math.ceil(max(px)) + pad,
            math.ceil(max(py)) + pad,
        )


def _render(page: pdfium.PdfPage, frame: tuple[int, int, int, int, tuple[int, int]]) -> bytes:
    """The pixels (BGRx) of the rectangle ``frame`` of the page rendered at ``frame[4]``, on white
    paper, with annotations and form fields as a viewer draws them."""
    x0, y0, width, height, size = frame
    bitmap = pdfium_c.FPDFBitmap_Create(width, height, 0)
    if not bitmap:
        raise MemoryError("pdfium could not allocate a bitmap")
    try:
        pdfium_c.FPDFBitmap_FillRect(bitmap, 0, 0, width, height, 0xFFFFFFFF)
        pdfium_c.FPDF_RenderPageBitmap(bitmap, page.raw, -x0, -y0, size[0], size[1], 0, pdfium_c.FPDF_ANNOT)
        formenv = getattr(page.pdf, "formenv", None)
        if formenv is not None:  # widgets a flattening left (a viewer draws them over the page)
            flags = pdfium_c.FPDF_ANNOT
            pdfium_c.FPDF_FFLDraw(formenv.raw, bitmap, page.raw, -x0, -y0, size[0], size[1], 0, flags)
        stride = pdfium_c.FPDFBitmap_GetStride(bitmap)
        buffer = pdfium_c.FPDFBitmap_GetBuffer(bitmap)
        data = ctypes.string_at(buffer, stride * height)
        if stride != width * 4:
            data = b"".join(data[row * stride : row * stride + width * 4] for row in range(height))
        return data
    finally:
        pdfium_c.FPDFBitmap_Destroy(bitmap)


def _ink(a: bytes, b: bytes, flags: bytes, stride: int, rect: tuple[int, int, int, int], need: int) -> bool:
    """Whether ``need`` pixels of ``rect`` differ between ``a`` and ``b`` by _CONTRAST in some channel.

    ``flags`` marks the bytes worth checking (see _candidate_bytes): ``find`` skips the rest in C.
    """
    x0, y0, x1, y1 = rect
    found = 0
    for y in range(y0, y1):
        end = y * stride + x1 * 4
        at = flags.find(1, y * stride + x0 * 4, end)
        while at >= 0:
            if abs(a[at] - b[at]) >= _CONTRAST:
                found += 1
                if found >= need:
                    return True
                at = (at // 4 + 1) * 4  # the next pixel
            else:
                at += 1
            at = flags.find(1, at, end)
    return False


def _candidate_bytes(a: bytes, b: bytes) -> bytes:
    """1 where a byte of ``a`` and ``b`` may differ by _CONTRAST, else 0: two values 64 apart differ in
    one of their top two bits, so their XOR (computed in C, as big integers) is at least 64."""
    xor = int.from_bytes(a, "little") ^ int.from_bytes(b, "little")
    return xor.to_bytes(len(a), "little").translate(_HIGH_BITS)


# A page whose largest picture covers this share of it is a page image (a scan, a photographed sheet).
SCAN_IMAGE_SHARE = 0.5
# On a page image, fewer readable characters than this a person sees is far less text than ink: the
# picture is what the page says (a searchable scan's layer is invisible; a caption or page number is not
# the page).
MIN_SHOWN_CHARS = 20
_MAX_OBJECTS = 5_000  # page objects looked at for page images (a page of vector art has many more)
_UNREADABLE = frozenset("\x00\ufffd\ufeff")


def reads_as_scan(page: pdfium.PdfPage, checks: GlyphChecks, text: str) -> bool:
    """Whether ``page``'s text is not what it shows, so only the pixels (OCR) can say what it says.

    True when it has text and none of it is both drawn (the cheap checks) and mapped to Unicode (an
    invisible layer, render mode 3: a searchable scan; glyphs without ToUnicode), when a page image
    is drawn over all of its text (a sandwich with the layer under the picture), or when a page image
    carries fewer than MIN_SHOWN_CHARS readable characters a person sees (image-only pages included).
    """
    shown = 0
    for index, char in enumerate(text):
        if char.isspace() or char in _UNREADABLE or not checks.drawn(index):
            continue
        shown += 1
        if shown >= MIN_SHOWN_CHARS:
            # A page of text: a scan only if a page image is drawn over all of it (read from the end
            # of the page's objects, so a page that ends in text costs a few calls).
            return _image_over_text(page)
    if text.strip() and shown == 0:
        return True  # text, none of it readable where it is drawn
    return shown < MIN_SHOWN_CHARS and _largest_image_share(page) >= SCAN_IMAGE_SHARE


def _image_share(page: pdfium.PdfPage, obj: pdfium_c.FPDF_PAGEOBJECT) -> float:
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
        return 0.0
    width, height = page.get_size()
    w = max(0.0, min(float(right.value), width) - max(float(left.value), 0.0))
    h = max(0.0, min(float(top.value), height) - max(float(bottom.value), 0.0))
    return float(w * h / max(width * height, 1e-6))


def _is_image(obj: pdfium_c.FPDF_PAGEOBJECT, kind: int) -> bool:
    return kind == pdfium_c.FPDF_PAGEOBJ_IMAGE or (kind == pdfium_c.FPDF_PAGEOBJ_FORM and _holds(obj, False))


def _image_over_text(page: pdfium.PdfPage) -> bool:
    """Whether a page image (SCAN_IMAGE_SHARE of the page or more) is drawn after every text object."""
    raw = page.raw
    count = pdfium_c.FPDFPage_CountObjects(raw)
    for index in range(count - 1, max(count - _MAX_OBJECTS, 0) - 1, -1):
        obj = pdfium_c.FPDFPage_GetObject(raw, index)
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == pdfium_c.FPDF_PAGEOBJ_TEXT or (kind == pdfium_c.FPDF_PAGEOBJ_FORM and _holds(obj, True)):
            return False
        if _is_image(obj, kind) and _image_share(page, obj) >= SCAN_IMAGE_SHARE:
            return True
    return False


def _largest_image_share(page: pdfium.PdfPage) -> float:
    """The share of the page its largest image (or form holding one) covers."""
    raw = page.raw
    best = 0.0
    for index in range(min(pdfium_c.FPDFPage_CountObjects(raw), _MAX_OBJECTS)):
        obj = pdfium_c.FPDFPage_GetObject(raw, index)
        if _is_image(obj, pdfium_c.FPDFPageObj_GetType(obj)):
            best = max(best, _image_share(page, obj))
    return best


def _holds(form: pdfium_c.FPDF_PAGEOBJECT, text: bool, depth: int = 0) -> bool:
    """Whether the form XObject ``form`` holds a text object (``text``) or an image, a few levels deep."""
    wanted = pdfium_c.FPDF_PAGEOBJ_TEXT if text else pdfium_c.FPDF_PAGEOBJ_IMAGE
    for index in range(min(pdfium_c.FPDFFormObj_CountObjects(form), _MAX_OBJECTS)):
        obj = pdfium_c.FPDFFormObj_GetObject(form, index)
        kind = pdfium_c.FPDFPageObj_GetType(obj)
        if kind == wanted or (
            kind == pdfium_c.FPDF_PAGEOBJ_FORM and depth < 3 and _holds(obj, text, depth + 1)
        ):
            return True
    return False
