"""Signed callbacks (issue 13): the signature scheme attacked, the URL rule attacked, the deliverer on fakes.

- verify() accepts exactly what sign() made: any changed byte of the body, another timestamp, another
  secret, a stale or future timestamp, or a malformed header is refused (Hypothesis).
- check_url() refuses every private, loopback, link-local, multicast, reserved, shared or unspecified
  address, IPv4 or IPv6, bare or carried inside IPv6 (mapped, 6to4, NAT64, compatible), as a literal or
  as any one of a name's addresses; the allow-list lifts exactly what it lists (Hypothesis).
- deliver() records every attempt once, backs off, signs what receivers verify, and a duplicate message
  changes nothing.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fakes import FakeCallbackLog, FakeClock
from fixtures import pdfs
from fixtures.apigw import Context, api_event, load_handler
from fixtures.examples import examples
from fixtures.pipeline import drain, upload
from fixtures.stack import CALLBACK_PORTS
from fixtures.zips import zipfile_zip as make_zip
from pdfbatch import announcement, bootstrap, callback_security
from pdfbatch.adapters.webhook import PostResult
from pdfbatch.callback_security import (
    AllowList,
    BlockedPort,
    CallbackUrlError,
    PortList,
    SignatureError,
    check_url,
    sign,
    verify,
)
from pdfbatch.config import Settings
from pdfbatch.errors import ConfigError, DependencyUnavailable, InvalidInput
from pdfbatch.services import callback_delivery as service
from pdfbatch.services import redelivery, staging
from pdfbatch.services.deps import Deps

SECRET = "whsec-test-0123456789"
NOW = 1_700_000_000
# What a v2 signature binds besides the body: the batch's tenant and the URL it is POSTed to.
TO = {"tenant": "acme", "url": "https://hooks.acme.example/in?token=1"}

# --- the signature --------------------------------------------------------------------------------


def test_a_signature_verifies_with_its_secret_and_body() -> None:
    body = b'{"batchId": "x", "status": "COMPLETED"}'
    header = sign(SECRET, body, NOW, **TO)
    assert header.startswith(f"t={NOW},v2=")
    assert verify(SECRET, header, body, now=NOW + 10, **TO) == NOW


@settings(max_examples=examples(300))
@given(body=st.binary(min_size=1, max_size=300), data=st.data())
def test_any_changed_byte_of_the_body_fails(body: bytes, data: st.DataObject) -> None:
    header = sign(SECRET, body, NOW, **TO)
    i = data.draw(st.integers(0, len(body) - 1))
    flip = data.draw(st.integers(1, 255))
    tampered = body[:i] + bytes([body[i] ^ flip]) + body[i + 1 :]
    with pytest.raises(SignatureError):
        verify(SECRET, header, tampered, now=NOW, **TO)
    truncated_or_longer = data.draw(st.sampled_from([body[:-1], body + b" "]))
    with pytest.raises(SignatureError):
        verify(SECRET, header, truncated_or_longer, now=NOW, **TO)


@settings(max_examples=examples(200))
@given(body=st.binary(max_size=200), other=st.text(min_size=1, max_size=40), shift=st.integers(-250, 250))
def test_another_secret_or_another_timestamp_fails(body: bytes, other: str, shift: int) -> None:
    assume(other != SECRET)
    header = sign(SECRET, body, NOW, **TO)
    with pytest.raises(SignatureError):
        verify(other, header, body, now=NOW, **TO)
    assume(shift != 0)
    # the v2 of one timestamp under another t (inside the tolerance): still refused
    moved = header.replace(f"t={NOW}", f"t={NOW + shift}")
    with pytest.raises(SignatureError):
        verify(SECRET, moved, body, now=NOW, **TO)


@given(age=st.integers(301, 10**9), sign_of=st.sampled_from([-1, 1]))
def test_stale_and_future_timestamps_fail_and_the_tolerance_holds(age: int, sign_of: int) -> None:
    body = b"{}"
    header = sign(SECRET, body, NOW, **TO)
    with pytest.raises(SignatureError):
        verify(SECRET, header, body, now=NOW + sign_of * age, **TO)
    assert verify(SECRET, header, body, now=NOW + sign_of * 300, **TO) == NOW
    with pytest.raises(SignatureError):
        verify(SECRET, header, body, tolerance=5, now=NOW + sign_of * 6, **TO)


@given(header=st.one_of(st.none(), st.text(max_size=120)))
def test_any_header_that_is_not_a_signature_is_refused_with_signature_error(header: str | None) -> None:
    with pytest.raises(SignatureError):
        verify(SECRET, header, b"{}", now=NOW, **TO)


def test_a_header_with_a_second_v2_verifies_when_one_matches() -> None:
    body = b"{}"
    good = sign(SECRET, body, NOW, **TO)
    assert verify(SECRET, f"{good},v2={'0' * 64}", body, now=NOW, **TO) == NOW


# --- which URLs may be called ---------------------------------------------------------------------

_PRIVATE_V4 = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.0.0.0/24",
    "192.0.2.0/24",
    "192.168.0.0/16",
    "198.18.0.0/15",
    "224.0.0.0/4",
    "240.0.0.0/4",
]
_PRIVATE_V6 = ["::1/128", "::/128", "fe80::/10", "fc00::/7", "ff00::/8", "fec0::/10", "2001:db8::/32"]


def _in(network: str) -> st.SearchStrategy[str]:
    net = ipaddress.ip_network(network)
    return st.integers(0, net.num_addresses - 1).map(lambda i: str(net[i]))


private_v4 = st.sampled_from(_PRIVATE_V4).flatmap(_in)
private_v6 = st.sampled_from(_PRIVATE_V6).flatmap(_in)


def _carried(v4: str, form: str) -> str:
    n = int(ipaddress.IPv4Address(v4))
    if form == "mapped":
        return str(ipaddress.IPv6Address((0xFFFF << 32) | n))
    if form == "6to4":
        return str(ipaddress.IPv6Address((0x2002 << 112) | (n << 80) | 1))
    if form == "nat64":
        return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | n))
    return str(ipaddress.IPv6Address(n))  # compatible ::a.b.c.d


private_any = st.one_of(
    private_v4,
    private_v6,
    st.builds(_carried, private_v4, st.sampled_from(["mapped", "6to4", "nat64", "compatible"])),
)
public_v4 = st.sampled_from(["8.8.8.8", "1.1.1.1", "93.184.216.34", "203.0.114.9", "151.101.1.69"])
public_v6 = st.sampled_from(["2606:4700:4700::1111", "2a00:1450:4001:80b::200e", "2001:4860:4860::8888"])


def _url(host: str, scheme: str = "https") -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}/hook?token=abc"


def _resolving(*addresses: str) -> Any:
    return lambda host, port: list(addresses)


@settings(max_examples=examples(300))
@given(address=private_any)
def test_every_private_form_is_refused_as_a_literal_and_as_a_resolved_name(address: str) -> None:
    assert not callback_security.is_public(ipaddress.ip_address(address))
    with pytest.raises(CallbackUrlError):
        check_url(_url(address))
    with pytest.raises(CallbackUrlError):
        check_url("https://hooks.example.com/x", resolver=_resolving(address))


@settings(max_examples=examples(200))
@given(
    bad=private_any,
    good=st.lists(st.one_of(public_v4, public_v6), min_size=1, max_size=3),
    at=st.integers(0, 3),
)
def test_one_private_address_among_public_ones_refuses_the_name(bad: str, good: list[str], at: int) -> None:
    answers = [*good]
    answers.insert(min(at, len(answers)), bad)
    with pytest.raises(CallbackUrlError):
        check_url("https://hooks.example.com/x", resolver=_resolving(*answers))


@given(addresses=st.lists(st.one_of(public_v4, public_v6), min_size=1, max_size=4, unique=True))
def test_public_addresses_pass_and_are_what_the_delivery_connects_to(addresses: list[str]) -> None:
    ports = PortList.parse("8443")  # the operator's: 443 only without it
    target = check_url("https://hooks.example.com:8443/in?x=1", ports=ports, resolver=_resolving(*addresses))
    assert target.addresses == tuple(addresses)
    assert (target.host, target.port, target.path) == ("hooks.example.com", 8443, "/in?x=1")
    assert target.origin == "https://hooks.example.com:8443"


@settings(max_examples=examples(200))
@given(address=private_v4)
def test_the_allow_list_lifts_exactly_the_networks_and_hosts_it_names(address: str) -> None:
    net = ipaddress.ip_network(f"{address}/32")
    allow = AllowList.parse(f" {net} , receiver.test ")
    assert check_url(_url(address), allow=allow).addresses == (address,)
    assert (
        check_url("https://receiver.test/", allow=allow, resolver=_resolving(address)).host == "receiver.test"
    )
    other = str(ipaddress.IPv4Address(int(ipaddress.IPv4Address(address)) ^ 1))
    with pytest.raises(CallbackUrlError):
        check_url(_url(other), allow=allow)
    with pytest.raises(CallbackUrlError):  # the name allowed, not every name resolving to its address
        check_url(
            "https://elsewhere.test/", allow=AllowList.parse("receiver.test"), resolver=_resolving(address)
        )


@pytest.mark.parametrize(
    "url",
    [
        "http://2130706433/",  # 127.0.0.1 as one number
        "http://0x7f.1/",  # hex and short forms, as inet_aton reads them
        "http://127.1/",
        "http://017700000001/",
        "http://localhost/",
        "http://[::ffff:127.0.0.1]/",
        "http://[::ffff:7f00:1]/",
        "http://0/",
    ],
)
def test_numeric_and_local_host_spellings_resolve_to_loopback_and_are_refused(url: str) -> None:
    with pytest.raises(CallbackUrlError):
        check_url(url, allow_http=True)


@pytest.mark.parametrize(
    ("url", "allow_http"),
    [
        ("http://hooks.example.com/", False),
        ("ftp://hooks.example.com/", True),
        ("https://user:pw@hooks.example.com/", False),
        ("https://hooks.example.com@10.0.0.1/", False),
        ("https:///nohost", False),
        ("https://hooks.example.com:0/", False),
        ("https://hooks.example.com:99999/", False),
        ("https://hooks.exa mple.com/", False),
        ("https://hooks.example.com/\u00e9", False),
        ("https://" + "a" * 2050 + ".com/", False),
        ("", False),
    ],
)
def test_urls_that_are_not_plain_https_are_refused(url: str, allow_http: bool) -> None:
    with pytest.raises(CallbackUrlError):
        check_url(url, allow_http=allow_http, resolver=_resolving("8.8.8.8"))


def test_http_is_accepted_only_where_the_deployment_allows_it() -> None:
    assert check_url("http://hooks.example.com/", allow_http=True, resolver=_resolving("8.8.8.8")).port == 80
    with pytest.raises(CallbackUrlError):
        check_url("http://hooks.example.com/", resolver=_resolving("8.8.8.8"))


@settings(max_examples=examples(200))
@given(port=st.integers(1, 65535), host=st.one_of(public_v4, public_v6), http=st.booleans())
def test_a_callback_names_port_443_or_80_with_http_unless_the_operator_allows_more(
    port: int, host: str, http: bool
) -> None:
    # GIVEN a public host (a literal: no lookup) on any port, https or http where allowed
    shown = f"[{host}]" if ":" in host else host
    url = f"{'http' if http else 'https'}://{shown}:{port}/hook"
    default = 80 if http else 443
    # WHEN it is checked without the operator's list THEN only the scheme's own port passes
    if port == default:
        assert check_url(url, allow_http=http).port == port
    else:
        with pytest.raises(BlockedPort):
            check_url(url, allow_http=http)  # https://8.8.8.8:22/ was a port scanner's probe
    # AND the operator's list adds exactly the ports and ranges it names
    listed = PortList.parse(f"{port}, 9000-9100")
    assert check_url(url, allow_http=http, ports=listed).port == port
    assert listed.allows("https", 9050) and not listed.allows("https", 9101)


@pytest.mark.parametrize("text", ["22-21", "0", "65536", "ssh", "1-2-3"])
def test_a_port_list_that_is_not_ports_fails_at_cold_start(text: str) -> None:
    with pytest.raises(ConfigError, match="PDFBATCH_CALLBACK_PORTS"):
        Settings.from_env({"PDFBATCH_BUCKET": "b", "PDFBATCH_CALLBACK_PORTS": text})


def test_a_name_that_does_not_resolve_is_refused() -> None:
    with pytest.raises(CallbackUrlError, match="does not resolve"):
        check_url("https://nowhere.invalid/", resolver=_resolving())


# --- POST /batches with a callbackUrl -------------------------------------------------------------


def _local(deps: Deps, **changes: Any) -> Deps:
    local_settings: dict[str, Any] = {
        "callback_allow": "127.0.0.1/32",
        "callback_allow_http": True,
        "callback_ports": CALLBACK_PORTS,
        "callback_key": SECRET,
    }
    s = replace(deps.settings, **{**local_settings, **changes})
    local = replace(deps, settings=s)
    bootstrap.override(local)
    return local


def _post_batches(body: Any) -> tuple[int, Any]:
    event = api_event("POST", "/batches")
    event["body"] = body if isinstance(body, str) or body is None else json.dumps(body)
    raw = load_handler("status").handler(event, Context())
    return raw["statusCode"], json.loads(raw["body"])


def test_post_batches_keeps_an_allowed_callback_url(deps: Deps) -> None:
    local = _local(deps)
    status, body = _post_batches({"callbackUrl": "http://127.0.0.1:9/hook?k=1"})
    assert status == 201
    assert (
        local.callbacks is not None
        and local.callbacks.url_of(body["batchId"]) == "http://127.0.0.1:9/hook?k=1"
    )
    status, body = _post_batches(None)
    assert status == 201 and local.callbacks.url_of(body["batchId"]) is None


@pytest.mark.parametrize(
    "body",
    [
        {"callbackUrl": "http://10.0.0.1/hook"},
        {"callbackUrl": "http://[::ffff:10.0.0.1]/hook"},
        {"callbackUrl": "https://169.254.169.254/latest/meta-data/"},
        {"callbackUrl": 7},
        {"callbackURL": "https://8.8.8.8/"},
        "[]",
        "not json",
    ],
)
def test_post_batches_refuses_a_bad_callback_url_and_creates_nothing(deps: Deps, body: Any) -> None:
    local = _local(deps)
    ledger: Any = local.ledger
    before = dict(ledger.batches)
    status, answer = _post_batches(body)
    assert status == 400 and answer["error"] == "invalid_input"
    assert ledger.batches == before
    assert "169.254" not in answer["message"] and "meta-data" not in answer["message"]


def test_post_batches_refuses_a_public_host_s_other_ports(deps: Deps) -> None:
    # GIVEN a deployment that allows http, without the operator's port list
    _local(deps, callback_ports="")
    # WHEN a tenant names ssh's or another port of a public host THEN 400, before any connection
    for url in ("https://8.8.8.8:22/", "http://8.8.8.8:8080/", "https://8.8.8.8:80/"):
        status, answer = _post_batches({"callbackUrl": url})
        assert (status, answer["error"]) == (400, "invalid_input"), url
        assert "port 443" in answer["message"]
    assert _post_batches({"callbackUrl": "https://8.8.8.8/"})[0] == 201
    assert _post_batches({"callbackUrl": "http://8.8.8.8:80/"})[0] == 201


# --- the deliverer ---------------------------------------------------------------------------------


class Receiver:
    """A fake POST: answers from a script, verifies every signature as a receiver would."""

    def __init__(self, clock: FakeClock, answers: Sequence[int | str]) -> None:
        self.clock = clock
        self.answers = list(answers)
        self.got: list[tuple[callback_security.Target, bytes, dict[str, str]]] = []
        self.seen_deliveries: list[str] = []

    def __call__(
        self, target: callback_security.Target, body: bytes, headers: dict[str, str], timeout: float
    ) -> PostResult:
        self.got.append((target, body, headers))
        tenant, url = headers[callback_security.TENANT_HEADER], target.origin + target.path
        verify(
            SECRET,
            headers[callback_security.SIGNATURE_HEADER],
            body,
            tenant=tenant,
            url=url,
            now=self.clock(),
        )
        answer = self.answers.pop(0) if self.answers else 200
        if isinstance(answer, str):
            return PostResult(None, answer, 5)
        if 200 <= answer < 300:
            self.seen_deliveries.append(headers[callback_security.DELIVERY_HEADER])
        return PostResult(answer, None if 200 <= answer < 300 else f"http_{answer}", 5)


class Visibility:
    """The callback queue as the deliverer uses it (backoff only)."""

    def __init__(self) -> None:
        self.delays: list[int] = []

    def send_tasks(self, tasks: Any) -> None:
        raise AssertionError("the deliverer never sends")

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        self.delays.append(delay_seconds)


def _finished_batch(
    deps: Deps, url: str | None = "http://127.0.0.1:9/hook?k=1"
) -> tuple[str, dict[str, Any]]:
    """A batch created with ``url``, uploaded and processed to COMPLETED; (batch id, its event message)."""
    from pdfbatch.services import batches

    created = batches.create_batch(deps, callback_url=url)
    batch_id = created["batchId"]
    ledger: Any = deps.ledger
    ledger.add_user("cb@example.com")
    data = make_zip([("cv.pdf", pdfs.resume_pdf("C", "cb@example.com")), ("n.txt", b"x")])
    staging.stage_zip(deps, upload(deps, data, key=created["key"]))
    drain(deps)
    events: Any = deps.events
    ((source, detail_type, detail),) = events.of(batch_id)
    return batch_id, {"source": source, "detail-type": detail_type, "detail": detail, "id": "e1"}


@pytest.fixture()
def local(deps: Deps) -> Deps:
    return replace(
        _local(deps, callback_attempts=4, callback_retry_base_seconds=30), callback_queue=Visibility()
    )


def test_a_delivery_down_twice_is_retried_with_backoff_and_every_attempt_is_recorded(local: Deps) -> None:
    # GIVEN a finished batch with a callback URL and a receiver down for two attempts
    batch_id, event = _finished_batch(local)
    clock: Any = local.clock
    receiver = Receiver(clock, [503, "ConnectionRefusedError", 200])
    message = service.parse_message(json.dumps(event))
    # WHEN the message is received three times
    for attempt in (1, 2):
        with pytest.raises(service.DeliveryFailed):
            service.deliver(local, message, attempt, "rh", post=receiver)
        clock.advance(60)
    assert service.deliver(local, message, 3, "rh", post=receiver) == "delivered"
    # THEN the body is summary.json byte for byte, signed, and the delays doubled
    summary = local.store.get_bytes(local.settings.bucket, announcement.report_keys(batch_id)["summary"])
    assert all(body == summary for _, body, _ in receiver.got)
    assert {h[callback_security.DELIVERY_HEADER] for _, _, h in receiver.got} == {message.delivery_id}
    assert receiver.got[0][0].addresses == ("127.0.0.1",) and receiver.got[0][0].path == "/hook?k=1"
    queue: Any = local.callback_queue
    assert queue.delays == [30, 60]
    log: Any = local.callbacks
    rows = log.attempts(batch_id)
    assert [(r.attempt, r.http_status, r.error) for r in rows] == [
        (1, 503, "http_503"),
        (2, None, "ConnectionRefusedError"),
        (3, 200, None),
    ]
    view = service.attempts(local, batch_id)
    assert view["delivered"] and view["callback"] == "http://127.0.0.1:9"
    assert "k=1" not in json.dumps(view) and "hook" not in json.dumps(view)


def test_a_duplicate_event_is_the_same_delivery_and_changes_nothing(local: Deps) -> None:
    batch_id, event = _finished_batch(local)
    clock: Any = local.clock
    receiver = Receiver(clock, [200])
    first = service.parse_message(json.dumps(event))
    again = service.parse_message(json.dumps({**event, "id": "e2"}))  # EventBridge's second copy
    assert first == again
    assert service.deliver(local, first, 1, "rh", post=receiver) == "delivered"
    assert service.deliver(local, again, 1, "rh2", post=receiver) == "already_delivered"
    assert len(receiver.got) == 1
    log: Any = local.callbacks
    assert len(log.attempts(batch_id)) == 1


def test_two_copies_received_at_once_post_once(local: Deps) -> None:
    batch_id, event = _finished_batch(local)
    message = service.parse_message(json.dumps(event))
    log: Any = local.callbacks
    # another consumer holds attempt 1 of this delivery (in flight)
    assert log.begin_attempt(batch_id, message.delivery_id, 1, "first", 0.0)
    receiver = Receiver(local.clock, [200])  # type: ignore[arg-type]
    assert service.deliver(local, message, 1, "rh", post=receiver) == "duplicate"
    assert receiver.got == []


def test_the_last_attempt_is_recorded_and_handed_to_the_dlq_at_once(local: Deps) -> None:
    batch_id, event = _finished_batch(local)
    message = service.parse_message(json.dumps(event))
    receiver = Receiver(local.clock, [500])  # type: ignore[arg-type]
    with pytest.raises(service.DeliveryFailed):
        service.deliver(local, message, local.settings.callback_attempts, "rh", post=receiver)
    queue: Any = local.callback_queue
    assert queue.delays == [0]  # visible now: SQS moves it to the DLQ on its next receive
    log: Any = local.callbacks
    assert [r.http_status for r in log.attempts(batch_id)] == [500]


def test_a_url_that_now_resolves_inside_is_never_posted_to(local: Deps) -> None:
    batch_id, event = _finished_batch(local, None)
    log: Any = local.callbacks
    log.set_url(batch_id, "https://hooks.example.com/in", 0.0)  # accepted while the name was public
    message = service.parse_message(json.dumps(event))
    receiver = Receiver(local.clock, [200])  # type: ignore[arg-type]
    with pytest.raises(service.DeliveryFailed):
        service.deliver(local, message, 1, "rh", post=receiver, resolver=_resolving("10.1.2.3"))
    with pytest.raises(service.DeliveryFailed):
        service.deliver(local, message, 2, "rh", post=receiver, resolver=_resolving())  # DNS failing
    assert receiver.got == []
    assert [r.error for r in log.attempts(batch_id)] == ["blocked_address", "unresolved"]


def test_a_url_on_a_port_no_longer_allowed_is_never_posted_to(local: Deps) -> None:
    # GIVEN a batch whose URL was kept while its port was allowed (a tenant's default set before the rule)
    batch_id, event = _finished_batch(local, None)
    log: Any = local.callbacks
    log.set_url(batch_id, "https://8.8.8.8:22/in", 0.0)
    strict = replace(local, settings=replace(local.settings, callback_ports=""))
    receiver = Receiver(local.clock, [200])  # type: ignore[arg-type]
    # WHEN it is delivered THEN nothing is sent and the attempt says why
    with pytest.raises(service.DeliveryFailed):
        service.deliver(strict, service.parse_message(json.dumps(event)), 1, "rh", post=receiver)
    assert receiver.got == [] and [r.error for r in log.attempts(batch_id)] == ["blocked_port"]


@pytest.mark.parametrize(
    ("recorded", "shown"),
    [
        ("http_503", "http_status"),
        ("http_301", "http_status"),
        ("timeout", "timeout"),
        ("ConnectionRefusedError", "unreachable"),
        ("ConnectionResetError", "unreachable"),
        ("OSError", "unreachable"),
        ("RemoteDisconnected", "unreachable"),
        ("BadStatusLine", "unreachable"),
        ("tls:SSLCertVerificationError", "unreachable"),
        ("unresolved", "unreachable"),
        ("blocked_address", "blocked"),
        ("blocked_port", "blocked"),
        ("ClientError", "internal"),
        ("DependencyUnavailable", "internal"),
        (None, None),
    ],
)
def test_a_tenant_is_shown_an_attempt_error_s_class_only(recorded: str | None, shown: str | None) -> None:
    # a refused port, a reset and a TLS failure read alike: the answer cannot map what listens on a host
    assert service.tenant_error(recorded) == shown
    assert shown is None or shown in service.TENANT_ERRORS


def test_the_api_shows_the_class_and_the_operator_the_detail(local: Deps) -> None:
    # GIVEN a delivery refused at the connection (the receiver down)
    batch_id, event = _finished_batch(local)
    receiver = Receiver(local.clock, ["ConnectionRefusedError"])  # type: ignore[arg-type]
    with pytest.raises(service.DeliveryFailed):
        service.deliver(local, service.parse_message(json.dumps(event)), 1, "rh", post=receiver)
    # WHEN the tenant reads the batch THEN its lastError is the class; `pdfbatch callbacks` keeps the detail
    raw = load_handler("status").handler(api_event("GET", f"/batches/{batch_id}"), Context())
    shown = json.loads(raw["body"])["callback"]
    assert (shown["state"], shown["lastError"]) == ("failing", "unreachable")
    assert service.attempts(local, batch_id)["attempts"][0]["error"] == "ConnectionRefusedError"


def test_a_batch_without_a_callback_or_of_another_deployment_is_acknowledged(local: Deps) -> None:
    _, event = _finished_batch(local, None)
    message = service.parse_message(json.dumps(event))
    assert service.deliver(local, message, 1, "rh", post=Receiver(local.clock, [])) == "no_callback"  # type: ignore[arg-type]
    other = replace(message, batch_id="f" * 32)
    assert service.deliver(local, other, 1, "rh", post=Receiver(local.clock, [])) == "no_batch"  # type: ignore[arg-type]


def test_a_replay_is_a_new_delivery_of_the_same_body(local: Deps) -> None:
    batch_id, event = _finished_batch(local)
    clock: Any = local.clock
    receiver = Receiver(clock, [200, 200])
    first = service.parse_message(json.dumps(event))
    assert service.deliver(local, first, 1, "rh", post=receiver) == "delivered"
    sent: list[dict[str, Any]] = []
    replay_id = service.replay(local, batch_id, lambda m: sent.append(dict(m)))
    replayed = service.parse_message(json.dumps(sent[0]))
    assert replayed.delivery_id == replay_id != first.delivery_id and replayed.kind == "replay"
    assert service.deliver(local, replayed, 1, "rh", post=receiver) == "delivered"
    assert receiver.got[0][1] == receiver.got[1][1]
    assert receiver.seen_deliveries == [first.delivery_id, replay_id]


def test_a_replay_of_an_unknown_or_unfinished_batch_is_refused(local: Deps) -> None:
    from pdfbatch.errors import NotFound
    from pdfbatch.services import batches

    with pytest.raises(NotFound):
        service.replay(local, "0" * 32, lambda m: None)
    pending = batches.create_batch(local, callback_url="http://127.0.0.1:9/")["batchId"]
    with pytest.raises(InvalidInput):
        service.replay(local, pending, lambda m: None)


@settings(suppress_health_check=list(HealthCheck))
@given(body=st.text(max_size=200))
def test_any_message_body_is_a_delivery_or_invalid_input(body: str) -> None:
    try:
        message = service.parse_message(body)
    except InvalidInput:
        return
    assert len(message.delivery_id) == 32


def test_retry_delay_doubles_up_to_the_cap(deps: Deps) -> None:
    s = replace(deps.settings, callback_retry_base_seconds=30, callback_retry_max_seconds=3600)
    delays = [redelivery.callback_retry_delay(s, a) for a in range(1, 10)]
    assert delays == [30, 60, 120, 240, 480, 960, 1920, 3600, 3600]


def test_the_fake_log_keeps_the_first_url() -> None:
    log = FakeCallbackLog()
    log.set_url("a" * 32, "https://one/", 1.0)
    log.set_url("a" * 32, "https://two/", 2.0)
    assert log.url_of("a" * 32) == "https://one/"


def test_the_handler_drops_a_malformed_message_and_reports_a_failed_delivery_for_retry(local: Deps) -> None:
    import socket

    from fixtures.events import sqs_record

    with socket.socket() as closed:  # a loopback port nothing listens on once this block ends
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    batch_id, event = _finished_batch(local, f"http://127.0.0.1:{port}/hook")
    bootstrap.override(local)
    attrs = {"ApproximateReceiveCount": "2", "SentTimestamp": "1"}
    bad, good = sqs_record("not json", attrs), sqs_record(json.dumps(event), attrs)
    handler = load_handler("deliver_callbacks")
    answer = handler.handler({"Records": [bad, good]}, Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": good["messageId"]}]}
    queue: Any = local.callback_queue
    assert queue.delays == [60]  # the second attempt's backoff: 30 s doubled
    log: Any = local.callbacks
    assert [(r.attempt, r.http_status, r.error) for r in log.attempts(batch_id)] == [
        (2, None, "ConnectionRefusedError")
    ]


class SlowLane:
    """The slow callback lane's queue: what was moved to it, and its backoffs."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], int]] = []
        self.delays: list[int] = []

    def send_json(self, message: Any, delay_seconds: int = 0) -> None:
        self.sent.append((dict(message), delay_seconds))

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        self.delays.append(delay_seconds)


