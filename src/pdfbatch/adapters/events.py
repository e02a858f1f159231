"""Completion events on EventBridge's default bus (PutEvents, one entry per call)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from pdfbatch.errors import DependencyUnavailable

DEFAULT_BUS = "default"


class EventBridgeEvents:
    """ports.Events over a boto3 EventBridge client; an entry EventBridge refuses raises, as a failed call."""

    def __init__(self, client: Any, bus: str = DEFAULT_BUS) -> None:
        self.client = client
        self.bus = bus

    def put_event(self, source: str, detail_type: str, detail: Mapping[str, Any]) -> None:
        """Put one event; DependencyUnavailable('events') unless EventBridge accepted it."""
        entry = {
            "Source": source,
            "DetailType": detail_type,
            "Detail": json.dumps(dict(detail), sort_keys=True),
            "EventBusName": self.bus,
        }
        try:
            answer = self.client.put_events(Entries=[entry])
        except (ClientError, BotoCoreError) as exc:
            raise DependencyUnavailable("events", type(exc).__name__) from exc
        # PutEvents answers 200 even when it refused the entry: the entry's own ErrorCode says so.
        if answer.get("FailedEntryCount", 0):
            code = (answer.get("Entries") or [{}])[0].get("ErrorCode", "refused")
            raise DependencyUnavailable("events", str(code))
