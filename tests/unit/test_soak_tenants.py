"""The soak's tenant faults (tests/soak): the plan puts the receivers after every connection fault, the
receivers behave as their names say against the deliverer's own POST, and the flood stops at the limit."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from pdfbatch import callback_security
from pdfbatch.api_client import ApiError
from soak import chaos, receivers
from soak.run import flood_batches
from soak.seeds import CI_SEEDS, CLEAN


@pytest.mark.parametrize("seed", [*CI_SEEDS, *CLEAN, 1, 2, 3])
@pytest.mark.parametrize("profile", sorted(chaos.PROFILES))
def test_every_receiver_fault_comes_after_the_last_connection_fault_is_over(seed: int, profile: str) -> None:
    p = chaos.PROFILES[profile]
    faults = chaos.plan(seed, p)
    ends = max(f.at + f.value for f in faults if f.kind in chaos.TIMED)
    kinds = [f.kind for f in faults]
    trickle, silent, honest = p.receivers
    assert (kinds.count("slow_receiver"), kinds.count("silent_receiver")) == (trickle, silent)
    assert kinds.count("honest_callback") == honest and kinds.count("flood") == 1
    assert all(f.at > ends for f in faults if f.kind.endswith(("_receiver", "_callback")))
    # the plan stays a function of the seed
    assert chaos.plan(seed, p) == faults


class _Api:
    """POST /batches of a tenant whose limit is ``limit``: a 503 once, then 429 past the limit."""

    def __init__(self, limit: int) -> None:
        self.limit, self.made, self.calls = limit, 0, 0

    def create_batch(self, callback_url: str | None = None) -> dict[str, Any]:
        self.calls += 1
        if self.calls == 3:
            raise ApiError("down", 503)
        if self.made >= self.limit:
            raise ApiError("too many", 429, headers={"retry-after": "7260"})
        self.made += 1
        return {"batchId": f"{self.made:032x}"}


def test_the_flood_retries_a_5xx_and_records_each_answer_past_the_limit(monkeypatch: Any) -> None:
    monkeypatch.setattr(time, "sleep", lambda _: None)
    got = flood_batches(_Api(limit=4), posts=7)  # type: ignore[arg-type]
    assert len(got.created) == 4 and got.errors == 1
    assert got.beyond == [(429, "7260")] * 3


def test_the_trickling_and_the_silent_receiver_hold_an_attempt_until_its_deadline() -> None:
    from pdfbatch.adapters import webhook

    for receiver in (receivers.Trickle(), receivers.Silent()):
        try:
            # WHEN the deliverer's own POST (adapters/webhook.py) goes to each, with a 1.5 s deadline
            target = callback_security.Target("http", "127.0.0.1", receiver.port, "/", ("127.0.0.1",))
            result = webhook.post(target, b"{}", {}, timeout=1.5)
            # THEN the receiver got the request and held the attempt to its deadline: a timeout
            assert (result.status, result.error) == (None, "timeout"), receiver.name
            assert 1400 <= result.duration_ms < 3000 and receiver.requests == 1
            if isinstance(receiver, receivers.Silent):  # AND it records why the connection ended
                deadline = time.monotonic() + 5
                while not receiver.ended and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert receiver.ended == {"deliverer_left": 1}
        finally:
            receiver.close()


def test_the_honest_receiver_takes_only_deliveries_signed_for_its_tenant_and_url() -> None:
    honest = receivers.Honest("soak-honest", "whsec_test")
    try:
        body = json.dumps({"batchId": "a" * 32, "completedAt": 1.0}).encode()
        now = int(time.time())

        def signed(tenant: str, url: str) -> str:
            return callback_security.sign("whsec_test", body, now, tenant=tenant, url=url)

        assert honest.receive(signed("soak-slow", honest.url), body, "/hook") == 400
        assert honest.receive(signed("soak-honest", honest.url + "x"), body, "/hook") == 400
        assert honest.refused == 2 and not honest.arrived
        assert honest.receive(signed("soak-honest", honest.url), body, "/hook") == 200
        assert list(honest.arrived) == ["a" * 32]
    finally:
        honest.close()
