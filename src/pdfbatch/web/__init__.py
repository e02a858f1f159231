"""The upload page and the API's OpenAPI document: files shipped in this folder, served by the status API.

Both are read from the package once per execution environment. The page is plain HTML with one inline
style and one inline script; its Content-Security-Policy allows exactly those two (by hash), so nothing
else can run even if some text slipped into the DOM unescaped.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from dataclasses import dataclass
from importlib import resources
from urllib.parse import urlsplit

from pdfbatch.config import Settings
from pdfbatch.display import UNSAFE_CHARS
from pdfbatch.model import BATCH_REASON_TEXT, REASON_TEXT

REASONS_PLACEHOLDER = "__PDFBATCH_REASON_TEXT__"
UNSAFE_PLACEHOLDER = "__PDFBATCH_UNSAFE_CHARS__"
_INLINE = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)


@dataclass(frozen=True)
class Page:
    """The HTML to send and the Content-Security-Policy that goes with it."""

    html: str
    csp: str


def _read(name: str) -> str:
    return (resources.files("pdfbatch") / "web" / name).read_text(encoding="utf-8")


@functools.cache
def openapi_document() -> str:
    """GET /openapi.json: the OpenAPI 3.1 description of the REST API, exactly as shipped."""
    return _read("openapi.json")


@functools.cache
def _routes() -> tuple[tuple[re.Pattern[str], frozenset[str]], ...]:
    """Each documented path as a pattern ({param}: one path segment) and the methods it lists."""
    methods = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
    out = []
    for template, item in json.loads(openapi_document())["paths"].items():
        pattern = re.sub(r"\\\{[^/]+?\\\}", "[^/]+", re.escape(template))
        out.append((re.compile(pattern), frozenset(m.upper() for m in item if m in methods)))
    return tuple(out)


def methods_of(path: str) -> frozenset[str]:
    """The methods the OpenAPI document lists for ``path`` (empty when the path is not documented)."""
    for pattern, methods in _routes():
        if pattern.fullmatch(path):
            return methods
    return frozenset()


@functools.cache
def _page_parts() -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    # The reason sentences come from model.py (one source for the CLI, the API and the page); "<" is
    # escaped so no text can close the <script> element that carries them.
    texts = json.dumps({**REASON_TEXT, **BATCH_REASON_TEXT}, sort_keys=True).replace("<", "\\u003c")
    html = _read("index.html").replace(REASONS_PLACEHOLDER, texts)
    # The names' unsafe characters (pdfbatch.display) as a regular expression class: \uXXXX escapes only.
    html = html.replace(UNSAFE_PLACEHOLDER, json.dumps(_js_class(UNSAFE_CHARS)))
    scripts: list[str] = []
    styles: list[str] = []
    for tag, body in _INLINE.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode()
        (scripts if tag == "script" else styles).append(f"'sha256-{digest}'")
    return html, tuple(scripts), tuple(styles)


def _js_class(chars: str) -> str:
    """A character class body (``a-b`` ranges) with every character written as a ``\\uXXXX`` escape."""
    return "".join(c if c == "-" else f"\\u{ord(c):04x}" for c in chars)


def upload_origins(settings: Settings) -> list[str]:
    """Where the browser sends the presigned POST: the S3 endpoint browsers reach."""
    endpoint = settings.public_endpoint_url or settings.endpoint_url
    if endpoint:
        parts = urlsplit(endpoint)
        return [f"{parts.scheme}://{parts.netloc}"]
    b, r = settings.bucket, settings.region
    return [f"https://{b}.s3.amazonaws.com", f"https://{b}.s3.{r}.amazonaws.com"]


def upload_page(settings: Settings) -> Page:
    """GET /: the upload page and its Content-Security-Policy."""
    html, scripts, styles = _page_parts()
    csp = "; ".join(
        [
            "default-src 'none'",
            f"script-src {' '.join(scripts)}",
            f"style-src {' '.join(styles)}",
            "img-src 'self' data:",
            f"connect-src 'self' {' '.join(upload_origins(settings))}",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )
    return Page(html, csp)
