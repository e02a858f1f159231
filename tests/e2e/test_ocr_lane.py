"""The OCR lane end to end on LocalStack (issue 12): a batch of text résumés and scans, every file to its
right outcome; the scans (searchable ones too, issue 26) through process_pdf's hand-off, the OCR queue and
ocr_pdf (real Tesseract, the function's own zip), linked with source "ocr"; then the invariant checker."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from tools import samples

from fixtures import pdfs, scans
from fixtures.stack import run_cli, seed

pytestmark = pytest.mark.e2e


def resume(seed_: int) -> tuple[bytes, str]:
    """A word processor's résumé with its address in the header band, or (b"", "") when it is elsewhere."""
    text, email, where, _ = scans.resume_text_pdf(random.Random(seed_))
    return (text, email) if where == "header" else (b"", "")


def test_a_batch_of_resumes_and_scans_reaches_the_right_outcomes_through_both_lanes(
    stack: dict[str, Any], tmp_path: Path
) -> None:
    # GIVEN users, their text résumés and two scanned résumés, a blank scanned sheet, and a long scan
    # (8 pages of a few lines, cheap to read) naming nobody, past the lane's 5-page limit
    corpus = samples.Corpus()
    for i in range(4):
        name, email = samples.person(5000 + i)
        corpus.users.append(email)
        corpus.add(f"cv/{i}.pdf", samples.resume(name, email), "linked", "matched")
    for n, seed_ in enumerate((22, 27), start=1):  # header layouts at 300 dpi (docs/OCR.md's test set)
        doc = scans.scan_doc(seed_, 300)
        corpus.users.append(doc.email)
        corpus.add(f"scans/resume_{n}.pdf", doc.data, "linked", "matched")
    corpus.add("scans/blank.pdf", scans.blank_scan(), "skipped_no_match", "no_email")
    # searchable scans (issue 26): one made by `tesseract img out pdf`, and a hand-built sandwich whose
    # invisible layer names another user than its picture: the picture's owner is linked, never the layer's
    searchable = [resume(s) for s in range(40, 80)]
    (made, owner), (sandwiched, pictured) = [(t, e) for t, e in searchable if t][:2]
    corpus.users.append(owner)
    corpus.add("scans/searchable_tesseract.pdf", scans.tesseract_pdf(made), "linked", "matched")
    layer_user = samples.person(5100)[1]
    corpus.users += [pictured, layer_user]
    corpus.add(
        "scans/searchable_sandwich.pdf",
        scans.sandwich(sandwiched, f"Email: {layer_user}"),
        "linked",
        "matched",
    )
    appendix = pdfs.text_pdf([[f"Appendix page {p}", "Intentionally brief."] for p in range(1, 9)])
    long_scan = scans.rasterize(appendix, dpi=150, seed=11)[0]
    corpus.add("scans/long.pdf", long_scan, "skipped_no_match", "ocr_page_limit")
    seed(stack["db"], corpus)
    path = tmp_path / "mixed.zip"
    corpus.write_zip(path)
    # WHEN the operator uploads it and waits
    done = run_cli(stack["env"], "upload", str(path), "--wait", "--json", "--timeout", "600")
    assert done.returncode == 0, done.stderr[-3000:]
    status = json.loads(done.stdout)
    batch_id = status["batchId"]
    # THEN the batch completes, every file with its expected outcome and reason
    assert status["status"] == "COMPLETED", status
    files = {f["name"]: f for f in stack["api"].files(batch_id)}
    for name, (outcome, reason) in corpus.expected.items():
        assert (files[name]["outcome"], files[name]["reason"]) == (outcome, reason), (name, files[name])
    # AND each file says which lane read it; the status counts the lanes
    for name, f in files.items():
        assert f["source"] == ("ocr" if name.startswith("scans/") else "text"), name
    final, _ = stack["api"].status(batch_id)
    assert final["lanes"] == {"text": {"done": 4}, "ocr": {"waiting": 0, "done": 6}}
    # AND the scans' users point at their final objects, as the text résumés' do
    with stack["db"].cursor() as cur:
        linked = ("scans/resume_1.pdf", "scans/resume_2.pdf", "scans/searchable_tesseract.pdf")
        for name in (*linked, "scans/searchable_sandwich.pdf"):
            cur.execute("SELECT pdf_url FROM users WHERE id = %s", (files[name]["userId"],))
            assert cur.fetchone()[0].endswith(files[name]["finalKey"])
        cur.execute(
            "SELECT email FROM users WHERE id = %s", (files["scans/searchable_sandwich.pdf"]["userId"],)
        )
        assert cur.fetchone()[0] == pictured  # the picture's owner
        cur.execute("SELECT pdf_url FROM users WHERE email = %s", (layer_user,))
        assert cur.fetchone()[0] is None  # the sandwich's invisible layer linked nobody
        cur.execute(
            "SELECT source, COUNT(*) FROM pdfbatch_files WHERE batch_id = %s GROUP BY source", (batch_id,)
        )
        assert dict(cur.fetchall()) == {"text": 4, "ocr": 6}
    # AND the invariants hold (one outcome each, counters = ledger, links, lanes, no staged leftovers)
    done = run_cli(stack["env"], "check", batch_id, "--json")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"], report
    assert "lanes_consistent" in {r["name"] for r in report["invariants"]}
