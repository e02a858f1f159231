"""The one place that builds clients: once per execution environment, lazily, never at import time.

Secrets (the MySQL credentials, a Redis URL with a password, the API key) are read from Secrets Manager
with Powertools Parameters and kept ``secrets_max_age`` seconds (PDFBATCH_SECRETS_MAX_AGE): after a
rotation the next read returns the new value, and get_deps() builds clients with it, without a deploy.
"""

from __future__ import annotations

import functools
from typing import Any

from pdfbatch.config import DEFAULT_IO, PER_FILE_IO, IoTimeouts, Settings
from pdfbatch.errors import ConfigError, DependencyUnavailable
from pdfbatch.services.deps import Deps


def boto3_client(
    service: str,
    settings: Settings,
    endpoint_url: str | None = None,
    io: IoTimeouts = DEFAULT_IO,
    **config: Any,
) -> Any:
    """A boto3 client for ``service`` pointed at AWS_ENDPOINT_URL when set (LocalStack)."""
    import boto3
    from botocore.config import Config

    options: dict[str, Any] = {
        "retries": {"mode": "standard", "max_attempts": io.attempts},
        "connect_timeout": io.connect_seconds,
        "read_timeout": io.read_seconds,
    }
    options.update(config)
    endpoint = endpoint_url or settings.endpoint_url
    if service == "s3" and endpoint:
        # LocalStack (and S3-compatible stores) are reached by path, not by virtual host.
        options.setdefault("s3", {"addressing_style": "path"})
    if service == "s3":
        options.setdefault("signature_version", "s3v4")
    session: Any = boto3.session.Session()
    client = session.client(
        service, region_name=settings.region, endpoint_url=endpoint, config=Config(**options)
    )
    if settings.inject_latency:  # the bench's latency mode; one check per client built, none per call
        from pdfbatch.adapters import latency

        latency.install(client)
    return client


def build_deps(
    settings: Settings, *, need_queue: str = "", ensure_schema: bool = True, io: IoTimeouts = DEFAULT_IO
) -> Deps:
    """Build every adapter from settings; the MySQL and Redis connections open on first use (and the
    ledger's schema is checked then: a dependency down at a cold start fails inside a handler's own
    failure path, not before it).

    ``need_queue``: the queue setting the caller cannot run without (e.g. "work_queue_url"), checked
    now so its absence fails at cold start naming the variable. ``io`` bounds every S3, SQS and MySQL
    call (process_pdf passes PER_FILE_IO).
    """
    from pdfbatch.adapters.events import EventBridgeEvents, bucket_arn
    from pdfbatch.adapters.ledger import MysqlLedger
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.adapters.mysql_callbacks import MysqlCallbackLog
    from pdfbatch.adapters.redis import RedisProgress
    from pdfbatch.adapters.s3 import S3Store
    from pdfbatch.adapters.sqs import SqsQueue
    from pdfbatch.adapters.tenant_keys import MysqlTenantKeys

    settings.require("bucket")
    if need_queue:
        settings.require(need_queue)
    pool = max(10, settings.stage_workers + 2)
    s3 = boto3_client("s3", settings, io=io, max_pool_connections=pool)
    presign = s3
    if settings.public_endpoint_url and settings.public_endpoint_url != settings.endpoint_url:
        presign = boto3_client("s3", settings, endpoint_url=settings.public_endpoint_url)
    mysql = MysqlClient.from_url(settings.mysql_url, io.connect_seconds, min(io.read_seconds, 30))
    ledger = MysqlLedger(mysql, settings.users)
    if ensure_schema:
        mysql.ensure_schema_on_first_use()
    s = settings
    urls = (
        s.work_queue_url,
        s.parked_queue_url,
        s.ocr_queue_url,
        s.callback_queue_url,
        s.callback_slow_queue_url,
    )
    sqs = boto3_client("sqs", settings, io=io, max_pool_connections=pool) if any(urls) else None

    def queue(url: str) -> SqsQueue | None:
        return SqsQueue(sqs, url) if sqs is not None and url else None

    # The client opens no connection until a batch is announced (tally.announce). Its events name this
    # stack's bucket, which the stack's callback rule matches (adapters/events.py).
    events = boto3_client("events", settings, io=io)

    return Deps(
        settings=settings,
        store=S3Store(s3, presign),
        ledger=ledger,
        users=ledger.user_rows,
        progress=RedisProgress.from_url(settings.redis_url, settings.progress_ttl_seconds),
        queue=queue(s.work_queue_url),
        parked=queue(s.parked_queue_url),
        ocr_queue=queue(s.ocr_queue_url),
        callback_queue=queue(s.callback_queue_url),
        slow_callbacks=queue(s.callback_slow_queue_url),
        events=EventBridgeEvents(events, resources=[bucket_arn(events.meta.partition, s.bucket)]),
        callbacks=MysqlCallbackLog(mysql),
        tenants=MysqlTenantKeys(mysql),
    )


