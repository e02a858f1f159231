"""The text layer proposes; the pixels decide (issue 26): what the page a viewer draws spells where a
user's address is in the text layer.

The text layer can lie about the glyphs (a ToUnicode map or /ActualText spelling another address),
and glyphs can be drawn so nobody reads them (squashed by Tz or a matrix to hairlines, stacked by a
negative Tc, stroked into a bar, blacked out inside the same TJ, placed right to left). The ink check
(visibility.shows) passes all of those. So each occurrence of a user's address that shows ink is
rendered as a viewer draws it (the lines of its glyphs, at OCR resolution, annotations and fields as a
viewer shows them) and read by Tesseract (one text line per render: psm 13, then psm 7 with the
address characters only; an address with full stops that still reads close, once more with white set
beside its stops in the page's own gaps: _dot_cuts), and ``judge`` compares:

  READ     the pixels spell the address (case-insensitively, whitespace removed): it may link.
  LIKE     they spell it up to the characters OCR cannot tell apart (l/1/I, O/0, rn/m, and an `l`/`I`
           that OCR slips in beside a `1` or drops there: ``alike``); it may link
           only when no other user's address reads the same that way (the caller checks: then
           ambiguous), so ``Check.read`` says what was read.
  UNREAD   ink that reads close to the address but not as it: perhaps an OCR slip, perhaps not. It can
           never link, but it still names its user, so a second user on the page makes it ambiguous
           (a wrong link is worse than a miss).
  REFUSED  the pixels plainly spell something else, or nothing (far from the address), or no ink.

Callers hold PDFIUM_LOCK. I/O: none (pdfium renders in memory, the engine reads a raster).
"""

from __future__ import annotations

import contextlib
import ctypes
import enum
import itertools
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

import pypdfium2.raw as pdfium_c

from pdfbatch.pdf import visibility
from pdfbatch.pdf.emails import find_obfuscated

if TYPE_CHECKING:
    from pdfbatch.pdf.pages import _Document

# Pixels per em-ish (the tallest tight glyph box of a line): Tesseract reads best at x-heights of ~20-30.
# Line heights in pixels to read at (the second only when the first read is close but not exact):
# measured on 27 addresses, at 36 or 44 px 7-8 misread, at 60 none; 44 reads some that 60 misreads.
_TARGETS = (60.0, 80.0, 44.0)
_MIN_SCALE = 200 / 72  # at least 200 dpi
_MAX_SCALE = 600 / 72
_MAX_LINE_PIXELS = 1_500_000
_PAD_X = 0.04  # of the line height, either side of the glyphs' tight boxes (not into a neighbour)
_BORDER = 12  # white pixels around the render: Tesseract wants a margin
# The look with white beside the full stops (_look): line heights of white set in, tried in turn
# (on DejaVu Serif and Sans, 40-60 px, `li.`/`l.`/`i.` addresses: 0.15 read 31 of 36 exactly, none
# apart 23), and the least gap, in line heights, the page must leave beside a stop for it.
_DOT_SPREADS = (0.15, 0.1)
_DOT_GAP = 0.06
# An UNREAD address is within this share of its length of edits (at least two) from what was read.
_CLOSE = 0.34
# What OCR cannot tell apart, written as one: applied to what was read and to the address alike.
_CONFUSABLE = str.maketrans({"1": "l", "I": "l", "i": "l", "|": "l", "0": "o", "O": "o"})
_LOCAL = frozenset("abcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+/=?^_`{|}~.-")
_DOMAIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789-")
_WHITELIST = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@.-_+!#$%&'*/=?^`{|}~[]()<>:;,\""
_CLASS_LOCAL = re.escape("".join(sorted(_LOCAL)))
_CLASS_DOMAIN = re.escape("".join(sorted(_DOMAIN)))


class Seen(enum.StrEnum):
    """What the pixels say about one address (best over its occurrences on the page)."""

    READ = "read"
    LIKE = "like"
    UNREAD = "unread"
    REFUSED = "refused"


_RANK = {Seen.READ: 0, Seen.LIKE: 1, Seen.UNREAD: 2, Seen.REFUSED: 3}


