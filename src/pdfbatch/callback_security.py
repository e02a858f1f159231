"""Signed callbacks: the signature scheme, the receivers' verifier, and which URLs may be called.

Standard library only: a receiver can copy this file, or ``pip install pdfbatch`` and call
``pdfbatch.callback_security.verify``.

Signature (like Stripe's, version 2): each POST carries

    Pdfbatch-Signature: t=<unix seconds>,v2=<hex hmac_sha256(secret, signed_bytes)>[,v2=...]
    Pdfbatch-Tenant: <the batch's tenant, "" for the admin's batches>
    Pdfbatch-Delivery: <32 hex characters, the same on every retry of one delivery>

    signed_bytes = b"v2\n" + t + b"\n" + tenant + b"\n" + callback URL + b"\n" + body

The body is the batch's summary.json, byte for byte; the URL the one the batch was created with (its
callbackUrl, or its tenant's default then), path and query included. Each tenant has a secret of its
own (``tenant_secret``: derived from the deployment's root secret and the tenant's random secret id,
so MySQL holds no secret; `pdfbatch keys create` shows it once). A receiver verifies with its secret,
its tenant name and its own URL (``verify``), so a summary of another tenant's batch, or a genuine
delivery re-posted to another receiver, fails there. While a secret is rotated (`pdfbatch keys
rotate-secret --overlap-hours H`) the header carries one ``v2`` per secret: either verifies.
``verify`` is constant-time and wants ``t`` within ``tolerance`` seconds of now (300 by default, in
the past or the future); a receiver then remembers the delivery id (a retry of a delivery it
processed: answer 2xx, do nothing) and the ``v2`` values for the tolerance window (a replay).
Version 1 (``v1=``, over ``t.body`` alone, one deployment-wide secret) is no longer sent.

A callback URL is refused unless it is https (http only where the deployment allows it: local tests),
names no user or password, names port 443 (80 for http) or one the operator lists
(PDFBATCH_CALLBACK_PORTS: else a callback could probe any port of a public host), and its host is
neither a literal nor a name resolving to an address that is private, loopback, link-local,
multicast, reserved, shared (CGNAT) or unspecified, IPv4 or IPv6, including IPv4 inside IPv6 (mapped,
6to4, NAT64). An explicit allow-list (PDFBATCH_CALLBACK_ALLOW: hosts and CIDRs) lifts that for local
testing. The check runs when the batch is created and again at every delivery, which then connects to
the address it checked (adapters/webhook.py): no second lookup.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

SIGNATURE_HEADER = "Pdfbatch-Signature"
TENANT_HEADER = "Pdfbatch-Tenant"
DELIVERY_HEADER = "Pdfbatch-Delivery"
DEFAULT_TOLERANCE = 300
MAX_URL_LENGTH = 2048

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]


class SignatureError(ValueError):
    """The signature header is missing, malformed, stale, from the future, or does not match the body."""


class CallbackUrlError(ValueError):
    """A callback URL pdfbatch will not call; the message says why (never echoes the query string)."""


class UnresolvedHost(CallbackUrlError):
    """The URL's host name resolved to no address (maybe for now: DNS may be failing)."""


class BlockedPort(CallbackUrlError):
    """The URL names a port the deployment does not call (443, 80 for http, and the operator's list)."""


# --- signing and verifying ------------------------------------------------------------------------


def _key(secret: str | bytes) -> bytes:
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def signed_bytes(timestamp: int, tenant: str, url: str, body: bytes) -> bytes:
    """What a v2 signature covers: version, timestamp, tenant, destination URL and body, newline-separated."""
    return f"v2\n{timestamp}\n{tenant}\n{url}\n".encode() + body


def signature(secret: str | bytes, timestamp: int, body: bytes, *, tenant: str, url: str) -> str:
    """hex(HMAC-SHA256(secret, signed_bytes(timestamp, tenant, url, body)))."""
    return hmac.new(_key(secret), signed_bytes(timestamp, tenant, url, body), hashlib.sha256).hexdigest()


