"""The status REST API through its Lambda handler, over fakes of MySQL/Redis and moto S3.

Access control on every route, and every answer (success or error) held to the OpenAPI document.
"""

from __future__ import annotations

import base64
import functools
import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import pytest

from fakes import FakeClock, FakeLedger, FakeProgress
from fixtures import pdfs
from fixtures.apigw import TEST_API_KEY, Context, api_event, header, load_handler
from fixtures.openapi import SPEC_FILE, check_response
from fixtures.pipeline import drain, process_all, receive_all, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import bootstrap
from pdfbatch.model import describe
from pdfbatch.services import staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.web import http

UNKNOWN = "0" * 32
PROTECTED = [
    ("POST", "/batches", None),
    ("GET", "/batches", {"key": "uploads/drop.zip"}),
    ("GET", f"/batches/{UNKNOWN}", None),
    ("GET", f"/batches/{UNKNOWN}/files", None),
]
# What each protected route answers with the right key and nothing behind it.
ANSWER_WITH_KEY = {"/batches": {"POST": 201, "GET": 200}, "": {"GET": 404}}

resume = functools.cache(pdfs.resume_pdf)
text_pdf = functools.cache(lambda text: pdfs.text_pdf([text]))


@dataclass
class Answer:
    status: int
    body: Any
    raw: dict[str, Any]

    def header(self, name: str) -> str | None:
        return header(self.raw, name)


@pytest.fixture(scope="module")
def status() -> Any:
    return load_handler("status")


def call(
    status: Any,
    method: str,
    path: str,
    query: dict[str, str] | None = None,
    api_key: str | None = TEST_API_KEY,
    headers: dict[str, str] | None = None,
) -> Answer:
    """Invoke the handler; every answer must match the OpenAPI document."""
    raw = status.handler(api_event(method, path, query, api_key=api_key, headers=headers), Context())
    content_type = header(raw, "Content-Type") or ""
    body = json.loads(raw["body"]) if content_type.startswith("application/json") else raw["body"]
    flat = {k: v for k, v in (raw.get("headers") or {}).items()}
    check_response(method, path, raw["statusCode"], body, flat)
    return Answer(raw["statusCode"], body, raw)


# --- access control ----------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path", "query"), PROTECTED)
def test_a_request_without_the_key_is_401_with_a_json_error(
    deps: Deps, status: Any, method: str, path: str, query: dict[str, str] | None
) -> None:
    answer = call(status, method, path, query, api_key=None)
    assert answer.status == 401
    assert answer.body["error"] == "unauthorized"
    assert answer.header("WWW-Authenticate") == 'ApiKey header="x-api-key"'


@pytest.mark.parametrize(("method", "path", "query"), PROTECTED)
@pytest.mark.parametrize(
    "wrong", ["", TEST_API_KEY[:-1], TEST_API_KEY + "x", TEST_API_KEY.upper(), "é" * 30], ids=repr
)
def test_a_request_with_a_wrong_key_is_403_and_does_nothing(
    deps: Deps, status: Any, method: str, path: str, query: dict[str, str] | None, wrong: str
) -> None:
    answer = call(status, method, path, query, api_key=wrong)
    # An empty header counts as no key at all.
    expected = (401, "unauthorized") if not wrong else (403, "forbidden")
    assert (answer.status, answer.body["error"]) == expected
    assert isinstance(deps.ledger, FakeLedger) and deps.ledger.batches == {}


@pytest.mark.parametrize(("method", "path", "query"), PROTECTED)
def test_the_right_key_reaches_the_route(
    deps: Deps, status: Any, method: str, path: str, query: dict[str, str] | None
) -> None:
    answer = call(status, method, path, query)
    expected = ANSWER_WITH_KEY["/batches" if path == "/batches" else ""][method]
    assert answer.status == expected, answer.body


def test_the_key_header_name_is_case_insensitive(deps: Deps, status: Any) -> None:
    answer = call(status, "POST", "/batches", api_key=None, headers={"X-API-Key": TEST_API_KEY})
    assert answer.status == 201


