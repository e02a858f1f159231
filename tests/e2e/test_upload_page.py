"""The upload page in a real browser (Debian's Chromium, headless, driven by Playwright) on the local stack.

A person's path through it: enter the key, pick a ZIP, watch it upload and get processed, read the table
of files not linked, download it as CSV, reload the page (or open the link in a new tab) and find the
same batch. The screenshot lands in test-output/ (git-ignored); docs/upload-page.png is one of them.
A callback URL entered on the page is where the summary goes (the page says when it is delivered), and
one the API refuses is explained in the API's words, with nothing created.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tools import demo_zip, samples

from fixtures.stack import ROOT, free_port, seed
from pdfbatch.api_client import ApiError
from pdfbatch.display import printable
from pdfbatch.model import REASON_TEXT

pytestmark = pytest.mark.e2e

CHROMIUM = Path("/usr/bin/chromium")
# The page runs under its own strict CSP (no eval): the test waits on selectors, never on JS strings.
OUTPUT = ROOT / "test-output"
# A file name that is markup: the page must show it as text and run nothing.
EVIL_NAME = 'scans/<img src=x onerror="alert(document.domain)">.pdf'
# One a spreadsheet would run as a formula: the CSV keeps it text with a leading '.
FORMULA_NAME = '=HYPERLINK("http://example.invalid","open").pdf'
# One whose right-to-left override would show "report\u202egnp.pdf" as "reportfdp.png": shown with U+FFFD.
BIDI_NAME = "report\u202egnp.pdf"
OUTCOME_TEXT = {
    "skipped_no_match": "no matching user",
    "skipped_already_exists": "user already had a PDF",
    "failed": "could not be read",
}
DONE = "body[data-state=done]"
WAIT_MS = 240_000


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.is_file(), "the browser test needs Debian's chromium: `make test` installs it"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), headless=True)
        yield browser
        browser.close()


class Watch:
    """Everything a page does that it should not: script errors, dialogs, CSP violations."""

    def __init__(self, page: Any) -> None:
        self.problems: list[str] = []
        page.on("pageerror", lambda exc: self.problems.append(f"script error: {exc}"))
        page.on("dialog", self._dialog)
        page.on("console", self._console)

    def _dialog(self, dialog: Any) -> None:
        self.problems.append(f"dialog: {dialog.message}")
        dialog.dismiss()

    def _console(self, msg: Any) -> None:
        if msg.type == "error" and "404" not in msg.text:  # the key check asks for a batch that is not there
            self.problems.append(f"console: {msg.text}")


def not_linked_in_ledger(db: Any, batch_id: str) -> list[tuple[int, str, str, str]]:
    """(index, name, outcome, reason) of the batch's PDFs that were not linked, read with SQL."""
    with db.cursor() as cur:
        cur.execute(
            "SELECT entry_index, entry_name, outcome, reason FROM pdfbatch_files WHERE batch_id = %s "
            "AND kind = 'pdf' AND outcome IS NOT NULL AND outcome <> 'linked' ORDER BY entry_index",
            (batch_id,),
        )
        return [(int(i), n, o, r) for i, n, o, r in cur.fetchall()]


def table(page: Any) -> list[list[str]]:
    """The rows of the not-linked table, cell texts as a person reads them."""
    rows: list[list[str]] = page.eval_on_selector_all(
        "#rows tr", "rows => rows.map(r => [...r.cells].map(c => c.textContent))"
    )
    return rows


def expected_rows(ledger: list[tuple[int, str, str, str]]) -> list[list[str]]:
    return [
        [str(i), printable(name), OUTCOME_TEXT[outcome], REASON_TEXT[reason]]
        for i, name, outcome, reason in ledger
    ]


def one_pdf_zip(folder: Path) -> Path:
    """A ZIP of one PDF that names nobody (for tests where nothing should be uploaded)."""
    corpus = samples.Corpus()
    corpus.add("one.pdf", samples.text_pdf([["nothing"]]))
    path = folder / "one.zip"
    corpus.write_zip(path)
    return path


