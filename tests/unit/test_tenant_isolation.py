"""One tenant cannot sign for another, nor replay another's delivery (issue 24, item 1).

Each tenant's summaries are signed with a secret of its own (derived from the deployment's root and the
tenant's random secret id), over the timestamp, the tenant, the destination URL and the body. The
oracle is the receiver's own check (``callback_security.verify`` with its secret, its tenant and its URL), the
code docs/RESULTS.md tells receivers to run: a header the deliverer made for A, or one A forged with its own
secret for B's batch, must never pass at B's receiver; a rotation's overlap lets both secrets verify,
and only until it ends.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes import FakeTenantKeys
from fixtures import pdfs
from fixtures.examples import examples
from fixtures.pipeline import drain, upload
from fixtures.stack import CALLBACK_PORTS
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import callback_security, tenants
from pdfbatch.adapters.webhook import PostResult
from pdfbatch.callback_security import SignatureError, sign, verify
from pdfbatch.services import batches, staging
from pdfbatch.services import callback_delivery as service
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import Caller

ROOT = "root-0123456789abcdef0123456789abcdef"
SHARED = "whsec-shared-0123456789"
NOW = 1_700_000_000
names = st.from_regex(r"[a-z][a-z0-9-]{1,8}[a-z0-9]", fullmatch=True)
paths = st.from_regex(r"/[a-z]{1,8}(\?token=[a-z0-9]{1,8})?", fullmatch=True)


def _url(tenant: str, path: str) -> str:
    return f"https://hooks.{tenant}.example{path}"


@settings(max_examples=examples(150), deadline=None)
@given(
    a=names,
    b=names,
    path_a=paths,
    path_b=paths,
    body=st.binary(max_size=200),
    forged=st.binary(max_size=200),
)
def test_a_tenant_cannot_forge_or_replay_another_tenants_delivery(
    a: str, b: str, path_a: str, path_b: str, body: bytes, forged: bytes
) -> None:
    # GIVEN two tenants, each with its own secret (shown to each once) and its own receiver URL
    keys = FakeTenantKeys()
    secret_a = tenants.new_signing_secret(keys, ROOT, a, NOW)
    secret_b = tenants.new_signing_secret(keys, ROOT, b, NOW) if b != a else secret_a
    url_a, url_b = _url(a, path_a), _url(b, path_b)
    assert secret_a.startswith("whsec_") and (a == b or secret_a != secret_b)
    # WHEN the deliverer signs A's summary for A's receiver THEN A's receiver accepts it
    for_a = sign(tenants.signing_secrets(keys, ROOT, SHARED, a, NOW), body, NOW, tenant=a, url=url_a)
    assert verify(secret_a, for_a, body, tenant=a, url=url_a, now=NOW) == NOW
    # AND re-posted to another receiver (B's, or another URL of A's) it fails there
    if (b, url_b) != (a, url_a):
        with pytest.raises(SignatureError):
            verify(secret_b, for_a, body, tenant=b, url=url_b, now=NOW)
    with pytest.raises(SignatureError):
        verify(secret_a, for_a, body, tenant=a, url=url_a + "/elsewhere", now=NOW)
    # AND A, holding only its own secret, cannot sign a summary of its choosing that B accepts
    if b != a:
        for claimed in (b, a):
            header = sign(secret_a, forged, NOW, tenant=claimed, url=url_b)
            with pytest.raises(SignatureError):
                verify(secret_b, header, forged, tenant=b, url=url_b, now=NOW)
    # AND the shared deployment secret (the admin's batches') signs for no tenant that has its own
    shared = sign(SHARED, body, NOW, tenant=a, url=url_a)
    with pytest.raises(SignatureError):
        verify(secret_a, shared, body, tenant=a, url=url_a, now=NOW)


@settings(max_examples=examples(60), deadline=None)
@given(tenant=names, overlap_hours=st.integers(1, 72), body=st.binary(max_size=100))
def test_a_rotated_secret_still_verifies_for_its_overlap_and_not_after(
    tenant: str, overlap_hours: int, body: bytes
) -> None:
    # GIVEN a tenant's secret rotated with an overlap
    keys = FakeTenantKeys()
    old = tenants.new_signing_secret(keys, ROOT, tenant, NOW)
    new = tenants.new_signing_secret(keys, ROOT, tenant, NOW, overlap_seconds=overlap_hours * 3600)
    assert new != old
    url = _url(tenant, "/in")
    # WHEN a delivery is signed during the overlap THEN a receiver on either secret accepts it
    during = NOW + overlap_hours * 3600 - 1
    header = sign(
        tenants.signing_secrets(keys, ROOT, SHARED, tenant, during), body, during, tenant=tenant, url=url
    )
    assert header.count("v2=") == 2
    for secret in (old, new):
        assert verify(secret, header, body, tenant=tenant, url=url, now=during) == during
    # AND once it ends only the new one signs
    after = NOW + overlap_hours * 3600
    header = sign(
        tenants.signing_secrets(keys, ROOT, SHARED, tenant, after), body, after, tenant=tenant, url=url
    )
    assert verify(new, header, body, tenant=tenant, url=url, now=after) == after
    with pytest.raises(SignatureError):
        verify(old, header, body, tenant=tenant, url=url, now=after)
    # AND a rotation without overlap retires the old secret at once
    newest = tenants.new_signing_secret(keys, ROOT, tenant, after)
    assert tenants.signing_secrets(keys, ROOT, SHARED, tenant, after) == [newest]


def test_the_database_holds_no_secret_only_ids() -> None:
    keys = FakeTenantKeys()
    secret = tenants.new_signing_secret(keys, ROOT, "acme", NOW)
    stored = json.dumps([vars(i) for i in keys.signing.values()])
    assert secret.removeprefix("whsec_") not in stored and secret not in stored
    # the id alone (a database read) is not the secret: the root is needed
    ids = keys.signing["acme"]
    assert callback_security.tenant_secret("another-root", "acme", ids.current) != secret


# --- the deliverer: each batch signed for its owner and its URL --------------------------------------


class Receivers:
    """Every tenant's receiver at once: each checks a POST with its own secret, tenant and URL."""

    def __init__(self, secrets_of: dict[str, str], clock: Any) -> None:
        self.secrets_of = secrets_of
        self.clock = clock
        self.accepted: dict[str, list[bytes]] = {t: [] for t in secrets_of}
        self.posts: list[tuple[str, bytes, dict[str, str]]] = []

    def __call__(
        self, target: callback_security.Target, body: bytes, headers: dict[str, str], timeout: float
    ) -> PostResult:
        url = target.origin + target.path
        self.posts.append((url, body, headers))
        for tenant, secret in self.secrets_of.items():
            try:
                verify(
                    secret,
                    headers[callback_security.SIGNATURE_HEADER],
                    body,
                    tenant=tenant,
                    url=url,
                    now=self.clock(),
                )
            except SignatureError:
                continue
            self.accepted[tenant].append(body)
        return PostResult(200, None, 5)


