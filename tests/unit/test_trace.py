"""Issue 25 through the status API: a caller's recent batches, and one document or one person traced.

Every answer is held to the OpenAPI document (fixtures.openapi.check_response); a tenant key sees only
its tenant's batches, and another tenant's document or user answers exactly as an unknown one does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any

import pytest

from fakes import FakeClock, FakeLedger
from fixtures import pdfs
from fixtures.apigw import TEST_API_KEY, Context, api_event, header, load_handler
from fixtures.openapi import check_response
from fixtures.pipeline import drain, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import tenants
from pdfbatch.services import Deps, staging

resume = functools.cache(pdfs.resume_pdf)
# Page 1 names nobody; page 2 names Jane and Bob: ambiguous on page 2.
two_names = functools.cache(
    lambda: pdfs.text_pdf(["A cover page", ["References", "jane@example.com", "bob@example.com"]])
)


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


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Story:
    """Jane's résumé sent three times (acme twice, globex once) and a letter naming Jane and Bob."""

    jane: str
    bob: str
    acme: str  # acme's key
    globex: str
    acme_batches: list[str]  # oldest first
    globex_batch: str


def story(deps: Deps, clock: FakeClock, status: Any) -> Story:
    ledger: Any = deps.ledger
    jane, bob = ledger.add_user("jane@example.com"), ledger.add_user("bob@example.com")
    acme = tenants.create_key(deps.tenants, "acme")  # type: ignore[arg-type]
    globex = tenants.create_key(deps.tenants, "globex")  # type: ignore[arg-type]
    sent = []
    for key, entries in (
        (acme, [("jane.pdf", resume("Jane", "jane@example.com"))]),
        (globex, [("cv/jane-copy.pdf", resume("Jane", "jane@example.com"))]),
        (acme, [("again.pdf", resume("Jane", "jane@example.com")), ("letter.pdf", two_names())]),
    ):
        raw = status.handler(api_event("POST", "/batches", api_key=key), Context())
        created = json.loads(raw["body"])
        staging.stage_zip(deps, upload(deps, make_zip(entries), key=created["key"]))
        drain(deps)
        sent.append(created["batchId"])
        clock.advance(60)
    return Story(jane, bob, acme, globex, [sent[0], sent[2]], sent[1])


def test_a_document_is_traced_through_every_batch_of_the_caller_newest_first(
    deps: Deps, clock: FakeClock, status: Any
) -> None:
    # GIVEN Jane's résumé linked in acme's first batch, then sent again by globex and by acme
    s = story(deps, clock, status)
    digest = sha(resume("Jane", "jane@example.com"))
    # WHEN acme traces it
    code, body = call(status, "/files", {"sha256": digest.upper()}, s.acme)
    # THEN it sees its two entries, newest batch first, each with outcome, reason in words, page and user
    assert code == 200 and body["sha256"] == digest and body["more"] is False
    got = [
        (f["batchId"], f["name"], f["outcome"], f["reason"], f["page"], f["userId"]) for f in body["files"]
    ]
    assert got == [
        (s.acme_batches[1], "again.pdf", "skipped_already_exists", "already_linked", 1, s.jane),
        (s.acme_batches[0], "jane.pdf", "linked", "matched", 1, s.jane),
    ]
    first = body["files"][1]
    assert first["reasonText"] == "linked to the user whose email address it contains"
    assert (first["source"], first["attempts"], first["batchStatus"]) == ("text", 1, "COMPLETED")
    assert first["finishedAt"] and first["batchCreatedAt"] and first["upload"].startswith("uploads/")
    # AND globex sees only its own entry, the admin all three
    _, theirs = call(status, "/files", {"sha256": digest}, s.globex)
    assert [f["batchId"] for f in theirs["files"]] == [s.globex_batch]
    assert len(call(status, "/files", {"sha256": digest})[1]["files"]) == 3


def test_another_tenants_document_answers_exactly_as_an_unknown_one(
    deps: Deps, clock: FakeClock, status: Any
) -> None:
    s = story(deps, clock, status)
    initech = tenants.create_key(deps.tenants, "initech")  # type: ignore[arg-type]
    letter = sha(two_names())  # only acme ever sent it
    theirs = call(status, "/files", {"sha256": letter}, s.globex)
    unknown = call(status, "/files", {"sha256": "0" * 64}, s.globex)
    assert theirs == unknown == (404, {"error": "not_found", "message": "no such document"})
    assert call(status, "/files", {"sha256": letter}, initech) == unknown
    assert call(status, "/files", {"sha256": letter}, s.acme)[1]["files"][0]["page"] == 2


@pytest.mark.parametrize("query", [{}, {"sha256": "abc"}, {"sha256": "g" * 64}, {"sha256": "a" * 65}])
def test_a_trace_needs_a_sha256(deps: Deps, status: Any, query: dict[str, str]) -> None:
    assert call(status, "/files", query)[0] == 400
