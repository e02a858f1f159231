"""A page's characters -> the addresses a reader sees there, whole: the layout half of the rule "whole".

pdfium lists a page's characters in reading order and inserts characters of its own (``generated``):
a space where glyphs stand apart, CR LF where a line ends. Text alone cannot tell a wrapped address from
two words on two lines, nor a letter-spaced heading from words, so this module looks at where the
glyphs are (their loose boxes, in page space) around every "@":

- Letter spacing. A heading set in tracked capitals (CSS ``letter-spacing``) gets a generated space
  between glyphs that stand apart. When the "@" itself stands apart from the glyphs beside it (by
  about the same gap on both sides), the address is tracked: generated spaces up to 1.6 times that gap
  are dropped, wider ones (the word spaces of the heading) end the address.
- Line wraps. A line break is inside an address only when the two lines are one block (the second
  directly below the first, same size, aligned left, centred or right). Every such break has two
  readings, joined and separate, and is decided JOIN, END or EITHER (both plausible). On the
  local-part side a head ending in ``. _ + -`` goes on, however early its line ended (``Email:
  firstname.`` / ``lastname@domain``: the tail alone is no reading, since TeX's ``\\url`` and others
  break after a dot); otherwise a line that ends early ends its word ("Email" / "jane@..."), a full
  line holding nothing but the head is joined (a word too long for it), and so is a head on a full
  line after other words or glued to a "(" (``Email: a`` / ``0.a@...`` as ``word-break: break-all``
  breaks, ``(a00`` / ``0.a@...``), unless it is a word: capitalised or in capitals, a number, a lead
  word ("please write to" / "jane@..."), or letters ending the widest line of a block that is not
  filled to one edge ("... our team" / "jane@..."). On the domain side an unfinished domain ending in a
  dot is joined (``maria@gmail.`` / ``com``); a full stop after a complete domain ends it (``Reach me at
  oscar.wu@example.org.`` / "I look forward"), unless the line is full and the next starts with one
  lower-case label that is a real top-level domain (``...@mail.co.`` / ``uk``): EITHER. An
  unfinished domain on a full line is joined (``gma`` / ``il.com``); a complete one (``gmail.co`` /
  ``m``) only when the joined last label is a real top-level domain (``com``), never to a word of the
  next line (``gmail.com`` / ``Phone``); a next line in lower case or digits that goes on as a domain
  to a real TLD (or fills its line) after a label that is a TLD itself (``mail.co`` / ``m.au``,
  ``sd.wf`` / ``tkge.info``, ``x.ar`` / ``0.com.``, ``cs.ac`` / ``-bonn.de``): EITHER, unless it is a
  web address (``www.``, a ``/`` path) or holds an "@" of its own. An EITHER
  break gives the occurrence ``readings`` (what each combination names), which pdfbatch.matching
  decides over. The head or tail fragment of a re-joined address is never a candidate on its own.
- Full lines. A line is full when what could not have been split from the next line's first glyph
  (the glyph and closing punctuation after it: no layout starts a line with ``. , ; : ! ? )``) would
  not have fitted within the block's right edge (``...@gmail.co`` / ``m.``: "m." moved down together).
- Column feet. When the next line, in the same size, starts higher up and further right (the text flows
  on into the next column), the layout may have broken the address at the column's foot, anywhere in it
  (``overflow-wrap: anywhere``): the break is judged as one inside a block (the top line's fullness
  measured in its own column), and what would join there is EITHER, since the join is not established
  either. A column ending in a word ("E-mail" / [next column] "jane@...") still ends its word.
- Glyphs without a Unicode mapping (NUL) end an address; invisible extraction artefacts are skipped.

Pure: it reads the characters through the small ``Glyphs`` interface (pages.py implements it over
pdfium; the tests over lists), and asks for boxes only near an "@", so a page costs one pass over its
text plus a few dozen lookups per address.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from pdfbatch.pdf.emails import (
    ARTEFACT_CHARS,
    HAS_OBFUSCATION,
    find_obfuscated,
    find_spans,
    is_domain_char,
    is_local_char,
)
from pdfbatch.pdf.tlds import TLDS

# Names reserved for examples and tests (RFC 2606, RFC 6761): complete domains, though not in the root.
_RESERVED_TLDS = frozenset({"example", "test", "invalid", "localhost"})

Box = tuple[float, float, float, float]  # left, bottom, right, top; page space (y up)

# Characters read as others: ligatures spelled out, and U+FFFE, pdfium's mark for a hyphen that ended a
# line (it joins the two lines itself): in an address the hyphen is part of it ("jean-" / "pierre@").
_EXPANSIONS = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl"}
_EXPANSIONS |= {"\ufb05": "st", "\ufb06": "st", "\ufffe": "-"}
_MAX_LOCAL = 65  # one more than a local part may hold, so a longer run is seen as too long
_MAX_DOMAIN = 254
_TRACKING_RATIO = 1.6  # a generated space this much wider than the tracking is a word space
_HYPHENS = "-\u2010\u2011\ufffe"
_NO_LINE_START = ".,;:!?)]}"  # closing punctuation: a layout never starts a line with it (UAX #14)
_CONTINUES = "._+"  # a local part's characters that no word ends with: a head ending in one goes on
# The words that end a line before an address on it (a label, a preposition): on a full line after other
# words, a head that is one of them, a capitalised word or a number is a word; any other head goes on.
_LEAD_WORDS = frozenset(
    "to at me us is on or and via by from email e-mail mail contact address write reach".split()
)


class Glyphs(Protocol):
    """A page's characters as pdfium lists them."""

    @property
    def text(self) -> str:
        """One character per glyph index; generated line breaks are "\\r\\n", unmapped glyphs NUL."""
        ...

    def generated(self, index: int) -> bool:
        """Whether pdfium inserted this character (a space or a line break) rather than a glyph."""
        ...

    def box(self, index: int) -> Box:
        """The glyph's loose box (font ascent to descent, advance width) in page space."""
        ...


