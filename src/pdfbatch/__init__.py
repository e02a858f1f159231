"""pdfbatch: turn a ZIP of PDFs into linked user records, asynchronously, without losing a file."""

__version__ = "0.1.0"
