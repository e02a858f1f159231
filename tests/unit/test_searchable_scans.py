"""Pages whose text is not what it shows (issue 26, class 7) are read by OCR like a scan: searchable scans,
and gradient text (render mode 7 filled by a shading, CSS background-clip: text).

A page image under an invisible text layer (what `tesseract img out pdf`, OCRmyPDF and scanner firmware
write), or with its layer drawn under the picture, goes to the OCR lane, which reads the pixels only: the
layer never decides, so a layer naming someone other than the picture never links them. Over the fakes
and moto's SQS, with the real Tesseract (the lane on the local stack: tests/e2e/test_ocr_lane.py).
"""

from __future__ import annotations

import functools
import io
import random
from typing import Any

import pypdf
import pytest
from fpdf import FPDF

from fakes import FakeLedger
from fixtures import chromium, pdfs, scans
from fixtures.pipeline import drain, files_by_name, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import ocr, pdf
from pdfbatch.adapters.sqs import SqsQueue
from pdfbatch.model import FileTask, Reason
from pdfbatch.services import processing, staging
from pdfbatch.services.deps import Deps

ENGINE = ocr.Tesseract()


@functools.cache
def resume(seed: int) -> tuple[bytes, str]:
    """A word processor's résumé whose address is in its header band: (pdf, address)."""
    rng = random.Random(seed)
    while True:
        text, email, where, _ = scans.resume_text_pdf(rng)
        if where == "header":
            return text, email


@functools.cache
def tesseract_scan(seed: int) -> tuple[bytes, str]:
    """That résumé scanned and made searchable by `tesseract img out pdf`: (pdf, address)."""
    text, email = resume(seed)
    return scans.tesseract_pdf(text), email


@pytest.fixture()
def ocr_queue(deps: Deps) -> SqsQueue:
    """The OCR lane's queue, wired into ``deps`` (process_pdf hands scans to it)."""
    sqs: Any = deps.queue.client  # type: ignore[union-attr]
    queue = SqsQueue(sqs, sqs.create_queue(QueueName="ocr")["QueueUrl"], sleep=lambda _: None)
    deps.ocr_queue = queue
    return queue


def through_both_lanes(deps: Deps, data: bytes) -> Any:
    """Stage ``data`` alone, let process_pdf read it, then ocr_pdf (the real engine) if it was handed."""
    batch_id = staging.stage_zip(deps, upload(deps, make_zip([("cv.pdf", data)]))).batch_id
    drain(deps)
    row = files_by_name(deps, batch_id)["cv.pdf"]
    assert (row.outcome, row.source) == (None, "ocr"), "the text lane must hand it to the OCR lane"
    task = FileTask(batch_id, 0, f"staging/{batch_id}/{0:07d}.pdf", deps.settings.bucket)
    return processing.process_scan(deps, task, ENGINE)


def no_lookup(emails: object) -> list[Any]:
    return []


@pytest.mark.slow
def test_a_searchable_scan_from_tesseract_links_its_owner(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue
) -> None:
    # GIVEN a résumé scanned and made searchable by Tesseract's PDF renderer, its owner a user
    data, email = tesseract_scan(3)
    user = ledger.add_user(email)
    # WHEN the text lane reads it THEN its invisible layer gives nothing to decide on: it is a scan
    assert pdf.scan(data, no_lookup, max_pages=5, budget_seconds=30).reason == Reason.NO_TEXT_LAYER
    # AND through both lanes its owner is linked by what the page shows
    row = through_both_lanes(deps, data)
    assert row is not None and (row.outcome, row.user_id, row.source) == ("linked", user, "ocr")


@pytest.mark.slow
@pytest.mark.parametrize("under", [False, True], ids=["invisible-layer", "layer-under-the-image"])
def test_a_sandwich_whose_layer_names_another_user_never_links_the_layer_user(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue, under: bool
) -> None:
    # GIVEN a page image showing user A's résumé, and a text layer naming user B (invisible over the
    # image, or drawn under it)
    text, shown = resume(5)
    layer_user = "grace.hopper@example.org"
    a, b = ledger.add_user(shown), ledger.add_user(layer_user)
    data = scans.sandwich(text, f"Email: {layer_user}", under=under)
    # WHEN both lanes have read it
    row = through_both_lanes(deps, data)
    # THEN the person the picture shows is linked, never the layer's
    assert row is not None and (row.outcome, row.user_id) == ("linked", a)
    assert ledger.pdf_url_of(b) is None


def test_text_over_a_full_page_background_image_stays_in_the_text_lane() -> None:
    # GIVEN a résumé template: a full-page background picture, real text over it
    doc = FPDF(unit="pt", format="A4")
    doc.add_page()
    from PIL import Image

    doc.image(Image.new("L", (60, 85), 235), x=0, y=0, w=595.28, h=841.89)
    doc.set_font("Helvetica", "", 11)
    doc.text(50, 80, "Ada Lovelace  |  ada@example.com")
    for n in range(10):
        doc.text(50, 120 + 16 * n, f"Experience line {n}: analytical engines, notes and programs")
    # WHEN the text lane reads it
    found = pdf.scan(bytes(doc.output()), lambda es: [], max_pages=5, budget_seconds=30, isolate=False)
    # THEN it is read as text (the address is a candidate of nobody), not handed to OCR
    assert found.reason == Reason.NO_USER


# --- gradient text: glyphs that paint no ink of their own, ink shown through them -------------------


