"""Tenant keys (issue 13): names, keys and hashes, who a key is, who owns a batch, and what a key sees.

The rule "a key sees only its tenant's batches" is attacked with Hypothesis: random tenants (live,
revoked, never created), batches made through POST /batches and by drops under uploads/{tenant}/, and
every key against every batch through every route; another tenant's batch must answer exactly as an
unknown id does.
"""

from __future__ import annotations

import hashlib
import json
import string
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeLedger, FakeProgress, FakeTenantKeys
from fixtures.apigw import TEST_API_KEY, Context, api_event, load_handler
from fixtures.examples import examples
from pdfbatch import auth, bootstrap, tenants
from pdfbatch.errors import ConfigError, Forbidden, InvalidInput, Unauthenticated
from pdfbatch.services import batches
from pdfbatch.services.batches import Upload
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN, Caller

UNKNOWN = "0" * 32
status = load_handler("status")


def call(method: str, path: str, key: str | None, query: dict[str, str] | None = None) -> dict[str, Any]:
    """The handler's raw answer (status, headers, body) to one request."""
    raw: dict[str, Any] = status.handler(api_event(method, path, query, api_key=key), Context())
    return raw


def body(raw: dict[str, Any]) -> Any:
    return json.loads(raw["body"])


# --- names, keys, hashes ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["acme", "a-1", "x" * 32, "team-42", "abc"])
def test_slug_names_are_tenants(name: str) -> None:
    assert tenants.valid_tenant(name) and tenants.check_tenant(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "ab", "x" * 33, "Acme", "1abc", "-abc", "abc-", "a/b", "a.b", "..", "a_b", "ac me", "acmé", UNKNOWN],
)
def test_other_names_are_refused(name: str) -> None:
    assert not tenants.valid_tenant(name)
    with pytest.raises(InvalidInput):
        tenants.check_tenant(name)


@given(st.text(alphabet=string.printable + "é/\x00", max_size=40))
def test_a_valid_tenant_name_is_one_safe_s3_segment_and_never_a_batch_id(name: str) -> None:
    if tenants.valid_tenant(name):
        assert set(name) <= set(string.ascii_lowercase + string.digits + "-")
        assert 3 <= len(name) <= 32 and name[0].isalpha() and not name.endswith("-")
        assert tenants.drop_tenant(f"uploads/{name}/march.zip") == name
    else:
        assert tenants.drop_tenant(f"uploads/{name}/march.zip") is None or "/" in name


def test_drops_outside_a_tenant_prefix_name_no_tenant() -> None:
    for key in ("uploads/march.zip", f"uploads/{UNKNOWN}.zip", "uploads/Acme/x.zip", "uploads//x.zip"):
        assert tenants.drop_tenant(key) is None, key
    assert tenants.drop_tenant("uploads/acme/deep/x.zip") == "acme"


def test_keys_are_random_256_bits_and_stored_only_as_their_sha256() -> None:
    # GIVEN many keys
    keys = {tenants.new_key() for _ in range(200)}
    # THEN each is the prefix and 43 base64url characters (256 bits, >= 128), all different
    assert len(keys) == 200
    for key in keys:
        assert tenants.looks_like_key(key) and len(key) == len(tenants.KEY_PREFIX) + 43
        assert tenants.key_hash(key) == hashlib.sha256(key.encode()).hexdigest()
    # AND what create_key stores is the hash, never the key
    store = FakeTenantKeys()
    key = tenants.create_key(store, "acme")
    (row,) = store.list_keys()
    assert row.key_hash == tenants.key_hash(key) and key not in repr(row)


# --- who a key is ------------------------------------------------------------------------------------


def test_authenticate_decides_admin_tenant_or_refusal() -> None:
    store = FakeTenantKeys()
    live, revoked = tenants.create_key(store, "acme"), tenants.create_key(store, "gone")
    tenants.revoke_keys(store, "gone")
    assert auth.authenticate(TEST_API_KEY, TEST_API_KEY, store.tenant_of) == ADMIN
    assert auth.authenticate(TEST_API_KEY, live, store.tenant_of) == Caller("acme")
    with pytest.raises(Unauthenticated):
        auth.authenticate(TEST_API_KEY, None, store.tenant_of)
    messages = set()
    for wrong in (revoked, tenants.new_key(), live[:-1] + ("A" if live[-1] != "A" else "B"), "x" * 20):
        with pytest.raises(Forbidden) as info:
            auth.authenticate(TEST_API_KEY, wrong, store.tenant_of)
        messages.add(str(info.value))
    assert messages == {"wrong API key"}
    # A tenant key never stands in for a missing admin key: the API refuses rather than run open.
    with pytest.raises(ConfigError):
        auth.authenticate("", live, store.tenant_of)


