"""Text -> email addresses: the address syntax pdfbatch accepts, the extraction artefacts it undoes first,
and the obfuscations it decodes. Pure: regular expressions over a string, no I/O and no PDF library.

What an address is (the rule of issue 16, "whole"):
- Local part: RFC 5322's dot-atom: ASCII letters and digits, ``! # $ % & ' * + - / = ? ^ _ ` { | } ~``
  and dots (never first, last or doubled), plus letters of the alphabetic scripts written with spaces
  between words: Latin with diacritics, Greek, Cyrillic. A local part starts where a run of those
  characters starts: ``jane=doe@example.com`` is ``jane=doe@...``, never ``doe@...`` (a tail of the
  address is another person's address). Han, kana, Hangul and the other scripts written without
  spaces are never part of a local part: text such as ``連絡先jane@example.jp`` gives ``jane@...``,
  where a Unicode-aware pattern would swallow the kanji. Internationalised local parts in those scripts
  (RFC 6531) are therefore not found; Latin, Greek and Cyrillic ones are.
- Domain: labels of letters, digits and hyphens, each label in one script (ASCII/Latin, Greek,
  Cyrillic, or CJK), so ``jane@example.jpです`` ends at ``.jp``; a last label of two or more letters
  (or an ``xn--`` A-label). At most 64 characters before the @ and 253 after.
- Matching downstream is exact and case-insensitive: every address is returned lowercased.

The PDF side (glyphs.py) re-joins what a page layout breaks (line wraps, letter spacing) before
calling ``find_spans``; this module sees a string.
"""

from __future__ import annotations

import re
import unicodedata

# Characters text extraction leaves inside words: soft hyphen, zero-width space/joiners, word joiner,
# BOM. They are invisible, never part of an address and may split one, so they are deleted. Typographic
# ligatures (a font mapping "fi" to U+FB01) are spelled out. Nothing else is rewritten: a line break, a
# hyphen at a line end or a fullwidth @ is left as is, since guessing there invents addresses. NUL (a
# glyph whose font maps it to no character) is not deleted either: it is a letter nobody can read, and
# dropping it would turn "jo?n@..." into the address of someone else.
_ARTEFACTS = str.maketrans(
    {
        "\u00ad": None,
        "\u200b": None,
        "\u200c": None,
        "\u200d": None,
        "\u2060": None,
        "\ufeff": None,
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
    }
)
ARTEFACT_CHARS = frozenset(chr(c) for c in _ARTEFACTS)
_HAS_ARTEFACT = re.compile("[" + "".join(re.escape(c) for c in sorted(ARTEFACT_CHARS)) + "]")

# Letters of the scripts a local part may use besides ASCII (see the module docstring).
_LATIN = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u1e00-\u1eff"
_MARKS = "\u0300-\u036f"  # combining diacritics (a decomposed "é")
_GREEK = "\u0370-\u03ff\u1f00-\u1fff"
_CYRILLIC = "\u0400-\u052f"
_CJK = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uac00-\ud7af\uf900-\ufaff\uff66-\uff9f\U00020000-\U0002ffff"
)
_ATEXT = "A-Za-z0-9!#$%&'*+\\-/=?^_`{|}~"
LOCAL_CLASS = f"[{_ATEXT}.{_LATIN}{_MARKS}{_GREEK}{_CYRILLIC}]"
_LOCAL_CHAR = re.compile(LOCAL_CLASS)
# A domain label is in one script: a change of script ends the domain.
_LABEL_CLASSES = (
    f"A-Za-z0-9\\-{_LATIN}{_MARKS}",
    f"0-9\\-{_GREEK}{_MARKS}",
    f"0-9\\-{_CYRILLIC}{_MARKS}",
    f"0-9\\-{_CJK}",
)
_LABEL_RE = "(?:" + "|".join(f"[{c}]+(?![{c}])" for c in _LABEL_CLASSES) + ")"
_DOMAIN_CHAR = re.compile("[.\\-" + "".join(c.replace("\\-", "") for c in _LABEL_CLASSES) + "]")

# Linear by construction: the local part starts only where a run of local-part characters starts (the
# lookbehind) and is at most 64 long (a longer run matches nowhere: its tail is not an address), and
# the domain's labels are separated by dots that no label contains, so no position is tried more than
# a bounded number of times. Checks that would need backtracking (dots, label edges, TLD, lengths) are
# done in Python on each match.
_EMAIL = re.compile(f"(?<!{LOCAL_CLASS})({LOCAL_CLASS}{{1,64}})@({_LABEL_RE}(?:\\.{_LABEL_RE})+)")
_LABEL = re.compile(r"[^\W_](?:[\w-]*[^\W_])?")
# Quote-like characters RFC 5322 allows in a local part but that usually wrap an address: dropped in
# front only when the same (or the matching) character follows the address, as in 'jane@example.com'.
_WRAPPERS = {"'": "'", "`": "`", "{": "}", "|": "|", "*": "*"}

