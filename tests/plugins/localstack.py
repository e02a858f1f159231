"""The `localstack` session fixture: a real LocalStack in host mode, shared by every session using it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tools import localstack as tooling


@pytest.fixture(scope="session")
def localstack() -> Iterator[str]:
    """The endpoint URL of a ready LocalStack (started if needed, ~2 s once the venvs exist)."""
    root = tooling.find_root(Path(__file__).parent)
    # A lease rather than "stop it if we started it": another session (a colleague's, CI's deploy tests)
    # may be using the same LocalStack; the last lease holder out stops it, an operator's `up` keeps it.
    handle = tooling.start(root, lease=True)
    try:
        yield handle.endpoint
    finally:
        tooling.release(root)
