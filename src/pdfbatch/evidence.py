"""Evidence a person can look at (issue 25): a small render of the region that decided a file.

For a file whose deciding page named a user (linked, found already linked, or ambiguous), the page's
region around the address(es) as the page draws them (pdfbatch.pdf.region: pdfium, grey, 144 dpi),
written as a PNG at ``reports/{batch}/evidence/{index}.png``: the report's prefix, so the same access
(status may presign it), encryption (the bucket's) and lifecycle (the reports rule) hold. The per-file
result, a trace, the upload page and the CSV link it with a presigned GET.

Rendered by the PDF reader from the page it decided on (``pdf.Scan.evidence``), or, for a page it read
earlier, by ``render`` from the bytes process_pdf holds; only the text lane's files (a scan's text is
OCR's, not the PDF's). Nothing of the text is logged.
"""

from __future__ import annotations

from collections.abc import Sequence


def key(batch_id: str, index: int) -> str:
    """Where a file's evidence lives: under its batch's report prefix."""
    return f"reports/{batch_id}/evidence/{index:07d}.png"


def render(data: bytes, page: int, addresses: Sequence[str]) -> bytes | None:
    """A PNG of ``page`` (1-based) around where ``addresses`` are drawn, or None when none is found."""
    import pypdfium2 as pdfium

    from pdfbatch.pdf import region
    from pdfbatch.pdf.pages import PDFIUM_LOCK

    with PDFIUM_LOCK:
        doc = pdfium.PdfDocument(data)
        try:
            if not 1 <= page <= len(doc):
                return None
            pdf_page = doc[page - 1]
            textpage = pdf_page.get_textpage()
            try:
                return region.png(pdf_page, textpage, addresses)
            finally:
                textpage.close()
        finally:
            doc.close()
