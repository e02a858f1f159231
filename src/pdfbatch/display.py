"""Untrusted text (entry names above all) made safe to show on a terminal, in a table or on the page.

A ZIP's entry names are the uploader's text: they may hold C0/C1 control characters (ESC starts the
terminal sequences that recolour, retitle or hyperlink a terminal), bidi controls that make
``cv\u202efdp.exe`` read as ``cvexe.pdf``, or line breaks that forge extra rows. ``printable`` replaces
each such character with U+FFFD (visible, so two names never look alike by a character vanishing).
The CLI's one helper (``cli.common.shown``) adds rich's markup escaping on top; the upload page uses the
same character class (served into its script), and the API and ``--json`` keep the name untouched:
data is data, only what reaches a person's screen is made printable.
"""

from __future__ import annotations

import re

# C0 and DEL, C1 (0x80-0x9F: 0x9B is a one-byte CSI), line/paragraph separators, the bidi controls
# (embeddings, overrides, isolates, marks, the Arabic letter mark), and lone surrogates (not text).
UNSAFE_CHARS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE = re.compile(f"[{UNSAFE_CHARS}]")
REPLACEMENT = "\ufffd"


def printable(text: str) -> str:
    """``text`` with every control, escape, bidi and separator character replaced by U+FFFD."""
    return _UNSAFE.sub(REPLACEMENT, text)