def test_a_timeout_on_the_fast_lane_is_recorded_and_the_delivery_goes_on_on_the_slow_lane(
    local: Deps,
) -> None:
    # GIVEN a finished batch whose receiver times out twice, then answers, and both lanes
    slow = SlowLane()
    deps = replace(local, slow_callbacks=slow)
    batch_id, event = _finished_batch(deps)
    clock: Any = deps.clock
    receiver = Receiver(clock, ["timeout", "timeout", 200])
    deadlines: list[float] = []

    def post(
        target: callback_security.Target, body: bytes, headers: dict[str, str], timeout: float
    ) -> PostResult:
        deadlines.append(timeout)
        return receiver(target, body, headers, timeout)

    message = service.parse_message(json.dumps(event))
    # WHEN its first attempt (fast lane) times out
    assert service.deliver(deps, message, 1, "rh", post=post) == "moved_to_slow_lane"
    # THEN it is recorded, the fast queue's message is done (no backoff there), and the delivery is queued
    # on the slow lane after the first backoff, with its attempt count
    fast: Any = deps.callback_queue
    assert fast.delays == []
    ((moved, delay),) = slow.sent
    assert delay == 30 and moved["attemptsBefore"] == 1 and moved["deliveryId"] == message.delivery_id
    # WHEN the slow lane receives it twice (a timeout, then a 2xx)
    again = service.parse_message(json.dumps(moved))
    assert (again.kind, again.attempts_before) == (message.kind, 1)
    with pytest.raises(service.DeliveryFailed, match="timeout"):
        service.deliver(deps, again, 1, "rh2", post=post, lane=service.SLOW)
    assert service.deliver(deps, again, 2, "rh2", post=post, lane=service.SLOW) == "delivered"
    # THEN attempt numbers go on across lanes, the slow lane backs off on its own queue, and each attempt
    # had its lane's deadline (3 s fast, 10 s slow)
    log: Any = deps.callbacks
    assert [(r.attempt, r.http_status, r.error) for r in log.attempts(batch_id)] == [
        (1, None, "timeout"),
        (2, None, "timeout"),
        (3, 200, None),
    ]
    assert slow.delays == [60] and fast.delays == []
    assert deadlines == [3.0, 10.0, 10.0]


