"""The one Powertools logger of pdfbatch (JSON lines); shared by services and handlers.

Log ids, counts, reasons and timings only: never PDF text, email addresses, passwords or entry
names (use services.deps.fingerprint() when correlation is needed).
"""

from __future__ import annotations

from aws_lambda_powertools import Logger

logger = Logger(service="pdfbatch")
