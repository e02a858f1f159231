"""Issue 25 through the status API: a caller's recent batches, and one document or one person traced.

Every answer is held to the OpenAPI document (fixtures.openapi.check_response); a tenant key sees only
its tenant's batches, and another tenant's document or user answers exactly as an unknown one does.
"""

from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeClock, FakeLedger
from fixtures import pdfs
from fixtures.apigw import TEST_API_KEY, Context, api_event, header, load_handler
from fixtures.examples import examples
from fixtures.openapi import check_response
from fixtures.pipeline import drain, upload
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import tenants
from pdfbatch.model import FileResult
from pdfbatch.named import ring
from pdfbatch.ports import NewEntry
from pdfbatch.services import staging, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import Caller

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


def user_files(status: Any, user: str, key: str = TEST_API_KEY) -> tuple[int, Any]:
    from urllib.parse import quote

    return call(status, f"/users/{quote(user, safe='@')}/files", None, key)


def test_a_person_is_traced_to_the_pdf_linked_to_them_and_every_file_that_named_them(
    deps: Deps, clock: FakeClock, status: Any
) -> None:
    # GIVEN the story: Jane linked in acme's first batch; her résumé again, and a letter naming Jane
    # and Bob (ambiguous: nobody linked) in acme's second; her résumé in globex's batch
    s = story(deps, clock, status)
    # WHEN acme traces Jane, by id and by email
    code, body = user_files(status, s.jane, s.acme)
    # THEN it sees, newest batch first, the two files that named her without linking her, then the link
    assert code == 200 and body["more"] is False
    got = [(f["batchId"], f["name"], f["relation"], f["reason"]) for f in body["files"]]
    assert got == [
        (s.acme_batches[1], "again.pdf", "already_linked", "already_linked"),
        (s.acme_batches[1], "letter.pdf", "named", "ambiguous"),
        (s.acme_batches[0], "jane.pdf", "linked", "matched"),
    ]
    letter = body["files"][1]
    assert (letter["page"], letter["usersNamed"], letter["userId"]) == (2, 2, None)
    assert user_files(status, "jane@example.com", s.acme) == (code, body)
    # AND Bob, whom only the letter named, is found through it
    assert [f["name"] for f in user_files(status, s.bob, s.acme)[1]["files"]] == ["letter.pdf"]
    # AND globex sees only its own batch of Jane's, and of Bob nothing: the answer for nobody at all
    assert [f["name"] for f in user_files(status, s.jane, s.globex)[1]["files"]] == ["cv/jane-copy.pdf"]
    nobody = user_files(status, "999999", s.globex)
    assert (
        user_files(status, s.bob, s.globex)
        == nobody
        == (404, {"error": "not_found", "message": "no such user"})
    )
    assert user_files(status, "bob@example.com", s.globex) == user_files(status, "no@example.com", s.globex)


def test_the_ledger_keeps_whom_a_file_named_only_as_keyed_hashes_and_a_rotation_keeps_them_found(
    deps: Deps, clock: FakeClock, status: Any
) -> None:
    s = story(deps, clock, status)
    ledger: Any = deps.ledger
    # The letter's two users are two 32-byte keyed hashes; neither is the id nor a plain hash of it
    hashes = {h for h, _, _ in ledger.named}
    assert len(hashes) == 2 and all(len(h) == 32 for h in hashes)
    for user_id in (s.jane, s.bob):
        assert user_id.encode() not in hashes and hashlib.sha256(user_id.encode()).digest() not in hashes
    # WHEN the ring is rotated (a new key first, the old one kept), Bob's letter is still found
    old = deps.settings.named_keys
    deps.settings = replace(deps.settings, named_keys=json.dumps(["a-brand-new-key-0123456789", old]))
    assert [f["name"] for f in user_files(status, s.bob, s.acme)[1]["files"]] == ["letter.pdf"]
    # AND with the old key dropped, nothing can tell whom the letter named
    deps.settings = replace(deps.settings, named_keys="a-brand-new-key-0123456789")
    assert user_files(status, s.bob, s.acme)[0] == 404


# --- the tenant property: A can never trace B's documents or users -----------------------------------

OWNERS = ("acme", "globex", None)  # None: the admin's own batches
CONTENTS = tuple(f"{n:064x}" for n in range(1, 5))
USERS = ("1", "2", "3")


@st.composite
def ledgers(draw: st.DrawFn) -> list[tuple[str | None, int, str, str | None, tuple[str, ...]]]:
    """Entries: (batch owner, batch number, content, user linked or found linked, users named unlinked)."""
    entries = []
    for _ in range(draw(st.integers(0, 12))):
        linked = draw(st.none() | st.sampled_from(USERS))
        named = () if linked else tuple(draw(st.sets(st.sampled_from(USERS), max_size=3)))
        entries.append(
            (
                draw(st.sampled_from(OWNERS)),
                draw(st.integers(0, 3)),
                draw(st.sampled_from(CONTENTS)),
                linked,
                named,
            )
        )
    return entries