def test_without_a_slow_lane_a_timeout_backs_off_like_any_failure(local: Deps) -> None:
    # GIVEN a deployment with one lane only, and a receiver that times out
    batch_id, event = _finished_batch(local)
    receiver = Receiver(local.clock, ["timeout"])  # type: ignore[arg-type]
    message = service.parse_message(json.dumps(event))
    # WHEN the attempt runs THEN it is recorded and the message backed off on its queue
    with pytest.raises(service.DeliveryFailed, match="timeout"):
        service.deliver(local, message, 1, "rh", post=receiver)
    queue: Any = local.callback_queue
    assert queue.delays == [30]
    log: Any = local.callbacks
    assert [(r.attempt, r.error) for r in log.attempts(batch_id)] == [(1, "timeout")]


class RefusingQueue:
    """A callback queue whose visibility changes SQS refuses (down, or an expired receipt handle)."""

    def change_visibility(self, receipt_handle: str, delay_seconds: int) -> None:
        raise DependencyUnavailable("sqs", "ServiceUnavailable")

    def send_json(self, message: Any, delay_seconds: int = 0) -> None:
        raise AssertionError("the deliverer never sends on the fast lane")


def test_a_backoff_sqs_refuses_still_fails_the_delivery_with_its_own_error(local: Deps) -> None:
    # GIVEN a finished batch whose receiver is down, and a callback queue that refuses the backoff
    batch_id, event = _finished_batch(local)
    deps = replace(local, callback_queue=RefusingQueue())
    message = service.parse_message(json.dumps(event))
    # WHEN an attempt fails THEN the message fails with the delivery's error, as a file message's does
    # (services/redelivery.py: it comes back after the visibility timeout), and the attempt is recorded
    with pytest.raises(service.DeliveryFailed, match="http_503"):
        service.deliver(deps, message, 1, "rh", post=Receiver(local.clock, [503]))  # type: ignore[arg-type]
    log: Any = deps.callbacks
    assert [(r.attempt, r.error) for r in log.attempts(batch_id)] == [(1, "http_503")]


