"""The status API's routes: a table of eight (method, path, route), the API-key rule, and the error table.

``answer(event)`` is the whole API: parse the request (web/http.py), authenticate, call the route
(which calls services/), and shape every error as its JSON answer. Every route needs an API key
(x-api-key) except the upload page (GET /) and the API's own description (GET /openapi.json), which
hold no data: the page asks for the key itself. The admin key sees every batch; a tenant key only its
tenant's, and any other batch is the same 404 as an unknown id (pdfbatch.tenants, services/views.py).
A tenant key is looked up in MySQL on every request, uncached, so a revocation holds from the next
request on. A method the document does not list for a path is 405 with ``Allow``.
tests/unit/test_api_fuzz.py holds the API to its /openapi.json with Schemathesis.

Routing is this table, not Powertools' APIGatewayRestResolver: importing
``aws_lambda_powertools.event_handler`` loads every resolver it has (AppSync's pulls in asyncio), about
a third of the status function's cold start for a feature it does not need (bench section 8).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from pdfbatch import auth, web
from pdfbatch.bootstrap import get_deps, get_settings
from pdfbatch.errors import (
    ConfigError,
    DependencyUnavailable,
    Forbidden,
    InvalidInput,
    NotFound,
    TooManyRequests,
    Unauthenticated,
)
from pdfbatch.logs import logger
from pdfbatch.services import batches, views
from pdfbatch.tenants import ADMIN, Caller
from pdfbatch.web.http import JSON, Request, error, is_text, response

PUBLIC_ROUTES = frozenset({("GET", "/"), ("GET", "/openapi.json")})


# --- routes ---------------------------------------------------------------------------------------


def upload_page(request: Request, caller: Caller) -> dict[str, Any]:
    """The upload page: plain HTML with its script and style inline, allowed by hash in its CSP."""
    page = web.upload_page(get_settings())
    headers = {
        "Content-Security-Policy": page.csp,
        "Cache-Control": "no-cache",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
    }
    return response(200, page.html, "text/html; charset=utf-8", headers)


def openapi(request: Request, caller: Caller) -> dict[str, Any]:
    """The OpenAPI 3.1 description of this API (the file shipped in pdfbatch/web)."""
    return response(200, web.openapi_document(), JSON, {"Cache-Control": "max-age=300"})


def create_batch(request: Request, caller: Caller) -> dict[str, Any]:
    """A new batch id (the caller's tenant owns it) and the presigned POST to upload its ZIP; optionally
    {"callbackUrl": "https://..."}, where the batch's summary is POSTed, signed, when it ends."""
    body = request.json_object()
    unknown = sorted(set(body) - {"callbackUrl"})
    if unknown:
        raise InvalidInput(f"unknown field {unknown[0]!r}" if is_text(unknown[0]) else "unknown field")
    url = body.get("callbackUrl")
    if "callbackUrl" in body and not (isinstance(url, str) and is_text(url)):
        raise InvalidInput("callbackUrl must be a string")  # null too: leave the field out instead
    return response(201, batches.create_batch(get_deps(), caller, url))


def find_batches(request: Request, caller: Caller) -> dict[str, Any]:
    """GET /batches?key=uploads/x.zip: the batches of an object key (dropped with the AWS CLI); without
    ``key``, the caller's recent batches (?status=&since=&until=&tenant=&limit=&cursor=)."""
    filters = {name: request.text(name) for name in ("tenant", "status", "since", "until", "cursor")}
    limit = request.number("limit", 20, most=100)
    key = request.text("key")
    if key is not None:
        if not key:
            raise InvalidInput("query parameter 'key' must not be empty")
        views.list_query(**filters)  # refused as without a key, though a key's batches ignore them
        return response(200, views.find_batches(get_deps(), key, caller=caller))
    body = views.recent_batches(get_deps(), caller=caller, limit=limit, **filters)
    return response(200, body, JSON, {"Cache-Control": "no-store"})


def get_batch(request: Request, caller: Caller, batch_id: str) -> dict[str, Any]:
    """Progress of one batch; clients are told when to poll again while it runs."""
    body = views.batch_status(get_deps(), batch_id, caller=caller)
    headers = {"Cache-Control": "no-store"}
    if body["status"] in ("PENDING", "PROCESSING"):
        headers["Retry-After"] = "1"
    return response(200, body, JSON, headers)


def get_files(request: Request, caller: Caller, batch_id: str) -> dict[str, Any]:
    """Per-file results, paginated: ?limit=&cursor=&outcome=."""
    body = views.list_files(
        get_deps(),
        batch_id,
        cursor=request.text("cursor"),
        limit=request.number("limit", 100, most=1000),
        outcome=request.text("outcome"),
        caller=caller,
    )
    return response(200, body)


def trace_document(request: Request, caller: Caller) -> dict[str, Any]:
    """Every batch entry that held exactly this PDF: GET /files?sha256=<hex>."""
    sha256 = request.text("sha256")
    if not sha256:
        raise InvalidInput("query parameter 'sha256' is required")
    return response(
        200, views.trace_document(get_deps(), sha256, caller=caller), JSON, {"Cache-Control": "no-store"}
    )


def trace_user(request: Request, caller: Caller, user: str) -> dict[str, Any]:
    """The PDF linked to a user and the files that named them: GET /users/{id or email}/files."""
    if not is_text(user):
        raise InvalidInput("the user id is not valid UTF-8")
    return response(
        200, views.trace_user(get_deps(), user, caller=caller), JSON, {"Cache-Control": "no-store"}
    )


Route = Callable[..., dict[str, Any]]
# (method, path as the OpenAPI document writes it, handler); a {parameter} is one path segment. Each
# handler is called with the request, the caller (ADMIN on the public routes) and the path's parameters.
ROUTES: tuple[tuple[str, str, Route], ...] = (
    ("GET", "/", upload_page),
    ("GET", "/openapi.json", openapi),
    ("POST", "/batches", create_batch),
    ("GET", "/batches", find_batches),
    ("GET", "/batches/{batchId}", get_batch),
    ("GET", "/batches/{batchId}/files", get_files),
    ("GET", "/files", trace_document),
    ("GET", "/users/{userId}/files", trace_user),
)


def _pattern(path: str) -> re.Pattern[str]:
    return re.compile(re.sub(r"\{[^}]+\}", "([^/]+)", path.replace(".", r"\.")))


_COMPILED = tuple((method, _pattern(path), run) for method, path, run in ROUTES)


def route(request: Request) -> dict[str, Any]:
    """Every documented route but PUBLIC_ROUTES needs an API key, the admin's or a live tenant key
    (401 without one, 403 with a wrong or revoked one); a method the document does not list for a
    known path is 405, an unknown path 404."""
    allowed = web.methods_of(request.path)
    if allowed and request.method not in allowed:
        allow = {"Allow": ", ".join(sorted(allowed))}
        return error(405, "method_not_allowed", f"{request.method} is not allowed here", allow)
    caller = ADMIN
    if allowed and (request.method, request.path) not in PUBLIC_ROUTES:
        caller = auth.authenticate(
            get_settings().api_key, request.headers.get(auth.HEADER.lower()), _tenant_of
        )
    for method, pattern, run in _COMPILED:
        if method == request.method and (match := pattern.fullmatch(request.path)):
            return run(request, caller, *match.groups())
    return error(404, "not_found", "no such route")


def _tenant_of(key_hash: str) -> str | None:
    """The live tenant of a key hash (one indexed MySQL read), None when there are no tenant keys."""
    tenants = get_deps().tenants
    return tenants.tenant_of(key_hash) if tenants is not None else None


# --- errors: each a JSON answer, looked up by the exception's class and then its bases ----------------


def unauthenticated(request: Request, exc: Exception) -> dict[str, Any]:
    """401: no API key."""
    logger.warning("request without an API key", extra={"path": request.path})
    return error(401, "unauthorized", str(exc), {"WWW-Authenticate": f'ApiKey header="{auth.HEADER}"'})


def forbidden(request: Request, exc: Exception) -> dict[str, Any]:
    """403: an API key that is neither the admin's nor a live tenant key (a revoked one included)."""
    logger.warning("request with a wrong API key", extra={"path": request.path})
    return error(403, "forbidden", str(exc))


def not_configured(request: Request, exc: Exception) -> dict[str, Any]:
    """500: the function lacks configuration (no API key): it refuses rather than run open."""
    logger.error("status function misconfigured", extra={"error": str(exc)})
    return error(500, "not_configured", "the API is not configured; its operator has been told in the logs")


def not_found(request: Request, exc: Exception) -> dict[str, Any]:
    """404 with a JSON error: what was not found (a batch, a document, a user), never whose it is."""
    return error(404, "not_found", _NOT_FOUND.get(str(exc), "no such batch"))


# The messages a 404 may carry; anything else (an S3 key, say) is "no such batch".
_NOT_FOUND = {m: m for m in ("no such batch", "no such document", "no such user")}


def invalid(request: Request, exc: Exception) -> dict[str, Any]:
    """400 with the reason."""
    return error(400, "invalid_input", str(exc))


def too_many(request: Request, exc: Exception) -> dict[str, Any]:
    """429 with Retry-After: the caller is over a documented limit (PDFBATCH_MAX_PENDING_BATCHES)."""
    wait = exc.retry_after if isinstance(exc, TooManyRequests) else 60
    return error(429, "too_many_requests", str(exc), {"Retry-After": str(wait)})


def unavailable(request: Request, exc: Exception) -> dict[str, Any]:
    """503: a dependency is down; the client may retry."""
    dependency = exc.dependency if isinstance(exc, DependencyUnavailable) else "a dependency"
    logger.error("dependency unavailable", extra={"dependency": dependency})
    return error(503, "unavailable", f"{dependency} is unavailable, try again shortly")


ERRORS: Mapping[type[Exception], Callable[[Request, Exception], dict[str, Any]]] = {
    Unauthenticated: unauthenticated,
    Forbidden: forbidden,
    ConfigError: not_configured,
    NotFound: not_found,
    InvalidInput: invalid,
    TooManyRequests: too_many,
    DependencyUnavailable: unavailable,
}


def answer(event: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to an API Gateway proxy event: the route's, or the error table's for what it raised."""
    request = Request.of(event)
    try:
        return route(request)
    except Exception as exc:
        for cls in type(exc).__mro__:
            shape = ERRORS.get(cls)
            if shape is not None:
                return shape(request, exc)
        raise
