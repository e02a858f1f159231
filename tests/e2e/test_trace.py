"""Issue 25 on the local stack: a batch processed, then each question answered by the CLI, the API
(held to its OpenAPI document) and the upload page in Chromium: which batches, what became of this PDF,
what became of this person's files, and what decided (the evidence PNG)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures.stack import run_cli, seed
from pdfbatch.cli.trace import sha256_of

pytestmark = pytest.mark.e2e

WAIT_MS = 240_000


def test_a_batch_then_each_question_answered_by_the_cli_the_api_and_the_page(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN Jane's résumé and a letter naming Jane and Bob, uploaded with the CLI and processed
    run = uuid.uuid4().hex[:8]
    jane, bob = f"jane.{run}@example.com", f"bob.{run}@example.com"
    corpus = samples.Corpus(users=[jane, bob])
    resume = samples.resume("Jane Trace", jane)
    corpus.add("jane.pdf", resume, "linked", "matched")
    corpus.add(
        "letter.pdf",
        samples.text_pdf([["Cover"], ["References", jane, bob]]),
        "skipped_no_match",
        "ambiguous",
    )
    seed(stack["db"], corpus)
    zip_path, pdf_path = tmp_path / "trace.zip", tmp_path / "resume.pdf"
    corpus.write_zip(zip_path)
    pdf_path.write_bytes(resume)
    env = stack["env"]
    done = run_cli(env, "upload", str(zip_path), "--wait", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    batch_id = json.loads(done.stdout)["batchId"]
    with stack["db"].cursor() as cur:
        cur.execute("SELECT id FROM users WHERE email = %s", (jane,))
        jane_id = str(cur.fetchone()[0])

    # THEN the CLI lists the batch first, traces the PDF (hashed locally) and the person
    listed = run_cli(env, "list", "--json", "--limit", "5")
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert json.loads(listed.stdout)[0]["batchId"] == batch_id
    traced = run_cli(env, "trace", str(pdf_path), "--json")
    assert traced.returncode == 0, traced.stderr[-2000:]
    newest = json.loads(traced.stdout)["files"][0]
    assert (newest["batchId"], newest["outcome"], newest["userId"], newest["page"]) == (
        batch_id,
        "linked",
        jane_id,
        1,
    )
    person = run_cli(env, "trace", "--user", jane, "--json")
    assert person.returncode == 0, person.stderr[-2000:]
    mine = [
        (f["name"], f["relation"]) for f in json.loads(person.stdout)["files"] if f["batchId"] == batch_id
    ]
    assert sorted(mine) == [("jane.pdf", "linked"), ("letter.pdf", "named")]
    unknown = run_cli(env, "trace", "--user", f"nobody.{run}@example.com")
    assert unknown.returncode == 2 and "not in any batch" in unknown.stderr

    # AND the API answers the same, as documented, with evidence a person can open
    api = stack["api"]
    assert next(iter(api.recent(limit=1)))["batchId"] == batch_id
    by_hash = api.trace_document(sha256_of(pdf_path))["files"][0]
    assert by_hash["batchId"] == batch_id and by_hash["reasonText"]
    named = [f for f in api.trace_user(bob)["files"] if f["batchId"] == batch_id]
    assert [(f["name"], f["reason"], f["page"]) for f in named] == [("letter.pdf", "ambiguous", 2)]
    for item in (by_hash, named[0]):
        with urllib.request.urlopen(item["evidence"], timeout=30) as got:
            assert got.read(8) == b"\x89PNG\r\n\x1a\n"

    # AND the page shows the batch among the recent ones and finds the PDF and the person
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", headless=True)
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(stack["outputs"]["LocalApiUrl"])
        page.fill("#api-key", api.api_key)
        page.click("#save-key")
        page.wait_for_selector(f"#recent-rows tr[data-batch='{batch_id}']", timeout=WAIT_MS)
        page.set_input_files("#find-file", str(pdf_path))
        page.click("#find-go")
        page.wait_for_selector(f"#found-rows tr[data-batch='{batch_id}']", timeout=WAIT_MS)
        assert page.locator("#found-rows a.evidence").count() >= 1
        page.set_input_files("#find-file", [])
        page.fill("#find-user", bob)
        page.click("#find-go")
        try:
            page.wait_for_selector(f"#find-note:has-text('user {bob}: 1 entry')", timeout=60_000)
        except Exception as exc:
            raise AssertionError(f"the page said: {page.text_content('#find-note')!r}") from exc
        assert page.text_content(f"#found-rows tr[data-batch='{batch_id}'] td:nth-child(3)") == "letter.pdf"
        page.fill("#find-user", f"nobody.{run}@example.com")
        page.click("#find-go")
        page.wait_for_selector("#find-note:has-text('not in any batch this key may see')", timeout=WAIT_MS)
        browser.close()
    assert errors == []
