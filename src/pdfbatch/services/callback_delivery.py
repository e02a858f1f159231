"""Signed callbacks: a batch's callbackUrl kept at creation, its summary POSTed once it ends, retried.

How a delivery travels (docs/ARCHITECTURE.md):
1. ``POST /batches`` with ``callbackUrl``: ``check`` checks the URL (pdfbatch.callback_security.check_url)
   and ``register`` keeps it (``CallbackLog.set_url``). A batch created without one (POST /batches
   without the field, a ZIP dropped under uploads/{tenant}/) keeps its tenant's default callback URL
   instead, if the tenant has one then (``keep_default``; set with `pdfbatch keys set-callback`).
2. The batch ends: ``tally.announce`` writes reports/{id}/summary.json, then puts the completion event.
   An EventBridge rule sends every pdfbatch completion event to the callback queue, so the functions
   that finish batches need no right or code for callbacks: the event is the enqueue.
3. deliver_callbacks reads each message (``parse_message``): an event is the batch's first delivery,
   its id derived from (batchId, completedAt), so a duplicate event is the same delivery; a replay
   (``pdfbatch callbacks BATCH --replay``) carries a fresh id.
4. ``deliver``: the URL is checked again (resolved, every address checked), the summary read from S3
   and POSTed, signed, to the checked address. Every attempt is recorded first (``begin_attempt``,
   one row per delivery and SQS receive: a duplicate message finds its row taken and does nothing),
   then its answer. A failure hides the message for ``redelivery.callback_retry_delay`` and fails it; after
   PDFBATCH_CALLBACK_ATTEMPTS receives SQS moves it to the callback DLQ (replay it once fixed).
5. Two lanes, so one slow receiver cannot hold up everybody's deliveries. Every attempt has one deadline
   for connect, headers and body (adapters/webhook.py): 3 s on the fast lane (the callback queue), where
   every delivery starts. An attempt that runs out is recorded (``timeout``) like any failure, and its
   delivery moves to the slow lane (SlowCallbackQueue, after the backoff), where each attempt has 10 s
   and the lane's own concurrency: a slow receiver then waits on slow receivers only. A moved message
   carries how many attempts came before (``attemptsBefore``), so attempt numbers go on; on the slow
   lane, PDFBATCH_CALLBACK_ATTEMPTS more receives lead to the DLQ.
"""

from __future__ import annotations

import functools
import hashlib
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pdfbatch import announcement, callback_security
from pdfbatch.adapters.webhook import PostResult
from pdfbatch.config import Settings
from pdfbatch.errors import ConfigError, InvalidInput, NotFound
from pdfbatch.logs import logger
from pdfbatch.model import FINAL_STATUSES, is_batch_id
from pdfbatch.ports import BatchRow, CallbackAttempt, CallbackLog, TenantKeys
from pdfbatch.services import redelivery
from pdfbatch.services.deps import Deps, iso

FIRST, REPLAY = "first", "replay"
FAST, SLOW = "fast", "slow"  # the callback lanes (5. above)
Post = Callable[[callback_security.Target, bytes, dict[str, str], float], PostResult]


class DeliveryFailed(Exception):
    """This attempt did not get a 2xx: the message goes back to the queue (or, at the last, to the DLQ)."""

    def __init__(self, error: str | None) -> None:
        super().__init__(error or "failed")
        self.error = error


@dataclass(frozen=True)
class Delivery:
    """One delivery of a batch's summary: the same id on every retry of it."""

    batch_id: str
    delivery_id: str
    kind: str  # FIRST or REPLAY
    attempts_before: int = 0  # attempts made before this message (on the fast lane, for a moved one)

    def to_message(self) -> dict[str, Any]:
        """The delivery as a queue message (a replay, or one moved to the slow lane)."""
        return {
            "batchId": self.batch_id,
            "deliveryId": self.delivery_id,
            "kind": self.kind,
            "attemptsBefore": self.attempts_before,
        }


