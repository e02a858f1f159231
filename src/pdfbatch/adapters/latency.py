"""Injected AWS latency (the bench only): a botocore ``before-send`` hook that waits before each request.

LocalStack answers S3 and SQS in a few ms; AWS takes tens. ``PDFBATCH_INJECT_LATENCY=1`` in a
function's environment makes every client ``bootstrap.boto3_client`` builds wait what AWS typically
takes before each HTTP request it sends (every retry too), so what the latency costs, and what overlapping
it buys, is measured on the local stack instead of assumed (bench section 11). Never set on AWS: off
unless the variable says so, and checked once, when a client is built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

# Seconds per request, by (service, operation); (service, "*") for every other operation of a service.
# S3 figures are typical first-byte times of small objects in one region (issue 15); HeadObject and
# DeleteObject take about a GET's. SQS calls ~10 ms. EventBridge and Secrets Manager are left alone
# (once per batch, once per cold start).
AWS_TYPICAL: Mapping[tuple[str, str], float] = {
    ("s3", "GetObject"): 0.025,
    ("s3", "PutObject"): 0.030,
    ("s3", "CopyObject"): 0.040,
    ("s3", "*"): 0.025,
    ("sqs", "*"): 0.010,
}


def delay_for(service: str, operation: str, table: Mapping[tuple[str, str], float] = AWS_TYPICAL) -> float:
    """Seconds one request of ``operation`` (botocore's name, e.g. ``GetObject``) of ``service`` waits."""
    return table.get((service, operation), table.get((service, "*"), 0.0))


def install(
    client: Any,
    table: Mapping[tuple[str, str], float] = AWS_TYPICAL,
    sleep: Callable[[float], None] | None = None,
) -> None:
    """Make ``client`` wait ``delay_for(service, operation)`` before sending each request."""
    service = client.meta.service_model.service_name  # "s3", "sqs" (botocore's endpoint prefix)

    def wait(event_name: str = "", **_: Any) -> None:
        # botocore emits before-send.<service-id>.<Operation> with the event's name among the kwargs.
        delay = delay_for(service, event_name.rpartition(".")[2], table)
        if delay > 0:
            (sleep or time.sleep)(delay)
        # None: botocore sends the request as usual (a response here would replace it).

    event_name = client.meta.service_model.service_id.hyphenize()
    client.meta.events.register(f"before-send.{event_name}", wait, unique_id="pdfbatch-inject-latency")