def clipped_text(address: str, *, paint: bool = True, transparent: bool = False) -> bytes:
    """A page with a title, and ``address`` drawn as a clip (render mode 7) that an axial shading then
    fills (``paint``), as gradient text is written; or (``transparent``) filled with alpha 0."""
    from fixtures.pdfs import assemble

    shading = b"<< /ShadingType 2 /ColorSpace /DeviceRGB /Coords [50 0 400 0] /Extend [true true]"
    shading += b" /Function << /FunctionType 2 /Domain [0 1] /C0 [0.8 0 0] /C1 [0 0 0.8] /N 1 >> >>"
    title = b"BT /F1 18 Tf 50 780 Td (Ada Lovelace, engineer) Tj ET "
    if transparent:
        body = b"q /G0 gs BT /F1 20 Tf 50 700 Td (%s) Tj ET Q" % address.encode()
    else:
        body = b"q BT 7 Tr /F1 20 Tf 50 700 Td (%s) Tj ET %s Q" % (
            address.encode(),
            b"/Sh0 sh" if paint else b"",
        )
    content = title + body
    return assemble(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources"
            b" << /Font << /F1 5 0 R >> /Shading << /Sh0 %s >> /ExtGState << /G0 << /ca 0 >> >> >> >>"
            % shading,
            b"<< /Length %d >>\nstream\n%s\nendstream" % (len(content), content),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        ]
    )


@pytest.mark.slow
def test_gradient_text_drawn_as_a_clip_filled_by_a_shading_links_its_owner(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue
) -> None:
    # GIVEN an address drawn in render mode 7 (a clip) and filled by a gradient: a person reads it
    owner = ledger.add_user("ada.lovelace@example.com")
    data = clipped_text("ada.lovelace@example.com")
    # WHEN both lanes have read it  THEN its owner is linked, by the pixels (the OCR lane)
    row = through_both_lanes(deps, data)
    assert row is not None and (row.outcome, row.user_id, row.source) == ("linked", owner, "ocr")


@pytest.mark.parametrize("how", ["clip-only", "transparent"])
def test_glyphs_with_no_ink_shown_through_them_are_neither_read_nor_sent_to_ocr(how: str) -> None:
    # GIVEN an address drawn as a clip nothing fills, or filled with a transparent colour, over paper
    data = clipped_text("victim@example.com", paint=False, transparent=how == "transparent")
    # WHEN the text lane reads it  THEN nobody sees it: it names nobody, and the page stays a text page
    found = pdf.scan(data, no_lookup, max_pages=5, budget_seconds=30)
    assert found.reason == Reason.NO_EMAIL


@pytest.mark.slow
def test_css_background_clip_text_printed_by_chromium_links_its_owner(
    deps: Deps, ledger: FakeLedger, ocr_queue: SqsQueue, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # GIVEN a résumé whose address is gradient text (CSS background-clip: text), printed by Chromium
    owner = ledger.add_user("maria.lopez@example.com")
    style = (
        "background: linear-gradient(90deg, #c00, #00c); -webkit-background-clip: text;"
        " background-clip: text; color: transparent; font-size: 13pt"
    )
    body = chromium.page("<p>Contact</p>", f'<p style="{style}">maria.lopez@example.com</p>')
    data = chromium.print_pdfs({"gradient": body}, tmp_path_factory.mktemp("chromium"))["gradient"]
    # WHEN both lanes have read it  THEN its owner is linked
    row = through_both_lanes(deps, data)
    assert row is not None and (row.outcome, row.user_id, row.source) == ("linked", owner, "ocr")


def test_a_page_image_with_only_a_caption_a_person_reads_is_read_by_ocr() -> None:
    # GIVEN a scanned page with a visible page number drawn over it (far less text than ink)
    text, _ = resume(5)
    image = scans.sandwich(text, "", dpi=100)
    doc = pypdf.PdfWriter(clone_from=io.BytesIO(image))
    stamp = FPDF(unit="pt", format="A4")
    stamp.add_page()
    stamp.set_font("Helvetica", "", 9)
    stamp.text(280, 820, "Page 1 of 1")
    doc.pages[0].merge_page(pypdf.PdfReader(io.BytesIO(bytes(stamp.output()))).pages[0])
    out = io.BytesIO()
    doc.write(out)
    # WHEN the text lane reads it  THEN the page is a scan: the OCR lane reads it
    assert pdf.scan(out.getvalue(), no_lookup, max_pages=5, budget_seconds=30).reason == Reason.NO_TEXT_LAYER


def test_a_text_page_before_a_searchable_scan_page_does_not_keep_the_scan_from_ocr() -> None:
    # GIVEN a cover page of text naming nobody, then a searchable scan's page (per page, not per document)
    text, email = resume(5)
    cover = pdfs.text_pdf([["Application for the platform role", "Please find my résumé attached."]])
    doc = pypdf.PdfWriter(clone_from=io.BytesIO(cover))
    doc.append(pypdf.PdfReader(io.BytesIO(scans.sandwich(text, f"Email: {email}"))))
    out = io.BytesIO()
    doc.write(out)
    # WHEN the text lane reads it  THEN it hands the document to OCR at the scanned page
    found = pdf.scan(out.getvalue(), no_lookup, max_pages=5, budget_seconds=30)
    assert (found.reason, found.pages_read) == (Reason.NO_TEXT_LAYER, 2)
