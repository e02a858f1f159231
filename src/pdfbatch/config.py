"""Every environment variable pdfbatch reads, in one place, read once into a frozen Settings."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import quote, unquote, urlparse, urlsplit

from pdfbatch.errors import ConfigError

DEFAULT_MYSQL_URL = "mysql://root@127.0.0.1:3306/pdfbatch"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
# The local stack the CLI, the tests, the bench and the soak use when AWS_ENDPOINT_URL is unset.
LOCALSTACK_PORT_ENV = "PDFBATCH_LOCALSTACK_PORT"
DEFAULT_LOCALSTACK_PORT = 4566

# PDFBATCH_MATCH_POLICY: which user a PDF is linked to (see pdfbatch.matching, docs/MATCHING.md).
#   unique: the only user named on the first page that names one (two or more: ambiguous, nobody)
#   first:  the first user's address in document order (still ambiguous when two rows share it)
MATCH_POLICIES = ("unique", "first")

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,63}(\.[A-Za-z_][A-Za-z0-9_$]{0,63})?$")


@dataclass(frozen=True)
class Limits:
    """What unzip and process_pdf accept; every value is configurable (docs/CONFIGURATION.md)."""

    max_zip_bytes: int = 5 * 1024**3  # PDFBATCH_MAX_ZIP_BYTES
    max_entries: int = 100_000  # PDFBATCH_MAX_ENTRIES (all entries, PDFs or not)
    max_pdf_bytes: int = 100 * 1024**2  # PDFBATCH_MAX_PDF_BYTES (uncompressed, per PDF)
    max_ratio: float = 200.0  # PDFBATCH_MAX_RATIO (uncompressed / compressed, per entry)
    max_pages: int = 500  # PDFBATCH_MAX_PAGES read per PDF before giving up on finding an email
    file_budget_seconds: float = 20.0  # PDFBATCH_FILE_BUDGET_SECONDS of text extraction per PDF
    ocr_max_pages: int = 5  # PDFBATCH_OCR_MAX_PAGES a scan is read by OCR before ocr_page_limit
    ocr_budget_seconds: float = 30.0  # PDFBATCH_OCR_BUDGET_SECONDS of OCR (render and read) per scan


@dataclass(frozen=True)
class IoTimeouts:
    """How long one call to S3, SQS or MySQL may take: connect and read timeouts, and attempts."""

    connect_seconds: float
    read_seconds: float
    attempts: int  # botocore's standard retry mode counts the first try

    def worst_call_seconds(self) -> float:
        """The longest one call can block when its dependency hangs (every attempt timing out)."""
        return self.attempts * (self.connect_seconds + self.read_seconds)


# unzip, status and the CLI: patient (unzip has 15 minutes; a failed unzip fails its whole batch).
DEFAULT_IO = IoTimeouts(connect_seconds=5, read_seconds=60, attempts=5)
# process_pdf: every call of a file is bounded, so one file's work outside its extraction budget is too
# (services/processing.py FILE_MARGIN_SECONDS, the template's timeout). A 100 MiB staged PDF still
# downloads well inside it: the read timeout is per socket read, not per object.
PER_FILE_IO = IoTimeouts(connect_seconds=3, read_seconds=10, attempts=2)


@dataclass(frozen=True)
class UsersTable:
    """The customer's users table: only three columns are needed, their names configurable."""

    table: str = "users"  # PDFBATCH_USERS_TABLE (may be db.table)
    id_column: str = "id"  # PDFBATCH_USERS_ID_COLUMN
    email_column: str = "email"  # PDFBATCH_USERS_EMAIL_COLUMN
    pdf_url_column: str = "pdf_url"  # PDFBATCH_USERS_PDF_URL_COLUMN