def test_the_page_and_the_openapi_document_need_no_key(deps: Deps, status: Any) -> None:
    page = call(status, "GET", "/", api_key=None)
    assert page.status == 200
    assert (page.header("Content-Type") or "").startswith("text/html")
    assert "<title>pdfbatch" in page.body
    assert "script-src 'sha256-" in (page.header("Content-Security-Policy") or "")
    doc = call(status, "GET", "/openapi.json", api_key=None)
    assert doc.status == 200
    assert doc.body == json.loads(SPEC_FILE.read_text())


def test_without_a_configured_key_the_api_refuses_everything_but_the_page(deps: Deps, status: Any) -> None:
    # GIVEN a function deployed without PDFBATCH_API_KEY
    bootstrap.override(replace(deps, settings=replace(deps.settings, api_key="")))
    # THEN protected routes refuse, whatever key is sent, and the page still loads
    for key in (None, TEST_API_KEY, ""):
        answer = call(status, "POST", "/batches", api_key=key)
        assert (answer.status, answer.body["error"]) == (500, "not_configured")
    assert call(status, "GET", "/", api_key=None).status == 200


def test_past_the_pending_batches_limit_post_batches_is_429_with_retry_after(deps: Deps, status: Any) -> None:
    # GIVEN a limit of two batches waiting for their upload, both taken
    bootstrap.override(replace(deps, settings=replace(deps.settings, max_pending_batches=2)))
    assert [call(status, "POST", "/batches").status for _ in range(2)] == [201, 201]
    # WHEN a third is asked for
    answer = call(status, "POST", "/batches")
    # THEN it is a 429 with a JSON error and when to ask again (the document holds it), and no batch
    assert (answer.status, answer.body["error"]) == (429, "too_many_requests")
    assert int(answer.header("Retry-After") or "0") >= deps.settings.upload_url_expires_seconds
    assert isinstance(deps.ledger, FakeLedger) and len(deps.ledger.batches) == 2


# --- every answer of a batch's life matches the OpenAPI document ---------------------------------


