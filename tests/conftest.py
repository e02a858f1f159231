"""Shared fixtures: the real MariaDB and Redis of this machine, moto for S3/SQS, LocalStack for e2e."""

from __future__ import annotations

import importlib.util
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from fixtures.examples import FAST_EXAMPLES, profile

pytest_plugins = [p for p in ("plugins.localstack", "plugins.services") if importlib.util.find_spec(p)]


# `full` is Hypothesis' own defaults (each property's count from fixtures.examples); `fast` is `make fast`.
settings.register_profile("full")
settings.register_profile("fast", max_examples=FAST_EXAMPLES)
settings.load_profile(profile())


# Each folder is a layer and its tests carry its marker (none for unit), so `-m integration` and
# `pytest tests/integration` select the same tests, and a test that deploys a stack cannot sit with those
# that only talk to a service.
LAYERS = {"unit": set(), "integration": {"integration"}, "e2e": {"e2e"}}


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    """Refuse the run when a test's layer marker does not say the folder it sits in."""
    root = Path(__file__).parent
    wrong = []
    for item in items:
        parts = item.path.relative_to(root).parts if item.path.is_relative_to(root) else ()
        if not parts or parts[0] not in LAYERS:
            continue
        marked = {m.name for m in item.iter_markers() if m.name in ("integration", "e2e")}
        if marked != LAYERS[parts[0]]:
            want = ", ".join(sorted(LAYERS[parts[0]])) or "no layer marker"
            wrong.append(f"{item.nodeid}: marked {sorted(marked) or 'nothing'}, {parts[0]}/ wants {want}")
    if wrong:
        raise pytest.UsageError("tests outside their layer (tests/conftest.py LAYERS):\n" + "\n".join(wrong))


def pytest_configure(config: Any) -> None:
    os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "pdfbatch")
    os.environ.setdefault("POWERTOOLS_METRICS_NAMESPACE", "pdfbatch")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture()
def run_id() -> str:
    """A short unique id for names created by one test."""
    return uuid.uuid4().hex[:10]


@pytest.fixture()
def aws_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials so nothing can reach a real AWS account."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.fixture()
def moto_aws(aws_credentials: None) -> Iterator[None]:
    """moto's in-process S3 and SQS."""
    from moto import mock_aws

    with mock_aws():
        yield
