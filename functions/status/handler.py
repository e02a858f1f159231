"""status: the REST API (API Gateway proxy) for creating batches and polling their progress.

The API itself is pdfbatch.web.api (routes, API keys, errors) over pdfbatch.web.http (requests and
answers). This function also runs, on a schedule (SettleSchedule, every minute), what a read would
settle for batches nobody reads: expired uploads, lost completions, due announcements
(services/settle.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch.bootstrap import get_deps
from pdfbatch.logs import logger
from pdfbatch.web import api


def is_schedule(event: Mapping[str, Any]) -> bool:
    """The Settle schedule's event (EventBridge), not a request: API Gateway never sends this shape."""
    return event.get("source") == "aws.events" and event.get("detail-type") == "Scheduled Event"


def settle() -> dict[str, Any]:
    """The scheduled run of services/settle.py: end and announce what no reader has."""
    from pdfbatch.services import settle as settling  # only the schedule pays for this import

    return {"settled": settling.settle(get_deps()).counts()}


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point for API Gateway proxy events, and for the Settle schedule."""
    if is_schedule(event):
        return settle()
    return api.answer(event)
