"""The demo ZIP: résumés, scans and every kind of file that is not linked, each with the outcome it gets
(`pdfbatch demo`, `make demo`, tests/e2e/test_stack.py). Built from samples.py's documents and scans.py's
scanned pages (scans draws its long documents with samples, so the demo lives beside both)."""

from __future__ import annotations

import random

from tools import scans
from tools.samples import Corpus, image_only, manual, person, png, resume, text_pdf


def demo_corpus(n_resumes: int = 12) -> Corpus:
    """The demo batch: every main outcome and reason, plus the junk real ZIPs carry."""
    c = Corpus()
    for i in range(n_resumes):
        name, email = person(i)
        c.users.append(email)
        c.add(f"resumes/{name.replace(' ', '_')}.pdf", resume(name, email), "linked", "matched")
    # a recruiter's address comes first; the candidate (a user) must win
    name, email = person(100)
    c.users.append(email)
    c.add(
        "resumes/via_agency.pdf",
        text_pdf([["Forwarded by talent@agency.example.org", name, f"Contact: {email}"]]),
        "linked",
        "matched",
    )
    # mixed case in the PDF, lowercase in the table
    name, email = person(101)
    c.users.append(email)
    c.add("resumes/MIXED_CASE.PDF", resume(name, email.upper()), "linked", "matched")
    # a long manual whose email is on page 40
    name, email = person(102)
    c.users.append(email)
    c.add("manuals/device_manual.pdf", manual(60, email, email_page=40), "linked", "matched")
    # the same résumé twice: exactly one is linked
    name, email = person(103)
    c.users.append(email)
    twin = resume(name, email)
    c.add("duplicates/copy_1.pdf", twin)
    c.add("duplicates/copy_2.pdf", twin)
    # a user who already has a PDF
    name, email = person(104)
    c.linked_users.append(email)
    c.add("resumes/already_on_file.pdf", resume(name, email), "skipped_already_exists", "already_linked")
    c.add(
        "unknown/stranger.pdf",
        resume("Pat Stranger", "pat.stranger@nowhere.example.net"),
        "skipped_no_match",
        "no_user",
    )
    c.add(
        "contracts/no_contact.pdf",
        text_pdf([["Service agreement", "Between the parties named below."]]),
        "skipped_no_match",
        "no_email",
    )
    # scans (no text layer) go to the OCR lane: two scanned résumés of users are linked by OCR, and a
    # page of shapes names nobody (read by OCR, no address found)
    for n, seed in enumerate((20, 23), start=1):  # header layouts, 300 dpi: each read in ~0.5 CPU-s
        doc = scans.scan_doc(seed, 300)
        c.users.append(doc.email)
        c.add(f"scans/scanned_resume_{n}.pdf", doc.data, "linked", "matched")
    c.add("scans/scanned_letter.pdf", image_only(), "skipped_no_match", "no_email")
    # a searchable scan (a page image under an invisible text layer, as OCRmyPDF or a scanner writes it):
    # its layer decides nothing, the OCR lane reads the picture and links its owner
    text, email = next(
        (t, e)
        for t, e, where, _ in (scans.resume_text_pdf(random.Random(s)) for s in range(30, 60))
        if where == "header"
    )
    c.users.append(email)
    c.add("scans/searchable_scan.pdf", scans.sandwich(text, f"Email: {email}"), "linked", "matched")
    name, email = person(105)
    c.users.append(email)
    c.add(
        "secure/password_protected.pdf",
        text_pdf([[name, f"Email: {email}"]], owner="o", user="secret"),
        "failed",
        "encrypted",
    )
    name, email = person(106)
    c.users.append(email)
    c.add(
        "secure/owner_password_only.pdf",
        text_pdf([[name, f"Email: {email}"]], owner="owner-only"),
        "linked",
        "matched",
    )
    broken = resume("Broken File", person(107)[1])
    c.users.append(person(107)[1])
    c.add("broken/truncated.pdf", broken[: len(broken) // 2], "failed", "malformed_pdf")
    c.add("broken/picture.pdf", png(), "failed", "malformed_pdf")
    c.add("__MACOSX/resumes/._Ada_Lovelace.pdf", b"\x00\x05\x16\x07AppleDouble")
    c.add("resumes/.DS_Store", b"\x00\x00\x00\x01Bud1")
    c.add("README.txt", b"Batch exported from the HR system.")
    return c
