"""Which users a file named without linking them, as the ledger keeps it (issue 25): keyed hashes only.

A file that names users but links nobody (ambiguous: two users on its deciding page) records, for each
user it named, HMAC-SHA256(key, user id) in ``pdfbatch_named``; never the id, never the address. So
the ledger answers "which files named user X?" for a given X (hash X with each key, look the hashes
up), and a copy of the ledger alone lists nobody.

The key is a deployment secret (NamedUsersSecret; PDFBATCH_NAMED_KEYS where there is no Secrets
Manager) holding a key ring: one key, or a JSON array of keys. The first key writes; every key is read,
so a rotation (a new key put first, the old ones after it) keeps every row written before it found.
Without a key nothing is recorded, and a trace by user shows only linked and already-linked files.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json

from pdfbatch.errors import ConfigError


class KeyRing:
    """The keys of the named users' hashes: ``keys[0]`` writes, every key is looked up."""

    __slots__ = ("keys",)

    def __init__(self, keys: tuple[bytes, ...]) -> None:
        self.keys = keys

    def __bool__(self) -> bool:
        return bool(self.keys)

    def write_hash(self, user_id: str) -> bytes:
        """The hash a file naming ``user_id`` records now (the ring's first key)."""
        return _hmac(self.keys[0], user_id)

    def read_hashes(self, user_id: str) -> list[bytes]:
        """Every hash a file naming ``user_id`` may have recorded, under any key of the ring."""
        return [_hmac(key, user_id) for key in self.keys]


def _hmac(key: bytes, user_id: str) -> bytes:
    return hmac.new(key, user_id.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()


@functools.lru_cache(maxsize=4)
def ring(value: str) -> KeyRing:
    """The ring a secret's value holds: a plain key, or a JSON array of keys (first writes); "" is none."""
    text = value.strip()
    if not text:
        return KeyRing(())
    if text.startswith("["):
        try:
            keys = json.loads(text)
        except ValueError as exc:
            raise ConfigError("the named users' key ring is not a valid JSON array") from exc
        if not keys or not all(isinstance(k, str) and len(k) >= 16 for k in keys):
            raise ConfigError("the named users' key ring must hold keys of at least 16 characters")
        return KeyRing(tuple(k.encode("utf-8") for k in keys))
    if len(text) < 16:
        raise ConfigError("the named users' key must be at least 16 characters")
    return KeyRing((text.encode("utf-8"),))
