"""The upload page as shipped: self-contained, escaping by construction, allowed to run only itself."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import tomllib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tools.build import _function_files

from fixtures.apigw import ROOT
from fixtures.examples import examples
from pdfbatch import web
from pdfbatch.config import Settings
from pdfbatch.display import printable
from pdfbatch.model import BATCH_REASON_TEXT, REASON_TEXT

PAGE = ROOT / "src" / "pdfbatch" / "web" / "index.html"


def csp_of(page: web.Page) -> dict[str, list[str]]:
    return {d.split()[0]: d.split()[1:] for d in page.csp.split("; ")}


def sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_csp_allows_exactly_the_inline_script_and_style() -> None:
    page = web.upload_page(Settings(bucket="b"))
    scripts = re.findall(r"<script>(.*?)</script>", page.html, re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", page.html, re.DOTALL)
    assert len(scripts) == 1 and len(styles) == 1
    csp = csp_of(page)
    assert csp["default-src"] == ["'none'"]
    assert csp["script-src"] == [sha256_source(scripts[0])]
    assert csp["style-src"] == [sha256_source(styles[0])]
    assert csp["frame-ancestors"] == ["'none'"]


@pytest.mark.parametrize(
    ("settings", "origins"),
    [
        (Settings(bucket="b", endpoint_url="http://127.0.0.1:4566"), ["http://127.0.0.1:4566"]),
        (
            Settings(
                bucket="b",
                endpoint_url="http://localstack:4566",
                public_endpoint_url="http://localhost:4566/",
            ),
            ["http://localhost:4566"],
        ),
        (
            Settings(bucket="b", region="eu-west-1"),
            ["https://b.s3.amazonaws.com", "https://b.s3.eu-west-1.amazonaws.com"],
        ),
    ],
)
def test_the_page_may_post_only_to_itself_and_the_s3_endpoint(settings: Settings, origins: list[str]) -> None:
    assert csp_of(web.upload_page(settings))["connect-src"] == ["'self'", *origins]


def test_the_page_loads_nothing_from_elsewhere() -> None:
    html = PAGE.read_text()
    assert not re.search(r"""\b(src|href)\s*=\s*["']?(https?:)?//""", html)
    assert "@import" not in html and "url(" not in html


def test_the_script_never_writes_html() -> None:
    # File names are untrusted: every value reaches the DOM as text.
    script = re.findall(r"<script>(.*?)</script>", PAGE.read_text(), re.DOTALL)[0]
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink


def test_the_reason_sentences_come_from_the_model_and_cannot_close_their_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    html = web.upload_page(Settings(bucket="b")).html
    blob = re.search(r'<script type="application/json" id="reason-text">(.*?)</script>', html, re.DOTALL)
    assert blob and json.loads(blob.group(1)) == {**REASON_TEXT, **BATCH_REASON_TEXT}
    # GIVEN a sentence holding markup
    monkeypatch.setitem(REASON_TEXT, "no_email", "</script><script>alert(1)</script>")
    web._page_parts.cache_clear()
    try:
        html = web.upload_page(Settings(bucket="b")).html
    finally:
        web._page_parts.cache_clear()
    # THEN it stays data inside the one JSON block
    assert html.count("</script>") == 3  # the reasons, the names' unsafe characters, the script
    blob = re.search(r'<script type="application/json" id="reason-text">(.*?)</script>', html, re.DOTALL)
    assert blob and json.loads(blob.group(1))["no_email"] == "</script><script>alert(1)</script>"


def test_the_page_and_the_document_ship_in_the_status_zip_and_the_wheel() -> None:
    shipped = {arcname for arcname, _ in _function_files(ROOT, "status")}
    assert {"pdfbatch/web/index.html", "pdfbatch/web/openapi.json", "pdfbatch/web/__init__.py"} <= shipped
    package_data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "web/*" in package_data["pdfbatch"]


@settings(max_examples=examples(300), deadline=None)
@given(name=st.text(max_size=30) | st.sampled_from(["a\u202eb", "\x1b[31m😀", "\ud800x\udfff", "\x85\u2028"]))
def test_the_page_makes_names_printable_with_the_clis_character_class(name: str) -> None:
    # GIVEN the class the page builds its RegExp from (\\uXXXX escapes read the same by JS and Python)
    html = web.upload_page(Settings(bucket="b")).html
    blob = re.search(r'<script type="application/json" id="unsafe-chars">(.*?)</script>', html, re.DOTALL)
    assert blob
    unsafe = re.compile("[" + json.loads(blob.group(1)) + "]")
    # THEN it replaces exactly what the CLI's printable() replaces
    assert unsafe.sub("\ufffd", name) == printable(name)
    # and the page applies it to the names it shows and writes to the CSV
    script = re.findall(r"<script>(.*?)</script>", html, re.DOTALL)[0]
    assert '["name", shown(f.name)]' in script and "text(shown(f.name))" in script