@functools.cache
def _allow_list(text: str) -> callback_security.AllowList:
    return callback_security.AllowList.parse(text)


@functools.cache
def _port_list(text: str) -> callback_security.PortList:
    return callback_security.PortList.parse(text)


def check(
    settings: Settings, url: str, resolver: callback_security.Resolver = callback_security.resolve
) -> callback_security.Target:
    """The URL's Target if the settings let pdfbatch call it; InvalidInput saying why not."""
    try:
        return _check_url(settings, url, resolver)
    except callback_security.CallbackUrlError as exc:
        raise InvalidInput(str(exc)) from exc


def _check_url(
    settings: Settings, url: str, resolver: callback_security.Resolver
) -> callback_security.Target:
    return callback_security.check_url(
        url,
        allow_http=settings.callback_allow_http,
        allow=_allow_list(settings.callback_allow),
        ports=_port_list(settings.callback_ports),
        resolver=resolver,
    )


def register(deps: Deps, batch_id: str, url: str) -> None:
    """Keep a new batch's callback URL (POST /batches, once ``check`` accepted it)."""
    if deps.callbacks is None:
        raise ConfigError("callbacks are not configured here")
    deps.callbacks.set_url(batch_id, url, deps.clock())


def url_for_new_batch(
    explicit: str | None, owner: str | None, default_of: Callable[[str], str | None]
) -> str | None:
    """Where a new batch's summary will go: the callbackUrl given with it (POST /batches) if any, else
    its owner's default callback URL as it is now; a batch of the admin's (owner None) has no default."""
    if explicit is not None:
        return explicit
    return default_of(owner) if owner is not None else None


def keep_default(deps: Deps, batch_id: str, owner: str | None) -> str | None:
    """Keep a new batch's owner's default callback URL as the batch's own (the URL it returns), if any.

    Fixed when the batch is created, as its owner is: a default set, changed or cleared later (`pdfbatch
    keys set-callback`) does not redirect a batch already running, and a replay goes where the first
    delivery went. Not checked again here: it was checked when set, and every attempt checks it again.
    """
    if owner is None or deps.tenants is None or deps.callbacks is None:
        return None
    url = url_for_new_batch(None, owner, deps.tenants.callback_of)
    if url is not None:
        register(deps, batch_id, url)
    return url


def set_default(
    keys: TenantKeys,
    settings: Settings,
    tenant: str,
    url: str | None,
    resolver: callback_security.Resolver = callback_security.resolve,
) -> str | None:
    """`pdfbatch keys set-callback`: set (or clear, with None) a tenant's default callback URL.

    Checked exactly as a POSTed callbackUrl (``check``: InvalidInput saying why not); only a tenant
    that has, or had, a key may have one. Returns the URL's origin (no path or query) to show.
    """
    from pdfbatch.tenants import check_tenant

    check_tenant(tenant)
    if url is not None:
        check(settings, url, resolver)
    if url is not None and not any(k.tenant == tenant for k in keys.list_keys()):
        raise InvalidInput(f"no tenant {tenant!r}: create its key first (`pdfbatch keys create`)")
    keys.set_callback(tenant, url)
    return origin_of(url)


def origin_of(url: str | None) -> str | None:
    """A callback URL's scheme, host and port, never its path or query (what may be shown or logged)."""
    if url is None:
        return None
    try:
        scheme, host, port, _ = callback_security.parse_url(url, allow_http=True)
    except callback_security.CallbackUrlError:
        return None
    return callback_security.Target(scheme, host, port, "/", ()).origin


# What GET /batches/{id} says of an attempt's error: a class, not the recorded detail (which `pdfbatch
# callbacks` and the logs show the operator). A refused connection, a reset and a TLS failure all read
# "unreachable", so a callback URL cannot tell what answers on a host.
TENANT_ERRORS = ("http_status", "timeout", "unreachable", "blocked", "internal")


