"""What every command shares: exit codes, CliError, the environment (endpoints, URLs, the stack's
name), reachability checks, the API client, the checkout's tooling (``dev_tooling``), the console and
``shown`` (every outside value printed)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
from typing import Any

from pdfbatch.checkout import find_checkout
from pdfbatch.config import DEFAULT_MYSQL_URL, DEFAULT_REDIS_URL, local_endpoint, parse_mysql_url

EXIT_OK, EXIT_BATCH_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3
EXIT_CODES = (
    "exit codes: 0 ok, 1 the batch FAILED, 2 bad usage or input (or no such batch),\n"
    "3 a service is unavailable"
)
STACK_NAME = os.environ.get("PDFBATCH_STACK_NAME", "pdfbatch")


class CliError(Exception):
    """A failure to report as one sentence with an exit code (no traceback)."""

    def __init__(self, message: str, code: int = EXIT_UNAVAILABLE) -> None:
        super().__init__(message)
        self.code = code


def endpoint_url() -> str | None:
    """AWS_ENDPOINT_URL, defaulting to the local stack (on PDFBATCH_LOCALSTACK_PORT when set, as the
    tests, the bench and the soak use it); set it empty to target real AWS."""
    value = os.environ.get("AWS_ENDPOINT_URL")
    if value is None:
        return local_endpoint()
    return value or None


def region() -> str:
    """The AWS region (us-east-1 unless set)."""
    return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"


def local_credentials() -> None:
    """Dummy credentials when none are set and the endpoint is local (LocalStack accepts any)."""
    if endpoint_url() and not os.environ.get("AWS_ACCESS_KEY_ID") and not os.environ.get("AWS_PROFILE"):
        os.environ["AWS_ACCESS_KEY_ID"] = "test"
        os.environ["AWS_SECRET_ACCESS_KEY"] = "test"  # noqa: S105 - LocalStack's dummy credentials
    os.environ.setdefault("AWS_DEFAULT_REGION", region())


def mysql_url() -> str:
    """PDFBATCH_MYSQL_URL or the local default."""
    return os.environ.get("PDFBATCH_MYSQL_URL") or DEFAULT_MYSQL_URL


def redis_url() -> str:
    """PDFBATCH_REDIS_URL or the local default."""
    return os.environ.get("PDFBATCH_REDIS_URL") or DEFAULT_REDIS_URL


def check_mysql(create: bool = False) -> None:
    """Fail with one sentence when MySQL is unreachable; optionally create the database and tables."""
    import pymysql

    p = parse_mysql_url(mysql_url())
    try:
        conn = pymysql.connect(
            host=p.host,
            port=p.port,
            user=p.user,
            password=p.password,
            connect_timeout=3,
            autocommit=True,
            charset="utf8mb4",
        )
    except pymysql.err.OperationalError as exc:
        raise CliError(
            f"MySQL is not reachable at {p.host}:{p.port} (PDFBATCH_MYSQL_URL): start it, e.g. "
            "`start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd`, "
            f"or point PDFBATCH_MYSQL_URL at a running server ({exc.args[-1] if exc.args else exc})."
        ) from exc
    if create:
        from tools import devdb  # only `stack up` creates, and it called dev_tooling() first

        devdb.create_schema(conn, p)
    conn.close()


def check_redis() -> None:
    """Fail with one sentence when Redis is unreachable."""
    import redis

    try:
        redis.Redis.from_url(redis_url(), socket_connect_timeout=3).ping()
    except redis.exceptions.RedisError as exc:
        raise CliError(
            f"Redis is not reachable at {redis_url()} (PDFBATCH_REDIS_URL): start it, e.g. "
            "`redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no`, "
            "or point PDFBATCH_REDIS_URL at a running server."
        ) from exc


def dev_tooling(command: str, hint: str = "run it from inside one") -> None:
    """Make the checkout's tooling importable, or fail in one sentence (exit 2): the local stack, build,
    deploy, the development database and the demo's corpus live in tools/, which the wheel leaves out.

    `python -m pdfbatch.cli` in a checkout has tools/ on sys.path already; the console script has not,
    so the checkout found from the current folder (or the one an editable install came from) is added,
    last, so that it shadows nothing installed.
    """
    if _tooling_importable():
        return
    root = find_checkout()
    if root is not None and (root / "tools" / "__init__.py").is_file():
        if str(root) not in sys.path:
            sys.path.append(str(root))
        if _tooling_importable():
            return
    raise CliError(
        f"`pdfbatch {command}` needs a pdfbatch checkout (its tooling, tools/, is not installed): {hint}.",
        EXIT_USAGE,
    )


def _tooling_importable() -> bool:
    try:
        importlib.import_module("tools")  # the package first: its modules may be cached without it
        return importlib.util.find_spec("tools.localstack") is not None  # ours, not another `tools`
    except ImportError:  # no package `tools` at all (or one blocked in sys.modules)
        return False


def api_client() -> Any:
    """An ApiClient for the deployed stack (PDFBATCH_API_URL overrides discovery)."""
    from pdfbatch.api_client import ApiClient, ApiError, stack_outputs

    url = os.environ.get("PDFBATCH_API_URL")
    if not url:
        local_credentials()
        try:
            outputs = stack_outputs(STACK_NAME, endpoint_url(), region())
        except ApiError as exc:
            raise CliError(str(exc)) from exc
        url = outputs.get("LocalApiUrl") or outputs["ApiUrl"]
    # The key: PDFBATCH_API_KEY (e.g. a tenant's), else the one `stack up` stored for this API (LocalStack).
    return ApiClient(url)


def stderr_console() -> Any:
    """A rich console on stderr: stdout is kept for --json documents.

    No emoji codes: ``:smile:`` in a file name is text. Markup is on for the CLI's own styles, so every
    value that comes from outside (names above all) goes through ``shown``.
    """
    from rich.console import Console

    return Console(stderr=True, highlight=False, emoji=False)


def shown(value: object) -> str:
    """The one way a value from outside (an entry name, a reason, a status) is put on the terminal.

    Control, escape and bidi characters become U+FFFD (``display.printable``), then rich markup is
    escaped, so ``cv[/b].pdf`` is printed rather than parsed and ``[link=...]`` never becomes a link.
    Safe for a rich markup string, a table cell or a plain ``print``.
    """
    from pdfbatch.display import printable

    return escape_markup(printable("" if value is None else str(value)))


# Every '[' with the backslashes before it, and whether rich's parser would read a tag there (its
# rich.markup.RE_TAGS: a letter, '#', '/' or '@' after the bracket, then anything but '[' up to ']').
_BRACKET = re.compile(r"(\\*)\[(?=([a-z#/@][^[]*?\])?)")


def escape_markup(text: str) -> str:
    """``text`` as rich markup that renders as ``text``: every bracket and the backslashes before it.

    rich's own ``escape`` handles only a bracket that opens a tag; but rich also turns a backslash and
    any other bracket into the bracket alone (``\\[`` was shown as ``[``). Before a tag, k backslashes
    are written 2k + 1 times (k literal, the tag escaped); before another bracket, k + 1 times (rich
    drops one). A trailing backslash is doubled as rich's ``escape`` does, so it cannot escape a tag that
    follows in the caller's markup.
    """

    def one(match: re.Match[str]) -> str:
        backslashes, tag = match.group(1), match.group(2)
        if tag:
            return backslashes * 2 + "\\["
        return backslashes + "\\[" if backslashes else "["

    escaped = _BRACKET.sub(one, text)
    if escaped.endswith("\\") and not escaped.endswith("\\\\"):
        escaped += "\\"
    return escaped