@dataclass(frozen=True)
class Settings:
    """Configuration of one process, read from the environment once."""

    bucket: str = ""  # PDFBATCH_BUCKET: uploads/, staging/ and pdfs/ live here
    # One setting per queue, each naming the same queue in every function that reads it.
    work_queue_url: str = ""  # PDFBATCH_WORK_QUEUE_URL: the work queue (unzip sends, process_pdf backs off)
    ocr_queue_url: str = ""  # PDFBATCH_OCR_QUEUE_URL: the OCR queue (process_pdf sends, ocr_pdf backs off)
    callback_queue_url: str = ""  # PDFBATCH_CALLBACK_QUEUE_URL: the callback queue (its fast lane)
    mysql_url: str = DEFAULT_MYSQL_URL  # PDFBATCH_MYSQL_URL (on AWS: where, not who; see mysql_secret)
    redis_url: str = DEFAULT_REDIS_URL  # PDFBATCH_REDIS_URL
    # Secrets Manager ARNs (or names); their values are read by bootstrap.read_secrets, never from env.
    mysql_secret: str = ""  # PDFBATCH_MYSQL_SECRET: {"username", "password"} for PDFBATCH_MYSQL_URL
    redis_secret: str = ""  # PDFBATCH_REDIS_SECRET: the whole redis URL, password included
    api_key_secret: str = ""  # PDFBATCH_API_KEY_SECRET: the REST API's key
    secrets_max_age: int = 300  # PDFBATCH_SECRETS_MAX_AGE: seconds a secret is reused before reading it again
    endpoint_url: str | None = None  # AWS_ENDPOINT_URL (LocalStack); None on AWS
    public_endpoint_url: str | None = None  # PDFBATCH_PUBLIC_ENDPOINT_URL: S3 endpoint browsers reach
    region: str = "us-east-1"  # AWS_REGION / AWS_DEFAULT_REGION
    progress_ttl_seconds: int = 3600  # PDFBATCH_PROGRESS_TTL_SECONDS
    upload_max_bytes: int = 5 * 1024**3  # PDFBATCH_UPLOAD_MAX_BYTES (presigned POST policy)
    upload_url_expires_seconds: int = 3600  # PDFBATCH_UPLOAD_URL_EXPIRES_SECONDS
    # PDFBATCH_MAX_PENDING_BATCHES: a tenant's (or the admin's) batches created and not uploaded to yet;
    # POST /batches past it is 429 with Retry-After (0: no limit).
    max_pending_batches: int = 100
    max_receive_count: int = 5  # PDFBATCH_MAX_RECEIVE_COUNT: the queue's redrive maxReceiveCount
    stage_workers: int = 32  # PDFBATCH_STAGE_WORKERS: parallel staging PUTs in unzip (1: sequential)
    pdf_url_prefix: str = "s3://"  # PDFBATCH_PDF_URL_PREFIX: users.pdf_url = prefix + bucket/key
    retry_base_seconds: int = 30  # PDFBATCH_RETRY_BASE_SECONDS: first backoff of a failed work message
    retry_max_seconds: int = 900  # PDFBATCH_RETRY_MAX_SECONDS: backoff cap (doubling from the base)
    parked_queue_url: str = ""  # PDFBATCH_PARKED_QUEUE_URL: work dead letters recorded gave_up, to redrive
    # PDFBATCH_UNZIP_DLQ_ARN: the unzip DLQ's ARN; unzip tells a failed S3 event (a record from this queue)
    # from a file dead letter (the work and OCR DLQs) by the queue a record comes from, not by its body.
    unzip_dlq_arn: str = ""
    api_key: str = field(default="", repr=False)  # PDFBATCH_API_KEY: the shared secret of the REST API
    match_policy: str = "unique"  # PDFBATCH_MATCH_POLICY: one of MATCH_POLICIES
    # Signed callbacks (pdfbatch.callback_security, services/callback_delivery.py; docs/RESULTS.md).
    callback_secret: str = ""  # PDFBATCH_CALLBACK_SECRET: the signing secret's ARN (read by bootstrap)
    callback_key: str = field(default="", repr=False)  # the signing secret's value (from that secret)
    # PDFBATCH_CALLBACK_TENANT_ROOT: the root's ARN; each tenant's secret derives from its value
    callback_tenant_root: str = ""
    callback_root_key: str = field(default="", repr=False)  # the root's value (from that secret)
    # Issue 25 (pdfbatch.named): the key ring of the named users' hashes, a secret's ARN (on AWS) or the
    # ring itself (PDFBATCH_NAMED_KEYS, local stacks and tests): one key, or a JSON array, first writes.
    named_secret: str = ""  # PDFBATCH_NAMED_SECRET
    named_keys: str = field(default="", repr=False)  # PDFBATCH_NAMED_KEYS, or the secret's value
    callback_allow: str = ""  # PDFBATCH_CALLBACK_ALLOW: hosts/CIDRs allowed though private (local tests)
    callback_allow_http: bool = False  # PDFBATCH_CALLBACK_ALLOW_HTTP: http:// too (local deployments only)
    # PDFBATCH_CALLBACK_PORTS: ports besides 443 (and 80 with http) a callback may name ("8443, 9000-9100")
    callback_ports: str = ""
    callback_attempts: int = 8  # PDFBATCH_CALLBACK_ATTEMPTS: POSTs of one delivery before its DLQ
    callback_retry_base_seconds: int = 30  # PDFBATCH_CALLBACK_RETRY_BASE_SECONDS: first backoff
    callback_retry_max_seconds: int = 3600  # PDFBATCH_CALLBACK_RETRY_MAX_SECONDS: backoff cap
    # One deadline per attempt (connect to the last byte): the fast lane's, then the slow lane's, where a
    # delivery that timed out on the fast lane goes (PDFBATCH_CALLBACK_SLOW_QUEUE_URL and _ARN: its queue).
    callback_timeout_seconds: float = 3.0  # PDFBATCH_CALLBACK_TIMEOUT_SECONDS
    callback_slow_timeout_seconds: float = 10.0  # PDFBATCH_CALLBACK_SLOW_TIMEOUT_SECONDS
    callback_slow_queue_url: str = ""  # PDFBATCH_CALLBACK_SLOW_QUEUE_URL
    callback_slow_queue_arn: str = ""  # PDFBATCH_CALLBACK_SLOW_QUEUE_ARN (tells a slow-lane record)
    # PDFBATCH_PROCESS_OVERLAP (default on): process_pdf overlaps a file's S3 waits with its neighbours'
    # reading (services/invocation.py); off, each file of an invocation runs start to end before the next.
    process_overlap: bool = True
    # PDFBATCH_INJECT_LATENCY: the bench's AWS-typical latency on every S3 and SQS request the functions
    # send (adapters/latency.py). Never set on AWS.
    inject_latency: bool = False
    limits: Limits = field(default_factory=Limits)
    users: UsersTable = field(default_factory=UsersTable)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Read settings from ``env`` (default: os.environ); raise ConfigError naming a bad variable."""
        e = os.environ if env is None else env
        limits = Limits(
            max_zip_bytes=_int(e, "PDFBATCH_MAX_ZIP_BYTES", Limits.max_zip_bytes),
            max_entries=_int(e, "PDFBATCH_MAX_ENTRIES", Limits.max_entries),
            max_pdf_bytes=_int(e, "PDFBATCH_MAX_PDF_BYTES", Limits.max_pdf_bytes),
            max_ratio=_float(e, "PDFBATCH_MAX_RATIO", Limits.max_ratio),
            max_pages=_int(e, "PDFBATCH_MAX_PAGES", Limits.max_pages),
            file_budget_seconds=_float(e, "PDFBATCH_FILE_BUDGET_SECONDS", Limits.file_budget_seconds),
            ocr_max_pages=_int(e, "PDFBATCH_OCR_MAX_PAGES", Limits.ocr_max_pages),
            ocr_budget_seconds=_float(e, "PDFBATCH_OCR_BUDGET_SECONDS", Limits.ocr_budget_seconds),
        )
        users = UsersTable(
            table=_ident(e, "PDFBATCH_USERS_TABLE", "users"),
            id_column=_ident(e, "PDFBATCH_USERS_ID_COLUMN", "id"),
            email_column=_ident(e, "PDFBATCH_USERS_EMAIL_COLUMN", "email"),
            pdf_url_column=_ident(e, "PDFBATCH_USERS_PDF_URL_COLUMN", "pdf_url"),
        )
        mysql_url = e.get("PDFBATCH_MYSQL_URL") or DEFAULT_MYSQL_URL
        redis_url = e.get("PDFBATCH_REDIS_URL") or DEFAULT_REDIS_URL
        parse_mysql_url(mysql_url)  # fail at cold start, not on the first message
        if urlparse(redis_url).scheme not in ("redis", "rediss", "unix"):
            raise ConfigError("PDFBATCH_REDIS_URL must be a redis:// or rediss:// URL")
        return cls(
            bucket=e.get("PDFBATCH_BUCKET", ""),
            work_queue_url=e.get("PDFBATCH_WORK_QUEUE_URL", ""),
            ocr_queue_url=e.get("PDFBATCH_OCR_QUEUE_URL", ""),
            callback_queue_url=e.get("PDFBATCH_CALLBACK_QUEUE_URL", ""),
            mysql_url=mysql_url,
            redis_url=redis_url,
            endpoint_url=e.get("AWS_ENDPOINT_URL") or None,
            public_endpoint_url=e.get("PDFBATCH_PUBLIC_ENDPOINT_URL") or None,
            region=e.get("AWS_REGION") or e.get("AWS_DEFAULT_REGION") or "us-east-1",
            progress_ttl_seconds=_int(e, "PDFBATCH_PROGRESS_TTL_SECONDS", 3600),
            upload_max_bytes=_int(e, "PDFBATCH_UPLOAD_MAX_BYTES", 5 * 1024**3),
            upload_url_expires_seconds=_int(e, "PDFBATCH_UPLOAD_URL_EXPIRES_SECONDS", 3600),
            max_pending_batches=_int(e, "PDFBATCH_MAX_PENDING_BATCHES", 100),
            max_receive_count=_int(e, "PDFBATCH_MAX_RECEIVE_COUNT", 5),
            stage_workers=_int(e, "PDFBATCH_STAGE_WORKERS", 32),
            pdf_url_prefix=e.get("PDFBATCH_PDF_URL_PREFIX", "s3://"),
            retry_base_seconds=_int(e, "PDFBATCH_RETRY_BASE_SECONDS", 30),
            retry_max_seconds=_int(e, "PDFBATCH_RETRY_MAX_SECONDS", 900),
            parked_queue_url=e.get("PDFBATCH_PARKED_QUEUE_URL", ""),
            unzip_dlq_arn=e.get("PDFBATCH_UNZIP_DLQ_ARN", ""),
            api_key=e.get("PDFBATCH_API_KEY", ""),
            mysql_secret=e.get("PDFBATCH_MYSQL_SECRET", ""),
            redis_secret=e.get("PDFBATCH_REDIS_SECRET", ""),
            api_key_secret=e.get("PDFBATCH_API_KEY_SECRET", ""),
            secrets_max_age=_int(e, "PDFBATCH_SECRETS_MAX_AGE", 300),
            match_policy=_choice(e, "PDFBATCH_MATCH_POLICY", MATCH_POLICIES),
            callback_secret=e.get("PDFBATCH_CALLBACK_SECRET", ""),
            callback_tenant_root=e.get("PDFBATCH_CALLBACK_TENANT_ROOT", ""),
            named_secret=e.get("PDFBATCH_NAMED_SECRET", ""),
            named_keys=e.get("PDFBATCH_NAMED_KEYS", ""),
            callback_allow=e.get("PDFBATCH_CALLBACK_ALLOW", ""),
            callback_allow_http=_bool(e, "PDFBATCH_CALLBACK_ALLOW_HTTP"),
            callback_ports=_ports(e, "PDFBATCH_CALLBACK_PORTS"),
            callback_attempts=max(1, _int(e, "PDFBATCH_CALLBACK_ATTEMPTS", 8)),
            callback_retry_base_seconds=_int(e, "PDFBATCH_CALLBACK_RETRY_BASE_SECONDS", 30),
            callback_retry_max_seconds=_int(e, "PDFBATCH_CALLBACK_RETRY_MAX_SECONDS", 3600),
            callback_timeout_seconds=_float(e, "PDFBATCH_CALLBACK_TIMEOUT_SECONDS", 3.0),
            callback_slow_timeout_seconds=_float(e, "PDFBATCH_CALLBACK_SLOW_TIMEOUT_SECONDS", 10.0),
            callback_slow_queue_url=e.get("PDFBATCH_CALLBACK_SLOW_QUEUE_URL", ""),
            callback_slow_queue_arn=e.get("PDFBATCH_CALLBACK_SLOW_QUEUE_ARN", ""),
            process_overlap=_bool(e, "PDFBATCH_PROCESS_OVERLAP", default=True),
            inject_latency=_bool(e, "PDFBATCH_INJECT_LATENCY"),
            limits=limits,
            users=users,
        )

    def require(self, *names: str) -> None:
        """Fail with a ConfigError naming the variable when a setting a function needs is empty."""
        env_names = {
            "bucket": "PDFBATCH_BUCKET",
            "work_queue_url": "PDFBATCH_WORK_QUEUE_URL",
            "ocr_queue_url": "PDFBATCH_OCR_QUEUE_URL",
            "callback_queue_url": "PDFBATCH_CALLBACK_QUEUE_URL",
            "unzip_dlq_arn": "PDFBATCH_UNZIP_DLQ_ARN",
            "api_key": "PDFBATCH_API_KEY",
        }
        for name in names:
            if not getattr(self, name):
                raise ConfigError(f"{env_names.get(name, name)} is not set")

    def with_secrets(
        self,
        mysql: Any = None,
        redis_url: str | None = None,
        api_key: str | None = None,
        callback_key: str | None = None,
        callback_root_key: str | None = None,
        named_keys: str | None = None,
    ) -> Settings:
        """These settings completed with the values read from their secrets (None: not read).

        ``mysql`` is the database secret ({"username", "password"}, the shape RDS uses): its credentials
        go into mysql_url, whose host, port and database stay those of PDFBATCH_MYSQL_URL.
        """
        changes: dict[str, Any] = {}
        if mysql is not None:
            changes["mysql_url"] = mysql_url_with_credentials(self.mysql_url, mysql)
        if redis_url is not None:
            if urlparse(redis_url).scheme not in ("redis", "rediss", "unix"):
                raise ConfigError("the Redis secret must hold a redis:// or rediss:// URL")
            changes["redis_url"] = redis_url
        if api_key is not None:
            changes["api_key"] = api_key
        if callback_key is not None:
            changes["callback_key"] = callback_key
        if callback_root_key is not None:
            changes["callback_root_key"] = callback_root_key
        if named_keys is not None:
            changes["named_keys"] = named_keys
        return replace(self, **changes) if changes else self

    def pdf_url(self, key: str) -> str:
        """The value written to users.pdf_url for an object in the bucket."""
        if self.pdf_url_prefix == "s3://":
            return f"s3://{self.bucket}/{key}"
        return self.pdf_url_prefix.rstrip("/") + "/" + key


@dataclass(frozen=True)
class MysqlParams:
    """Connection parameters parsed from a mysql:// URL."""

    host: str
    port: int
    user: str
    password: str
    database: str