def tenant_error(error: str | None) -> str | None:
    """The class of a recorded attempt error a tenant is shown (one of TENANT_ERRORS), None for none."""
    import builtins
    import http.client

    if error is None:
        return None
    if error.startswith("http_"):
        return "http_status"
    if error == "timeout":
        return "timeout"
    if error in ("blocked_address", "blocked_port"):
        return "blocked"
    network = getattr(builtins, error, None), getattr(http.client, error, None)
    if (
        error == "unresolved"
        or error.startswith("tls:")
        or any(
            isinstance(cls, type) and issubclass(cls, (OSError, http.client.HTTPException)) for cls in network
        )
    ):
        return "unreachable"
    return "internal"  # the summary could not be read (S3 down, say): retried like any failure


def state_of(url: str, rows: Sequence[CallbackAttempt]) -> dict[str, Any]:
    """GET /batches/{id}'s ``callback``: the URL's host and the delivery's state, from its attempts.

    "pending": no attempt answered yet (the batch runs, or its first POST is on its way); "delivered":
    an attempt got a 2xx; "failing": attempts answered, none with a 2xx (retried with backoff; after
    the last one the operator replays it). The last answered attempt's HTTP status or error class
    (``tenant_error``: coarse, the detail is the operator's).
    """
    try:
        host: str | None = callback_security.parse_url(url, allow_http=True)[1]
    except callback_security.CallbackUrlError:
        host = None
    answered = [a for a in rows if a.duration_ms is not None]
    last = max(answered, key=lambda a: (a.started_at, a.attempt), default=None)
    if any(a.http_status is not None and 200 <= a.http_status < 300 for a in answered):
        state = "delivered"
    else:
        state = "failing" if answered else "pending"
    return {
        "host": host,
        "state": state,
        "attempts": len(answered),
        "lastAttemptAt": iso(last.started_at) if last is not None else None,
        "lastHttpStatus": last.http_status if last is not None else None,
        "lastError": tenant_error(last.error) if last is not None else None,
    }


def callback_url(deps: Deps, batch: BatchRow) -> str | None:
    """Where a batch's summary goes: the URL kept for it at creation (its callbackUrl, or its tenant's
    default then: ``keep_default``), so deliveries, replays and `pdfbatch callbacks` all follow it."""
    return deps.callbacks.url_of(batch.batch_id) if deps.callbacks is not None else None


def delivery_id_of(batch_id: str, completed_at: Any) -> str:
    """A completion's delivery id: the same for every copy of its event, another for a later completion."""
    return hashlib.sha256(f"{batch_id}\x00{completed_at}".encode()).hexdigest()[:32]


def parse_message(body: str) -> Delivery:
    """A callback queue message: a completion event (EventBridge) or a replay; InvalidInput otherwise."""
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise InvalidInput("not JSON") from exc
    if not isinstance(data, dict):
        raise InvalidInput("not a JSON object")
    detail = data.get("detail")
    if data.get("source") == announcement.EVENT_SOURCE and isinstance(detail, dict):
        batch_id = detail.get("batchId")
        if not isinstance(batch_id, str) or not is_batch_id(batch_id):
            raise InvalidInput("event without a batch id")
        return Delivery(batch_id, delivery_id_of(batch_id, detail.get("completedAt")), FIRST)
    batch_id, delivery_id = data.get("batchId"), data.get("deliveryId")
    if not (isinstance(batch_id, str) and is_batch_id(batch_id)):
        raise InvalidInput("message without a batch id")
    if not (isinstance(delivery_id, str) and is_batch_id(delivery_id)):
        raise InvalidInput("message without a delivery id")
    before = data.get("attemptsBefore", 0)
    if not isinstance(before, int) or isinstance(before, bool) or not 0 <= before <= 1000:
        raise InvalidInput("message with a bad attemptsBefore")
    kind = FIRST if data.get("kind") == FIRST else REPLAY
    return Delivery(batch_id, delivery_id, kind, before)


