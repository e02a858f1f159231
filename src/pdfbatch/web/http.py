"""HTTP of the status API: what a route reads of an API Gateway (REST, proxy) event, and its answers.

Every malformed request is a 4xx with a JSON error, never a raise (API Gateway's 502): query values
are read through ``Request.text`` (text only: a lone surrogate is 400) and numbers through
``Request.number`` (ASCII digits only), a JSON body through ``Request.json_object`` (at most
MAX_BODY_BYTES of UTF-8, nested at most MAX_DEPTH deep, both checked before it is parsed: 100,000
``[`` made ``json.loads`` recurse out of the stack).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from pdfbatch.errors import InvalidInput

JSON = "application/json"
_DIGITS = re.compile(r"[0-9]+")  # ASCII: str.isdigit() also says yes to "²", which int() refuses
# A JSON body's limits (docs/API.md): POST /batches' body is one short object; these leave room.
MAX_BODY_BYTES = 16 * 1024
MAX_DEPTH = 16
# What a depth count reads: a string (escapes included) or one bracket; everything else is skipped.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


class Request(NamedTuple):
    """What a route reads of an API Gateway (REST, proxy) event.

    (A NamedTuple: the cheapest class to import and build, on every request.)"""

    method: str
    path: str  # without a trailing slash (but "/")
    headers: Mapping[str, str]  # names lowercased: HTTP header names are case-insensitive
    query: Mapping[str, str]
    body: str | None = None

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Request:
        """The request an event carries."""
        path = str(event.get("path") or "/")
        return cls(
            method=str(event.get("httpMethod") or "GET").upper(),
            path=path.rstrip("/") or "/",
            headers={str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()},
            query=dict(event.get("queryStringParameters") or {}),
            body=_body_text(event),
        )

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object ({} when there is none); InvalidInput when it is not one."""
        if self.body is None or not self.body.strip():
            return {}
        check_json_limits(self.body)
        try:
            value = json.loads(self.body)
        except ValueError as exc:
            raise InvalidInput("the body must be a JSON object") from exc
        if not isinstance(value, dict):
            raise InvalidInput("the body must be a JSON object")
        return value

    def text(self, name: str) -> str | None:
        """A query parameter as API Gateway decoded it; InvalidInput when it is not text.

        Bytes that are not UTF-8 (``%ED%A0%80``) arrive as lone surrogates, which no store, hash or
        JSON encoder accepts: refused here, once, for every parameter a route reads.
        """
        value = self.query.get(name)
        if value is not None and not is_text(value):
            raise InvalidInput(f"query parameter {name!r} is not valid UTF-8")
        return value

    def number(self, name: str, default: int, most: int) -> int:
        """A whole-number query parameter (ASCII digits), capped at ``most`` without parsing huge ones."""
        raw = self.text(name)
        if raw is None:
            return default
        if not _DIGITS.fullmatch(raw):  # "" too: the parameter is there, without a number
            raise InvalidInput(f"{name} must be a whole number")
        digits = raw.lstrip("0")
        return most if len(digits) > len(str(most)) else min(int(digits or "0"), most)


def check_json_limits(body: str) -> None:
    """InvalidInput unless ``body`` is UTF-8 text of at most MAX_BODY_BYTES nested at most MAX_DEPTH deep.

    Checked before ``json.loads`` sees it: the parser recurses once per level (a deep enough body is a
    RecursionError, not a ValueError), and a size cap bounds what the depth count and parse cost."""
    if len(body) > MAX_BODY_BYTES or len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise InvalidInput(f"the body must be at most {MAX_BODY_BYTES} bytes")
    if not is_text(body):
        raise InvalidInput("the body is not valid UTF-8")
    if json_depth(body) > MAX_DEPTH:
        raise InvalidInput(f"the body must be nested at most {MAX_DEPTH} deep")


def json_depth(text: str) -> int:
    """The deepest nesting of brackets in ``text`` outside JSON strings (whether or not it is JSON)."""
    depth = deepest = 0
    for token in _JSON_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in ("]", "}"):
            depth = max(depth - 1, 0)
    return deepest


def _body_text(event: Mapping[str, Any]) -> str | None:
    body = event.get("body")
    if body is None:
        return None
    if event.get("isBase64Encoded"):
        import base64
        import binascii

        try:
            return base64.b64decode(str(body)).decode("utf-8", "surrogateescape")
        except (binascii.Error, ValueError):
            return "\x00"  # not JSON: refused by json_object
    return str(body)


def is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def response(
    status: int, body: Any, content_type: str = JSON, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A proxy response; a body that is not text is sent as compact JSON."""
    text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
    return {
        "statusCode": status,
        "headers": {**(headers or {}), "Content-Type": content_type},
        "body": text,
        "isBase64Encoded": False,
    }


def error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A JSON error answer: ``{"error": code, "message": message}``."""
    return response(status, {"error": code, "message": message}, headers=headers)
