"""Text -> candidate email addresses: the address syntax pdfbatch accepts, and the text-extraction
artefacts it undoes first. Pure: regular expressions over a string, no I/O and no PDF library (it is
given each page's text and the addresses of its mailto: links)."""

from __future__ import annotations

import re

# Characters text extraction leaves inside words: NUL, soft hyphen, zero-width space/joiners, word
# joiner, BOM. They are never part of an address and may split one, so they are deleted. Typographic
# ligatures (a font mapping "fi" to U+FB01) are spelled out. Nothing else is rewritten: a line break,
# a hyphen at a line end or a fullwidth @ is left as is, since guessing there invents addresses.
_ARTEFACTS = str.maketrans(
    {
        "\x00": None,
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
_HAS_ARTEFACT = re.compile("[" + "".join(re.escape(chr(c)) for c in _ARTEFACTS) + "]")

# Linear by construction: the local part starts only where a run of local-part characters starts (the
# lookbehind) and is at most 64 long, and the domain's labels are separated by dots that no label
# contains, so no position is tried more than a bounded number of times. Checks that would need
# backtracking (label edges, TLD, lengths) are done in Python on each match.
_EMAIL = re.compile(r"(?<![\w.+'-])([\w.+'-]{1,64})@([\w-]+(?:\.[\w-]+)+)")
_LABEL = re.compile(r"[^\W_](?:[\w-]*[^\W_])?")


def find_emails(text: str) -> list[str]:
    """Email addresses in ``text``, lowercased, in order of first appearance, without duplicates."""
    if "@" not in text:  # deleting artefacts never makes an "@"
        return []
    if _HAS_ARTEFACT.search(text):  # translate() with a dict costs ~0.1 ms/KB even when it changes nothing
        text = text.translate(_ARTEFACTS)
    seen: dict[str, None] = {}
    for m in _EMAIL.finditer(text):
        email = _clean(m.group(1), m.group(2))
        if email is not None:
            seen.setdefault(email, None)
    return list(seen)


def _clean(local: str, domain: str) -> str | None:
    # Quotes, dots and dashes glued in front ("'alice@..", "...alice@..", "--alice@..") are punctuation.
    local = local.lstrip(".'-")
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
    return f"{local}@{domain}".lower()