def deliver(
    deps: Deps,
    message: Delivery,
    attempt: int,
    receipt_handle: str | None,
    post: Post | None = None,
    resolver: callback_security.Resolver = callback_security.resolve,
    *,
    lane: str = FAST,
) -> str:
    """One attempt of a delivery; returns what happened, raises DeliveryFailed after backing it off.

    ``attempt`` is the message's receive count on its lane's queue. "delivered", "moved_to_slow_lane"
    (it timed out on the fast lane: recorded, and queued on the slow lane after its backoff), or nothing
    to do: "no_batch" (not this deployment's, or not final), "no_callback", "already_delivered" (a 2xx
    is recorded for this delivery), "duplicate" (this attempt is recorded already: another copy of the
    message has it).
    """
    log = _log(deps)
    s = deps.settings
    received = attempt
    attempt = message.attempts_before + received  # the delivery's attempt number, across both lanes
    batch = deps.ledger.get_batch(message.batch_id)
    if batch is None or batch.status not in FINAL_STATUSES:
        return "no_batch"
    url = callback_url(deps, batch)
    if url is None:
        return "no_callback"
    from pdfbatch.tenants import signing_secrets

    keys = signing_secrets(deps.tenants, s.callback_root_key, s.callback_key, batch.tenant, deps.clock())
    if (
        batch.tenant is not None
        and deps.tenants is not None
        and deps.tenants.signing_ids(batch.tenant) is None
    ):
        logger.warning("tenant signs with the shared secret: `pdfbatch keys rotate-secret` gives it its own")
    if log.delivered(message.delivery_id):
        return "already_delivered"
    if not log.begin_attempt(message.batch_id, message.delivery_id, attempt, message.kind, deps.clock()):
        return "duplicate"
    started = time.monotonic()
    try:
        result = _attempt(deps, message, url, post, resolver, keys=keys, tenant=batch.tenant or "", lane=lane)
    except Exception as exc:
        # S3 down, say: recorded as this attempt's error, then SQS retries the message as it is.
        log.finish_attempt(
            message.delivery_id,
            attempt,
            None,
            type(exc).__name__[:64],
            int((time.monotonic() - started) * 1000),
        )
        raise
    log.finish_attempt(message.delivery_id, attempt, result.status, result.error, result.duration_ms)
    extra = {
        "delivery_id": message.delivery_id,
        "attempt": attempt,
        "kind": message.kind,
        "http_status": result.status,
        "error": result.error,
        "duration_ms": result.duration_ms,
        "lane": lane,
    }
    if result.delivered:
        logger.info("callback delivered", extra=extra)
        return "delivered"
    if lane == FAST and result.error == "timeout" and deps.slow_callbacks is not None:
        # Sent before this message is deleted (it is, once this returns): a crash in between sends it
        # twice, and the second copy finds its attempt recorded ("duplicate") or the delivery done.
        delay = min(900, redelivery.callback_retry_delay(s, attempt))
        moved = Delivery(message.batch_id, message.delivery_id, message.kind, attempt)
        deps.slow_callbacks.send_json(moved.to_message(), delay)
        logger.warning("callback timed out; moved to the slow lane", extra={**extra, "retry_in": delay})
        return "moved_to_slow_lane"
    if received < s.callback_attempts:
        delay = redelivery.callback_retry_delay(s, attempt)
        if receipt_handle is not None:
            _back_off(deps, receipt_handle, delay, lane)
        logger.warning("callback failed; retried later", extra={**extra, "retry_in": delay})
    else:
        # Visible at once, so SQS moves it to the DLQ now rather than after the visibility timeout.
        if receipt_handle is not None:
            _back_off(deps, receipt_handle, 0, lane)
        logger.error("callback failed on its last attempt; its message goes to the DLQ", extra=extra)
    raise DeliveryFailed(result.error)


