"""bytes -> validated document -> page texts -> candidate emails -> scan(lookup).

Two libraries, each for what it does best: pypdf checks structure and encryption (it reads the xref and
the page tree without touching page content), pypdfium2 extracts text (faster, and it orders glyphs by
position on the page, where pypdf follows the content stream and can read an address backwards).

Both parse hostile bytes, so scan() runs them in a forked reader process that the per-file budget can
kill. One module per concern, each importing only those above it:

  emails.py     text -> candidate addresses (pure regular expressions, no PDF library)
  structure.py  what counts as a PDF: pypdf's checks, pdfium's on opening, the pypdf log collector
  pages.py      a validated document's pages -> each page's new candidates (_read)
  reader.py     the forked reader process that runs _read for scan()
  scan.py       scan(): page by page until the lookup knows a candidate, within the per-file budget

Callers use the names below (``from pdfbatch import pdf``; ``pdf.scan(...)``). ``pdf.scan`` is the
function: reach the module's own names with ``from pdfbatch.pdf.scan import ...``. Importing any part of
the package loads pypdf and pypdfium2 (~20 MB resident), so unzip and status never import it: the PDF
worker imports it where it scans.

pdfium is not thread-safe: call this package from one thread per process (one Lambda invocation is).
"""

from pdfbatch.pdf.emails import find_emails
from pdfbatch.pdf.pages import MAX_CANDIDATES_PER_PAGE, PDFIUM_LOCK
from pdfbatch.pdf.reader import CHILD_MEMORY_BYTES, READER_MAX_SCANS
from pdfbatch.pdf.scan import Lookup, Scan, scan
from pdfbatch.pdf.structure import PdfInfo, validate

__all__ = [
    "CHILD_MEMORY_BYTES",
    "MAX_CANDIDATES_PER_PAGE",
    "PDFIUM_LOCK",
    "READER_MAX_SCANS",
    "Lookup",
    "PdfInfo",
    "Scan",
    "find_emails",
    "scan",
    "validate",
]