@dataclass(frozen=True)
class Occurrence:
    """One place an address is shown: the glyphs (by index) that draw it, generated characters excluded.

    ``readings``: when a line break next to it may join or separate and both readings are plausible,
    what each reading names (None: no address), the joined one first; ``email`` is the first address
    among them. Empty when the glyphs read one way only. pdfbatch.matching decides over them."""

    email: str
    glyphs: tuple[int, ...]
    readings: tuple[str | None, ...] = ()


class _Break(enum.Enum):
    JOIN = "join"  # one word across the line break
    END = "end"  # the break ends the address
    EITHER = "either"  # both readings are plausible: the address has readings


def occurrences(glyphs: Glyphs) -> list[Occurrence]:
    """Every address shown on the page, in reading order, with the glyphs that show it."""
    text = glyphs.text
    reader = _Reader(glyphs, text)
    found: list[Occurrence] = []
    taken: set[int] = set()
    at = text.find("@")
    while at >= 0:
        if at not in taken and not glyphs.generated(at):
            occurrence = reader.address_at(at)
            if occurrence is not None:
                found.append(occurrence)
                taken.update(occurrence.glyphs)
        at = text.find("@", at + 1)
    if HAS_OBFUSCATION.search(text):
        found.extend(reader.obfuscated(taken))
        found.sort(key=lambda o: min(o.glyphs))  # reading order, the decoded ones among the others
    return found