def _attempt(
    deps: Deps,
    message: Delivery,
    url: str,
    post: Post | None,
    resolver: callback_security.Resolver,
    *,
    keys: Sequence[str],
    tenant: str,
    lane: str = FAST,
) -> PostResult:
    """Check the URL again, read the summary, sign it (for its tenant and this URL) and POST it to the
    checked address."""
    s = deps.settings
    started = time.monotonic()
    try:
        target = _check_url(s, url, resolver)
    except callback_security.CallbackUrlError as exc:
        # not sent; "unresolved" may pass on a later attempt, "blocked_address" only if DNS changes,
        # "blocked_port" only if the operator allows the port (a tenant's default set before the rule)
        if isinstance(exc, callback_security.UnresolvedHost):
            error = "unresolved"
        else:
            error = "blocked_port" if isinstance(exc, callback_security.BlockedPort) else "blocked_address"
        return PostResult(None, error, int((time.monotonic() - started) * 1000))
    body = deps.store.get_bytes(s.bucket, announcement.report_keys(message.batch_id)["summary"])
    headers = {
        callback_security.SIGNATURE_HEADER: callback_security.sign(
            keys, body, int(deps.clock()), tenant=tenant, url=url
        ),
        callback_security.TENANT_HEADER: tenant,
        callback_security.DELIVERY_HEADER: message.delivery_id,
    }
    if post is None:
        from pdfbatch.adapters.webhook import post as http_post

        post = http_post
    deadline = s.callback_slow_timeout_seconds if lane == SLOW else s.callback_timeout_seconds
    return post(target, body, headers, deadline)


def _back_off(deps: Deps, receipt_handle: str, delay: int, lane: str = FAST) -> None:
    queue = deps.slow_callbacks if lane == SLOW else deps.callback_queue
    if queue is None:
        raise ConfigError(
            f"the {lane} callback queue is not set (PDFBATCH_CALLBACK_QUEUE_URL, _CALLBACK_SLOW_QUEUE_URL)"
        )
    redelivery.change_visibility(queue, receipt_handle, delay)


def _log(deps: Deps) -> CallbackLog:
    if deps.callbacks is None:
        raise ConfigError("callbacks are not configured here")
    return deps.callbacks


def replay(deps: Deps, batch_id: str, send: Callable[[Mapping[str, Any]], None]) -> str:
    """Queue a new delivery of a final batch's summary (new delivery id, same body); return its id."""
    batch = deps.ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    if batch.status not in FINAL_STATUSES or batch.announced_at is None:
        raise InvalidInput(f"batch {batch_id} has no summary to send yet (it is {batch.status})")
    if callback_url(deps, batch) is None:
        raise InvalidInput(f"batch {batch_id} has no callbackUrl")
    delivery_id = secrets.token_hex(16)
    send(Delivery(batch_id, delivery_id, REPLAY).to_message())
    logger.info("callback replay queued", extra={"batch_id": batch_id, "delivery_id": delivery_id})
    return delivery_id


def attempts(deps: Deps, batch_id: str) -> dict[str, Any]:
    """`pdfbatch callbacks BATCH`: the batch's callback origin (no path or query) and every attempt."""
    batch = deps.ledger.get_batch(batch_id) if is_batch_id(batch_id) else None
    if batch is None:
        raise NotFound("no such batch")
    origin = origin_of(callback_url(deps, batch))
    rows = _log(deps).attempts(batch_id)
    return {
        "batchId": batch_id,
        "status": batch.status,
        "callback": origin,
        "delivered": any(a.http_status is not None and 200 <= a.http_status < 300 for a in rows),
        "attempts": [
            {
                "deliveryId": a.delivery_id,
                "kind": a.kind,
                "attempt": a.attempt,
                "at": iso(a.started_at),
                "httpStatus": a.http_status,
                "error": a.error if a.duration_ms is not None else "in_flight_or_died",
                "durationMs": a.duration_ms,
            }
            for a in rows
        ],
    }