@dataclass(frozen=True)
class Check:
    """The verdict on one address; ``read`` is what the pixels spell there (LIKE: the caller looks it
    up, since a user with that address makes the page ambiguous)."""

    email: str
    seen: Seen
    read: str = ""


def squeeze(text: str) -> str:
    """``text`` as compared: NFKC, lowercased, without any whitespace."""
    return "".join(unicodedata.normalize("NFKC", text).lower().split())


def confusable(text: str, *, slips: bool = False) -> str:
    """``text`` squeezed, with OCR's look-alikes made one (l/1/I -> l, O/0 -> o, rn -> m); with
    ``slips``, an `l`/`I` beside a `1` taken out first (OCR writes `turing1012` as `turingl1012`)."""
    return _folded(squeeze(text), slips)[0]


def alike(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` read the same up to what OCR cannot tell apart (``confusable``, with or
    without its slips): a LIKE reading links only when no other user's address is alike."""
    return any(confusable(a, slips=s) == confusable(b, slips=s) for s in (False, True))


def judge(ocr: str, email: str) -> Check:
    """What ``ocr`` (the text read where ``email`` is drawn) says about ``email``."""
    read, want = squeeze(ocr), squeeze(email)
    if _bounded(read, want) or any(found == want for found, _, _ in find_obfuscated(" ".join(ocr.split()))):
        return Check(email, Seen.READ, want)
    if not want.isascii() and _unreadable_letters(want).search(read):
        return Check(email, Seen.READ, want)
    for slips in (False, True):
        loose_read, spans = _folded(read, slips)
        loose_want = _folded(want, slips)[0]
        at = _bounded_at(loose_read, loose_want) if loose_want else None
        if at is not None:
            # What was read there (the caller looks it up: another user's address makes it ambiguous).
            return Check(email, Seen.LIKE, read[spans[at][0] : spans[at + len(loose_want) - 1][1]])
    if _distance(want, read) <= max(2, int(_CLOSE * len(want))):
        return Check(email, Seen.UNREAD, read)
    return Check(email, Seen.REFUSED, read)


def confirm(document: _Document, emails: Sequence[str], shown: Sequence[str]) -> list[Check]:
    """A Check for each of ``emails`` (users' addresses on the page ``document`` read last): those
    in ``shown`` (which passed the ink check, in their page order) by reading their pixels, first;
    the rest REFUSED (no ink)."""
    page = document._page
    checks: list[Check] = []
    if page is not None and shown:
        engine = _engine()
        for email in shown:
            best = Check(email, Seen.REFUSED)
            inked = False
            for occurrence in page.occurrences:
                if occurrence.email != email and email not in occurrence.readings:
                    continue
                assert page.textpage is not None
                if not visibility.shows(page.page, page.textpage, page.checks, occurrence.glyphs):
                    continue
                inked = True
                check = _look(page, occurrence.glyphs, engine, email)
                if _RANK[check.seen] < _RANK[best.seen]:
                    best = check
                if best.seen is Seen.READ:
                    break
            if inked and best.seen is Seen.REFUSED:
                # Ink that passed the ink check but reads as nothing like the address: a lie of the
                # text layer, or OCR failing on what a person reads. Which one, the pixels cannot say;
                # so it never links, and it still names its user: with another user on the page the
                # file is ambiguous, never the other user's (CI: the matching property, two users
                # drawn plainly and one of them misread, linked the other).
                best = Check(email, Seen.UNREAD, best.read)
            checks.append(best)
    done = {check.email for check in checks}
    checks.extend(Check(email, Seen.REFUSED) for email in emails if email not in done)
    return checks


def load() -> None:
    """Load the OCR models now (before the reader is forked, so every reader inherits them)."""
    _engine().load()
    _strict_engine().load()


@cache
def _engine() -> Any:
    """The first opinion: psm 13 (a raw line: no page layout analysis, which a one-line render has no
    use for). Measured against psm 7 on bench section 1's first looks (100 résumés, 210 labelled
    addresses): 13.9 against 18.4 ms CPU a read, and 87 against 44 of the résumés read exactly."""
    from pdfbatch.ocr.engine import Tesseract

    return Tesseract(dpi=300, psm=13)


@cache
def _strict_engine() -> Any:
    """The engine limited to what addresses are written with (a second opinion: measured, it stops
    the fast model reading "c1" as "ct1" or "a" as "€"; it cannot make other glyphs spell the address,
    but it loses the spaces an obfuscated "ANNA AT EXAMPLE DOT ORG" needs, so it is not the first)."""
    from pdfbatch.ocr.engine import Tesseract

    engine = Tesseract(dpi=300, psm=7)
    engine.load()
    engine._api.SetVariable("tessedit_char_whitelist", _WHITELIST)
    return engine


def _look(page: Any, glyphs: Sequence[int], engine: Any, email: str) -> Check:
    """The best of a few readings of ``glyphs``: at each size of _TARGETS while they read close but
    neither READ nor LIKE; then, if still not read, with the other text objects that overlap their
    lines hidden.

    The last look is sound because the ink check (visibility.shows) has already found that every glyph
    changes the pixels of whatever is drawn under and over it; text of another object crossing the
    address (a layout engine's overflow: a sidebar heading running into the main column) is what it
    takes away, so OCR reads the glyphs themselves.
    """
    best = Check(email, Seen.REFUSED)
    for hide in (False, True):
        with _others_hidden(page, glyphs) if hide else contextlib.nullcontext(True) as hid:
            if not hid:
                break
            for reader in (engine, _strict_engine()):
                for target in _TARGETS:
                    check = judge(_read_glyphs(page, glyphs, reader, target), email)
                    if _RANK[check.seen] < _RANK[best.seen]:
                        best = check
                    if check.seen is not Seen.UNREAD:
                        break
                # LIKE is as good as READ for what follows (the caller's ambiguity check on
                # Check.read): further looks cost ~40 ms CPU each (bench section 1) and cannot
                # make another user's address read.
                if best.seen in (Seen.READ, Seen.LIKE):
                    return best
    if best.seen is Seen.UNREAD and "." in email:
        # The fast model glues a full stop to the letter before it (`li.nowak` read `linowak`,
        # `liinowak`; `l.silva` read `Lsilva`). Read once more with white space set on both sides
        # of the address's full stops: every pixel the viewer drew is kept, in its order; only
        # columns of white are added, and only in a gap the page itself leaves (_dot_cuts).
        for reader in (engine, _strict_engine()):
            for target in _TARGETS:
                for spread in _DOT_SPREADS:
                    check = judge(_read_glyphs(page, glyphs, reader, target, spread), email)
                    if check.seen in (Seen.READ, Seen.LIKE):
                        return check
    return best


@contextlib.contextmanager
def _others_hidden(page: Any, glyphs: Sequence[int]) -> Iterator[bool]:
    """Page-level text objects other than those drawing ``glyphs`` whose bounds cross their box,
    switched to invisible (mode 3) while inside; yields whether there were any."""
    boxes = [page.checks.boxes[i] for i in glyphs]
    x0, y0 = min(b[0] for b in boxes), min(b[1] for b in boxes)
    x1, y1 = max(b[2] for b in boxes), max(b[3] for b in boxes)
    own = {page.checks.objects[i] for i in glyphs}
    raw = page.page.raw
    hidden: list[tuple[Any, int]] = []
    left, bottom, right, top = (ctypes.c_float() for _ in range(4))
    try:
        for index in range(pdfium_c.FPDFPage_CountObjects(raw)):
            obj = pdfium_c.FPDFPage_GetObject(raw, index)
            if pdfium_c.FPDFPageObj_GetType(obj) != pdfium_c.FPDF_PAGEOBJ_TEXT:
                continue
            if ctypes.cast(obj, ctypes.c_void_p).value in own:
                continue
            if not pdfium_c.FPDFPageObj_GetBounds(obj, left, bottom, right, top):
                continue
            if right.value < x0 or left.value > x1 or top.value < y0 or bottom.value > y1:
                continue
            hidden.append((obj, pdfium_c.FPDFTextObj_GetTextRenderMode(obj)))
            pdfium_c.FPDFTextObj_SetTextRenderMode(obj, pdfium_c.FPDF_TEXTRENDERMODE_INVISIBLE)
        yield bool(hidden)
    finally:
        for obj, mode in hidden:
            pdfium_c.FPDFTextObj_SetTextRenderMode(obj, mode)


def _read_glyphs(page: Any, glyphs: Sequence[int], engine: Any, target: float, spread: float = 0.0) -> str:
    """The text OCR reads where ``glyphs`` are drawn: each line they are on rendered on its own (the
    glyphs' tight boxes across, the font's line height down), the lines side by side, read as one;
    with ``spread``, that many line heights of white set beside each full stop (_dot_cuts)."""
    textpage = page.textpage.raw
    loose = pdfium_c.FS_RECTF()
    lines: list[list[tuple[int, visibility.Box]]] = []
    for index in glyphs:
        tight = page.checks.boxes[index]
        pdfium_c.FPDFText_GetLooseCharBox(textpage, index, loose)
        box = (tight[0], min(loose.bottom, tight[1]), tight[2], max(loose.top, tight[3]))
        middle = (box[1] + box[3]) / 2
        if lines:
            last = lines[-1]
            bottom, top = min(b[1] for _, b in last), max(b[3] for _, b in last)
            if bottom <= middle <= top:
                last.append((index, box))
                continue
        lines.append([(index, box)])
    height = max(max(b[3] - b[1] for _, b in line) for line in lines)
    scale = min(_MAX_SCALE, max(_MIN_SCALE, target / max(height, 0.5)))
    cuts = [_dot_cuts(textpage, line) if spread else [] for line in lines]
    if spread and (not any(cuts) or page.page.get_rotation()):
        # No gap to widen (or a turned page, where _line_image sets no white): this look would
        # read the very pixels the looks before it read.
        return ""
    images = [
        _line_image(page.page, [b for _, b in line], scale, at, spread)
        for line, at in zip(lines, cuts, strict=True)
    ]
    return str(engine.read(_side_by_side([image for image in images if image is not None], scale)))


def _dot_cuts(textpage: Any, line: list[tuple[int, visibility.Box]]) -> list[float]:
    """Where, in page space across, white may be set beside the full stops of one line: the middle of
    each gap between a full stop and the glyph next to it in the text's order, when the page leaves
    white there (the next glyph starts at least _DOT_GAP line heights to the right of where the one
    before it ends). Overlapping, stacked or right-to-left glyphs leave no such gap, so their pixels
    are never pulled apart; nor is a stop drawn touching its letter."""
    height = max(b[3] for _, b in line) - min(b[1] for _, b in line)
    cuts = []
    for (left, a), (right, b) in itertools.pairwise(line):
        dots = (
            chr(pdfium_c.FPDFText_GetUnicode(textpage, left)),
            chr(pdfium_c.FPDFText_GetUnicode(textpage, right)),
        )
        if "." in dots and b[0] - a[2] >= _DOT_GAP * height:
            cuts.append((a[2] + b[0]) / 2)
    return cuts


def _line_image(
    page: Any, boxes: list[visibility.Box], scale: float, cuts: Sequence[float] = (), spread: float = 0.0
) -> Any:
    """The viewer's pixels (greyscale) of the rectangle around ``boxes`` (one line), or None; with
    ``cuts`` (page-space x), ``spread`` line heights of white put in at each (an upright page only)."""
    from PIL import Image

    pad = _PAD_X * (max(b[3] for b in boxes) - min(b[1] for b in boxes))
    union = (
        min(b[0] for b in boxes) - pad,
        min(b[1] for b in boxes),
        max(b[2] for b in boxes) + pad,
        max(b[3] for b in boxes),
    )
    page_w, page_h = page.get_size()
    while True:
        size = (max(1, round(page_w * scale)), max(1, round(page_h * scale)))
        to_pixels = visibility._PageToPixels(page.raw, size)
        x0, y0, x1, y1 = to_pixels.rect(union, pad=1)
        x0, y0, x1, y1 = max(x0, 0), max(y0, 0), min(x1, size[0]), min(y1, size[1])
        if (x1 - x0) * (y1 - y0) <= _MAX_LINE_PIXELS or scale <= 0.5:
            break
        scale /= 2
    if x1 <= x0 or y1 <= y0:
        return None
    width, rows = x1 - x0, y1 - y0
    bgrx = visibility._render(page, (x0, y0, width, rows, size))
    image = Image.frombuffer("RGBX", (width, rows), bgrx, "raw", "BGRX", 0, 1).convert("L")
    columns = sorted({round(to_pixels.across(x)) - x0 for x in cuts}) if to_pixels.upright else []
    columns = [c for c in columns if 0 < c < width]
    if not columns:
        return image
    gap = max(1, round(spread * rows))
    spaced = Image.new("L", (width + gap * len(columns), rows), 255)
    for n, (start, end) in enumerate(itertools.pairwise([0, *columns, width])):
        spaced.paste(image.crop((start, 0, end, rows)), (start + n * gap, 0))
    return spaced


def _side_by_side(images: list[Any], scale: float) -> Any:
    """One greyscale raster: ``images`` left to right, bottoms aligned, in a white border."""
    from PIL import Image

    from pdfbatch.ocr.engine import Raster

    if not images:
        return Raster.blank()
    gap = _BORDER // 2
    width = sum(image.width for image in images) + gap * (len(images) - 1) + 2 * _BORDER
    height = max(image.height for image in images) + 2 * _BORDER
    canvas = Image.new("L", (width, height), 255)
    x = _BORDER
    for image in images:
        canvas.paste(image, (x, height - _BORDER - image.height))
        x += image.width + gap
    return Raster(width, height, width, canvas.tobytes(), round(scale * 72))


def _bounded_at(read: str, want: str) -> int | None:
    """Where ``want`` occurs in ``read`` as a whole address (no address character glued to it)."""
    start = read.find(want)
    while start >= 0:
        end = start + len(want)
        before = read[start - 1] if start else ""
        after = read[end] if end < len(read) else ""
        if before not in _LOCAL and not (after in _DOMAIN and after):
            return start
        start = read.find(want, start + 1)
    return None


def _unreadable_letters(want: str) -> re.Pattern[str]:
    """``want`` as a pattern in which each run of characters the English model cannot read (outside
    ASCII: Cyrillic, Greek, CJK) stands for any ink read as one to three characters per letter; the
    rest must be read exactly. (The text layer's word is taken for those letters, not for the rest.)"""
    parts = []
    for run in re.findall(r"[\x00-\x7f]+|[^\x00-\x7f]+", want):
        parts.append(re.escape(run) if run.isascii() else f"[^@.\\s]{{{len(run)},{3 * len(run)}}}")
    return re.compile(f"(?<![{_CLASS_LOCAL}]){''.join(parts)}(?![{_CLASS_DOMAIN}])")


def _bounded(read: str, want: str) -> bool:
    return bool(want) and _bounded_at(read, want) is not None


def _folded(text: str, slips: bool) -> tuple[str, list[tuple[int, int]]]:
    """``text`` (squeezed) as ``confusable`` writes it, and for each of its characters the span of
    ``text`` it stands for (rn -> m: two; an `l` slipped in beside a `1` belongs to no character)."""
    if slips:
        kept = [
            (m.start(), m.group())
            for m in re.finditer(r"(?<=1)[il|]|[il|](?=1)|(.)", text, re.S)
            if m.group(1)
        ]
    else:
        kept = list(enumerate(text))
    out: list[str] = []
    spans: list[tuple[int, int]] = []
    for at, char in kept:
        char = char.translate(_CONFUSABLE)
        if char == "n" and out and out[-1] == "r" and spans[-1][1] == at:
            out[-1], spans[-1] = "m", (spans[-1][0], at + 1)
            continue
        out.append(char)
        spans.append((at, at + 1))
    return "".join(out), spans


def _distance(want: str, read: str) -> int:
    """The fewest edits that turn ``want`` into some part of ``read`` (free text around it)."""
    if not read:
        return len(want)
    previous = [0] * (len(read) + 1)  # a match may start anywhere in ``read``
    for i, a in enumerate(want, start=1):
        current = [i]
        for j, b in enumerate(read, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return min(previous)  # and end anywhere