def test_a_batch_seen_through_the_api_matches_the_openapi_document(deps: Deps, status: Any) -> None:
    assert isinstance(deps.ledger, FakeLedger) and isinstance(deps.clock, FakeClock)
    clock = deps.clock
    user = deps.ledger.add_user("ada@example.com")
    # GIVEN a batch created through the API, whose ZIP arrives 5 s later
    created = call(status, "POST", "/batches")
    assert created.status == 201
    batch_id = created.body["batchId"]
    pending = call(status, "GET", f"/batches/{batch_id}")
    assert pending.body["status"] == "PENDING" and pending.header("Retry-After") == "1"
    assert pending.body["durations"] == dict.fromkeys(
        ("queuedSeconds", "unzipSeconds", "processingSeconds", "totalSeconds")
    )
    clock.advance(5)
    evil = '<img src=x onerror="alert(1)">.pdf'
    data = make_zip(
        [
            ("cv/ada.pdf", resume("Ada", "ada@example.com")),
            ("cv/none.pdf", text_pdf("no address here")),
            ("broken.pdf", b"%PDF-1.7 not really"),
            (evil, text_pdf("nothing")),
            ("notes.txt", b"not a pdf"),
        ]
    )
    staging.stage_zip(deps, upload(deps, data, key=created.body["key"]))
    # WHEN the files are processed, one second apart, and the API is asked along the way
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:1])
    clock.advance(1)
    process_all(deps, msgs[1:2])
    running = call(status, "GET", f"/batches/{batch_id}")
    clock.advance(2)
    process_all(deps, msgs[2:])
    done = call(status, "GET", f"/batches/{batch_id}")
    # THEN the running batch has a rate, an ETA and a poll hint, and the stage timings fill in
    assert running.body["status"] == "PROCESSING" and running.header("Retry-After") == "1"
    assert (running.body["processed"], running.body["percent"], running.body["etaSeconds"]) == (2, 50.0, 2.0)
    assert running.body["filesPerSecond"] == 1.0
    assert done.body["status"] == "COMPLETED" and done.header("Retry-After") is None
    assert (done.body["etaSeconds"], done.body["filesPerSecond"]) == (None, None)
    assert done.body["durations"] == {
        "queuedSeconds": 5.0,
        "unzipSeconds": 0.0,
        "processingSeconds": 3.0,
        "totalSeconds": 8.0,
    }
    assert done.body["reasons"] == {"matched": 1, "no_email": 2, "malformed_pdf": 1}
    # and the files not linked each carry the sentence for their reason
    page = call(status, "GET", f"/batches/{batch_id}/files", {"outcome": "not_linked"})
    assert {(f["name"], f["reasonText"]) for f in page.body["items"]} == {
        ("cv/none.pdf", describe("no_email")),
        ("broken.pdf", describe("malformed_pdf")),
        (evil, describe("no_email")),
    }
    linked = call(status, "GET", f"/batches/{batch_id}/files", {"outcome": "linked"}).body["items"]
    assert [(f["name"], f["userId"]) for f in linked] == [("cv/ada.pdf", user)]
    first = call(status, "GET", f"/batches/{batch_id}/files", {"limit": "2"})
    assert first.body["nextCursor"] is not None
    found = call(status, "GET", "/batches", {"key": created.body["key"]})
    assert [b["batchId"] for b in found.body["batches"]] == [batch_id]
    # and once the live counters expire, the ledger gives the same answer
    assert isinstance(deps.progress, FakeProgress)
    deps.progress.expire(batch_id)
    stored = call(status, "GET", f"/batches/{batch_id}")
    assert stored.body["source"] == "ledger"
    same = ("status", "processed", "reasons", "startedAt", "unpackedAt", "durations", "percent")
    assert {k: stored.body[k] for k in same} == {k: done.body[k] for k in same}
    # and only the final batch links its report (presigned GETs of reports/{id}/...), both ways
    assert "report" not in running.body
    for body in (done.body, stored.body):
        assert set(body["report"]) == {"csv", "summary", "expiresIn"}
        assert f"/reports/{batch_id}/results.csv?" in body["report"]["csv"]
        assert f"/reports/{batch_id}/summary.json?" in body["report"]["summary"]


@pytest.mark.parametrize(
    ("method", "path", "query", "code"),
    [
        ("GET", "/batches", {"status": "DONE"}, 400),
        ("GET", "/batches", {"key": "elsewhere/x.zip"}, 400),
        ("GET", f"/batches/{UNKNOWN}/files", {"limit": "lots"}, 400),
        ("GET", "/batches/not-an-id", None, 404),
    ],
)
def test_errors_match_the_openapi_document(
    deps: Deps, status: Any, method: str, path: str, query: dict[str, str] | None, code: int
) -> None:
    assert call(status, method, path, query).status == code


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "²"},  # str.isdigit() says yes, int() says no
        {"limit": ""},
        {"limit": "٣"},  # an Arabic-Indic digit: int() would take it
        {"limit": "-1"},
        {"limit": " 5"},
        {"cursor": "²"},
        {"cursor": "9" * 5000},  # past int()'s 4,300 digits
        {"cursor": "1_000"},
        {"outcome": "linked\udc80"},
    ],
    ids=repr,
)
def test_malformed_query_values_are_400_with_a_json_error(
    deps: Deps, status: Any, query: dict[str, str]
) -> None:
    # GIVEN a batch with a file WHEN its files are asked for with a malformed value THEN 400, never a raise
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", text_pdf("x"))])))
    answer = call(status, "GET", f"/batches/{report.batch_id}/files", query)
    assert (answer.status, answer.body["error"]) == (400, "invalid_input")