def sign(
    secrets: str | bytes | Sequence[str | bytes],
    body: bytes,
    timestamp: int | None = None,
    *,
    tenant: str,
    url: str,
) -> str:
    """The Pdfbatch-Signature header value for ``body`` to ``url`` of ``tenant`` at ``timestamp`` (default:
    now): one ``v2`` per secret (several while a secret is rotated)."""
    t = int(time.time()) if timestamp is None else int(timestamp)
    keys = [secrets] if isinstance(secrets, str | bytes) else list(secrets)
    return ",".join([f"t={t}", *(f"v2={signature(k, t, body, tenant=tenant, url=url)}" for k in keys)])


def tenant_secret(root: str | bytes, tenant: str, secret_id: str) -> str:
    """A tenant's signing secret: HMAC-SHA256(root, tenant and its secret id), as the tenant is shown it.

    The root is the deployment's (CallbackTenantRoot in Secrets Manager), the id random per tenant and
    rotation (pdfbatch_tenants): neither alone is the secret, so the database holds none."""
    mac = hmac.new(_key(root), f"pdfbatch-tenant-secret\x00{tenant}\x00{secret_id}".encode(), hashlib.sha256)
    return "whsec_" + mac.hexdigest()


def verify(
    secret: str | bytes,
    header: str | None,
    body: bytes,
    *,
    tenant: str,
    url: str,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> int:
    """Check a Pdfbatch-Signature header against the raw body, this receiver's tenant and URL; return its
    timestamp.

    Raises SignatureError when the header is missing or malformed, when its timestamp is more than
    ``tolerance`` seconds from ``now`` (either way), or when no ``v2`` matches (compared in constant
    time): another secret, tenant, URL or body. Several ``v2`` entries may be present (a secret being
    rotated): one match is enough. ``v1`` entries (the old scheme) are ignored.
    """
    if not header:
        raise SignatureError("no signature header")
    timestamp: int | None = None
    candidates: list[str] = []
    for part in header.split(","):
        name, sep, value = part.strip().partition("=")
        if not sep:
            raise SignatureError("malformed signature header")
        if name == "t":
            if timestamp is not None or not value.isascii() or not value.isdigit() or len(value) > 12:
                raise SignatureError("malformed timestamp")
            timestamp = int(value)
        elif name == "v2":
            candidates.append(value)
    if timestamp is None or not candidates:
        raise SignatureError("the header needs t= and v2=")
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance:
        raise SignatureError("timestamp outside the tolerance")
    expected = signature(secret, timestamp, body, tenant=tenant, url=url)
    if not any(
        hmac.compare_digest(expected.encode("ascii"), c.encode("utf-8", "replace")) for c in candidates
    ):
        raise SignatureError("signature does not match")
    return timestamp


# --- which URLs may be called ---------------------------------------------------------------------

# IPv6 prefixes that carry an IPv4 address a gateway would reach: NAT64 (well-known and local-use).
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
# IANA's special-purpose ranges that are not globally reachable, written out rather than left to
# ipaddress.is_global alone: its tables differ between Python versions (3.11 calls 192.0.0.8 global).
_NOT_GLOBAL = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT (shared address space)
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "192.88.99.0/24",
        "192.168.0.0/16",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "64:ff9b:1::/48",
        "100::/64",
        "2001::/23",  # IETF protocol assignments, Teredo among them
        "2001:db8::/32",
        "3fff::/20",
        "5f00::/16",
        "fc00::/7",
        "fe80::/10",
        "fec0::/10",
        "ff00::/8",
    )
)


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address carries (mapped, 6to4, NAT64, IPv4-compatible), or None."""
    if isinstance(address, ipaddress.IPv4Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if any(address in net for net in _NAT64) or (int(address) >> 32 == 0 and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)  # NAT64, or ::a.b.c.d (compatible)
    return None


def is_public(address: Address) -> bool:
    """True only for a globally routable unicast address (and whatever IPv4 address it carries)."""
    inner = embedded_ipv4(address)
    if inner is not None and not is_public(inner):
        return False
    if any(address in net for net in _NOT_GLOBAL if net.version == address.version):
        return False
    return not (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv6Address) and address.is_site_local)
        or not address.is_global
    )


@dataclass(frozen=True)
class AllowList:
    """Hosts and networks a callback may reach although they are not public (local testing only)."""

    hosts: frozenset[str] = frozenset()
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, text: str) -> AllowList:
        """``"127.0.0.1/32, ::1, receiver.test"``: CIDRs, addresses and host names, comma-separated."""
        hosts: set[str] = set()
        networks: list[Network] = []
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                hosts.add(item.lower().rstrip("."))
        return cls(frozenset(hosts), tuple(networks))

    def allows(self, host: str, address: Address) -> bool:
        """Whether ``address`` (of ``host``) is allowed although not public."""
        return host in self.hosts or any(address in n for n in self.networks)


@dataclass(frozen=True)
class PortList:
    """Ports a callback may name besides its scheme's default (443, or 80 for http): the operator's."""

    ranges: tuple[tuple[int, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> PortList:
        """``"8443, 9000-9100"``: ports and inclusive ranges, comma-separated; ValueError when not."""
        ranges: list[tuple[int, int]] = []
        for item in (i.strip() for i in text.split(",")):
            if not item:
                continue
            low, _, high = item.partition("-")
            first, last = int(low), int(high or low)
            if not 1 <= first <= last <= 65535:
                raise ValueError(f"not a port or range: {item!r}")
            ranges.append((first, last))
        return cls(tuple(ranges))

    def allows(self, scheme: str, port: int) -> bool:
        """Whether a ``scheme`` URL may name ``port``."""
        default = 443 if scheme == "https" else 80
        return port == default or any(first <= port <= last for first, last in self.ranges)


@dataclass(frozen=True)
class Target:
    """A checked callback URL: where to connect (the checked addresses) and what to ask for."""

    scheme: str
    host: str  # lowercased, no brackets; sent as Host and TLS SNI
    port: int
    path: str  # path and query, what goes on the request line
    addresses: tuple[str, ...]  # every address the host resolved to, all checked; connect to these only

    @property
    def origin(self) -> str:
        """scheme://host[:port], without path or query: what logs may name."""
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}" + ("" if self.port == default else f":{self.port}")


