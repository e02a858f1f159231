"""The OpenAPI document (src/pdfbatch/web/openapi.json) is valid and describes exactly what is deployed."""

from __future__ import annotations

import re
from typing import Any

from cfnlint import decode as cfn_decode
from openapi_spec_validator import validate

from fixtures.apigw import ROOT
from fixtures.openapi import spec
from pdfbatch.model import BATCH_REASON_TEXT, COUNTED_OUTCOMES, IGNORED, REASON_OUTCOME, Reason
from pdfbatch.web import api

METHODS = {"get", "post", "put", "patch", "delete"}


def normalise(path: str) -> str:
    """/batches/<batch_id> and /batches/{batchId} are the same route."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path)


def documented() -> set[tuple[str, str]]:
    return {(m.upper(), normalise(p)) for p, item in spec()["paths"].items() for m in item if m in METHODS}


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(spec())
    assert spec()["openapi"].startswith("3.1")


def test_every_route_of_the_handler_is_documented_and_nothing_else() -> None:
    served = {(method, normalise(path)) for method, path, _ in api.ROUTES}
    assert served == documented()


def test_every_documented_route_is_deployed_on_the_rest_api() -> None:
    template, errors = cfn_decode.decode(str(ROOT / "infra" / "template.yaml"))
    assert not errors
    events = [
        e
        for e in template["Resources"]["StatusFunction"]["Properties"]["Events"].values()
        if e["Type"] == "Api"
    ]
    deployed = {(e["Properties"]["Method"].upper(), normalise(e["Properties"]["Path"])) for e in events}
    assert deployed == documented()


def test_only_the_page_and_the_document_are_public() -> None:
    public = {
        (m.upper(), p)
        for p, item in spec()["paths"].items()
        for m, op in item.items()
        if m in METHODS and op.get("security") == []
    }
    assert public == set(api.PUBLIC_ROUTES)
    assert spec()["security"] == [{"apiKey": []}]
    scheme = spec()["components"]["securitySchemes"]["apiKey"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "x-api-key")


def test_every_protected_operation_documents_401_and_403() -> None:
    for path, item in spec()["paths"].items():
        for method, op in item.items():
            if method in METHODS and op.get("security") != []:
                assert {"401", "403"} <= set(op["responses"]), (method, path)


def test_the_enums_are_the_models() -> None:
    schemas: dict[str, Any] = spec()["components"]["schemas"]
    assert set(schemas["Reason"]["enum"]) == {r.value for r in Reason}
    assert set(schemas["Outcome"]["enum"]) == set(COUNTED_OUTCOMES)
    assert set(schemas["File"]["properties"]["outcome"]["enum"]) == {*COUNTED_OUTCOMES, IGNORED, None}
    counted = {r for r, o in REASON_OUTCOME.items() if o != IGNORED}
    assert set(schemas["BatchStatus"]["properties"]["reasons"]["propertyNames"]["enum"]) == counted
    assert set(schemas["BatchStatus"]["properties"]["reason"]["enum"]) == {*BATCH_REASON_TEXT, "unknown"}


def test_every_error_code_the_handler_sends_is_documented() -> None:
    source = (ROOT / "src" / "pdfbatch" / "web" / "api.py").read_text()
    sent = set(re.findall(r'\berror\(\s*\d{3},\s*"([a-z_]+)"', source))
    assert sent and sent == set(spec()["components"]["schemas"]["Error"]["properties"]["error"]["enum"])