def parse_mysql_url(url: str) -> MysqlParams:
    """Parse ``mysql://user:pass@host:port/db``; raise ConfigError when it is not one."""
    parsed = urlparse(url)
    if parsed.scheme not in ("mysql", "mysql+pymysql", "mariadb") or not parsed.hostname:
        raise ConfigError("PDFBATCH_MYSQL_URL must look like mysql://user:password@host:3306/database")
    database = parsed.path.lstrip("/")
    if not database or not _IDENT.fullmatch(database):
        raise ConfigError(
            "PDFBATCH_MYSQL_URL must name a database, e.g. mysql://root@127.0.0.1:3306/pdfbatch"
        )
    return MysqlParams(
        host=parsed.hostname,
        port=parsed.port or 3306,
        user=unquote(parsed.username or "root"),
        password=unquote(parsed.password or ""),
        database=database,
    )


def mysql_url_with_credentials(url: str, secret: Any) -> str:
    """``url`` (mysql://host:port/db) with the username and password of a database secret."""
    username = secret.get("username") if isinstance(secret, Mapping) else None
    if not isinstance(username, str) or not username:
        raise ConfigError('the database secret must be JSON with "username" and "password"')
    password = secret.get("password") or ""
    if not isinstance(password, str):
        raise ConfigError('the database secret\'s "password" must be a string')
    p = parse_mysql_url(url)
    auth = quote(username, safe="") + (f":{quote(password, safe='')}" if password else "")
    host = f"[{p.host}]" if ":" in p.host else p.host
    return f"{urlparse(url).scheme}://{auth}@{host}:{p.port}/{p.database}"


