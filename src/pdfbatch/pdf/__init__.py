"""bytes -> validated document -> the addresses a person sees on each page -> scan(lookup) -> who it names.

Two libraries, each for what it does best: pypdf checks structure and encryption (it reads the xref and
the page tree without touching page content), pypdfium2 reads the pages (faster, it orders glyphs by
position on the page, and it gives each glyph's box, render mode, colour and size, and renders).

Both parse hostile bytes, so scan() runs them in a forked reader process that the per-file budget can
kill. One module per concern, each importing only those above it:

  emails.py      text -> addresses: the syntax (RFC 5322 dot-atom), artefacts, obfuscations (pure)
  tlds.py        the root zone's top-level domains (for re-joining a domain cut at a line end)
  glyphs.py      a page's characters -> addresses whole across wraps and letter spacing (pure)
  structure.py   what counts as a PDF: pypdf's checks, pdfium's on opening, the pypdf log collector
  visibility.py  whether a person sees a glyph: the cheap checks, the render check, form fields
  pages.py       a validated document's pages -> each page's visible candidates (_Document)
  reader.py      the forked reader process that runs _Document for scan()
  scanning.py    scan(): page by page until pdfbatch.matching decides, within the per-file budget

Callers use the names below (``from pdfbatch import pdf``; ``pdf.scan(...)``). Importing any part of
the package loads pypdf and pypdfium2 (~20 MB resident), so unzip and status never import it: the PDF
worker imports it where it scans.

pdfium is not thread-safe: call this package from one thread per process (one Lambda invocation is).
"""

from pdfbatch.pdf.emails import find_emails, find_obfuscated
from pdfbatch.pdf.pages import PDFIUM_LOCK
from pdfbatch.pdf.reader import CHILD_MEMORY_BYTES, READER_MAX_SCANS
from pdfbatch.pdf.scanning import Lookup, Scan, scan
from pdfbatch.pdf.structure import PdfInfo, validate

__all__ = [
    "CHILD_MEMORY_BYTES",
    "PDFIUM_LOCK",
    "READER_MAX_SCANS",
    "Lookup",
    "PdfInfo",
    "Scan",
    "find_emails",
    "find_obfuscated",
    "scan",
    "validate",
]
