"""status: the REST API (API Gateway proxy) for creating batches and polling their progress.

Every route needs the API key (x-api-key) except the upload page (GET /) and the API's own
description (GET /openapi.json), which hold no data: the page asks for the key itself.

Every malformed request is a 4xx with a JSON error, never a raise (API Gateway's 502): query values
are read through ``_query`` (text only: a lone surrogate is 400) and numbers through ``_number``
(ASCII digits only), and a method the document does not list for a path is 405 with ``Allow``.
tests/unit/test_api_fuzz.py holds the handler to its /openapi.json with Schemathesis.
"""

from __future__ import annotations

import re
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.utilities.typing import LambdaContext

from pdfbatch import auth, web
from pdfbatch.bootstrap import get_deps, get_settings
from pdfbatch.errors import (
    ConfigError,
    DependencyUnavailable,
    Forbidden,
    InvalidInput,
    NotFound,
    Unauthenticated,
)
from pdfbatch.logs import logger
from pdfbatch.services import batches, views

app = APIGatewayRestResolver()
PUBLIC_ROUTES = frozenset({("GET", "/"), ("GET", "/openapi.json")})
_DIGITS = re.compile(r"[0-9]+")  # ASCII: str.isdigit() also says yes to "²", which int() refuses


def require_api_key(app: APIGatewayRestResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Every documented route but PUBLIC_ROUTES needs the shared API key (401 without one, 403 with a
    wrong one); a method the document does not list for a known path is 405, an unknown path 404."""
    event = app.current_event
    allowed = web.methods_of(event.path)
    if allowed and event.http_method not in allowed:
        return _error(
            405,
            "method_not_allowed",
            f"{event.http_method} is not allowed here",
            {"Allow": ", ".join(sorted(allowed))},
        )
    if allowed and (event.http_method, event.path) not in PUBLIC_ROUTES:
        auth.check_api_key(get_settings().api_key, event.headers.get(auth.HEADER))
    return next_middleware(app)


def _query(name: str) -> str | None:
    """A query parameter as API Gateway decoded it; InvalidInput when it is not text.

    Bytes that are not UTF-8 (``%ED%A0%80``) arrive as lone surrogates, which no store, hash or JSON
    encoder accepts: refused here, once, for every parameter a route reads.
    """
    value = app.current_event.get_query_string_value(name=name, default_value=None)
    if value is not None and not _is_text(value):
        raise InvalidInput(f"query parameter {name!r} is not valid UTF-8")
    return value


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _number(name: str, default: int, most: int) -> int:
    """A whole-number query parameter (ASCII digits), capped at ``most`` without parsing huge ones."""
    raw = _query(name)
    if raw is None:
        return default
    if not _DIGITS.fullmatch(raw):  # "" too: the parameter is there, without a number
        raise InvalidInput(f"{name} must be a whole number")
    digits = raw.lstrip("0")
    return most if len(digits) > len(str(most)) else min(int(digits or "0"), most)


app.use(middlewares=[require_api_key])


@app.get("/")
def upload_page() -> Response[str]:
    """The upload page: plain HTML with its script and style inline, allowed by hash in its CSP."""
    page = web.upload_page(get_settings())
    headers = {
        "Content-Security-Policy": page.csp,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return Response(status_code=200, content_type="text/html; charset=utf-8", body=page.html, headers=headers)


@app.get("/openapi.json")
def openapi() -> Response[str]:
    """The OpenAPI 3.1 description of this API (the file shipped in pdfbatch/web)."""
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=web.openapi_document(),
        headers={"Cache-Control": "max-age=300"},
    )


@app.post("/batches")
def create_batch() -> tuple[dict[str, Any], int]:
    """A new batch id and the presigned POST to upload its ZIP."""
    return batches.create_batch(get_deps()), 201


@app.get("/batches")
def find_batches() -> dict[str, Any]:
    """Batches of an object key dropped with the AWS CLI: GET /batches?key=uploads/x.zip."""
    key = _query("key") or ""
    if not key:
        raise InvalidInput("query parameter 'key' is required")
    return views.find_batches(get_deps(), key)


@app.get("/batches/<batch_id>")
def get_batch(batch_id: str) -> Response[Any]:
    """Progress of one batch; clients are told when to poll again while it runs."""
    body = views.batch_status(get_deps(), batch_id)
    headers = {"Cache-Control": "no-store"}
    if body["status"] in ("PENDING", "PROCESSING"):
        headers["Retry-After"] = "1"
    return Response(status_code=200, content_type=content_types.APPLICATION_JSON, body=body, headers=headers)


@app.get("/batches/<batch_id>/files")
def get_files(batch_id: str) -> dict[str, Any]:
    """Per-file results, paginated: ?limit=&cursor=&outcome=."""
    return views.list_files(
        get_deps(),
        batch_id,
        cursor=_query("cursor"),
        limit=_number("limit", 100, most=1000),
        outcome=_query("outcome"),
    )


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body={"error": code, "message": message},
        headers=headers,
    )


@app.exception_handler(Unauthenticated)
def unauthenticated(exc: Unauthenticated) -> Response[Any]:
    """401: no API key."""
    logger.warning("request without an API key", extra={"path": app.current_event.path})
    return _error(401, "unauthorized", str(exc), {"WWW-Authenticate": f'ApiKey header="{auth.HEADER}"'})


@app.exception_handler(Forbidden)
def forbidden(exc: Forbidden) -> Response[Any]:
    """403: an API key that is not the configured one."""
    logger.warning("request with a wrong API key", extra={"path": app.current_event.path})
    return _error(403, "forbidden", str(exc))


@app.exception_handler(ConfigError)
def not_configured(exc: ConfigError) -> Response[Any]:
    """500: the function lacks configuration (no API key): it refuses rather than run open."""
    logger.error("status function misconfigured", extra={"error": str(exc)})
    return _error(500, "not_configured", "the API is not configured; its operator has been told in the logs")


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