def resolve(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to (TCP), as getaddrinfo answers; [] when it does not resolve."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return []
    out: list[str] = []
    for info in infos:
        addr = str(info[4][0]).split("%", 1)[0]  # a scope id (fe80::1%eth0) is not part of the address
        if addr not in out:
            out.append(addr)
    return out


def parse_url(url: str, allow_http: bool = False) -> tuple[str, str, int, str]:
    """(scheme, host, port, path and query) of a callback URL, or CallbackUrlError saying why not."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise CallbackUrlError(f"callbackUrl must be a URL of at most {MAX_URL_LENGTH} characters")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise CallbackUrlError("callbackUrl must be ASCII without spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise CallbackUrlError("callbackUrl is not a valid URL") from exc
    scheme = parts.scheme.lower()
    if scheme != "https" and not (allow_http and scheme == "http"):
        raise CallbackUrlError("callbackUrl must be https" + (" or http" if allow_http else ""))
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise CallbackUrlError("callbackUrl must not hold a user or password")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise CallbackUrlError("callbackUrl has no host")
    if port == 0:
        raise CallbackUrlError("callbackUrl has no usable port")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return scheme, host, port or (443 if scheme == "https" else 80), path


def check_url(
    url: str,
    *,
    allow_http: bool = False,
    allow: AllowList | None = None,
    ports: PortList | None = None,
    resolver: Resolver = resolve,
) -> Target:
    """The Target of ``url`` if pdfbatch may call it: scheme, no credentials, port, every address public.

    The host is resolved once here; every address it resolves to must pass (one private address
    refuses the URL: a name that also points inside is a way in). A literal address is its own answer.
    """
    scheme, host, port, path = parse_url(url, allow_http)
    if not (ports or PortList()).allows(scheme, port):
        raise BlockedPort("callbackUrl must use port 443" + (" (80 for http)" if allow_http else ""))
    allowed = allow or AllowList()
    try:
        literal: Address | None = ipaddress.ip_address(host)
    except ValueError:
        literal = None
    addresses = [str(literal)] if literal is not None else list(resolver(host, port))
    if not addresses:
        raise UnresolvedHost("callbackUrl's host does not resolve")
    for text in addresses:
        try:
            address = ipaddress.ip_address(text)
        except ValueError as exc:
            raise CallbackUrlError("callbackUrl's host resolved to something that is not an address") from exc
        if not is_public(address) and not allowed.allows(host, address):
            raise CallbackUrlError(
                "callbackUrl's host is (or resolves to) a private, loopback, link-local, multicast or "
                "reserved address"
            )
    return Target(scheme, host, port, path, tuple(addresses))
