"""Issue 25 through the status API: a caller's recent batches, and one document or one person traced.

Every answer is held to the OpenAPI document (fixtures.openapi.check_response); a tenant key sees only
its tenant's batches, and another tenant's document or user answers exactly as an unknown one does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from fakes import FakeClock, FakeLedger
from fixtures.apigw import TEST_API_KEY, Context, api_event, header, load_handler
from fixtures.openapi import check_response
from pdfbatch import tenants
from pdfbatch.services import Deps


@pytest.fixture(scope="module")
def status() -> Any:
    return load_handler("status")


def call(
    status: Any, path: str, query: dict[str, str] | None = None, api_key: str = TEST_API_KEY
) -> tuple[int, Any]:
    """GET ``path`` through the handler; the answer must match the OpenAPI document."""
    raw = status.handler(api_event("GET", path, query, api_key=api_key), Context())
    body = json.loads(raw["body"])
    check_response("GET", path, raw["statusCode"], body, dict(raw.get("headers") or {}))
    assert (header(raw, "Content-Type") or "").startswith("application/json")
    return raw["statusCode"], body


def _batches(ledger: FakeLedger, clock: FakeClock, owners: list[str | None]) -> list[str]:
    """One batch per owner, a minute apart, the last one FAILED; their ids oldest first."""
    ids = []
    for n, owner in enumerate(owners):
        batch_id = f"{n:032x}"
        ledger.create_batch(batch_id, "b", f"uploads/{batch_id}.zip", "api", "PROCESSING", owner)
        ledger.start_batch(batch_id, 3, 1)
        counts = {
            "linked": 2,
            "skipped_no_match": 1,
            "skipped_already_exists": 0,
            "failed": 0,
            "processed": 3,
        }
        ledger.finish_batch(batch_id, "COMPLETED", counts, None)
        ids.append(batch_id)
        clock.advance(60)
    return ids


def test_recent_batches_are_the_callers_newest_first_with_counts_and_pages(
    deps: Deps, ledger: FakeLedger, clock: FakeClock, status: Any
) -> None:
    # GIVEN five batches of acme, two of globex and one of the admin's, created a minute apart
    owners: list[str | None] = ["acme", "globex", "acme", None, "acme", "acme", "globex", "acme"]
    ids = _batches(ledger, clock, owners)
    ledger.create_batch("f" * 32, "b", "uploads/late.zip", "s3", "PENDING", "acme")
    ledger.expire_unclaimed("f" * 32, "upload_expired", {})
    acme = tenants.create_key(deps.tenants, "acme")  # type: ignore[arg-type]
    # WHEN acme lists its batches two at a time
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        code, body = call(status, "/batches", {"limit": "2", **({"cursor": cursor} if cursor else {})}, acme)
        assert code == 200
        seen += [b["batchId"] for b in body["batches"]]
        pages += 1
        cursor = body["nextCursor"]
        if cursor is None:
            break
    # THEN it sees exactly its own six, newest first, over three pages (never another tenant's)
    mine = ["f" * 32, *[b for b, o in zip(ids, owners, strict=True) if o == "acme"][::-1]]
    assert seen == mine and pages == 3
    # AND each carries its counts, its upload and, when FAILED, why in words
    _, body = call(status, "/batches", {"limit": "2"}, acme)
    failed, done = body["batches"]
    assert (failed["status"], failed["reason"], failed["counts"]) == ("FAILED", "upload_expired", None)
    assert "no ZIP was uploaded" in failed["reasonText"]
    assert done["counts"]["linked"] == 2 and done["upload"] == f"uploads/{done['batchId']}.zip"
    assert "tenant" not in done
    # AND a status filter and a date window narrow it
    _, only_failed = call(status, "/batches", {"status": "FAILED"}, acme)
    assert [b["batchId"] for b in only_failed["batches"]] == ["f" * 32]
    _, nothing = call(status, "/batches", {"until": "2000-01-01"}, acme)
    assert nothing["batches"] == []


def test_the_admin_lists_every_batch_or_one_tenants_and_a_tenant_never_anothers(
    deps: Deps, ledger: FakeLedger, clock: FakeClock, status: Any
) -> None:
    owners: list[str | None] = ["acme", None, "globex"]
    ids = _batches(ledger, clock, owners)
    acme = tenants.create_key(deps.tenants, "acme")  # type: ignore[arg-type]
    _, every = call(status, "/batches")
    assert [(b["batchId"], b["tenant"]) for b in every["batches"]] == list(zip(ids, owners, strict=True))[
        ::-1
    ]
    _, globex = call(status, "/batches", {"tenant": "globex"})
    assert [b["batchId"] for b in globex["batches"]] == [ids[2]]
    # A tenant naming another tenant finds nothing, the same answer as a tenant with no batches
    assert call(status, "/batches", {"tenant": "globex"}, acme) == call(
        status, "/batches", {"tenant": "nobody"}, acme
    )
    assert call(status, "/batches", {"tenant": "globex"}, acme)[1]["batches"] == []


@pytest.mark.parametrize(
    "query",
    [{"status": "DONE"}, {"since": "yesterday"}, {"cursor": "12~x"}, {"limit": "many"}, {"key": ""}],
)
def test_bad_list_parameters_are_400(deps: Deps, status: Any, query: dict[str, str]) -> None:
    assert call(status, "/batches", query)[0] == 400
