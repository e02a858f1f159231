"""The deployed REST API fuzzed from its own /openapi.json (Schemathesis): a short run through API Gateway
on LocalStack, with the key `stack up` stored. Zero 5xx, every answer as documented.

One check is left to the in-process run (tests/unit/test_api_fuzz.py): a method the document does not
list never reaches the function here, API Gateway answers it itself (a 403/404 of its own shape).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error, unsupported_method

from fixtures.openapi import CheckedApiClient

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def deployed(stack: dict[str, Any]) -> Any:
    """The document as the deployed API serves it, configured with the stack's URL and key."""
    url = stack["outputs"]["LocalApiUrl"]
    key = CheckedApiClient(url).api_key
    config = schemathesis.Config.from_dict(
        {"base-url": url, "auth": {"openapi": {"apiKey": {"api_key": key}}}}
    )
    return schemathesis.openapi.from_url(url + "openapi.json", config=config)


schema = schemathesis.pytest.from_fixture("deployed")


@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_deployed_api_answers_as_documented_and_never_with_a_5xx(case: Any) -> None:
    case.call_and_validate(
        timeout=30, additional_checks=[not_a_server_error], excluded_checks=[unsupported_method]
    )
