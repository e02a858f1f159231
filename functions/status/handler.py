"""status: the REST API (API Gateway proxy) for creating batches and polling their progress."""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch import services
from pdfbatch.bootstrap import get_deps
from pdfbatch.errors import DependencyUnavailable, InvalidInput, NotFound
from pdfbatch.logs import logger

app = APIGatewayRestResolver()


@app.post("/batches")
def create_batch() -> tuple[dict[str, Any], int]:
    """A new batch id and the presigned POST to upload its ZIP."""
    return services.create_batch(get_deps()), 201


@app.get("/batches")
def find_batches() -> dict[str, Any]:
    """Batches of an object key dropped with the AWS CLI: GET /batches?key=uploads/x.zip."""
    key = app.current_event.get_query_string_value(name="key", default_value="") or ""
    if not key:
        raise InvalidInput("query parameter 'key' is required")
    return services.find_batches(get_deps(), key)


@app.get("/batches/<batch_id>")
def get_batch(batch_id: str) -> Response[Any]:
    """Progress of one batch; clients are told when to poll again while it runs."""
    body = services.batch_status(get_deps(), batch_id)
    headers = {"Cache-Control": "no-store"}
    if body["status"] in ("PENDING", "PROCESSING"):
        headers["Retry-After"] = "1"
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


@app.get("/batches/<batch_id>/files")
def get_files(batch_id: str) -> dict[str, Any]:
    """Per-file results, paginated: ?limit=&cursor=&outcome=."""
    q = app.current_event.get_query_string_value
    limit_raw = q(name="limit", default_value="100") or "100"
    if not limit_raw.isdigit():
        raise InvalidInput("limit must be a positive integer")
    return services.list_files(
        get_deps(),
        batch_id,
        cursor=q(name="cursor", default_value=None),
        limit=int(limit_raw),
        outcome=q(name="outcome", default_value=None),
    )


def _error(status: int, code: str, message: str) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": code, "message": message},
    )


@app.exception_handler(NotFound)
def not_found(exc: NotFound) -> Response[Any]:
    """404 with a JSON error."""
    return _error(404, "not_found", "no such batch")


@app.exception_handler(InvalidInput)
def invalid(exc: InvalidInput) -> Response[Any]:
    """400 with the reason."""
    return _error(400, "invalid_input", str(exc))


@app.exception_handler(DependencyUnavailable)
def unavailable(exc: DependencyUnavailable) -> Response[Any]:
    """503: a dependency is down; the client may retry."""
    logger.error("dependency unavailable", extra={"dependency": exc.dependency})
    return _error(503, "unavailable", f"{exc.dependency} is unavailable, try again shortly")


@app.not_found
def route_not_found(exc: Exception) -> Response[Any]:
    """Unknown routes: JSON 404."""
    return _error(404, "not_found", "no such route")


@logger.inject_lambda_context(clear_state=True)
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    """Entry point for API Gateway proxy events."""
    return app.resolve(event, context)
