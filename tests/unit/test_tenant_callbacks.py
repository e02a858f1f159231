"""A tenant's default callback URL (issue 13): set by the operator, checked as a POSTed callbackUrl,
fixed on each of the tenant's batches when it is created, and never the admin's.

The rule "a batch's summary goes to its explicit callbackUrl, else to its owner's default as it was
when the batch was created, else nowhere" is attacked with Hypothesis: random tenants (live, revoked,
never created), defaults set, changed and cleared between batches, batches made by POST /batches (with
and without a URL, by tenant and admin keys) and by drops under uploads/{tenant}/.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeTenantKeys
from fixtures.apigw import TEST_API_KEY, Context, api_event, load_handler
from fixtures.examples import examples
from fixtures.openapi import check_response
from fixtures.stack import CALLBACK_PORTS
from pdfbatch import bootstrap, tenants
from pdfbatch.errors import InvalidInput
from pdfbatch.ports import CallbackAttempt
from pdfbatch.services import batches, callback_delivery, views
from pdfbatch.services.batches import Upload
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN, Caller

status = load_handler("status")
HOOK = "http://127.0.0.1:9/acme-hook?token=s3cret"


def _local(deps: Deps) -> Deps:
    """Callbacks to 127.0.0.1 over http allowed, as on the local stack."""
    allowed = replace(
        deps.settings, callback_allow="127.0.0.1/32", callback_allow_http=True, callback_ports=CALLBACK_PORTS
    )
    local = replace(deps, settings=allowed)
    bootstrap.override(local)
    return local


def _drop(deps: Deps, key: str, sequencer: str) -> Upload:
    return Upload(deps.settings.bucket, key, 10, sequencer=sequencer, version_id="v" + sequencer)


def _url(deps: Deps, batch_id: str) -> str | None:
    assert deps.callbacks is not None
    return deps.callbacks.url_of(batch_id)


def _post(key: str, payload: dict[str, Any] | None = None) -> tuple[int, Any]:
    event = api_event("POST", "/batches", api_key=key)
    if payload is not None:
        event["body"] = json.dumps(payload)
    raw = status.handler(event, Context())
    return raw["statusCode"], json.loads(raw["body"])


# --- choosing the URL ---------------------------------------------------------------------------------


def test_an_explicit_url_wins_then_the_owners_default_and_the_admin_has_none() -> None:
    defaults = {"acme": "https://hooks.acme.example/in"}
    choose = callback_delivery.url_for_new_batch
    assert choose("https://x.example/", "acme", defaults.get) == "https://x.example/"
    assert choose(None, "acme", defaults.get) == "https://hooks.acme.example/in"
    assert choose(None, "globex", defaults.get) is None
    assert choose(None, None, lambda t: "https://never.example/") is None


# --- the operator's writes ------------------------------------------------------------------------------


def test_a_default_is_checked_as_a_posted_callback_url_and_cleared(deps: Deps) -> None:
    local = _local(deps)
    keys: Any = local.tenants
    tenants.create_key(keys, "acme")
    # GIVEN the checks a POSTed callbackUrl gets: private, link-local, http where not allowed
    for bad in ("http://10.0.0.1/in", "https://169.254.169.254/latest/meta-data/", "ftp://127.0.0.1/"):
        with pytest.raises(InvalidInput):
            callback_delivery.set_default(keys, local.settings, "acme", bad)
    with pytest.raises(InvalidInput):
        callback_delivery.set_default(
            keys, deps.settings, "acme", HOOK
        )  # http and 127.0.0.1 not allowed here
    assert keys.callbacks() == {}
    # WHEN an allowed URL is set THEN only its origin is returned to show
    assert callback_delivery.set_default(keys, local.settings, "acme", HOOK) == "http://127.0.0.1:9"
    assert keys.callback_of("acme") == HOOK
    # AND a tenant that never had a key cannot have one; a bad name is refused first
    with pytest.raises(InvalidInput, match="create its key first"):
        callback_delivery.set_default(keys, local.settings, "nobody", HOOK)
    with pytest.raises(InvalidInput, match="tenant name"):
        callback_delivery.set_default(keys, local.settings, "Acme", HOOK)
    # AND clearing it leaves none
    assert callback_delivery.set_default(keys, local.settings, "acme", None) is None
    assert keys.callback_of("acme") is None and keys.callbacks() == {}


# --- a tenant's batches -----------------------------------------------------------------------------------


def test_a_tenants_drop_and_post_without_a_url_get_its_default_an_explicit_url_wins(deps: Deps) -> None:
    local = _local(deps)
    keys: Any = local.tenants
    acme = tenants.create_key(keys, "acme")
    callback_delivery.set_default(keys, local.settings, "acme", HOOK)
    # WHEN a ZIP is dropped under uploads/acme/ and acme POSTs with and without a callbackUrl
    dropped = batches.claim_batch(local, _drop(local, "uploads/acme/march.zip", "01"))
    _, plain = _post(acme)
    _, own = _post(acme, {"callbackUrl": "http://127.0.0.1:10/own"})
    # THEN the drop and the plain POST keep the default, the explicit one its own
    assert _url(local, dropped.batch_id) == HOOK
    assert _url(local, plain["batchId"]) == HOOK
    assert _url(local, own["batchId"]) == "http://127.0.0.1:10/own"
    # AND the admin's batches (a POST with the admin key, a drop outside a tenant's prefix) have none
    _, admin = _post(TEST_API_KEY)
    loose = batches.claim_batch(local, _drop(local, "uploads/march.zip", "02"))
    assert _url(local, admin["batchId"]) is None and _url(local, loose.batch_id) is None


def test_a_later_change_of_the_default_does_not_redirect_a_created_batch(deps: Deps) -> None:
    local = _local(deps)
    keys: Any = local.tenants
    tenants.create_key(keys, "acme")
    callback_delivery.set_default(keys, local.settings, "acme", HOOK)
    upload = _drop(local, "uploads/acme/march.zip", "01")
    first = batches.claim_batch(local, upload)
    # WHEN the default changes, and the same notification arrives again
    callback_delivery.set_default(keys, local.settings, "acme", "http://127.0.0.1:11/new")
    again = batches.claim_batch(local, upload)
    # THEN the batch keeps the URL it was created with; a new batch gets the new one
    assert again.batch_id == first.batch_id and _url(local, first.batch_id) == HOOK
    later = batches.claim_batch(local, _drop(local, "uploads/acme/april.zip", "02"))
    assert _url(local, later.batch_id) == "http://127.0.0.1:11/new"
    # AND once cleared, the next batch has none while the first keeps its own
    callback_delivery.set_default(keys, local.settings, "acme", None)
    cleared = batches.claim_batch(local, _drop(local, "uploads/acme/may.zip", "03"))
    assert _url(local, cleared.batch_id) is None and _url(local, first.batch_id) == HOOK


def test_a_revoked_tenants_drop_is_the_admins_and_gets_no_default(deps: Deps) -> None:
    local = _local(deps)
    keys: Any = local.tenants
    tenants.create_key(keys, "acme")
    callback_delivery.set_default(keys, local.settings, "acme", HOOK)
    tenants.revoke_keys(keys, "acme")
    dropped = batches.claim_batch(local, _drop(local, "uploads/acme/march.zip", "01"))
    assert dropped.tenant is None and _url(local, dropped.batch_id) is None


TENANT_NAMES = ("acme", "globex", "initech")
ACTIONS = st.lists(
    st.one_of(
        st.tuples(st.just("set"), st.sampled_from(TENANT_NAMES), st.integers(1, 3)),
        st.tuples(st.just("clear"), st.sampled_from(TENANT_NAMES), st.just(0)),
        st.tuples(st.just("revoke"), st.sampled_from(TENANT_NAMES), st.just(0)),
        st.tuples(st.just("key"), st.sampled_from(TENANT_NAMES), st.just(0)),
        st.tuples(st.just("drop"), st.sampled_from((*TENANT_NAMES, "nobody")), st.just(0)),
        st.tuples(st.just("post"), st.sampled_from((*TENANT_NAMES, None)), st.integers(0, 3)),
    ),
    max_size=25,
)


@settings(
    max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    start=st.fixed_dictionaries({t: st.sampled_from(("none", "key", "default")) for t in TENANT_NAMES}),
    actions=ACTIONS,
)
def test_every_batch_keeps_its_explicit_url_else_its_owners_default_at_creation(
    deps: Deps, start: dict[str, str], actions: list[tuple[str, str | None, int]]
) -> None:
    # GIVEN a fresh keys table: each tenant without a key, with one, or with one and a default; keys,
    # defaults and revocations then change between batches
    keys = FakeTenantKeys()
    local = replace(
        deps,
        tenants=keys,
        settings=replace(
            deps.settings,
            callback_allow="127.0.0.1/32",
            callback_allow_http=True,
            callback_ports=CALLBACK_PORTS,
        ),
    )
    run = secrets.token_hex(4)  # the ledger outlives one example: each example's drops are new uploads
    expected: dict[str, str | None] = {}
    defaults: dict[str, str] = {}  # the model: each tenant's default now
    for tenant, how in start.items():
        if how != "none":
            tenants.create_key(keys, tenant)
        if how == "default":
            defaults[tenant] = f"http://127.0.0.1:7/start-{tenant}"
            callback_delivery.set_default(keys, local.settings, tenant, defaults[tenant])
    for step, (action, tenant, n) in enumerate(actions):
        if action == "key" and tenant is not None:
            tenants.create_key(keys, tenant)
        elif action == "revoke" and tenant is not None:
            tenants.revoke_keys(keys, tenant)
        elif action == "set" and tenant is not None:
            url = f"http://127.0.0.1:{n}/default-{tenant}-{step}"
            if any(k.tenant == tenant for k in keys.list_keys()):
                callback_delivery.set_default(keys, local.settings, tenant, url)
                defaults[tenant] = url
            else:
                with pytest.raises(InvalidInput):
                    callback_delivery.set_default(keys, local.settings, tenant, url)
        elif action == "clear" and tenant is not None:
            callback_delivery.set_default(keys, local.settings, tenant, None)
            defaults.pop(tenant, None)
        elif action == "drop" and tenant is not None:
            # WHEN a ZIP is dropped under uploads/{tenant}/
            upload = _drop(local, f"uploads/{tenant}/{run}-{step}.zip", f"{step:02X}")
            batch = batches.claim_batch(local, upload)
            live = keys.is_active(tenant)
            assert batch.tenant == (tenant if live else None)
            expected[batch.batch_id] = defaults.get(tenant) if live else None
        elif action == "post":
            # WHEN a batch is created through POST /batches, by a tenant or the admin, with a URL or not
            caller = Caller(tenant) if tenant is not None else ADMIN
            explicit = f"http://127.0.0.1:{n}/explicit-{step}" if n else None
            created = batches.create_batch(local, caller, explicit)
            owner_default = defaults.get(tenant) if tenant is not None else None
            expected[created["batchId"]] = explicit if explicit is not None else owner_default
    # THEN every batch, read now, goes where the rule said when it was created
    for batch_id, url in expected.items():
        assert _url(local, batch_id) == url, batch_id
    assert keys.callbacks() == dict(sorted(defaults.items()))


# --- what the status API shows ----------------------------------------------------------------------------


def _attempt(n: int, status_code: int | None, error: str | None, done: bool = True) -> CallbackAttempt:
    return CallbackAttempt("b" * 32, "d" * 32, n, "first", 100.0 + n, 5 if done else None, status_code, error)


@pytest.mark.parametrize(
    ("rows", "state", "count", "last"),
    [
        ([], "pending", 0, None),
        ([_attempt(1, None, None, done=False)], "pending", 0, None),
        ([_attempt(1, None, "ConnectionRefusedError")], "failing", 1, None),
        ([_attempt(1, 503, "http_503"), _attempt(2, 200, None)], "delivered", 2, 200),
        ([_attempt(1, 500, "http_500"), _attempt(2, 500, "http_500")], "failing", 2, 500),
    ],
)
def test_the_callback_state_names_the_host_only_and_how_delivery_stands(
    rows: list[CallbackAttempt], state: str, count: int, last: int | None
) -> None:
    shown = callback_delivery.state_of("https://hooks.acme.example:8443/p/a/t/h?token=s3cret", rows)
    assert (shown["host"], shown["state"], shown["attempts"], shown["lastHttpStatus"]) == (
        "hooks.acme.example",
        state,
        count,
        last,
    )
    assert "s3cret" not in json.dumps(shown) and "/p/a" not in json.dumps(shown)


def test_get_batch_shows_the_callback_of_a_batch_that_has_one_and_nothing_otherwise(deps: Deps) -> None:
    local = _local(deps)
    with_url = batches.create_batch(local, ADMIN, HOOK)["batchId"]
    without = batches.create_batch(local, ADMIN)["batchId"]
    shown = views.batch_status(local, with_url, caller=ADMIN)["callback"]
    assert shown == {
        "host": "127.0.0.1",
        "state": "pending",
        "attempts": 0,
        "lastAttemptAt": None,
        "lastHttpStatus": None,
        "lastError": None,
    }
    assert "callback" not in views.batch_status(local, without, caller=ADMIN)
    # AND once an attempt answered, the API's answer shows it, as its OpenAPI document describes
    assert local.callbacks is not None
    local.callbacks.begin_attempt(with_url, "d" * 32, 1, "first", 1_700_000_000.0)
    local.callbacks.finish_attempt("d" * 32, 1, None, "ConnectionRefusedError", 3)
    raw = status.handler(api_event("GET", f"/batches/{with_url}"), Context())
    answer = json.loads(raw["body"])
    check_response("GET", f"/batches/{with_url}", raw["statusCode"], answer)
    assert answer["callback"]["state"] == "failing" and answer["callback"]["lastAttemptAt"]
    assert "s3cret" not in raw["body"] and "acme-hook" not in raw["body"]