@pytest.mark.parametrize("limit", ["1" + "0" * 5000, "00000000000000000000000000007", "1001", "0"])
def test_any_ascii_number_as_limit_is_clamped_to_1_to_1000(deps: Deps, status: Any, limit: str) -> None:
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", text_pdf("x"))])))
    answer = call(status, "GET", f"/batches/{report.batch_id}/files", {"limit": limit})
    assert answer.status == 200 and len(answer.body["items"]) == 1


@pytest.mark.parametrize("key", ["uploads/\ud800.zip", "uploads/\udced\udca0\udc80.zip", "uploads/a\udfff"])
def test_a_lone_surrogate_in_a_query_is_400_not_an_encoding_error(deps: Deps, status: Any, key: str) -> None:
    # GIVEN a query string API Gateway decoded into a lone surrogate (%ED%A0%80 is no UTF-8)
    answer = call(status, "GET", "/batches", {"key": key})
    # THEN it is refused as input, before any store sees it
    assert (answer.status, answer.body["error"]) == (400, "invalid_input")


def test_an_undeclared_method_on_a_known_path_is_405_with_allow(deps: Deps, status: Any) -> None:
    for method, path, allow in [
        ("DELETE", "/batches", "GET, POST"),
        ("TRACE", "/", "GET"),
        ("PUT", f"/batches/{UNKNOWN}/files", "GET"),
    ]:
        raw = status.handler(api_event(method, path, api_key=None), Context())
        assert raw["statusCode"] == 405, (method, path)
        assert json.loads(raw["body"])["error"] == "method_not_allowed"
        assert header(raw, "Allow") == allow


def test_files_with_a_bad_filter_or_cursor_are_400(deps: Deps, status: Any) -> None:
    report = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", text_pdf("x"))])))
    for query in ({"outcome": "deleted"}, {"cursor": "abc"}):
        answer = call(status, "GET", f"/batches/{report.batch_id}/files", query)
        assert (answer.status, answer.body["error"]) == (400, "invalid_input")


def test_a_failed_batch_says_why_in_a_sentence(deps: Deps, status: Any) -> None:
    report = staging.stage_zip(deps, upload(deps, b"PK\x03\x04 this is no zip"))
    body = call(status, "GET", f"/batches/{report.batch_id}").body
    assert (body["status"], body["reason"], body["reasonText"]) == (
        "FAILED",
        "corrupt_zip",
        describe("corrupt_zip"),
    )


def test_reason_counts_equal_the_ledger_after_the_counters_are_rebuilt(deps: Deps, status: Any) -> None:
    # GIVEN a batch half processed when its Redis hash expires
    entries = [(f"{i}.pdf", text_pdf("none") if i % 3 else b"junk") for i in range(9)]
    report = staging.stage_zip(deps, upload(deps, make_zip(entries)))
    msgs = sorted(receive_all(deps), key=lambda m: m["index"])
    process_all(deps, msgs[:4])
    assert isinstance(deps.progress, FakeProgress)
    deps.progress.expire(report.batch_id)
    # WHEN the rest is processed (the first count rebuilds the hash from the ledger)
    process_all(deps, msgs[4:])
    drain(deps)
    # THEN the live per-reason counts are the ledger's
    body = call(status, "GET", f"/batches/{report.batch_id}").body
    ledger = Counter(r.reason for r in views.iter_all_files(deps, report.batch_id))
    assert body["source"] == "live" and body["status"] == "COMPLETED"
    assert body["reasons"] == dict(ledger) == {"no_email": 6, "malformed_pdf": 3}
    assert body["startedAt"] is not None