@settings(
    max_examples=examples(15), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(owners=st.lists(st.sampled_from(["acme", "globex", None]), min_size=1, max_size=4))
def test_each_delivery_verifies_at_its_owners_receiver_only(deps: Deps, owners: list[str | None]) -> None:
    # GIVEN two tenants with their own secrets and the admin, each batch sent to its owner's receiver
    keys = FakeTenantKeys(deps.clock)
    local = replace(
        deps,
        tenants=keys,
        settings=replace(
            deps.settings,
            callback_allow="127.0.0.1/32",
            callback_allow_http=True,
            callback_ports=CALLBACK_PORTS,
            callback_key=SHARED,
            callback_root_key=ROOT,
        ),
    )
    secrets_of = {}
    for tenant in ("acme", "globex"):
        tenants.create_key(keys, tenant)
        secrets_of[tenant] = tenants.new_signing_secret(keys, ROOT, tenant, deps.clock())
    receivers = Receivers(secrets_of, deps.clock)
    work: Any = local.queue
    for n, owner in enumerate(owners):
        caller = Caller(owner) if owner is not None else tenants.ADMIN
        created = batches.create_batch(local, caller, f"http://127.0.0.1:9/{owner or 'admin'}-{n}")
        ledger: Any = local.ledger
        data = make_zip([("cv.pdf", pdfs.resume_pdf("C", "cb@example.com"))])
        ledger.add_user("cb@example.com")
        staging.stage_zip(local, upload(local, data, key=created["key"]))
        drain(replace(local, queue=work))
        events: Any = local.events
        ((source, detail_type, detail),) = events.of(created["batchId"])
        message = service.parse_message(
            json.dumps({"source": source, "detail-type": detail_type, "detail": detail})
        )
        # WHEN it is delivered
        before = {t: len(v) for t, v in receivers.accepted.items()}
        assert service.deliver(local, message, 1, None, post=receivers) == "delivered"
        # THEN exactly its owner's receiver accepts it (the admin's: none of the tenants')
        headers = receivers.posts[-1][2]
        assert headers[callback_security.TENANT_HEADER] == (owner or "")
        grew = {t for t, v in receivers.accepted.items() if len(v) > before[t]}
        assert grew == ({owner} if owner is not None else set())
    assert {t: len(v) for t, v in receivers.accepted.items()} == {
        t: sum(1 for o in owners if o == t) for t in secrets_of
    }


def test_a_v1_header_is_refused_and_an_old_tenant_signs_with_the_shared_secret_until_rotated() -> None:
    # GIVEN a v1 header (t.body under one secret), as receivers got before issue 24
    import hashlib
    import hmac

    body = b"{}"
    v1 = hmac.new(SHARED.encode(), f"{NOW}.".encode() + body, hashlib.sha256).hexdigest()
    with pytest.raises(SignatureError):
        verify(SHARED, f"t={NOW},v1={v1}", body, tenant="", url="https://x.example/", now=NOW)
    # AND a tenant made before tenants had secrets: signed with the shared one until it is rotated
    keys = FakeTenantKeys()
    tenants.create_key(keys, "oldco")
    assert tenants.signing_secrets(keys, ROOT, SHARED, "oldco", NOW) == [SHARED]
    own = tenants.new_signing_secret(keys, ROOT, "oldco", NOW, overlap_seconds=3600)
    assert tenants.signing_secrets(keys, ROOT, SHARED, "oldco", NOW) == [own]
    assert tenants.signing_secrets(keys, ROOT, SHARED, None, NOW) == [SHARED]  # the admin's batches
