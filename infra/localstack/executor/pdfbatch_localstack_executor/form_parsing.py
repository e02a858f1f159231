"""Stop Twisted from parsing multipart/form-data bodies that LocalStack parses again anyway."""

# LocalStack serves HTTP through Twisted's web server and hands every request to its WSGI gateway, which
# reads the raw body (werkzeug parses an S3 POST upload's form itself). Twisted's Request also parses any
# multipart/form-data POST into ``request.args`` before that, with the standard library's email parser,
# and nothing reads those args. For a presigned POST of a ZIP that is a second parse of every byte: a
# py-spy profile of a 320-PDF batch (a 9 MB ZIP) found ~23% of LocalStack's CPU for the whole batch in
# ``email.message_from_bytes`` under ``twisted.web.http._getMultiPartArgs``. Twisted reads that function
# from its module at call time, so replacing it makes the parse a no-op for every later request.

from __future__ import annotations

import threading

_applied = False
_lock = threading.Lock()


def _no_form_args(content: bytes, ctype: bytes) -> dict[bytes, list[bytes]]:
    return {}


def apply() -> None:
    """Make Twisted skip its multipart/form-data parse (idempotent)."""
    global _applied
    with _lock:
        if _applied:
            return
        from twisted.web import http

        http._getMultiPartArgs = _no_form_args  # type: ignore[attr-defined]
        _applied = True
