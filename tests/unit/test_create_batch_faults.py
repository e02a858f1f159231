"""POST /batches under dependency faults: a batch exists only if its creator was told its id.

A client whose POST /batches failed (503: MySQL or Redis down) tries again and never learns the first
attempt's id, so a batch row written by that attempt would wait PENDING for an upload that cannot come
(the chaos soak found two, seed 72221: Redis refused after the row was written). The rule, attacked
here with Hypothesis over every call of the creation (each one failing before it takes effect), with and
without a callbackUrl, by the admin and by a tenant with and without a default callback:

- either create_batch returns, and its batch is PENDING, visible to its creator, with the callback URL
  it was given (or its tenant's default);
- or it raises, and no batch row exists that was not there before.

A failure after the batch row's own commit (the reply lost on the wire) still leaves one PENDING batch
nobody knows; it ends FAILED upload_expired on its first read after its link expires (test_services).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fixtures.examples import examples
from fixtures.stack import CALLBACK_PORTS
from pdfbatch.errors import DependencyUnavailable
from pdfbatch.services import batches, views
from pdfbatch.services.deps import Deps
from pdfbatch.tenants import ADMIN, Caller

HOOK = "http://127.0.0.1:9/hook?token=s3cret"
DEFAULT = "http://127.0.0.1:9/acme-default"


class Faulty:
    """Wraps one adapter: every method call is counted on the shared ``plan``; the one numbered
    ``plan['fail_at']`` raises DependencyUnavailable before reaching the adapter."""

    def __init__(self, inner: Any, name: str, plan: dict[str, Any]) -> None:
        self._inner, self._name, self._plan = inner, name, plan

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._inner, attr)
        if not callable(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            self._plan["calls"].append(f"{self._name}.{attr}")
            if len(self._plan["calls"]) - 1 == self._plan["fail_at"]:
                raise DependencyUnavailable(f"{self._name} down (injected)")
            return value(*args, **kwargs)

        return call


def _faulty(deps: Deps, plan: dict[str, Any]) -> Deps:
    local = replace(
        deps.settings, callback_allow="127.0.0.1/32", callback_allow_http=True, callback_ports=CALLBACK_PORTS
    )
    wrapped = {
        name: Faulty(getattr(deps, name), name, plan)
        for name in ("ledger", "progress", "callbacks", "tenants", "store")
        if getattr(deps, name) is not None
    }
    return replace(deps, settings=local, **wrapped)


@settings(
    max_examples=examples(120), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    fail_at=st.integers(min_value=0, max_value=12),
    explicit=st.booleans(),
    who=st.sampled_from(["admin", "tenant with a default", "tenant without one"]),
)
def test_a_post_that_fails_at_any_call_leaves_no_batch_and_one_that_answers_leaves_its_batch(
    deps: Deps, fail_at: int, explicit: bool, who: str
) -> None:
    # GIVEN a caller (admin or tenant, with or without a default callback URL) and a fault at one call
    caller = ADMIN if who == "admin" else Caller("acme" if who == "tenant with a default" else "zeta")
    assert deps.tenants is not None and deps.callbacks is not None
    deps.tenants.set_callback("acme", DEFAULT)
    plan: dict[str, Any] = {"fail_at": fail_at, "calls": []}
    before = set(deps.ledger.batches)  # type: ignore[attr-defined]
    # WHEN POST /batches runs (callbacks to 127.0.0.1 allowed, as on the local stack)
    local = _faulty(deps, plan)
    try:
        body = batches.create_batch(local, caller, HOOK if explicit else None)
    except DependencyUnavailable:
        body = None
    new = set(deps.ledger.batches) - before  # type: ignore[attr-defined]
    if body is None:
        # THEN a POST that failed left no batch behind (its client will try again with a new id)
        assert new == set(), f"a failed POST left batch rows {new} (calls: {plan['calls']})"
        return
    # THEN one that answered left exactly its batch, PENDING, visible to its creator, with its callback
    assert new == {body["batchId"]}
    status = views.batch_status(deps, body["batchId"], caller=caller)
    assert status["status"] == "PENDING"
    expected = HOOK if explicit else (DEFAULT if caller.tenant == "acme" else None)
    assert deps.callbacks.url_of(body["batchId"]) == expected