def test_only_key_shaped_values_are_looked_up_once_each(deps: Deps) -> None:
    keys: Any = deps.tenants
    key = tenants.create_key(keys, "acme")
    call("GET", "/batches", "not-a-key-but-long-enough", {"key": "uploads/x.zip"})
    assert keys.lookups == 0
    call("GET", "/batches", key, {"key": "uploads/x.zip"})
    call("GET", "/batches", TEST_API_KEY, {"key": "uploads/x.zip"})
    assert keys.lookups == 1


def test_a_revoked_key_gets_exactly_the_answer_of_a_wrong_key(deps: Deps) -> None:
    # GIVEN a tenant whose key worked, then was revoked
    keys: Any = deps.tenants
    key = tenants.create_key(keys, "acme")
    assert call("POST", "/batches", key)["statusCode"] == 201
    assert tenants.revoke_keys(keys, "acme") == 1
    # THEN every route answers it as it answers a key that never existed (status, headers, body)
    for method, path, query in (
        ("POST", "/batches", None),
        ("GET", "/batches", {"key": "uploads/x.zip"}),
        ("GET", f"/batches/{UNKNOWN}", None),
        ("GET", f"/batches/{UNKNOWN}/files", None),
    ):
        revoked, wrong = call(method, path, key, query), call(method, path, tenants.new_key(), query)
        assert revoked["statusCode"] == 403 and revoked == wrong
    # AND a second revoke finds nothing to revoke
    assert tenants.revoke_keys(keys, "acme") == 0


# --- who owns a batch ----------------------------------------------------------------------------------


def _drop(deps: Deps, key: str, sequencer: str = "0A") -> Upload:
    return Upload(deps.settings.bucket, key, 10, sequencer=sequencer, version_id="v" + sequencer)


def test_a_batch_belongs_to_the_tenant_whose_key_created_it_and_to_its_later_uploads(deps: Deps) -> None:
    # GIVEN acme creates a batch through POST /batches
    key = tenants.create_key(deps.tenants, "acme")  # type: ignore[arg-type]
    created = body(call("POST", "/batches", key))
    batch_id = created["batchId"]
    assert deps.ledger.get_batch(batch_id).tenant == "acme"  # type: ignore[union-attr]
    # WHEN its upload arrives, and later a second upload through the same link
    first = batches.claim_batch(deps, _drop(deps, created["key"], "01"))
    later = batches.claim_batch(deps, _drop(deps, created["key"], "02"))
    # THEN both are acme's: the first is the batch itself, the later one a batch of its own
    assert first.batch_id == batch_id and first.tenant == "acme"
    assert later.batch_id != batch_id and later.tenant == "acme"
    # AND an admin's POST /batches belongs to the admin only
    admin_batch = body(call("POST", "/batches", TEST_API_KEY))["batchId"]
    assert deps.ledger.get_batch(admin_batch).tenant is None  # type: ignore[union-attr]


def test_a_drop_under_a_live_tenants_prefix_is_the_tenants_and_any_other_drop_the_admins(deps: Deps) -> None:
    store: Any = deps.tenants
    tenants.create_key(store, "acme")
    tenants.create_key(store, "gone")
    tenants.revoke_keys(store, "gone")
    owners = {
        key: batches.claim_batch(deps, _drop(deps, key)).tenant
        for key in (
            "uploads/acme/march.zip",
            "uploads/gone/march.zip",  # revoked: admin only
            "uploads/nobody/march.zip",  # never created: admin only
            "uploads/march.zip",
            "uploads/Acme/march.zip",  # not a tenant name
            f"uploads/{UNKNOWN}.zip",  # names a batch that does not exist
        )
    }
    assert owners == {
        "uploads/acme/march.zip": "acme",
        "uploads/gone/march.zip": None,
        "uploads/nobody/march.zip": None,
        "uploads/march.zip": None,
        "uploads/Acme/march.zip": None,
        f"uploads/{UNKNOWN}.zip": None,
    }


def test_a_duplicate_notification_keeps_the_owner_even_after_a_revocation(deps: Deps) -> None:
    store: Any = deps.tenants
    tenants.create_key(store, "acme")
    upload = _drop(deps, "uploads/acme/march.zip")
    first = batches.claim_batch(deps, upload)
    tenants.revoke_keys(store, "acme")
    again = batches.claim_batch(deps, upload)
    assert (again.batch_id, again.tenant) == (first.batch_id, "acme")


