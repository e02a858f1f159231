"""Fixtures shared by the unit tests that run the pipeline: ``Deps`` over the in-memory fakes and moto."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import FakeClock, FakeLedger, FakeProgress
from fixtures.apigw import TEST_API_KEY
from fixtures.pipeline import BUCKET, fake_deps
from pdfbatch import bootstrap
from pdfbatch import metrics as pdf_metrics
from pdfbatch.services.deps import Deps


@pytest.fixture()
def deps(moto_aws: None) -> Iterator[Deps]:
    """FakeLedger (also the users table) and FakeProgress on a still FakeClock, moto's S3 bucket and
    SQS queue; wired into the handlers (bootstrap.override, the API key set) with no metrics pending."""
    d = fake_deps(BUCKET, api_key=TEST_API_KEY)
    pdf_metrics.metrics.clear_metrics()
    bootstrap.override(d)
    yield d
    bootstrap.override(None)
    pdf_metrics.metrics.clear_metrics()


@pytest.fixture()
def ledger(deps: Deps) -> FakeLedger:
    """The ledger (and users table) of ``deps``."""
    assert isinstance(deps.ledger, FakeLedger)
    return deps.ledger


@pytest.fixture()
def progress(deps: Deps) -> FakeProgress:
    """The live progress counters of ``deps``."""
    assert isinstance(deps.progress, FakeProgress)
    return deps.progress


@pytest.fixture()
def clock(deps: Deps) -> FakeClock:
    """The clock of ``deps`` and its fakes: it moves only when told to."""
    assert isinstance(deps.clock, FakeClock)
    return deps.clock
