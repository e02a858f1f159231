"""Completion events on EventBridge's default bus (PutEvents, one entry per call).

Each event names the stack's bucket (where the batch and its report live) in ``resources``: the bus is the
account's, so every stack's callback rule would otherwise take every stack's completions, and a
neighbour stack's deliverer could claim this stack's deliveries (infra/template.yaml, CallbackRule)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pdfbatch.errors import DependencyUnavailable

DEFAULT_BUS = "default"


def bucket_arn(partition: str, bucket: str) -> str:
    """The ARN of ``bucket`` in ``partition`` (``aws``, ``aws-cn``, ...): what the callback rule matches."""
    return f"arn:{partition}:s3:::{bucket}"


class EventBridgeEvents:
    """ports.Events over a boto3 EventBridge client; an entry EventBridge refuses raises, as a failed call."""

    def __init__(self, client: Any, bus: str = DEFAULT_BUS, resources: Sequence[str] = ()) -> None:
        self.client = client
        self.bus = bus
        self.resources = list(resources)

    def put_event(self, source: str, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event; DependencyUnavailable('events') unless EventBridge accepted it."""
        entry: dict[str, Any] = {
            "Source": source,
            "DetailType": detail_type,
            "Detail": json.dumps(dict(detail), sort_keys=True),
            "EventBusName": self.bus,
        }
        if self.resources:
            entry["Resources"] = self.resources
        try:
            answer = self.client.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            raise DependencyUnavailable("events", type(exc).__name__) from exc
        # PutEvents answers 200 even when it refused the entry: the entry's own ErrorCode says so.
        if answer.get("FailedEntryCount", 0):
            code = (answer.get("Entries") or [{}])[0].get("ErrorCode", "refused")
            raise DependencyUnavailable("events", str(code))