@functools.cache
def _secrets_provider(endpoint_url: str | None, region: str) -> Any:
    """One Powertools SecretsProvider per environment: its cache is what keeps reads to one per max_age."""
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    settings = Settings(endpoint_url=endpoint_url, region=region)
    client = boto3_client(
        "secretsmanager", settings, retries={"mode": "standard", "max_attempts": 3}, read_timeout=5
    )
    return SecretsProvider(boto3_client=client)


def read_secrets(settings: Settings) -> Settings:
    """``settings`` completed with the current values of its secrets (each cached secrets_max_age s)."""
    if not (
        settings.mysql_secret
        or settings.redis_secret
        or settings.api_key_secret
        or settings.callback_secret
        or settings.callback_tenant_root
        or settings.named_secret
    ):
        return settings
    from aws_lambda_powertools.utilities.parameters.exceptions import (
        GetParameterError,
        TransformParameterError,
    )

    provider = _secrets_provider(settings.endpoint_url, settings.region)
    age = settings.secrets_max_age

    def read(name: str, transform: str | None = None) -> Any:
        try:
            return provider.get(name, max_age=age, transform=transform)
        except TransformParameterError as exc:
            raise ConfigError(f"the secret {name} is not valid JSON") from exc
        except GetParameterError as exc:
            # Not found, no permission or Secrets Manager unreachable: a retry (or a fix) may help.
            raise DependencyUnavailable("secretsmanager", type(exc.__cause__ or exc).__name__) from exc

    return settings.with_secrets(
        mysql=read(settings.mysql_secret, "json") if settings.mysql_secret else None,
        redis_url=read(settings.redis_secret) if settings.redis_secret else None,
        api_key=read(settings.api_key_secret) if settings.api_key_secret else None,
        callback_key=read(settings.callback_secret) if settings.callback_secret else None,
        callback_root_key=read(settings.callback_tenant_root) if settings.callback_tenant_root else None,
        named_keys=read(settings.named_secret) if settings.named_secret else None,
    )


_override: Deps | None = None
# (need_queue, per_file) -> (the settings they were built with, the deps): rebuilt when a secret's
# value changes.
_built: dict[tuple[str, bool], tuple[Settings, Deps]] = {}


@functools.cache
def _settings() -> Settings:
    return Settings.from_env()


def get_settings() -> Settings:
    """The environment's settings with its secrets' current values (no client built but Secrets Manager's)."""
    if _override is not None:
        return _override.settings
    return read_secrets(_settings())


def get_deps(need_queue: str = "", per_file: bool = False) -> Deps:
    """The execution environment's dependencies: built on first call, then reused across invocations.

    ``per_file`` (process_pdf): every S3, SQS and MySQL call bounded by config.PER_FILE_IO. When a secret
    read again after its max age has a new value (a rotation), new clients are built with it; the old
    ones are dropped (their connections close when they are collected).
    """
    if _override is not None:
        return _override
    settings = get_settings()
    key = (need_queue, per_file)
    built = _built.get(key)
    if built is None or built[0] != settings:
        io = PER_FILE_IO if per_file else DEFAULT_IO
        _built[key] = (settings, build_deps(settings, need_queue=need_queue, io=io))
    return _built[key][1]


def get_file_deps() -> Deps:
    """``get_deps(per_file=True)`` for an SQS handler's message (process_pdf, ocr_pdf).

    A failure here comes before any file work (the secrets, the clients), so the handler's own failure
    path cannot back the message off: SQS shows it again after the queue's visibility timeout. Said in
    the log, since nothing else would say why it came back so late.
    """
    try:
        return get_deps(per_file=True)
    except Exception:
        from pdfbatch.logs import logger

        logger.exception("dependencies unavailable; message left to its visibility timeout")
        raise


def override(deps: Deps | None) -> None:
    """Inject dependencies (tests); None returns to building them from the environment."""
    global _override
    _override = deps
    _built.clear()
    _settings.cache_clear()
    _secrets_provider.cache_clear()