def test_a_zip_uploaded_through_the_page_ends_in_the_table_of_files_not_linked(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    # GIVEN the demo users and a ZIP with every outcome, one file name being markup
    corpus = demo_zip.demo_corpus()
    for name in (EVIL_NAME, FORMULA_NAME, BIDI_NAME):
        notes = samples.text_pdf([["Meeting notes", "no address in here"]])
        corpus.add(name, notes, "skipped_no_match", "no_email")
    seed(stack["db"], corpus)
    zip_path = tmp_path / "march résumés.zip"
    corpus.write_zip(zip_path)
    api_url = stack["outputs"]["LocalApiUrl"]
    context = browser.new_context(accept_downloads=True, viewport={"width": 1180, "height": 900})
    page = context.new_page()
    watch = Watch(page)

    # WHEN a person opens the page, enters the key and picks the ZIP
    page.goto(api_url)
    page.fill("#api-key", stack["api"].api_key)
    page.click("#save-key")
    page.wait_for_selector("#key-status:not(.bad):text-is('Key accepted.')")
    page.set_input_files("#file", str(zip_path))
    page.wait_for_selector(DONE, timeout=WAIT_MS)

    # THEN the upload bar is full, the batch id is in the address, and the counts are the API's
    batch_id = page.text_content("#batch-id")
    assert batch_id and page.url.endswith(f"#batch={batch_id}")
    assert page.eval_on_selector("#upload-bar", "b => b.value") == 100
    assert page.eval_on_selector("#process-bar", "b => b.value") == 100
    status, _ = stack["api"].status(batch_id)
    assert status["status"] == "COMPLETED"
    for outcome in ("linked", "skipped_no_match", "skipped_already_exists", "failed", "ignored"):
        assert page.text_content(f"#count-{outcome}") == str(status[outcome]), outcome
    # and the table is exactly the ledger's files not linked, each with its reason in words
    ledger = not_linked_in_ledger(stack["db"], batch_id)
    assert len(ledger) == status["totalFiles"] - status["linked"] > 0
    assert table(page) == expected_rows(ledger)
    assert page.text_content("#not-linked-count") == str(len(ledger))
    assert {EVIL_NAME, FORMULA_NAME} <= {row[1] for row in table(page)}  # shown as text, as they are
    # and the OCR lane's part is said in words, as the API counts it (the demo ZIP has four scans)
    ocr = status["lanes"]["ocr"]
    assert ocr["done"] == 4 and ocr["waiting"] == 0
    assert page.text_content("#lanes") == "4 scans read by OCR, 0 waiting."
    assert page.is_hidden("#callback")  # no callbackUrl, an admin key: no callback
    assert "report\ufffdgnp.pdf" in {row[1] for row in table(page)}  # the override is not obeyed
    assert page.locator("#rows img").count() == 0

    # WHEN the CSV is downloaded THEN it holds the same files, reasons and sentences
    with page.expect_download() as download:
        page.click("#download-csv")
    assert download.value.suggested_filename == f"pdfbatch-{batch_id}-not-linked.csv"
    text = Path(download.value.path()).read_text(encoding="utf-8-sig")
    rows = list(csv.DictReader(io.StringIO(text)))
    as_text = [(i, "'" + name if name == FORMULA_NAME else printable(name), o, r) for i, name, o, r in ledger]
    assert [(int(r["index"]), r["file"], r["outcome"], r["reason"]) for r in rows] == as_text
    assert [r["why"] for r in rows] == [REASON_TEXT[reason] for *_, reason in ledger]

    OUTPUT.mkdir(exist_ok=True)
    shot = OUTPUT / "upload-page.png"
    page.screenshot(path=str(tmp_path / "upload-page.png"), full_page=True)
    shutil.copyfile(tmp_path / "upload-page.png", shot)

    # WHEN the page is reloaded THEN it resumes the batch from the address and shows the same
    page.reload()
    page.wait_for_selector(DONE, timeout=WAIT_MS)
    assert page.text_content("#batch-id") == batch_id
    assert table(page) == expected_rows(ledger)
    # and the link opened in a new tab (no key in it yet) asks for the key, then shows the same
    other = context.new_page()
    other_watch = Watch(other)
    other.goto(f"{api_url}#batch={batch_id}")
    other.wait_for_selector("#key-status.bad")
    assert other.get_attribute("body", "data-state") == "processing"
    other.fill("#api-key", stack["api"].api_key)
    other.click("#save-key")
    other.wait_for_selector(DONE, timeout=WAIT_MS)
    assert table(other) == expected_rows(ledger)
    assert watch.problems == [] and other_watch.problems == []
    context.close()


def test_a_wrong_key_is_refused_in_words_and_nothing_is_uploaded(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    zip_path = one_pdf_zip(tmp_path)
    with stack["db"].cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM pdfbatch_batches")
        before = cur.fetchone()[0]
    page = browser.new_page()
    watch = Watch(page)
    page.goto(stack["outputs"]["LocalApiUrl"])
    page.fill("#api-key", "not-the-key-0123456789")
    page.click("#save-key")
    page.wait_for_selector("#key-status.bad")
    assert "refused" in (page.text_content("#key-status") or "")
    page.set_input_files("#file", str(zip_path))
    page.wait_for_selector("body[data-state=idle] #message:not([hidden])")
    assert "Could not start a batch" in (page.text_content("#message") or "")
    with stack["db"].cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM pdfbatch_batches")
        assert cur.fetchone()[0] == before
    assert [p for p in watch.problems if "403" not in p] == []
    page.close()


class Hook:
    """A callback receiver on 127.0.0.1 (allow-listed in the e2e stack): answers 200, keeps each body
    (after answering 503 to the first ``refuse`` deliveries)."""

    def __init__(self, refuse: int = 0) -> None:
        import http.server
        import threading

        self.bodies: list[bytes] = []
        self.refused = 0
        hook = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if hook.refused < refuse:
                    hook.refused += 1
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                hook.bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.port = free_port()
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_callback_url_entered_on_the_page_gets_the_summary_and_the_page_says_so(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    corpus = samples.Corpus()
    corpus.add("one.pdf", samples.text_pdf([["nothing to link"]]))
    zip_path = tmp_path / "one.zip"
    corpus.write_zip(zip_path)
    hook = Hook()
    page = browser.new_page()
    watch = Watch(page)
    try:
        # GIVEN a person who enters the key and a callback URL, then picks the ZIP
        page.goto(stack["outputs"]["LocalApiUrl"])
        page.fill("#api-key", stack["api"].api_key)
        page.click("#save-key")
        page.wait_for_selector("#key-status:not(.bad):text-is('Key accepted.')")
        page.fill("#callback-url", f"http://127.0.0.1:{hook.port}/page-hook?token=from-the-page")
        page.set_input_files("#file", str(zip_path))
        page.wait_for_selector(DONE, timeout=WAIT_MS)
        batch_id = page.text_content("#batch-id")
        # THEN the batch was created with it: the summary arrives, and the page says where it went
        page.wait_for_selector("#callback:text-is('Summary delivered to 127.0.0.1.')", timeout=60_000)
        assert any(json.loads(b)["batchId"] == batch_id for b in hook.bodies)
        assert "page-hook" not in (page.text_content("body") or "")
        assert watch.problems == []
    finally:
        page.close()
        hook.close()


def test_a_refused_callback_url_is_explained_and_nothing_is_created(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    zip_path = one_pdf_zip(tmp_path)
    refused_url = "http://169.254.169.254/latest/meta-data/"
    with pytest.raises(ApiError) as refused:  # what the API says about it, asked directly
        stack["api"].request("POST", "/batches", body={"callbackUrl": refused_url})
    reason = refused.value.body["message"]
    with stack["db"].cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM pdfbatch_batches")
        before = cur.fetchone()[0]
    page = browser.new_page()
    watch = Watch(page)
    # GIVEN the key and a link-local callback URL
    page.goto(stack["outputs"]["LocalApiUrl"])
    page.fill("#api-key", stack["api"].api_key)
    page.click("#save-key")
    page.wait_for_selector("#key-status:not(.bad):text-is('Key accepted.')")
    page.fill("#callback-url", refused_url)
    # WHEN the ZIP is picked
    page.set_input_files("#file", str(zip_path))
    # THEN the page stays where it was and says why, in the API's words; the field is marked
    page.wait_for_selector("body[data-state=idle] #message:not([hidden])")
    assert page.text_content("#message") == f"The callback URL was refused: {reason}"
    assert page.get_attribute("#callback-url", "aria-invalid") == "true"
    assert page.is_visible("#pick-section") and page.is_hidden("#batch-section")
    with stack["db"].cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM pdfbatch_batches")
        assert cur.fetchone()[0] == before
    assert [p for p in watch.problems if "400" not in p] == []
    page.close()


def test_a_failed_read_of_the_delivery_state_is_said_on_the_page_and_the_follow_goes_on(
    stack: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    corpus = samples.Corpus()
    corpus.add("one.pdf", samples.text_pdf([["nothing to link"]]))
    zip_path = tmp_path / "one.zip"
    corpus.write_zip(zip_path)
    hook = Hook(refuse=1)  # the first delivery fails: the page follows the retry (backoff from 30 s)
    page = browser.new_page()
    try:
        # GIVEN a batch with a callback URL uploaded through the page, and its first delivery refused
        page.goto(stack["outputs"]["LocalApiUrl"])
        page.fill("#api-key", stack["api"].api_key)
        page.click("#save-key")
        page.wait_for_selector("#key-status:not(.bad):text-is('Key accepted.')")
        page.fill("#callback-url", f"http://127.0.0.1:{hook.port}/page-hook?token=follow")
        page.set_input_files("#file", str(zip_path))
        page.wait_for_selector(DONE, timeout=WAIT_MS)
        batch_id = page.text_content("#batch-id")
        # WHEN the page's reads of the batch fail while it follows the delivery
        message = "redis is unavailable, try again shortly"
        unavailable = json.dumps({"error": "unavailable", "message": message})

        def refuse(route: Any) -> None:
            route.fulfill(status=503, content_type="application/json", body=unavailable)

        page.route(f"**/batches/{batch_id}", refuse)
        # THEN it says so, with the API's words, instead of going quiet
        said = "The summary's delivery state could not be read: redis is unavailable, try again shortly"
        page.wait_for_selector(f'#callback:text-is("{said}")', timeout=30_000)
        # WHEN the API answers again THEN the follow went on: the page says where the summary went
        page.unroute(f"**/batches/{batch_id}", refuse)
        page.wait_for_selector("#callback:text-is('Summary delivered to 127.0.0.1.')", timeout=120_000)
        assert hook.refused == 1 and any(json.loads(b)["batchId"] == batch_id for b in hook.bodies)
    finally:
        page.close()
        hook.close()
