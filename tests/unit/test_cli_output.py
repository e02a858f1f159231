"""Entry names are untrusted text on the operator's terminal: no path that prints one may crash on it,
let it style or link anything (rich markup), or pass control, escape or bidi characters through."""

from __future__ import annotations

import argparse
import io
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from pdfbatch.cli import batches, operator
from pdfbatch.display import printable

BATCH = "b" * 32
# rich's own sequences: colours and styles, and the progress bars' cursor hiding, line erasing and
# moving up. A name's escapes never get here unchanged (their words are checked to appear as U+FFFD
# text), and no OSC sequence (a hyperlink, a title) may appear at all.
RICH = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\?25[lh]|\x1b\[2K|\x1b\[[0-9]*A")
BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")

# What a hostile name holds: markup (closing a tag never opened, links), terminal escapes (colour, a
# hyperlink, the title), bidi overrides, a lone surrogate, an emoji code, a trailing backslash.
_HOSTILE = st.sampled_from(
    [
        "[/b]",
        "[bold red]",
        "[link=https://evil.example]click[/link]",
        "[/]",
        "\\",
        "\\[b]",
        "\x1b[31m",
        "\x1b]8;;https://evil.example\x1b\\",
        "\x1b]0;title\x07",
        "\x9b31m",
        "\u202e",
        "\u2066",
        "\u200f",
        "\ud800",
        ":smile:",
        "\r",
        "\t",
        "\x00",
        ".pdf",
    ]
)
NAMES = st.lists(st.one_of(st.text(max_size=6), _HOSTILE), min_size=1, max_size=6).map("".join)


class FakeApi:
    """The REST API as the CLI sees it, answering with files of the given names."""

    def __init__(self, names: list[str], status: str = "COMPLETED") -> None:
        self.names = names
        self.final = {
            "batchId": BATCH,
            "status": status,
            "totalFiles": len(names),
            "processed": len(names),
            "percent": 100.0,
            "linked": 0,
            "skipped_no_match": len(names),
            "skipped_already_exists": 0,
            "failed": 0,
            "ignored": 0,
        }

    def files(self, batch_id: str, outcome: str | None = None) -> Iterator[dict[str, Any]]:
        for i, name in enumerate(self.names):
            yield {"index": i, "name": name, "outcome": "skipped_no_match", "reason": "no_email"}

    def status(self, batch_id: str) -> tuple[dict[str, Any], float | None]:
        return dict(self.final), None

    def create_batch(self, callback_url: str | None = None) -> dict[str, Any]:
        return {"batchId": BATCH, "upload": {"url": "http://127.0.0.1:1/", "fields": {}}}

    def wait(self, batch_id: str, on_update: Any = None, timeout: float = 0.0) -> dict[str, Any]:
        if on_update:
            on_update(dict(self.final))
        return dict(self.final)


class Terminal:
    """stdout and stderr as a colour terminal would get them (rich writes styles, and links, there)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.out, self.err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(sys, "stdout", self.out)
        monkeypatch.setattr(sys, "stderr", self.err)
        for name, value in {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "400"}.items():
            monkeypatch.setenv(name, value)
        monkeypatch.delenv("NO_COLOR", raising=False)

    def text(self) -> str:
        return self.err.getvalue() + self.out.getvalue()  # stdout (the --json document) last


def run_paths(names: list[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """Every command that prints an entry name, over ``names``; what reached the terminal."""
    term = Terminal(monkeypatch)
    api = FakeApi(names)
    monkeypatch.setattr(batches, "api_client", lambda: api)
    monkeypatch.setattr("pdfbatch.api_client.presigned_post", lambda *a, **k: None)
    monkeypatch.setattr(operator, "ops_deps", lambda: (None, {}))
    monkeypatch.setattr(operator, "dead_letters", lambda deps, outputs: None)
    letters = {
        "approximateCount": len(names),
        "messages": [
            {"messageId": str(i), "batchId": BATCH, "index": i, "name": name, "outcome": "failed",
             "reason": "gave_up", "attempts": 5, "receiveCount": 5, "sentAt": None}
            for i, name in enumerate(names)
        ],
    }  # fmt: skip
    monkeypatch.setattr("pdfbatch.services.operations.list_dead_letters", lambda *a, **k: letters)
    zip_path = tmp_path / "batch.zip"
    zip_path.write_bytes(b"PK\x05\x06" + bytes(18))

    # `pdfbatch files`, `status` (final), `upload --wait`, `dlq`; and `files --json`
    batches.files_cmd(argparse.Namespace(batch_id=BATCH, outcome=None, json=False))
    batches.status_cmd(argparse.Namespace(batch_id=BATCH, json=False))
    batches.run_upload(zip_path, wait=True, as_json=False, timeout=1.0)
    operator.dlq_cmd(argparse.Namespace(redrive=False, limit=10, json=False, wait=False))
    batches.files_cmd(argparse.Namespace(batch_id=BATCH, outcome=None, json=True))
    return term.text()


def assert_shown_safely(output: str, names: list[str]) -> None:
    """No escape but rich's own, no bidi or control character, and every name's words shown literally
    (markup in a name is text, never a style or a link; its escapes are U+FFFD)."""
    assert "\x1b]" not in output
    plain = RICH.sub("", output)
    assert "\x1b" not in plain
    assert not BIDI.search(plain)
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]", plain)  # \r: rich's bars
    json_part = plain[plain.rindex("[\n") :]  # `files --json` came last
    assert [f["name"] for f in json.loads(json_part)] == names  # the data itself is untouched
    for name in names:
        for word in printable(name).split():
            assert plain.count(word) >= 4, (name, word)  # files, status, upload --wait and dlq tables


def test_a_name_that_closes_a_markup_tag_is_printed_not_parsed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # GIVEN files named with markup, a link and a terminal escape
    names = ["cv[/b].pdf", "[link=https://evil.example]cv[/link].pdf", "\x1b[2Jcv.pdf", "cv\u202efdp.exe"]
    # WHEN every command that prints names runs THEN none crashes, and each name is shown as text
    assert_shown_safely(run_paths(names, monkeypatch, tmp_path), names)


@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
@given(names=st.lists(NAMES, min_size=1, max_size=4))
# Found by this generator: rich shows a backslash before a bracket that opens no tag as the bracket alone,
# and its escape() leaves that pair as it is (``\[`` was printed as ``[``).
@example(names=["\\["])
@example(names=["a\\[b", "\\\\[[b]"])
def test_arbitrary_names_through_every_printing_path_never_raise_or_reach_the_terminal_raw(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, names: list[str]
) -> None:
    assert_shown_safely(run_paths(names, monkeypatch, tmp_path), names)


def test_printable_replaces_control_escape_and_bidi_characters_and_keeps_the_rest() -> None:
    assert printable("a\x1b[31mb\u202ec\x00d\u0085e\u2028f") == "a\ufffd[31mb\ufffdc\ufffdd\ufffde\ufffdf"
    assert printable("ünïcødé 日本語 😀 [b] \\ :x:") == "ünïcødé 日本語 😀 [b] \\ :x:"


def test_status_says_what_the_ocr_lane_read_only_when_it_read_something(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # GIVEN a running batch with two scans waiting for the OCR lane and one read by it
    api = FakeApi(["a.pdf"], status="PROCESSING")
    api.final["lanes"] = {"text": {"done": 3}, "ocr": {"waiting": 2, "done": 1}}
    monkeypatch.setattr(batches, "api_client", lambda: api)
    term = Terminal(monkeypatch)
    # WHEN the operator asks for its status
    batches.status_cmd(argparse.Namespace(batch_id=BATCH, json=False))
    # THEN the lane's part is shown; a batch without scans shows no such line
    assert "scans read by OCR: 1 done, 2 waiting" in RICH.sub("", term.text())
    api.final["lanes"] = {"text": {"done": 3}, "ocr": {"waiting": 0, "done": 0}}
    term = Terminal(monkeypatch)
    batches.status_cmd(argparse.Namespace(batch_id=BATCH, json=False))
    assert "OCR" not in term.text()
