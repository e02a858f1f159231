"""Tenant keys: who a caller of the REST API is, and which batches that caller may see (issue 13).

The admin key (PDFBATCH_API_KEY) sees every batch. A tenant key sees only the batches its tenant owns:
the ones it created with POST /batches (and later uploads through their links), and ZIPs dropped with
`aws s3 cp` under ``uploads/{tenant}/`` while the tenant had a live key. Any other batch answers
exactly as an unknown id does (404, same body), so a key cannot tell "not yours" from "no such batch".

No clients: the keys live in MySQL (``adapters/tenant_keys.py``, the ``TenantKeys`` port), the
decisions and the operator's two writes (``create_key``, ``revoke_keys``) are here.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from pdfbatch.errors import InvalidInput

if TYPE_CHECKING:
    from pdfbatch.ports import TenantKeys

# A tenant name becomes an S3 prefix (uploads/{tenant}/) and a column value: a short lowercase slug,
# starting with a letter (so no tenant name is ever a batch id, 32 hex characters, nor "." or "..").
TENANT_RE = re.compile(r"[a-z][a-z0-9-]{1,30}[a-z0-9]")
KEY_PREFIX = "pdfbt_"
# 32 bytes from the OS CSPRNG, base64url: 43 characters, 256 bits.
_KEY_BYTES = 32
KEY_RE = re.compile(re.escape(KEY_PREFIX) + r"[A-Za-z0-9_-]{43}")
# uploads/{tenant}/anything.zip: the drop belongs to that tenant (if it has a live key when it arrives).
TENANT_DROP_RE = re.compile(r"uploads/([^/]+)/.+", re.DOTALL)


class Caller:
    """Whoever presented a valid key: the admin (``tenant`` None) or one tenant.

    (A plain class, not a frozen dataclass: building one at import costs status's cold start a few ms.)
    """

    __slots__ = ("tenant",)

    def __init__(self, tenant: str | None = None) -> None:
        self.tenant = tenant

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Caller) and other.tenant == self.tenant

    def __hash__(self) -> int:
        return hash(self.tenant)

    def __repr__(self) -> str:
        return f"Caller({self.tenant!r})"

    @property
    def is_admin(self) -> bool:
        """The admin key sees every batch."""
        return self.tenant is None

    def may_access(self, owner: str | None) -> bool:
        """The tenant-access rule: may this caller read a batch owned by ``owner`` (None: the admin's own)?

        The admin reads every batch, a tenant only its own. Every read checks this (services/views.py);
        ``listing_owner`` is the same rule in the form a query takes.
        """
        return self.tenant is None or owner == self.tenant

    def listing_owner(self, requested: str | None) -> str | None:
        """The owner a listing's query is restricted to (``may_access`` as a filter); None: unfiltered.

        The admin lists every batch, or ``requested``'s; a tenant its own. A tenant naming another
        tenant raises NoAccess: the caller lists nothing, whether that tenant has batches or not.
        """
        if self.is_admin:
            return requested
        if requested is not None and requested != self.tenant:
            raise NoAccess
        return self.tenant


class NoAccess(Exception):
    """A tenant asked for what another tenant owns (``Caller.listing_owner``)."""


ADMIN = Caller()


def valid_tenant(name: str) -> bool:
    """True for a tenant name: 3-32 characters of a-z, 0-9 and '-', starting with a letter, not ending '-'."""
    return bool(TENANT_RE.fullmatch(name))


def new_key() -> str:
    """A fresh tenant key: the prefix and 256 random bits (shown once, never stored)."""
    import secrets  # only `keys create` needs it; status's cold start does not load it (bench section 8)

    return KEY_PREFIX + secrets.token_urlsafe(_KEY_BYTES)


def key_hash(key: str) -> str:
    """What the keys table stores and looks up: the key's SHA-256 (hex).

    A plain hash, not a slow password hash (bcrypt, scrypt): a key is 256 random bits, not a word a
    person chose, so nothing is gained by slowing a guess down (2^256 of them), and the status function
    pays one fast hash per request instead of a deliberately slow one.
    """
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def looks_like_key(presented: str) -> bool:
    """True when ``presented`` has the shape of a tenant key: only those are looked up in MySQL."""
    return bool(KEY_RE.fullmatch(presented))


def drop_tenant(key: str) -> str | None:
    """The tenant a dropped object's key names (``uploads/{tenant}/...``), if it is a valid tenant name."""
    match = TENANT_DROP_RE.fullmatch(key)
    if match is None or not valid_tenant(match.group(1)):
        return None
    return match.group(1)


def check_tenant(name: str) -> str:
    """``name`` if it is a valid tenant name, else InvalidInput saying what one is."""
    if not valid_tenant(name):
        raise InvalidInput(
            "a tenant name is 3-32 characters of a-z, 0-9 and '-', starting with a letter and not "
            "ending with '-' (it becomes the S3 prefix uploads/{tenant}/)"
        )
    return name


def create_key(keys: TenantKeys, tenant: str) -> str:
    """`pdfbatch keys create`: a new key for ``tenant``, its hash stored; the key is returned once.

    A tenant may hold several live keys; `revoke` refuses all of them at once. Creating a key for a
    revoked name makes the tenant live again, with its earlier batches: the name is the tenant.
    """
    key = new_key()
    keys.add(check_tenant(tenant), key_hash(key))
    return key


def revoke_keys(keys: TenantKeys, tenant: str) -> int:
    """`pdfbatch keys revoke`: every live key of ``tenant`` refused from the next request on."""
    return keys.revoke(check_tenant(tenant))


def new_signing_secret(
    keys: TenantKeys, root: str, tenant: str, now: float, overlap_seconds: float = 0.0
) -> str:
    """A new signing secret for ``tenant`` (`keys create`, `keys rotate-secret`), returned to show once.

    Only a random id is stored (pdfbatch_tenants); the secret is derived from it and the deployment's
    root (callback_security.tenant_secret). With ``overlap_seconds`` the secret it replaces keeps signing,
    next to the new one, until then: its receivers switch without a delivery failing.
    """
    import secrets

    from pdfbatch.callback_security import tenant_secret
    from pdfbatch.errors import ConfigError
    from pdfbatch.ports import SigningIds

    if not root:
        raise ConfigError("the tenants' signing root is not available (CallbackTenantRoot)")
    old = keys.signing_ids(check_tenant(tenant))
    new_id = secrets.token_hex(16)
    if old is not None and overlap_seconds > 0:
        keys.set_signing_ids(tenant, SigningIds(new_id, old.current, now + overlap_seconds))
    else:
        keys.set_signing_ids(tenant, SigningIds(new_id))
    return tenant_secret(root, tenant, new_id)


def signing_secrets(
    keys: TenantKeys | None, root: str, shared: str, tenant: str | None, now: float
) -> list[str]:
    """The secrets a delivery of ``tenant``'s batch is signed with, the current one first.

    A tenant's own (and, during a rotation's overlap, its previous); the deployment-wide CallbackSecret
    for the admin's batches and for a tenant made before tenants had secrets (until `keys
    rotate-secret` gives it one: until then a tenant holding that secret could sign for it).
    """
    from pdfbatch.callback_security import tenant_secret
    from pdfbatch.errors import ConfigError

    ids = keys.signing_ids(tenant) if keys is not None and tenant is not None else None
    if ids is None:
        if tenant is not None:
            from pdfbatch.logs import logger

            logger.warning("tenant signs with the shared secret: `pdfbatch keys rotate-secret` gives it one")
        if not shared:
            raise ConfigError("PDFBATCH_CALLBACK_SECRET is not set (the signing secret)")
        return [shared]
    if not root:
        raise ConfigError("PDFBATCH_CALLBACK_TENANT_ROOT is not set (the tenants' signing root)")
    assert tenant is not None
    out = [tenant_secret(root, tenant, ids.current)]
    if ids.previous is not None and ids.previous_until is not None and now < ids.previous_until:
        out.append(tenant_secret(root, tenant, ids.previous))
    return out
