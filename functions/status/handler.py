"""status: the REST API (API Gateway proxy) for creating batches and polling their progress.

It also runs, on a schedule (SettleSchedule, every minute), what a read would settle for batches
nobody reads: expired uploads, lost completions, due announcements (services/settle.py).

Every route needs an API key (x-api-key) except the upload page (GET /) and the API's own
description (GET /openapi.json), which hold no data: the page asks for the key itself. The admin key
sees every batch; a tenant key only its tenant's, and any other batch is the same 404 as an unknown id
(pdfbatch.tenants, services/views.py). A tenant key is looked up in MySQL on every request, uncached,
so a revocation holds from the next request on.

Every malformed request is a 4xx with a JSON error, never a raise (API Gateway's 502): query values
are read through ``_query`` (text only: a lone surrogate is 400) and numbers through ``_number``
(ASCII digits only), a JSON body through ``json_object`` (at most MAX_BODY_BYTES of UTF-8, nested at
most MAX_DEPTH deep, both checked before it is parsed: 100,000 ``[`` made ``json.loads`` recurse out
of the stack), and a method the document does not list for a path is 405 with ``Allow``.
tests/unit/test_api_fuzz.py holds the handler to its /openapi.json with Schemathesis.

Routing is a table of six routes, not Powertools' APIGatewayRestResolver: importing
``aws_lambda_powertools.event_handler`` loads every resolver it has (AppSync's pulls in asyncio), about
a third of this function's cold start for a feature it does not need (bench section 8).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from aws_lambda_powertools.utilities.typing import LambdaContext

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

PUBLIC_ROUTES = frozenset({("GET", "/"), ("GET", "/openapi.json")})
JSON = "application/json"
_DIGITS = re.compile(r"[0-9]+")  # ASCII: str.isdigit() also says yes to "²", which int() refuses
# A JSON body's limits (docs/API.md): POST /batches' body is one short object; these leave room.
MAX_BODY_BYTES = 16 * 1024
MAX_DEPTH = 16
# What a depth count reads: a string (escapes included) or one bracket; everything else is skipped.
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.DOTALL)


class Request(NamedTuple):
    """What a route reads of an API Gateway (REST, proxy) event.

    (A NamedTuple, not a dataclass: Lambda and the tests load this file as a module of its own.)"""

    method: str
    path: str  # without a trailing slash (but "/")
    headers: Mapping[str, str]  # names lowercased: HTTP header names are case-insensitive
    query: Mapping[str, str]
    body: str | None = None

    @classmethod
    def of(cls, event: Mapping[str, Any]) -> Request:
        """The request an event carries."""
        path = str(event.get("path") or "/")
        return cls(
            method=str(event.get("httpMethod") or "GET").upper(),
            path=path.rstrip("/") or "/",
            headers={str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()},
            query=dict(event.get("queryStringParameters") or {}),
            body=_body_text(event),
        )

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object ({} when there is none); InvalidInput when it is not one."""
        if self.body is None or not self.body.strip():
            return {}
        check_json_limits(self.body)
        try:
            value = json.loads(self.body)
        except ValueError as exc:
            raise InvalidInput("the body must be a JSON object") from exc
        if not isinstance(value, dict):
            raise InvalidInput("the body must be a JSON object")
        return value

    def text(self, name: str) -> str | None:
        """A query parameter as API Gateway decoded it; InvalidInput when it is not text.

        Bytes that are not UTF-8 (``%ED%A0%80``) arrive as lone surrogates, which no store, hash or
        JSON encoder accepts: refused here, once, for every parameter a route reads.
        """
        value = self.query.get(name)
        if value is not None and not _is_text(value):
            raise InvalidInput(f"query parameter {name!r} is not valid UTF-8")
        return value

    def number(self, name: str, default: int, most: int) -> int:
        """A whole-number query parameter (ASCII digits), capped at ``most`` without parsing huge ones."""
        raw = self.text(name)
        if raw is None:
            return default
        if not _DIGITS.fullmatch(raw):  # "" too: the parameter is there, without a number
            raise InvalidInput(f"{name} must be a whole number")
        digits = raw.lstrip("0")
        return most if len(digits) > len(str(most)) else min(int(digits or "0"), most)