class _Reader:
    def __init__(self, glyphs: Glyphs, text: str) -> None:
        self.glyphs = glyphs
        self.text = text
        self._boxes: dict[int, Box] = {}

    def box(self, index: int) -> Box:
        box = self._boxes.get(index)
        if box is None:
            box = self._boxes[index] = self.glyphs.box(index)
        return box

    # --- one address around an "@" ---

    def address_at(self, at: int) -> Occurrence | None:
        tracking = self._tracking(at)
        left, left_fork = self._walk(at, -1, tracking)
        right, right_fork = self._walk(at, +1, tracking)
        joined = self._read(at, left, right)
        if left_fork is None and right_fork is None:
            return joined
        # A break that may join or separate: every combination of the two sides' readings.
        lefts = [left] if left_fork is None else [left, [*left[:left_fork], (" ", None)]]
        rights = [right] if right_fork is None else [right, [*right[:right_fork], (" ", None)]]
        found = [self._read(at, lf, rt) for lf in lefts for rt in rights]
        readings = tuple(dict.fromkeys(o.email if o is not None else None for o in found))
        anyone = next((o for o in found if o is not None), None)
        if anyone is None:
            return None
        if len(readings) == 1:
            return anyone
        return Occurrence(anyone.email, joined.glyphs if joined is not None else anyone.glyphs, readings)

    def _read(
        self, at: int, left: list[tuple[str, int | None]], right: list[tuple[str, int | None]]
    ) -> Occurrence | None:
        reading = [*reversed(left), ("@", at), *right]
        string = "".join(char for char, _ in reading)
        position = len(left)
        for email, start, end in find_spans(string):
            if start <= position < end:
                indices = tuple(dict.fromkeys(i for _, i in reading[start:end] if i is not None))
                return Occurrence(email, indices)
        return None

    def _walk(
        self, at: int, step: int, tracking: float | None
    ) -> tuple[list[tuple[str, int | None]], int | None]:
        """The characters read from the "@" outwards until the address must end (the boundary
        character included, so the pattern sees it), and where a line break that may also separate
        was read across (the length of the characters before it), if one was."""
        text, glyphs = self.text, self.glyphs
        accepts = is_local_char if step < 0 else is_domain_char
        limit = _MAX_LOCAL if step < 0 else _MAX_DOMAIN
        out: list[tuple[str, int | None]] = []
        fork: int | None = None
        i = at + step
        while 0 <= i < len(text) and len(out) < limit:
            char = text[i]
            if char in ARTEFACT_CHARS:
                i += step
                continue
            if char in "\r\n " and glyphs.generated(i):
                # What pdfium inserted stands for a gap: a space or the start of another line. Its own
                # kind is no guide (it puts a line break between glyphs of one line drawn out of
                # order, and a space between two lines), so the glyphs' positions decide.
                before, after = self._line_break(i)
                if before is None or after is None:
                    out.append((" ", None))
                    break
                a, b = self.box(before), self.box(after)
                if _same_line(a, b):
                    gap, height = b[0] - a[2], a[3] - a[1]
                    join = tracking is not None and gap <= _TRACKING_RATIO * tracking
                    if not join and " " not in text[before + 1 : after]:
                        join = -0.3 * height <= gap <= 0.25 * height  # glyphs that touch
                    if not join:
                        out.append((" ", None))
                        break
                else:
                    verdict = self._wrap(before, after, at, out, step)
                    if verdict is _Break.EITHER and fork is None:
                        fork = len(out)  # read on across it; the caller also reads it as separating
                    elif verdict is not _Break.JOIN:
                        out.append((" ", None))
                        break
                i = before if step < 0 else after
                continue
            expanded = _EXPANSIONS.get(char)
            if expanded is not None:
                out.extend((c, i) for c in (reversed(expanded) if step < 0 else expanded))
                i += step
                continue
            out.append((char, i))
            if not accepts(char):
                break
            i += step
        return out, fork

    # --- letter spacing ---

    def _tracking(self, at: int) -> float | None:
        """The tracking around a letter-spaced "@": the gap between it and the glyphs beside it, when
        that gap is clearly open (a tenth of its height) and about the same on both sides."""
        text, glyphs = self.text, self.glyphs
        here = self.box(at)
        height = here[3] - here[1]
        gaps = []
        for step in (-1, 1):
            i = at + step
            while 0 <= i < len(text) and text[i] in " \r\n" and glyphs.generated(i):
                i += step
            if not (0 <= i < len(text)) or glyphs.generated(i) or text[i].isspace():
                continue
            other = self.box(i)
            if not _same_line(here, other):
                continue
            gaps.append(other[0] - here[2] if step > 0 else here[0] - other[2])
        if not gaps or min(gaps) <= 0.1 * height:
            return None
        if max(gaps) > _TRACKING_RATIO * min(gaps):
            return None
        return max(gaps)

    # --- line wraps ---

    def _line_break(self, i: int) -> tuple[int | None, int | None]:
        """The last glyph before the line break at ``i`` and the first glyph after it."""
        text, glyphs = self.text, self.glyphs
        before = i
        while before >= 0 and text[before] in "\r\n " and glyphs.generated(before):
            before -= 1
        after = i
        while after < len(text) and text[after] in "\r\n " and glyphs.generated(after):
            after += 1
        if before < 0 or after >= len(text):
            return None, None
        return before, after

    def _line(self, index: int) -> tuple[int, int]:
        """First and last glyph of the visual line holding glyph ``index``.

        pdfium marks where it sees gaps (generated spaces and line breaks) but not reliably which of
        them start another line, so each one is checked: the line goes on while the glyphs on both
        sides of a gap stand on the same baseline. A U+FFFE (a hyphen that ended a line, joined with
        the next by pdfium) ends it too.
        """
        return self._line_end(index, -1), self._line_end(index, +1)

    def _line_end(self, index: int, step: int) -> int:
        text = self.text
        last = index
        while True:
            gap = self._next_gap(last, step)
            if gap is None:
                return len(text) - 1 if step > 0 else 0
            if text[gap] == "\ufffe":
                return gap if step > 0 else gap + 1
            before, after = self._line_break(gap)
            if before is None or after is None:
                return last
            near, far = (before, after) if step > 0 else (after, before)
            if not _same_line(self.box(near), self.box(far)):
                return near
            last = far

    def _next_gap(self, index: int, step: int) -> int | None:
        """The next generated space or line break (or U+FFFE) from glyph ``index`` in direction ``step``."""
        text, glyphs = self.text, self.glyphs
        position = index
        while True:
            if step > 0:
                found = [f for f in (text.find(c, position + 1) for c in " \r\ufffe") if f >= 0]
                position = min(found) if found else -1
            else:
                position = max(text.rfind(c, 0, position) for c in " \n\ufffe")
            if position < 0:
                return None
            if text[position] == "\ufffe" or glyphs.generated(position):
                return position

    def _wrap(
        self, before: int, after: int, at: int, read: list[tuple[str, int | None]], step: int
    ) -> _Break:
        """Whether the line break between glyphs ``before`` and ``after`` is inside the address."""
        text = self.text
        if step < 0:
            if not is_local_char(text[before]):
                return _Break.END
        elif not is_domain_char(text[after]):
            return _Break.END
        top_line, bottom_line = self._line(before), self._line(after)
        if not self._one_block(top_line, bottom_line):
            if not self._flows_on(top_line, bottom_line):
                return _Break.END
            # The text goes on higher up, in the next column: the layout may have broken the address
            # at the column's foot as at any line end (overflow-wrap: anywhere breaks anywhere in it),
            # so the break is read as one inside a block, the top line's fullness measured in its own
            # column. Only the join is not established there: what would join is EITHER.
            full = self._full_in_column(top_line, before, after)
            verdict = self._inside(at, read, before, after, (top_line, None), full=full, step=step)
            return _Break.EITHER if verdict is _Break.JOIN else verdict
        if self._paragraph_gap(top_line, bottom_line):
            return _Break.END
        full = self._full(top_line, bottom_line, before, after)
        return self._inside(at, read, before, after, (top_line, bottom_line), full=full, step=step)

    def _inside(
        self,
        at: int,
        read: list[tuple[str, int | None]],
        before: int,
        after: int,
        lines: tuple[tuple[int, int], tuple[int, int] | None],
        *,
        full: bool,
        step: int,
    ) -> _Break:
        """A line break that may fall inside the address (the two lines are one run of text; the
        bottom one None at a column's foot)."""
        if self.text[before] in _HYPHENS:
            return _Break.JOIN
        if step < 0:
            return self._local_wrap(before, after, lines, full)
        return self._domain_wrap(at, read, after, full)

    def _local_wrap(
        self, before: int, after: int, lines: tuple[tuple[int, int], tuple[int, int] | None], full: bool
    ) -> _Break:
        top_line, bottom_line = lines
        head_start = before
        while head_start > top_line[0] and is_local_char(self.text[head_start - 1]):
            head_start -= 1
        if head_start > 0 and self.text[head_start - 1] == "@":
            return _Break.END  # the top line ends an address of its own; this one starts below
        head = self.text[head_start : before + 1]
        if head[-1] in _CONTINUES or self.text[after] == ".":
            # A head that could start an address ("Email: firstname." / "lastname@..."): the tail
            # alone is not a plausible reading, however early the line ended (TeX's \url, for one,
            # breaks after a dot, so a short line says nothing about the unbreakable chunk below).
            return _Break.JOIN
        if not full:
            return _Break.END  # a line that ends early ends its word: "Email" / "jane@..."
        word = head.replace("-", "")
        capitalised = word[:1].isupper() and word[1:].islower() and word.isalpha()
        if head_start == top_line[0]:
            # The whole line is the head: a word too long for it, broken by the layout (but a
            # capitalised word on a line of its own is a word: "Contact" / "jane@...").
            return _Break.END if capitalised else _Break.JOIN
        if word.isalpha() and word[:1].isupper() and (word[1:].islower() or word.isupper()):
            return _Break.END  # a capitalised word, or capitals ("E-mail", "EMAIL", "M" of a tracked "COM")
        if word.isdigit() or head.lower() in _LEAD_WORDS:
            return _Break.END  # a word wrapped before the address ("... write to", "555 0100")
        # Any other head on a full line could start the address, when it is glued to what comes before
        # it ("(a00" / "0.a@..."), holds more than letters ("at mgc-vh8" / "0yf@..."), or ends a line
        # filled to its block's edge like the lines beside it ("Email: a" / "0.a@...": a layout that
        # breaks anywhere, CSS word-break: break-all, filled it there): the tail alone is no reading.
        # A word of letters ending the widest line of its block is a word ("... our team" / "jane@..."):
        # there, that the next glyph would not have fitted says nothing about where the layout broke.
        glued = not self.text[head_start - 1].isspace()
        if glued or not word.isalpha() or bottom_line is None or self._filled(top_line, bottom_line):
            return _Break.JOIN
        return _Break.END

    def _domain_wrap(self, at: int, read: list[tuple[str, int | None]], after: int, full: bool) -> _Break:
        domain = "".join(char for char, _ in read)
        tail = self._run(after)
        if not tail or "@" in self._word(after):
            return _Break.END  # the next line starts an address of its own ("0.gg%2pgf=@...")
        if domain.endswith("."):
            return self._after_dot(domain[:-1], tail, after, full)
        if tail[0] == "." and tail[1:2].islower():
            return _Break.JOIN  # no word starts with a dot: "...@uni.co" / ".uk" (but ".NET" is a word)
        if not full:
            return _Break.END
        last = domain.rsplit(".", 1)[-1] if "." in domain else ""
        if not last or _tld(last) is not True:
            return _Break.JOIN  # an unfinished domain broken by the layout ("gma" / "il.com")
        word = tail.rstrip(".")  # a sentence's full stop after the last glyphs ("gmail.co" / "m.")
        piece = word.split("-", 1)[0]
        if piece and "." not in word and _tld(last + piece) is True:
            return _Break.JOIN  # "gmail.co" / "m" (never "gmail.com" / "-...": nothing to join there)
        end = after + len(tail)
        # A tail in lower case or digits (or a hyphen) that goes on as a domain ending in a real TLD, or
        # that fills its line and may wrap again: the layout may have broken the domain after a label
        # that is a TLD itself ("mail.co" / "m.au", "sd.wf" / "tkge.info", "x.ar" / "0.com.", "uni.ac" /
        # "-bonn.de"). The address ending its line is as plausible: both readings.
        goes_on = tail[0].islower() or tail[0].isdigit() or (tail[0] == "-" and tail[1:2].isalnum())
        # (but never into a web address below the address: "www.jane.info", "linkedin.com/in/...")
        goes_on = goes_on and not tail.lower().startswith("www.") and self.text[end : end + 1] != "/"
        wraps = end < len(self.text) and self.text[end] in "\r\n" and self.glyphs.generated(end)
        if goes_on and (("." in word and _tld(word.rsplit(".", 1)[-1]) is True) or wraps):
            return _Break.EITHER
        return _Break.END  # a complete address ending the line ("gmail.com" / "Phone")

    def _after_dot(self, body: str, tail: str, after: int, full: bool) -> _Break:
        """A domain ending its line with a dot (``body`` before it), ``tail`` starting the next line."""
        if "." not in body or _tld(body.rsplit(".", 1)[-1]) is not True:
            return _Break.JOIN  # "maria@gmail." / "com": an unfinished domain goes on after its dot
        # A sentence's full stop after a complete address ends it ("... oscar.wu@example.org." /
        # "I look forward ..."), unless the line is full and the next goes on in lower case to a
        # real TLD ("...@mail.co." / "uk", "...@cs.tv." / "q-v.com"): then both readings are plausible.
        label = tail.rstrip(".").rsplit(".", 1)[-1]
        end = after + len(tail)
        goes_on = end < len(self.text) and self.text[end] in "\r\n" and self.glyphs.generated(end)
        plausible = _tld(label) is True or goes_on  # (a tail that fills its line may wrap again)
        if not full or not plausible or (tail[0].isupper() and not body.isupper()):
            return _Break.END
        return _Break.EITHER

    def _word(self, start: int) -> str:
        """The glyphs from ``start`` up to the next space or line break."""
        text, glyphs = self.text, self.glyphs
        end = start
        while end < len(text) and not glyphs.generated(end) and not text[end].isspace():
            end += 1
        return text[start:end]

    def _run(self, start: int) -> str:
        """The domain characters from glyph ``start`` on, across a hyphen that ended a line (U+FFFE,
        which pdfium joins itself: "xvj-" / "b7u.io" reads "xvj-b7u.io")."""
        text, glyphs = self.text, self.glyphs
        end = start
        while (
            end < len(text)
            and not glyphs.generated(end)
            and (is_domain_char(text[end]) or text[end] == "\ufffe")
        ):
            end += 1
        return text[start:end].replace("\ufffe", "-")

    def _one_block(self, top: tuple[int, int], bottom: tuple[int, int]) -> bool:
        """The bottom line sits directly under the top one, in the same size, aligned with it."""
        a_first, a_last = self.box(top[0]), self.box(top[1])
        b_first, b_last = self.box(bottom[0]), self.box(bottom[1])
        h_top, h_bottom = a_last[3] - a_last[1], b_first[3] - b_first[1]
        if min(h_top, h_bottom) <= 0 or max(h_top, h_bottom) > 1.25 * min(h_top, h_bottom):
            return False
        h = max(h_top, h_bottom)
        if not 0.7 * h <= a_last[1] - b_first[1] <= 2.0 * h:
            return False
        left, right = a_first[0], a_last[2]
        b_left, b_right = b_first[0], b_last[2]
        aligned_left = left - 3 * h <= b_left <= left + 0.5 * h
        centred = abs((left + right) / 2 - (b_left + b_right) / 2) <= 0.5 * h
        aligned_right = abs(right - b_right) <= 0.5 * h
        return aligned_left or centred or aligned_right

    def _full(self, top: tuple[int, int], bottom: tuple[int, int], before: int, after: int) -> bool:
        """The top line is full: the bottom line's first glyph (``after``) would not have fitted after
        glyph ``before``, within the block's right edge (the rightmost end of its lines)."""
        end = self.box(before)
        edge = max(self.box(top[1])[2], self.box(bottom[1])[2])
        for neighbour in self._neighbours(top, bottom):
            edge = max(edge, self.box(neighbour[1])[2])
        slack = 0.1 * (end[3] - end[1])
        return end[2] + self._chunk(after) + slack >= edge

    def _filled(self, top: tuple[int, int], bottom: tuple[int, int]) -> bool:
        """Two other lines of the block (the bottom one, the lines above and below) end within a line
        height of where the top line ends, or further right: the block is a paragraph set to one
        right edge, which the top line reached (two lines that end alike may do so by chance)."""
        end = self.box(top[1])
        edge = end[2] - (end[3] - end[1])
        lines = (bottom, *self._neighbours(top, bottom))
        return sum(self.box(line[1])[2] >= edge for line in lines) >= 2

    def _chunk(self, after: int) -> float:
        """The width of what could not have been split from glyph ``after``: the glyph and the closing
        punctuation right after it, which no line starts with ("gmail.co" / "m.": "m." moved together)."""
        first = self.box(after)
        last = after
        while last + 1 < len(self.text) and self.text[last + 1] in _NO_LINE_START:
            last += 1
        return self.box(last)[2] - first[0]

    def _flows_on(self, top: tuple[int, int], bottom: tuple[int, int]) -> bool:
        """The bottom line, in the same size, starts higher up than the top line: the text flows on
        into the next column (or a region beside it), as columns and sidebars do."""
        a_last, b_first = self.box(top[1]), self.box(bottom[0])
        h_top, h_bottom = a_last[3] - a_last[1], b_first[3] - b_first[1]
        if min(h_top, h_bottom) <= 0 or max(h_top, h_bottom) > 1.25 * min(h_top, h_bottom):
            return False
        return b_first[1] > a_last[3] and b_first[0] > self.box(top[0])[2]

    def _full_in_column(self, top: tuple[int, int], before: int, after: int) -> bool:
        """The top line is full within its own column: the bottom line's first glyph would not have
        fitted within the right edge of the top line and the line above it, when that is one block."""
        end = self.box(before)
        edge = self.box(top[1])[2]
        line = self._above(top)
        if line is not None:
            edge = max(edge, self.box(line[1])[2])
        slack = 0.1 * (end[3] - end[1])
        return end[2] + self._chunk(after) + slack >= edge

    def _paragraph_gap(self, top: tuple[int, int], bottom: tuple[int, int]) -> bool:
        """Whether the two lines are further apart than the lines around them (a paragraph ends)."""
        step = self._step(top, bottom)
        for line in self._adjacent(top, bottom):
            pair = (line, top) if self._step(line, top) > 0 else (bottom, line)
            if step > 1.3 * self._step(*pair):
                return True
        return False

    def _step(self, top: tuple[int, int], bottom: tuple[int, int]) -> float:
        return self.box(top[1])[1] - self.box(bottom[0])[1]

    def _above(self, top: tuple[int, int]) -> tuple[int, int] | None:
        """The line just above ``top`` when it is one block with it (aligned), else None."""
        text, glyphs = self.text, self.glyphs
        above = top[0] - 1
        while above >= 0 and (glyphs.generated(above) or text[above] == " "):
            above -= 1
        if above < 0:
            return None
        line = self._line(above)
        return line if self._one_block(line, top) else None

    def _adjacent(self, top: tuple[int, int], bottom: tuple[int, int]) -> Iterator[tuple[int, int]]:
        """The lines just above ``top`` and just below ``bottom`` that are aligned with them."""
        text, glyphs = self.text, self.glyphs
        line = self._above(top)
        if line is not None:
            yield line
        below = bottom[1] + 1
        while below < len(text) and (glyphs.generated(below) or text[below] == " "):
            below += 1
        if below < len(text):
            line = self._line(below)
            if self._one_block(bottom, line):
                yield line

    def _neighbours(self, top: tuple[int, int], bottom: tuple[int, int]) -> Iterator[tuple[int, int]]:
        """The lines just above ``top`` and just below ``bottom`` when they belong to the same block:
        aligned with it, in the same size, at the same line spacing."""
        spacing = self._step(top, bottom)
        for line in self._adjacent(top, bottom):
            pair = (line, top) if self._step(line, top) > 0 else (bottom, line)
            if self._spaced(*pair, spacing):
                yield line

    def _spaced(self, top: tuple[int, int], bottom: tuple[int, int], spacing: float) -> bool:
        return abs(self._step(top, bottom) - spacing) <= 0.25 * spacing

    # --- obfuscations ---

    def obfuscated(self, taken: set[int]) -> Iterator[Occurrence]:
        """Decoded obfuscations, unless a line break at either end may be inside the address."""
        text, glyphs = self.text, self.glyphs
        for email, start, end in find_obfuscated(text):
            if start > 0 and text[start - 1] in "\r\n" and glyphs.generated(start - 1):
                before, after = self._line_break(start - 1)
                if before is not None and after is not None:
                    if self._wrap(before, after, start, [], -1) is not _Break.END:
                        continue
            if end < len(text) and text[end] in "\r\n" and glyphs.generated(end):
                before, after = self._line_break(end)
                if before is not None and after is not None:
                    domain: list[tuple[str, int | None]] = [(c, None) for c in email.split("@", 1)[1]]
                    if self._wrap(before, after, start, domain, 1) is not _Break.END:
                        continue
            indices = tuple(i for i in range(start, end) if not glyphs.generated(i) and not text[i].isspace())
            if indices and not taken.intersection(indices):
                yield Occurrence(email, indices)


def _same_line(a: Box, b: Box) -> bool:
    h = max(a[3] - a[1], b[3] - b[1], 1e-6)
    return abs(a[1] - b[1]) <= 0.3 * h


def _tld(label: str) -> bool | None:
    """Whether ``label`` is a top-level domain in the root zone (None when it cannot be one)."""
    if not label or not label.replace("-", "").isalnum():
        return None
    try:
        ascii_label = label.encode("idna").decode("ascii").lower()
    except UnicodeError:
        return None
    return ascii_label in TLDS or ascii_label in _RESERVED_TLDS
