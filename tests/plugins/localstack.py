"""The `localstack` session fixture: a real LocalStack in host mode, started once if not running already."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pdfbatch.ops import localstack as ops


@pytest.fixture(scope="session")
def localstack() -> Iterator[str]:
    """The endpoint URL of a ready LocalStack; stopped at the end only if this session started it."""
    root = ops.find_root(Path(__file__).parent)
    handle = ops.start(root)  # sets up .venvs on first use (about a minute), then takes ~2 s
    try:
        yield handle.endpoint
    finally:
        if handle.started:
            ops.stop(root)
