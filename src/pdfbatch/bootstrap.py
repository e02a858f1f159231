"""The one place that builds clients: once per execution environment, lazily, never at import time."""

from __future__ import annotations

import functools
from typing import Any

from pdfbatch.config import DEFAULT_IO, PER_FILE_IO, IoTimeouts, Settings
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
    return session.client(
        service, region_name=settings.region, endpoint_url=endpoint, config=Config(**options)
    )


def build_deps(
    settings: Settings, *, need_queue: bool = False, ensure_schema: bool = True, io: IoTimeouts = DEFAULT_IO
) -> Deps:
    """Build every adapter from settings; the MySQL and Redis connections open on first use.

    ``io`` bounds every S3, SQS and MySQL call (process_pdf passes PER_FILE_IO).
    """
    from pdfbatch.adapters.mysql import MysqlClient, MysqlLedger
    from pdfbatch.adapters.redis import RedisProgress
    from pdfbatch.adapters.s3 import S3Store
    from pdfbatch.adapters.sqs import SqsQueue

    settings.require("bucket")
    if need_queue:
        settings.require("queue_url")
    pool = max(10, settings.stage_workers + 2)
    s3 = boto3_client("s3", settings, io=io, max_pool_connections=pool)
    presign = s3
    if settings.public_endpoint_url and settings.public_endpoint_url != settings.endpoint_url:
        presign = boto3_client("s3", settings, endpoint_url=settings.public_endpoint_url)
    mysql = MysqlClient.from_url(settings.mysql_url, io.connect_seconds, min(io.read_seconds, 30))
    ledger = MysqlLedger(mysql, settings.users)
    if ensure_schema:
        mysql.ensure_schema()
    queue = parked = None
    if settings.queue_url or settings.parked_queue_url:
        sqs = boto3_client("sqs", settings, io=io, max_pool_connections=pool)
        queue = SqsQueue(sqs, settings.queue_url) if settings.queue_url else None
        parked = SqsQueue(sqs, settings.parked_queue_url) if settings.parked_queue_url else None
    return Deps(
        settings=settings,
        store=S3Store(s3, presign),
        ledger=ledger,
        users=ledger,
        progress=RedisProgress.from_url(settings.redis_url, settings.progress_ttl_seconds),
        queue=queue,
        parked=parked,
    )


_override: Deps | None = None


@functools.cache
def _cached(need_queue: bool, per_file: bool) -> Deps:
    return build_deps(_settings(), need_queue=need_queue, io=PER_FILE_IO if per_file else DEFAULT_IO)


@functools.cache
def _settings() -> Settings:
    return Settings.from_env()


def get_settings() -> Settings:
    """The execution environment's settings, without building any client (for checks before the work)."""
    if _override is not None:
        return _override.settings
    return _settings()


def get_deps(need_queue: bool = False, per_file: bool = False) -> Deps:
    """The execution environment's dependencies: built on first call, then reused across invocations.

    ``per_file`` (process_pdf): every S3, SQS and MySQL call bounded by config.PER_FILE_IO.
    """
    if _override is not None:
        return _override
    return _cached(need_queue, per_file)


def override(deps: Deps | None) -> None:
    """Inject dependencies (tests); None returns to building them from the environment."""
    global _override
    _override = deps
    _cached.cache_clear()
    _settings.cache_clear()
