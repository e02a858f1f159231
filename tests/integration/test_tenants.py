"""Tenant keys on the real MariaDB: the keys table, the `pdfbatch keys` CLI, owners and what a key sees."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from fakes import FakeTenantKeys
from fixtures.apigw import TEST_API_KEY, Context, api_event, load_handler
from fixtures.stack import CALLBACK_PORTS
from pdfbatch import bootstrap, callback_security, tenants
from pdfbatch.adapters.mysql import MysqlClient
from pdfbatch.adapters.tenant_keys import MysqlTenantKeys
from pdfbatch.services import batches
from pdfbatch.services.batches import Upload
from pdfbatch.services.deps import Deps

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
UNKNOWN = "0" * 32


def test_the_keys_table_stores_hashes_finds_live_keys_and_revokes_them(db: Any, mysql_url: str) -> None:
    # GIVEN two keys of acme and one of globex
    store = MysqlTenantKeys(MysqlClient.from_url(mysql_url))
    a1, a2, g = (tenants.create_key(store, t) for t in ("acme", "acme", "globex"))
    # THEN each is found by its hash, and the table holds no key, only hashes
    assert [store.tenant_of(tenants.key_hash(k)) for k in (a1, a2, g)] == ["acme", "acme", "globex"]
    with db.cursor() as cur:
        cur.execute("SELECT * FROM pdfbatch_tenant_keys")
        stored = json.dumps(cur.fetchall(), default=str)
    assert not any(k in stored for k in (a1, a2, g))
    assert store.is_active("acme") and not store.is_active("nobody")
    # WHEN acme is revoked (twice: the second finds nothing)
    assert store.revoke("acme") == 2 and store.revoke("acme") == 0
    # THEN its keys are refused and it is no longer live; globex is untouched
    assert store.tenant_of(tenants.key_hash(a1)) is None and not store.is_active("acme")
    assert store.tenant_of(tenants.key_hash(g)) == "globex"
    rows = store.list_keys()
    assert [(r.tenant, r.revoked_at is not None) for r in rows] == [
        ("acme", True),
        ("acme", True),
        ("globex", False),
    ]
    store.client.close()


def test_the_fake_keys_table_answers_as_the_mysql_one(db: Any, mysql_url: str) -> None:
    real, fake = MysqlTenantKeys(MysqlClient.from_url(mysql_url)), FakeTenantKeys()
    hashes = [tenants.key_hash(tenants.new_key()) for _ in range(3)]
    for store in (real, fake):
        store.add("acme", hashes[0])
        store.add("globex", hashes[1])
        store.add("acme", hashes[2])
    steps = [
        lambda s: [s.tenant_of(h) for h in hashes] + [s.tenant_of("f" * 64)],
        lambda s: (s.is_active("acme"), s.is_active("globex"), s.is_active("nobody")),
        lambda s: s.revoke("acme"),
        lambda s: [s.tenant_of(h) for h in hashes],
        lambda s: (s.is_active("acme"), s.revoke("acme")),
        lambda s: [(k.tenant, k.key_hash, k.revoked_at is None) for k in s.list_keys()],
    ]
    for step in steps:
        assert step(real) == step(fake)
    real.client.close()


# The tenants' signing root as the CLI reads it without a stack (a deployed one: its CallbackTenantRoot).
ROOT_KEY = "integration-root-0123456789"


def cli(mysql_url: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("PDFBATCH_CALLBACK_")}
    env = {
        **base,
        "PDFBATCH_CALLBACK_TENANT_ROOT_KEY": ROOT_KEY,
        **(env or {}),
        "PDFBATCH_MYSQL_URL": mysql_url,
    }
    return subprocess.run(
        [sys.executable, "-m", "pdfbatch.cli", "keys", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_keys_cli_creates_lists_and_revokes_on_the_database(db: Any, mysql_url: str) -> None:
    # GIVEN no keys table yet (a fresh install: the CLI creates it)
    with db.cursor() as cur:
        cur.execute("DROP TABLE pdfbatch_tenant_keys")
        cur.execute("DROP TABLE IF EXISTS pdfbatch_tenants")
    # WHEN an operator creates a key for acme
    done = cli(mysql_url, "create", "acme", "--json")
    assert done.returncode == 0, done.stderr
    created = json.loads(done.stdout)
    key = created["key"]
    # THEN it is a tenant key, shown this once, and only its hash is stored
    assert created["tenant"] == "acme" and tenants.looks_like_key(key)
    store = MysqlTenantKeys(MysqlClient.from_url(mysql_url))
    assert store.tenant_of(tenants.key_hash(key)) == "acme"
    listed = cli(mysql_url, "list", "--json")
    assert listed.returncode == 0 and key not in listed.stdout
    (item,) = json.loads(listed.stdout)["keys"]
    assert (item["tenant"], item["keyId"], item["revokedAt"]) == ("acme", created["keyId"], None)
    # AND its first key came with its signing secret, shown this once; MySQL holds only a random id
    secret = created["signingSecret"]
    ids = store.signing_ids("acme")
    assert secret.startswith("whsec_") and ids is not None
    assert secret == callback_security.tenant_secret(ROOT_KEY, "acme", ids.current)
    with db.cursor() as cur:
        cur.execute("SELECT * FROM pdfbatch_tenants WHERE tenant = 'acme'")
        assert secret.removeprefix("whsec_") not in json.dumps(cur.fetchall(), default=str)
    # AND a second key leaves the secret as it is: the plain output prints the key alone on stdout
    plain = cli(mysql_url, "create", "acme")
    assert plain.returncode == 0 and tenants.looks_like_key(plain.stdout.strip())
    assert store.signing_ids("acme") == ids
    # WHEN the secret is rotated with a 2-hour overlap THEN the new one is printed, the old signs on
    rotated = cli(mysql_url, "rotate-secret", "acme", "--overlap-hours", "2", "--json")
    assert rotated.returncode == 0, rotated.stderr
    new = json.loads(rotated.stdout)["signingSecret"]
    now = time.time()
    assert tenants.signing_secrets(store, ROOT_KEY, "", "acme", now) == [new, secret]
    assert tenants.signing_secrets(store, ROOT_KEY, "", "acme", now + 2 * 3600 + 60) == [new]
    assert cli(mysql_url, "rotate-secret", "nobody-here").returncode == 2
    # WHEN acme is revoked
    revoked = cli(mysql_url, "revoke", "acme", "--json")
    assert revoked.returncode == 0 and json.loads(revoked.stdout) == {"tenant": "acme", "revoked": 2}
    # THEN its keys are refused
    assert store.tenant_of(tenants.key_hash(key)) is None
    # AND a name that cannot be a tenant is bad usage (exit 2), nothing stored
    for bad in ("Acme", "a/b", "x"):
        refused = cli(mysql_url, "create", bad)
        assert refused.returncode == 2 and "tenant name" in refused.stderr, bad
    assert len(store.list_keys()) == 2
    store.client.close()


def _drop(deps: Deps, key: str, sequencer: str) -> Upload:
    return Upload(deps.settings.bucket, key, 10, sequencer=sequencer, version_id="v" + sequencer)


def test_owners_and_404s_over_mariadb_and_redis(deps: Deps) -> None:
    # GIVEN two tenants with keys, on the real ledger
    store = deps.tenants
    assert store is not None
    acme, globex = tenants.create_key(store, "acme"), tenants.create_key(store, "globex")
    status = load_handler("status")
    bootstrap.override(deps)
    try:

        def call(method: str, path: str, key: str, query: dict[str, str] | None = None) -> dict[str, Any]:
            raw: dict[str, Any] = status.handler(api_event(method, path, query, api_key=key), Context())
            return raw

        # WHEN acme creates a batch through the API and globex's ZIP is dropped under uploads/globex/
        a_batch = json.loads(call("POST", "/batches", acme)["body"])["batchId"]
        dropped = batches.claim_batch(deps, _drop(deps, "uploads/globex/march.zip", "01"))
        g_batch = dropped.batch_id
        assert (deps.ledger.get_batch(a_batch).tenant, dropped.tenant) == ("acme", "globex")  # type: ignore[union-attr]
        # THEN each sees its own, and the other's exactly as an unknown id, on every route
        for key, mine, theirs in ((acme, a_batch, g_batch), (globex, g_batch, a_batch)):
            for path in ("/batches/{}", "/batches/{}/files"):
                assert call("GET", path.format(mine), key)["statusCode"] == 200
                assert call("GET", path.format(theirs), key) == call("GET", path.format(UNKNOWN), key)
        found = json.loads(call("GET", "/batches", acme, {"key": "uploads/globex/march.zip"})["body"])
        assert found["batches"] == []
        found = json.loads(call("GET", "/batches", globex, {"key": "uploads/globex/march.zip"})["body"])
        assert [b["batchId"] for b in found["batches"]] == [g_batch]
        # AND the admin sees both
        for batch_id in (a_batch, g_batch):
            assert call("GET", f"/batches/{batch_id}", TEST_API_KEY)["statusCode"] == 200
        # AND a revoked key is refused as a wrong one, from the next request on
        tenants.revoke_keys(store, "acme")
        assert call("GET", f"/batches/{a_batch}", acme) == call(
            "GET", f"/batches/{a_batch}", tenants.new_key()
        )
    finally:
        bootstrap.override(None)


# --- a tenant's default callback URL ----------------------------------------------------------------------


def test_the_fake_and_mysql_tenants_table_keep_defaults_alike(db: Any, mysql_url: str) -> None:
    client = MysqlClient.from_url(mysql_url)
    client.ensure_schema()
    client.ensure_schema()  # idempotent: what every cold start runs
    real, fake = MysqlTenantKeys(client), FakeTenantKeys()
    steps = [
        lambda s: (s.callback_of("acme"), s.callbacks()),
        lambda s: s.set_callback("acme", "https://hooks.acme.example/in?token=1"),
        lambda s: s.set_callback("globex", "https://g.example/"),
        lambda s: s.set_callback("acme", "https://hooks.acme.example/v2"),  # replaces
        lambda s: (s.callback_of("acme"), s.callback_of("nobody"), s.callbacks()),
        lambda s: s.set_callback("acme", None),
        lambda s: s.set_callback("nobody", None),  # clearing what was never set
        lambda s: (s.callback_of("acme"), s.callbacks()),
    ]
    for step in steps:
        assert step(real) == step(fake)
    client.close()


def test_the_keys_cli_sets_lists_and_clears_a_default_callback(db: Any, mysql_url: str) -> None:
    env = {
        "PDFBATCH_CALLBACK_ALLOW": "127.0.0.1/32",
        "PDFBATCH_CALLBACK_ALLOW_HTTP": "true",
        "PDFBATCH_CALLBACK_PORTS": CALLBACK_PORTS,
    }
    url = "http://127.0.0.1:8080/hooks/acme?token=s3cret"
    # WHEN an operator creates acme's key with a default callback URL
    done = cli(mysql_url, "create", "acme", "--callback-url", url, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["callback"] == "http://127.0.0.1:8080"
    # THEN `keys list` shows its origin only, never the path or query
    listed = cli(mysql_url, "list", "--json", env=env)
    assert listed.returncode == 0 and "s3cret" not in listed.stdout and "/hooks" not in listed.stdout
    assert [k["callback"] for k in json.loads(listed.stdout)["keys"]] == ["http://127.0.0.1:8080"]
    table = cli(mysql_url, "list", env={**env, "COLUMNS": "200"})
    assert "127.0.0.1:8080" in table.stderr and "s3cret" not in table.stderr + table.stdout
    # AND a private address (without the allow-list) is refused as usage, nothing changed
    refused = cli(mysql_url, "set-callback", "acme", "https://10.0.0.1/in")
    assert refused.returncode == 2 and "10.0.0.1" not in refused.stdout, refused.stderr
    refused = cli(mysql_url, "set-callback", "acme", url)  # http and 127.0.0.1 not allowed here
    assert refused.returncode == 2
    store = MysqlTenantKeys(MysqlClient.from_url(mysql_url))
    assert store.callback_of("acme") == url
    # AND a create with a refused URL creates no key
    bad = cli(mysql_url, "create", "globex", "--callback-url", "http://169.254.169.254/", env=env)
    assert bad.returncode == 2 and not any(k.tenant == "globex" for k in store.list_keys())
    # AND neither URL nor --clear, or both, is bad usage
    assert cli(mysql_url, "set-callback", "acme", env=env).returncode == 2
    assert cli(mysql_url, "set-callback", "acme", url, "--clear", env=env).returncode == 2
    # WHEN it is cleared THEN acme has no default
    cleared = cli(mysql_url, "set-callback", "acme", "--clear", "--json", env=env)
    assert cleared.returncode == 0 and json.loads(cleared.stdout) == {"tenant": "acme", "callback": None}
    assert store.callback_of("acme") is None
    store.client.close()


def test_a_tenants_drop_keeps_the_default_it_was_created_with_on_mariadb(deps: Deps) -> None:
    from dataclasses import replace

    from pdfbatch.adapters.mysql_callbacks import MysqlCallbackLog
    from pdfbatch.services import callback_delivery

    assert deps.tenants is not None
    local = replace(
        deps,
        settings=replace(
            deps.settings,
            callback_allow="127.0.0.1/32",
            callback_allow_http=True,
            callback_ports=CALLBACK_PORTS,
        ),
        callbacks=MysqlCallbackLog(deps.tenants.client),  # type: ignore[attr-defined]
    )
    store = local.tenants
    assert store is not None and local.callbacks is not None
    tenants.create_key(store, "acme")
    callback_delivery.set_default(store, local.settings, "acme", "http://127.0.0.1:9/first?k=1")
    # WHEN a ZIP is dropped under uploads/acme/, then the default changes and the event comes again
    upload = _drop(local, "uploads/acme/march.zip", "01")
    batch = batches.claim_batch(local, upload)
    callback_delivery.set_default(store, local.settings, "acme", "http://127.0.0.1:9/second")
    assert batches.claim_batch(local, upload).batch_id == batch.batch_id
    # THEN the batch keeps the first, a new drop gets the second, an admin's batch none
    assert local.callbacks.url_of(batch.batch_id) == "http://127.0.0.1:9/first?k=1"
    later = batches.claim_batch(local, _drop(local, "uploads/acme/april.zip", "02"))
    assert local.callbacks.url_of(later.batch_id) == "http://127.0.0.1:9/second"
    loose = batches.claim_batch(local, _drop(local, "uploads/april.zip", "03"))
    assert local.callbacks.url_of(loose.batch_id) is None
