"""Access control of the REST API: one shared secret, sent by the CLI and the upload page as x-api-key."""

from __future__ import annotations

import hmac

from pdfbatch.errors import ConfigError, Forbidden, Unauthenticated

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
