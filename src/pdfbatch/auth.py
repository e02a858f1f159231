"""Access control of the REST API: the admin key (PDFBATCH_API_KEY) or a tenant key, sent as x-api-key.

The admin key sees every batch; a tenant key only its tenant's (``tenants.Caller``). A revoked tenant
key is refused exactly as a wrong key is (403, same body): the caller learns nothing about keys that
once existed.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from pdfbatch import tenants
from pdfbatch.errors import ConfigError, Forbidden, Unauthenticated
from pdfbatch.tenants import ADMIN, Caller

HEADER = "x-api-key"
MIN_KEY_LENGTH = 16


def check_api_key(expected: str, presented: str | None) -> None:
    """Pass when ``presented`` is the configured key: Unauthenticated when absent, Forbidden when wrong.

    The comparison takes the same time wherever the keys differ. With no key configured every request
    is refused (ConfigError): the API never runs open by accident.
    """
    if len(expected) < MIN_KEY_LENGTH:
        raise ConfigError(f"PDFBATCH_API_KEY must be set to a secret of at least {MIN_KEY_LENGTH} characters")
    if not presented:
        raise Unauthenticated(f"missing API key: send it in the {HEADER} header")
    if not hmac.compare_digest(presented.encode("utf-8", "replace"), expected.encode("utf-8", "replace")):
        raise Forbidden("wrong API key")


def authenticate(
    expected: str, presented: str | None, tenant_of: Callable[[str], str | None] | None
) -> Caller:
    """Who ``presented`` is: the admin (the configured key), or the tenant of a live tenant key.

    ``tenant_of`` maps a key's hash to its live tenant (``TenantKeys.tenant_of``: one indexed read); it
    is asked only for a value shaped like a tenant key, so a wrong key of another shape costs no query.
    The lookup is by the key's SHA-256, so its timing says nothing about the stored hashes' keys. A
    wrong, unknown or revoked key is Forbidden("wrong API key"), the same answer in every case.
    """
    try:
        check_api_key(expected, presented)
        return ADMIN
    except Forbidden:
        assert presented is not None  # check_api_key refused an empty one as Unauthenticated
        if tenant_of is None or not tenants.looks_like_key(presented):
            raise
        tenant = tenant_of(tenants.key_hash(presented))
        if tenant is None:
            raise
        return Caller(tenant)