def test_one_invocation_delivers_its_records_side_by_side_and_routes_each_to_its_lane(
    local: Deps, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    import time

    from fixtures.events import sqs_record
    from pdfbatch.adapters import webhook

    # GIVEN four finished batches, and receivers that each use a whole 1 s deadline before answering
    slow_arn = "arn:aws:sqs:us-east-1:000000000000:slow-callbacks"
    slow = SlowLane()
    deps = replace(local, slow_callbacks=slow)
    deps = replace(deps, settings=replace(deps.settings, callback_slow_queue_arn=slow_arn))
    events = [_finished_batch(deps)[1] for _ in range(4)]
    busy: list[int] = []
    lock = threading.Lock()
    seen: list[float] = []

    def post(
        target: callback_security.Target, body: bytes, headers: dict[str, str], timeout: float
    ) -> PostResult:
        with lock:
            busy.append(len(busy) + 1)
            seen.append(timeout)
        time.sleep(1.0)
        return PostResult(None, "timeout", 1000)

    monkeypatch.setattr(webhook, "post", post)
    bootstrap.override(deps)
    attrs = {"ApproximateReceiveCount": "1", "SentTimestamp": "1"}
    records = [sqs_record(json.dumps(e), attrs) for e in events[:3]]
    records.append(sqs_record(json.dumps(events[3]), attrs, arn=slow_arn))
    handler = load_handler("deliver_callbacks")
    # WHEN one invocation gets all four
    started = time.monotonic()
    answer = handler.handler({"Records": records}, Context())
    took = time.monotonic() - started
    # THEN they ran side by side (about one deadline in all, not four), each with its lane's deadline:
    # the three fast ones moved to the slow lane (done on theirs), the slow one failed and backed off there
    assert took < 2.5, took
    assert sorted(seen) == [
        deps.settings.callback_timeout_seconds,
        deps.settings.callback_timeout_seconds,
        deps.settings.callback_timeout_seconds,
        deps.settings.callback_slow_timeout_seconds,
    ]
    assert answer == {"batchItemFailures": [{"itemIdentifier": records[3]["messageId"]}]}
    assert len(slow.sent) == 3 and slow.delays == [30]


def test_the_slow_lane_queue_sends_one_json_message_with_its_delay_capped_at_sqs_limit(
    moto_aws: None,
) -> None:
    import boto3

    from pdfbatch.adapters.sqs import SqsQueue

    # GIVEN the slow lane's queue on moto's SQS
    client = boto3.client("sqs", region_name="us-east-1")
    url = client.create_queue(QueueName="slow-callbacks")["QueueUrl"]
    # WHEN a delivery is moved to it with a backoff past SQS's 900 s limit, and one with none
    SqsQueue(client, url).send_json({"batchId": "a" * 32, "attemptsBefore": 1}, 3600)
    SqsQueue(client, url).send_json({"batchId": "b" * 32, "attemptsBefore": 2}, 0)
    # THEN both are accepted (the first delayed by at most 900 s), bodies as sent
    got = client.receive_message(QueueUrl=url, MaxNumberOfMessages=10)["Messages"]
    assert [json.loads(m["Body"]) for m in got] == [{"attemptsBefore": 2, "batchId": "b" * 32}]
    attrs = client.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessagesDelayed"])
    assert attrs["Attributes"]["ApproximateNumberOfMessagesDelayed"] == "1"