def test_no_key_sent_or_configured_ever_reaches_the_logs(
    deps: Deps, status: Any, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "wrong-secret-that-must-not-be-logged"
    with caplog.at_level("INFO"):
        for key in (wrong, None, TEST_API_KEY):
            call(status, "POST", "/batches", api_key=key)
    # every record with its extra fields, as the JSON formatter would write them
    logged = "\n".join(repr(vars(r)) for r in caplog.records)
    assert "request with a wrong API key" in logged and "request without an API key" in logged
    assert wrong not in logged and TEST_API_KEY not in logged


def test_a_reused_upload_link_shows_in_the_status_and_the_key_lookup_as_documented(
    deps: Deps, status: Any
) -> None:
    # GIVEN a batch whose presigned POST was used for a second ZIP, both processed
    created = call(status, "POST", "/batches").body
    first = staging.stage_zip(deps, upload(deps, make_zip([("a.pdf", text_pdf("a"))]), created["key"], "0A"))
    second = staging.stage_zip(deps, upload(deps, make_zip([("b.pdf", text_pdf("b"))]), created["key"], "0B"))
    drain(deps)
    # WHEN the first batch and the key are asked for (every answer checked against the OpenAPI document)
    body = call(status, "GET", f"/batches/{first.batch_id}").body
    found = call(status, "GET", "/batches", {"key": created["key"]}).body
    # THEN the first batch names the second, which the key lookup lists as an upload of its own
    assert body["laterUploads"] == [second.batch_id]
    assert {(b["batchId"], b["source"]) for b in found["batches"]} == {
        (first.batch_id, "api"),
        (second.batch_id, "s3"),
    }
    assert "laterUploads" not in call(status, "GET", f"/batches/{second.batch_id}").body


# --- JSON bodies: capped before they are parsed --------------------------------------------------------


def post(status: Any, body: str, encoded: bool = False) -> Answer:
    """POST /batches with ``body`` (base64, as API Gateway sends a binary body, when ``encoded``)."""
    event = api_event("POST", "/batches", headers={"Content-Type": "application/json"})
    event["body"] = body
    event["isBase64Encoded"] = encoded
    raw = status.handler(event, Context())
    parsed = json.loads(raw["body"])
    check_response("POST", "/batches", raw["statusCode"], parsed, raw["headers"])
    return Answer(raw["statusCode"], parsed, raw)


@pytest.mark.parametrize(
    "body",
    [
        "[" * 100_000,  # json.loads recursed out of the stack: RecursionError, a 502 at API Gateway
        "[" * 17 + "]" * 17,
        '{"a":' * 17 + "1" + "}" * 17,
        "{}" + " " * (16 * 1024),  # past the size cap, however harmless
        '{"callbackUrl": "https://example.com/' + "é" * 8200 + '"}',  # < 16 Ki characters, > 16 KiB
    ],
    ids=["100000-brackets", "17-lists", "17-objects", "16KiB-and-more", "16KiB-of-utf8"],
)
def test_a_body_too_deep_or_too_big_is_400_before_it_is_parsed(deps: Deps, status: Any, body: str) -> None:
    # GIVEN a body past the documented limits WHEN it is POSTed THEN 400 with a JSON error, never a raise
    answer = post(status, body)
    assert (answer.status, answer.body["error"]) == (400, "invalid_input")


def test_a_body_that_is_not_utf8_is_400(deps: Deps, status: Any) -> None:
    # GIVEN a binary body (base64) whose bytes are not UTF-8, outside a string and inside one
    for raw in (b"\xff{}", b'{"callbackUrl": "https://example.com/\xed\xa0\x80"}'):
        answer = post(status, base64.b64encode(raw).decode(), encoded=True)
        assert (answer.status, answer.body["error"]) == (400, "invalid_input")


def test_a_body_at_the_limits_is_accepted(deps: Deps, status: Any) -> None:
    # GIVEN an object 16 deep that fills 16 KiB: brackets inside strings are text, not nesting
    padding = " " * (16 * 1024 - 2)
    assert post(status, "{}" + padding).status == 201
    assert http.json_depth('{"a": "[[[[\\"[[[[", "b": [[]]}') == 3
    nested = '{"callbackUrl": ' + "[" * 15 + "1" + "]" * 15 + "}"
    assert post(status, nested).body["message"] == "callbackUrl must be a string"  # read, not capped
