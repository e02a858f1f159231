"""The deployed REST API fuzzed from its own /openapi.json (Schemathesis): a short run through API Gateway
on LocalStack, with the key `stack up` stored. Zero 5xx, every answer as documented, for valid and
malformed requests alike.

One check is left to the in-process run (tests/unit/test_api_fuzz.py): a method the document does not
list never reaches the function here, API Gateway answers it itself (a 403/404 of its own shape).
The schema is loaded inside the test (it needs the deployed stack), each operation driven by Hypothesis.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, unsupported_method
from schemathesis.generation import GenerationMode

from fixtures.examples import examples
from fixtures.openapi import FUZZ_OPERATIONS, CheckedApiClient

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda m: m.value)
def test_the_deployed_api_answers_as_documented_and_never_with_a_5xx(
    stack: dict[str, Any], mode: GenerationMode
) -> None:
    # GIVEN the document as the deployed API serves it, with the stack's URL and key
    url = stack["outputs"]["LocalApiUrl"]
    key = CheckedApiClient(url).api_key
    config = schemathesis.Config.from_dict(
        {"base-url": url, "auth": {"openapi": {"apiKey": {"api_key": key}}}, "operations": FUZZ_OPERATIONS}
    )
    schema = schemathesis.openapi.from_url(url + "openapi.json", config=config)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    if mode is GenerationMode.NEGATIVE:  # only parameters can be broken (a route without any has none)
        operations = [op for op in operations if list(op.query) or list(op.path_parameters)]
    for operation in operations:
        # WHEN requests it allows (or, negative, that break it) reach it THEN each answer is as documented

        @settings(
            max_examples=examples(15), deadline=None, database=None, suppress_health_check=list(HealthCheck)
        )
        @given(case=operation.as_strategy(generation_mode=mode))
        def answers_as_documented(case: Any) -> None:
            case.call_and_validate(
                timeout=30, additional_checks=[not_a_server_error], excluded_checks=[unsupported_method]
            )

        answers_as_documented()