def split_mysql_credentials(url: str) -> tuple[str, dict[str, str]]:
    """(the URL without user and password, {"username", "password"}): what goes where on deploy."""
    p = parse_mysql_url(url)
    host = f"[{p.host}]" if ":" in p.host else p.host
    address = f"{urlparse(url).scheme}://{host}:{p.port}/{p.database}"
    return address, {"username": p.user, "password": p.password}


def local_endpoint() -> str:
    """http://127.0.0.1:4566, or the port in PDFBATCH_LOCALSTACK_PORT."""
    port = os.environ.get(LOCALSTACK_PORT_ENV, "").strip() or str(DEFAULT_LOCALSTACK_PORT)
    if not port.isdigit():
        raise ConfigError(f"{LOCALSTACK_PORT_ENV} must be a port number, not {port!r}.")
    return f"http://127.0.0.1:{port}"


def local_port(endpoint: str | None) -> int:
    """The gateway port of ``endpoint`` (default: local_endpoint())."""
    return urlsplit(endpoint or local_endpoint()).port or DEFAULT_LOCALSTACK_PORT


def _int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be an integer, got {raw!r}") from exc
    if value < 0:
        raise ConfigError(f"{name} must not be negative")
    return value


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc
    if value <= 0:
        raise ConfigError(f"{name} must be positive")
    return value


def _ports(env: Mapping[str, str], name: str) -> str:
    from pdfbatch.callback_security import PortList

    raw = env.get(name) or ""
    try:
        PortList.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{name} must be ports and ranges (8443, 9000-9100), got {raw!r}") from exc
    return raw


def _bool(env: Mapping[str, str], name: str, default: bool = False) -> bool:
    raw = (env.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw in ("0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigError(f"{name} must be true or false, got {env.get(name)!r}")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    # The first choice is the default (unset or empty).
    value = env.get(name) or choices[0]
    if value not in choices:
        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {env.get(name)!r}")
    return value


def _ident(env: Mapping[str, str], name: str, default: str) -> str:
    value = env.get(name) or default
    if not _IDENT.fullmatch(value):
        raise ConfigError(f"{name} must be a plain SQL identifier, got {value!r}")
    return value