# Obfuscations decoded (see ``find_obfuscated``): "at" and "dot" in brackets, or as capitalised words.
_OPEN, _CLOSE = r"[\[({<]", r"[\])}>]"
_BRACKET_AT = rf"\s*{_OPEN}\s*(?:at|@)\s*{_CLOSE}\s*"
_BRACKET_DOT = rf"\s*{_OPEN}\s*(?:dot|\.)\s*{_CLOSE}\s*"
_WORD_AT = r"\s+AT\s+"
_WORD_DOT = r"\s+DOT\s+"
_OBFUSCATED = re.compile(
    f"(?<!{LOCAL_CLASS})({LOCAL_CLASS}{{1,64}})"
    rf"(?:(?i:{_BRACKET_AT})({_LABEL_RE}(?:(?:\.|(?i:{_BRACKET_DOT})|{_WORD_DOT}){_LABEL_RE})+)"
    rf"|{_WORD_AT}({_LABEL_RE}(?:(?:(?i:{_BRACKET_DOT})|{_WORD_DOT}){_LABEL_RE})+))"
)
_DOT_TOKEN = re.compile(rf"(?i:{_BRACKET_DOT})|{_WORD_DOT}")
HAS_OBFUSCATION = re.compile(rf"(?i:{_OPEN}\s*(?:at|@)\s*{_CLOSE})|\sAT\s")


def clean_text(text: str) -> str:
    """``text`` without extraction artefacts (same length or longer: ligatures are spelled out)."""
    if _HAS_ARTEFACT.search(text):  # translate() with a dict costs ~0.1 ms/KB even when it changes nothing
        return text.translate(_ARTEFACTS)
    return text


def is_local_char(char: str) -> bool:
    """Whether ``char`` may be part of a local part (dot included)."""
    return _LOCAL_CHAR.fullmatch(char) is not None


def is_domain_char(char: str) -> bool:
    """Whether ``char`` may be part of a domain (dots and hyphens included)."""
    return _DOMAIN_CHAR.fullmatch(char) is not None


def find_spans(text: str) -> list[tuple[str, int, int]]:
    """Every address written out in ``text``: (address lowercased, start, end), in order.

    ``text`` is taken as it is (artefacts are the caller's to remove); start and end index it.
    """
    if "@" not in text:
        return []
    found = []
    for m in _EMAIL.finditer(text):
        start = m.start(1)
        if _cut(text, start, m.end()):
            continue
        local, domain = m.group(1), m.group(2)
        wrapper = _WRAPPERS.get(local[0])
        if wrapper is not None and text[m.end() : m.end() + 1] == wrapper:
            local, start = local[1:], start + 1
        email = _address(local, domain)
        if email is not None:
            found.append((email, start, m.end()))
    return found


def find_emails(text: str) -> list[str]:
    """Email addresses written out in ``text``, lowercased, in order of first appearance, once each."""
    if "@" not in text:  # deleting artefacts never makes an "@"
        return []
    return list(dict.fromkeys(email for email, _, _ in find_spans(clean_text(text))))


def find_obfuscated(text: str) -> list[tuple[str, int, int]]:
    """Addresses spelt out to fool harvesters, decoded: (address lowercased, start, end), in order.

    Decoded: "at" in brackets (``[at]``, ``(at)``, ``{at}``, ``<at>``, or ``@`` in brackets) with the
    domain's dots written as dots or as bracketed/capitalised "dot" (``jane (at) example.org``,
    ``jane [at] example [dot] org``); and "AT"/"DOT" as capitalised words when both are used
    (``JANE AT EXAMPLE DOT ORG``, ``jane AT example DOT org``). Not decoded: lowercase "at" and "dot"
    as plain words (``anna at example dot org``): in prose "at" is a preposition ("worked at Example
    dot com"), and a decoded guess is an address nobody wrote.
    """
    if not HAS_OBFUSCATION.search(text):
        return []
    found = []
    for m in _OBFUSCATED.finditer(text):
        domain = m.group(2) if m.group(2) is not None else m.group(3)
        email = _address(m.group(1), _DOT_TOKEN.sub(".", domain))
        if email is not None:
            found.append((email, m.start(1), m.end()))
    return found


def _cut(text: str, start: int, end: int) -> bool:
    """Whether the address at ``text[start:end]`` may be a piece of a longer one: glued to a glyph
    nobody can read (NUL), or starting a line whose previous line ends in local-part characters that
    are not the end of an address (a wrap, ``maria.`` / ``lopez@...``, that only the page's layout can
    tell from a label on its own line; pdf/glyphs.py decides those with the glyphs' positions)."""
    if text[start - 1 : start] == "\x00" or text[end : end + 1] == "\x00":
        return True
    i = start - 1
    while i >= 0 and start - i <= 2 and text[i] in "\r\n":
        i -= 1
    if i == start - 1 or i < 0 or _LOCAL_CHAR.fullmatch(text[i]) is None:
        return False
    stop = max(i - 64, -1)
    while i > stop and _LOCAL_CHAR.fullmatch(text[i]) is not None:
        i -= 1
    return not (i >= 0 and text[i] == "@")


def _address(local: str, domain: str) -> str | None:
    # A dot-atom never starts with a dot: dots in front ("see ...jane@x.org") are punctuation.
    local = local.lstrip(".")
    if not local or local.endswith(".") or ".." in local:
        return None
    if len(domain) > 253:
        return None
    labels = domain.split(".")
    if any(len(label) > 63 or not _LABEL.fullmatch(label) or "_" in label for label in labels):
        return None
    tld = labels[-1]
    if not ((tld.isalpha() and len(tld) >= 2) or (tld.lower().startswith("xn--") and len(tld) > 4)):
        return None
    return unicodedata.normalize("NFC", f"{local}@{domain}").lower()