def check_json_limits(body: str) -> None:
    """InvalidInput unless ``body`` is UTF-8 text of at most MAX_BODY_BYTES nested at most MAX_DEPTH deep.

    Checked before ``json.loads`` sees it: the parser recurses once per level (a deep enough body is a
    RecursionError, not a ValueError), and a size cap bounds what the depth count and parse cost."""
    if len(body) > MAX_BODY_BYTES or len(body.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
        raise InvalidInput(f"the body must be at most {MAX_BODY_BYTES} bytes")
    if not _is_text(body):
        raise InvalidInput("the body is not valid UTF-8")
    if json_depth(body) > MAX_DEPTH:
        raise InvalidInput(f"the body must be nested at most {MAX_DEPTH} deep")


def json_depth(text: str) -> int:
    """The deepest nesting of brackets in ``text`` outside JSON strings (whether or not it is JSON)."""
    depth = deepest = 0
    for token in _JSON_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in ("[", "{"):
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in ("]", "}"):
            depth = max(depth - 1, 0)
    return deepest


def _body_text(event: Mapping[str, Any]) -> str | None:
    body = event.get("body")
    if body is None:
        return None
    if event.get("isBase64Encoded"):
        import base64
        import binascii

        try:
            return base64.b64decode(str(body)).decode("utf-8", "surrogateescape")
        except (binascii.Error, ValueError):
            return "\x00"  # not JSON: refused by json_object
    return str(body)


def _is_text(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def response(
    status: int, body: Any, content_type: str = JSON, headers: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A proxy response; a body that is not text is sent as compact JSON."""
    text = body if isinstance(body, str) else json.dumps(body, separators=(",", ":"))
    return {
        "statusCode": status,
        "headers": {**(headers or {}), "Content-Type": content_type},
        "body": text,
        "isBase64Encoded": False,
    }


def _error(status: int, code: str, message: str, headers: Mapping[str, str] | None = None) -> dict[str, Any]:
    return response(status, {"error": code, "message": message}, headers=headers)


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
        raise InvalidInput(f"unknown field {unknown[0]!r}" if _is_text(unknown[0]) else "unknown field")
    url = body.get("callbackUrl")
    if "callbackUrl" in body and not (isinstance(url, str) and _is_text(url)):
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
    if not _is_text(user):
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
        return _error(405, "method_not_allowed", f"{request.method} is not allowed here", allow)
    caller = ADMIN
    if allowed and (request.method, request.path) not in PUBLIC_ROUTES:
        caller = auth.authenticate(
            get_settings().api_key, request.headers.get(auth.HEADER.lower()), _tenant_of
        )
    for method, pattern, run in _COMPILED:
        if method == request.method and (match := pattern.fullmatch(request.path)):
            return run(request, caller, *match.groups())
    return _error(404, "not_found", "no such route")


def _tenant_of(key_hash: str) -> str | None:
    """The live tenant of a key hash (one indexed MySQL read), None when there are no tenant keys."""
    tenants = get_deps().tenants
    return tenants.tenant_of(key_hash) if tenants is not None else None


# --- errors: each a JSON answer, looked up by the exception's class and then its bases ----------------


def unauthenticated(request: Request, exc: Exception) -> dict[str, Any]:
    """401: no API key."""
    logger.warning("request without an API key", extra={"path": request.path})
    return _error(401, "unauthorized", str(exc), {"WWW-Authenticate": f'ApiKey header="{auth.HEADER}"'})


def forbidden(request: Request, exc: Exception) -> dict[str, Any]:
    """403: an API key that is neither the admin's nor a live tenant key (a revoked one included)."""
    logger.warning("request with a wrong API key", extra={"path": request.path})
    return _error(403, "forbidden", str(exc))


def not_configured(request: Request, exc: Exception) -> dict[str, Any]:
    """500: the function lacks configuration (no API key): it refuses rather than run open."""
    logger.error("status function misconfigured", extra={"error": str(exc)})
    return _error(500, "not_configured", "the API is not configured; its operator has been told in the logs")


def not_found(request: Request, exc: Exception) -> dict[str, Any]:
    """404 with a JSON error: what was not found (a batch, a document, a user), never whose it is."""
    return _error(404, "not_found", _NOT_FOUND.get(str(exc), "no such batch"))


# The messages a 404 may carry; anything else (an S3 key, say) is "no such batch".
_NOT_FOUND = {m: m for m in ("no such batch", "no such document", "no such user")}


def invalid(request: Request, exc: Exception) -> dict[str, Any]:
    """400 with the reason."""
    return _error(400, "invalid_input", str(exc))


def too_many(request: Request, exc: Exception) -> dict[str, Any]:
    """429 with Retry-After: the caller is over a documented limit (PDFBATCH_MAX_PENDING_BATCHES)."""
    wait = exc.retry_after if isinstance(exc, TooManyRequests) else 60
    return _error(429, "too_many_requests", str(exc), {"Retry-After": str(wait)})


def unavailable(request: Request, exc: Exception) -> dict[str, Any]:
    """503: a dependency is down; the client may retry."""
    dependency = exc.dependency if isinstance(exc, DependencyUnavailable) else "a dependency"
    logger.error("dependency unavailable", extra={"dependency": dependency})
    return _error(503, "unavailable", f"{dependency} is unavailable, try again shortly")


ERRORS: Mapping[type[Exception], Callable[[Request, Exception], dict[str, Any]]] = {
    Unauthenticated: unauthenticated,
    Forbidden: forbidden,
    ConfigError: not_configured,
    NotFound: not_found,
    InvalidInput: invalid,
    TooManyRequests: too_many,
    DependencyUnavailable: unavailable,
}


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
    request = Request.of(event)
    try:
        return route(request)
    except Exception as exc:
        for cls in type(exc).__mro__:
            answer = ERRORS.get(cls)
            if answer is not None:
                return answer(request, exc)
        raise
