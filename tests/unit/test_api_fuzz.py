"""The REST API fuzzed from its own /openapi.json (Schemathesis), in process: every request the document
allows, and malformed ones, through the status handler as API Gateway would call it (a WSGI wrapper).

Zero 5xx, and every answer conforms to the document: status code, content type, body and headers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from fixtures import pdfs, zips
from fixtures.apigw import TEST_API_KEY, as_wsgi, load_handler
from fixtures.examples import examples
from fixtures.openapi import FUZZ_OPERATIONS
from fixtures.pipeline import BUCKET, drain, fake_deps, upload
from pdfbatch import bootstrap
from pdfbatch.services import staging

status = load_handler("status")
APP = as_wsgi(status.handler)
# The API key through the document's own security scheme, so Schemathesis also sends requests without it
# (or with a wrong one) and checks they are refused; the base URL instead of the document's relative ".".
CONFIG = schemathesis.Config.from_dict(
    {
        "base-url": "http://localhost/",
        "auth": {"openapi": {"apiKey": {"api_key": TEST_API_KEY}}},
        "operations": FUZZ_OPERATIONS,  # POST /batches may refuse a schema-valid callbackUrl (400)
    }
)
schema = schemathesis.openapi.from_wsgi("/openapi.json", APP, config=CONFIG)


# The document's examples (batchId, key) name batches that exist here, so the fuzzer also reads real
# answers: a finished batch whose files have every outcome and hostile names, found by its key too.
EXAMPLE_ID = "0123456789abcdef0123456789abcdef"
EXAMPLE_KEY = "uploads/march.zip"


@pytest.fixture(autouse=True)
def wired(moto_aws: None) -> Iterator[None]:
    deps = fake_deps(BUCKET, api_key=TEST_API_KEY)
    ledger: Any = deps.ledger
    ledger.add_user("fuzz@example.com")
    data = zips.raw_zip(
        [
            zips.RawEntry("cv[/b]\x1b[31m.pdf", pdfs.resume_pdf("F", "fuzz@example.com")),
            zips.RawEntry(b"Jos\xe9.pdf", pdfs.text_pdf(["no address"]), flags=0x800),
            zips.RawEntry("broken.pdf", b"%PDF-1.4 not really"),
            zips.RawEntry("notes.txt", b"hello"),
        ]
    )
    for key in (f"uploads/{EXAMPLE_ID}.zip", EXAMPLE_KEY):
        staging.stage_zip(deps, upload(deps, data, key=key))
    drain(deps)
    bootstrap.override(deps)
    yield
    bootstrap.override(None)


@schema.parametrize()
@settings(max_examples=examples(60), deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_answers_every_request_as_documented_and_never_with_a_5xx(case: Any) -> None:
    case.call_and_validate()