@settings(
    max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(entries=ledgers())
def test_a_tenant_traces_only_its_own_documents_and_users(
    entries: list[tuple[str | None, int, str, str | None, tuple[str, ...]]],
) -> None:
    from fakes import FakeLedger as Ledger

    # GIVEN a ledger of batches of two tenants and the admin, holding the same contents and users
    clock = FakeClock()
    ledger = Ledger(clock)
    keys = ring("property-named-key-0123456789")
    deps = Deps(
        settings=replace(_settings(), named_keys="property-named-key-0123456789"),
        store=None,
        ledger=ledger,
        users=ledger,
        progress=None,
    )  # type: ignore[arg-type]
    where: dict[tuple[str, int], str | None] = {}
    for n, (owner, number, content, linked, named) in enumerate(entries):
        batch_id = f"{OWNERS.index(owner)}{number:031x}"
        ledger.create_batch(batch_id, "b", f"uploads/{batch_id}.zip", "api", "PROCESSING", owner)
        ledger.add_entries(batch_id, [NewEntry(n, f"f{n}.pdf", "pdf", 1)])
        outcome = ("linked", "matched") if linked else ("skipped_no_match", "ambiguous")
        result = FileResult(
            *outcome, user_id=linked, sha256=content, named=tuple(keys.write_hash(u) for u in named)
        )
        ledger.record(batch_id, n, result)
        where[(batch_id, n)] = owner
        clock.advance(1)
    for tenant in ("acme", "globex", "initech"):
        caller = Caller(tenant)
        # THEN every document it traces is held in its own batches only, and all of those are found
        for content in CONTENTS:
            expected = {
                k for k, (o, _, c, _, _) in zip(where, entries, strict=True) if o == tenant and c == content
            }
            assert _traced(views.trace_document, deps, content, caller) == expected
        # AND every user it traces, likewise: linked to them or naming them, in its own batches only
        for user in USERS:
            expected = {
                k
                for k, (o, _, _, linked, named) in zip(where, entries, strict=True)
                if o == tenant and (linked == user or user in named)
            }
            assert _traced(views.trace_user, deps, user, caller) == expected


def _traced(trace: Any, deps: Deps, what: str, caller: Caller) -> set[tuple[str, int]]:
    """The (batch, index) a trace answers with; a 404 is the empty set."""
    from pdfbatch.errors import NotFound

    try:
        body = trace(deps, what, caller=caller)
    except NotFound as exc:
        assert str(exc) in ("no such document", "no such user")
        return set()
    return {(f["batchId"], f["index"]) for f in body["files"]}


def _settings() -> Any:
    from pdfbatch.config import Settings

    return Settings(bucket="b")


# --- evidence: the deciding region, as a person sees it ---------------------------------------------


def _expires_in(link: str) -> float:
    """Seconds a presigned GET stays valid (SigV4's X-Amz-Expires, or SigV2's absolute Expires)."""
    import time
    from urllib.parse import parse_qs, urlparse

    query = parse_qs(urlparse(link).query)
    if "X-Amz-Expires" in query:
        return float(query["X-Amz-Expires"][0])
    return float(query["Expires"][0]) - time.time()


def _ocr(png: bytes) -> str:
    """What Tesseract reads on a PNG Pillow decodes: readers independent of pdfium and of our encoder."""
    import io

    from PIL import Image

    from pdfbatch.ocr.engine import Raster, Tesseract

    image = Image.open(io.BytesIO(png))
    assert image.format == "PNG" and image.mode == "L"
    # Tesseract reads small print best at >= 200 dpi: the evidence is 144 dpi, scaled up as a viewer would.
    big = image.resize((image.width * 2, image.height * 2))
    engine = Tesseract()
    engine.load()
    return engine.read(Raster(big.width, big.height, big.width, big.tobytes(), 288)).replace(" ", "")


def test_linked_and_ambiguous_files_keep_a_render_of_what_decided_linked_from_every_answer(
    deps: Deps, clock: FakeClock, status: Any
) -> None:
    # GIVEN the story's batches processed
    s = story(deps, clock, status)
    client: Any = deps.store.client  # type: ignore[attr-defined]
    _, body = user_files(status, s.jane, s.acme)
    by_name = {f["name"]: f for f in body["files"]}
    # THEN the linked résumé, the one found already linked and the ambiguous letter each link a PNG
    # under their batch's report prefix, where Jane's address (and Bob's, on the letter) can be read
    for name, addresses in (
        ("jane.pdf", ["jane@example.com"]),
        ("again.pdf", ["jane@example.com"]),
        ("letter.pdf", ["jane@example.com", "bob@example.com"]),
    ):
        link = by_name[name]["evidence"]
        assert link and 290 < _expires_in(link) <= 300, name
        key = f"reports/{by_name[name]['batchId']}/evidence/{by_name[name]['index']:07d}.png"
        assert f"/{key}?" in link
        png = client.get_object(Bucket=deps.settings.bucket, Key=key)["Body"].read()
        assert len(png) < 20_000
        text = _ocr(png)
        for address in addresses:
            assert address in text, (name, text)
    # AND the batch's own file list links the same evidence
    linked = by_name["jane.pdf"]
    _, page = call(status, f"/batches/{linked['batchId']}/files", None, s.acme)
    assert page["items"][0]["evidence"] is not None


def test_a_file_that_named_nobody_has_no_evidence(deps: Deps, clock: FakeClock, status: Any) -> None:
    raw = status.handler(api_event("POST", "/batches"), Context())
    created = json.loads(raw["body"])
    staging.stage_zip(
        deps, upload(deps, make_zip([("none.pdf", pdfs.text_pdf(["nobody here"]))]), key=created["key"])
    )
    drain(deps)
    _, page = call(status, f"/batches/{created['batchId']}/files")
    assert [(f["reason"], f["evidence"], f["page"]) for f in page["items"]] == [("no_email", None, None)]