# --- what a key sees: attacked -------------------------------------------------------------------------

NAMES = ("acme", "globex", "initech")


@st.composite
def worlds(draw: st.DrawFn) -> dict[str, Any]:
    """Tenants (each live, revoked or never created) and batches: (creator, how) for each."""
    fates = draw(st.tuples(*(st.sampled_from(["live", "revoked", "absent"]) for _ in NAMES)))
    made = draw(
        st.lists(
            st.tuples(st.sampled_from([None, *NAMES]), st.sampled_from(["post", "drop", "reuse"])),
            min_size=1,
            max_size=6,
        )
    )
    return {"fates": dict(zip(NAMES, fates, strict=True)), "made": made}


@settings(
    max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(world=worlds())
def test_a_key_never_sees_another_tenants_batch_through_any_route(deps: Deps, world: dict[str, Any]) -> None:
    # GIVEN a fresh ledger, counters and keys table for this world
    d = replace(
        deps, ledger=(ledger := FakeLedger(deps.clock)), progress=FakeProgress(), tenants=FakeTenantKeys()
    )
    d = replace(d, users=ledger)
    bootstrap.override(d)
    store: Any = d.tenants
    keys: dict[str, str] = {}
    for name, fate in world["fates"].items():
        if fate != "absent":
            keys[name] = tenants.create_key(store, name)
    owner: dict[str, str | None] = {}  # batch id -> who may see it besides the admin
    for n, (creator, how) in enumerate(world["made"]):
        if how == "drop":
            prefix = f"uploads/{creator}/" if creator else "uploads/"
            batch = batches.claim_batch(d, _drop(d, f"{prefix}b{n}.zip", f"{n:02X}"))
            # (revoked tenants are revoked below, after every batch is made: their keys were live here)
            expected = creator if creator and world["fates"][creator] != "absent" else None
        else:
            caller_key = TEST_API_KEY if creator is None else keys.get(creator)
            if caller_key is None:  # a tenant that never had a key cannot POST
                continue
            created = body(call("POST", "/batches", caller_key))
            batch = batches.claim_batch(d, _drop(d, created["key"], f"{n:02X}"))
            if how == "reuse":
                owner[batch.batch_id] = creator  # the first upload's batch, read and listed like any
                batch = batches.claim_batch(d, _drop(d, created["key"], f"{n:02X}R"))
            expected = creator
        assert batch.tenant == expected
        owner[batch.batch_id] = expected
    for name, fate in world["fates"].items():
        if fate == "revoked":
            tenants.revoke_keys(store, name)
    callers = {None: TEST_API_KEY} | {n: k for n, k in keys.items() if world["fates"][n] == "live"}
    for name in set(keys) - set(callers):  # a revoked key is refused outright, batches or not
        assert call("GET", f"/batches/{next(iter(owner), UNKNOWN)}", keys[name])["statusCode"] == 403
    # WHEN every live key asks for every batch through every route
    for who, key in callers.items():
        unknown = {p: call("GET", p.format(UNKNOWN), key) for p in ("/batches/{}", "/batches/{}/files")}
        for batch_id, batch_owner in owner.items():
            row = ledger.get_batch(batch_id)
            assert row is not None
            found = body(call("GET", "/batches", key, {"key": row.object_key}))["batches"]
            listed = batch_id in {b["batchId"] for b in found}
            for path in ("/batches/{}", "/batches/{}/files"):
                answer = call("GET", path.format(batch_id), key)
                # THEN the admin sees everything, a tenant only its own; anything else is the unknown 404
                if who is None or batch_owner == who:
                    assert answer["statusCode"] == 200 and listed
                else:
                    assert answer == unknown[path] and answer["statusCode"] == 404
                    assert not listed
                    assert all(ledger.get_batch(b["batchId"]).tenant == who for b in found)  # type: ignore[union-attr]
        # AND a listing by tenant name lists exactly what this key may read of that tenant's (the admin:
        # that tenant's; a tenant: its own, and nothing when it names another)
        for named in (None, *NAMES):
            query = {"tenant": named} if named else {}
            answer = call("GET", "/batches", key, query)
            assert answer["statusCode"] == 200
            listed_ids = {b["batchId"] for b in body(answer)["batches"]}
            readable = {b for b, o in owner.items() if who is None or o == who}
            assert listed_ids == {b for b in readable if named is None or owner[b] == named}
