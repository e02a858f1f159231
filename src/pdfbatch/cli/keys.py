"""`pdfbatch keys create NAME | list | revoke NAME | set-callback NAME URL|--clear`: tenant keys and
each tenant's default callback URL, on MySQL directly (as `report`).

The key is printed once, on create, and only its SHA-256 is stored. A default callback URL is checked
as a POSTed callbackUrl is (PDFBATCH_CALLBACK_ALLOW, PDFBATCH_CALLBACK_ALLOW_HTTP and
PDFBATCH_CALLBACK_PORTS from this environment, as `stack up` passes them to the stack) and shown by its
origin only, never its path or query. The operator reaches the same
database the functions use (PDFBATCH_MYSQL_URL, as `stack up` passes it), and the table is created
if this runs before any function did (``ensure_schema``: idempotent, what every cold start runs).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pdfbatch.cli.common import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, CliError, check_mysql, mysql_url, shown


@contextmanager
def _errors() -> Iterator[None]:
    from pdfbatch.errors import ConfigError, DependencyUnavailable, InvalidInput

    try:
        yield
    except (InvalidInput, ConfigError) as exc:
        raise CliError(str(exc), EXIT_USAGE) from exc
    except DependencyUnavailable as exc:
        raise CliError(f"{exc}: check it is running", EXIT_UNAVAILABLE) from exc


def tenant_keys() -> Any:
    """The keys table (created if missing) over PDFBATCH_MYSQL_URL."""
    from pdfbatch.adapters.mysql import MysqlClient
    from pdfbatch.adapters.tenant_keys import MysqlTenantKeys

    check_mysql()
    client = MysqlClient.from_url(mysql_url())
    with _errors():
        client.ensure_schema()
    return MysqlTenantKeys(client)


def _iso(ts: float | None) -> str | None:
    from pdfbatch.services.deps import iso

    return iso(ts)


def keys_create(args: argparse.Namespace) -> int:
    """Create a key for a tenant and print it (the only time it is shown), and the tenant's signing
    secret when it has none yet (shown this once too)."""
    from pdfbatch import tenants

    with _errors():
        tenants.check_tenant(args.name)
        store = tenant_keys()
        if args.callback_url is not None:
            _check_callback(args.callback_url)  # before the key: a refused URL creates nothing
        needs_secret = store.signing_ids(args.name) is None
        root = tenant_root() if needs_secret else ""  # before the key: no root, nothing created
        key = tenants.create_key(store, args.name)
        secret = tenants.new_signing_secret(store, root, args.name, time.time()) if needs_secret else None
        origin = _set_callback(store, args.name, args.callback_url) if args.callback_url else None
    if args.json:
        out = {"tenant": args.name, "key": key, "keyId": tenants.key_hash(key)[:12], "signingSecret": secret}
        print(json.dumps({**out, "callback": origin} if args.callback_url else out))
    else:
        print(key)
        if secret is not None:
            print(secret)
        from pdfbatch.cli.common import stderr_console

        stderr_console().print(
            f"tenant {shown(args.name)}: key created"
            + (" (first line) and its callbacks' signing secret (second line)" if secret else "")
            + ". Shown this once; send the key as x-api-key (upload page, curl, PDFBATCH_API_KEY)"
            + (
                ", give the secret to the tenant's receiver"
                if secret
                else " (its signing secret is unchanged)"
            )
            + f". ZIPs dropped under uploads/{shown(args.name)}/ are this tenant's too."
            + (f" Their summaries are POSTed to {shown(origin)}, signed." if origin else "")
        )
    return EXIT_OK


def keys_rotate_secret(args: argparse.Namespace) -> int:
    """A new signing secret for a tenant, printed once; the old one also signs for --overlap-hours."""
    from pdfbatch import tenants
    from pdfbatch.cli.common import stderr_console

    if args.overlap_hours < 0:
        raise CliError("--overlap-hours must not be negative", EXIT_USAGE)
    with _errors():
        tenants.check_tenant(args.name)
        store = tenant_keys()
        if not any(k.tenant == args.name for k in store.list_keys()):
            raise CliError(
                f"no tenant {args.name!r}: create its key first (`pdfbatch keys create`)", EXIT_USAGE
            )
        secret = tenants.new_signing_secret(
            store, tenant_root(), args.name, time.time(), overlap_seconds=args.overlap_hours * 3600
        )
    if args.json:
        print(json.dumps({"tenant": args.name, "signingSecret": secret, "overlapHours": args.overlap_hours}))
    else:
        print(secret)
        stderr_console().print(
            f"tenant {shown(args.name)}: new signing secret (shown this once). "
            + (
                f"For {args.overlap_hours:g} h every delivery carries a signature by each secret; after "
                "that only by this one."
                if args.overlap_hours
                else "The old secret no longer signs."
            )
        )
    return EXIT_OK


def tenant_root() -> str:
    """The tenants' signing root: PDFBATCH_CALLBACK_TENANT_ROOT_KEY if set (tests), else the stack's
    CallbackTenantRoot secret (its output CallbackTenantRootArn), read from Secrets Manager."""
    import os

    value = os.environ.get("PDFBATCH_CALLBACK_TENANT_ROOT_KEY")
    if value:
        return value
    from pdfbatch.api_client import ApiError, stack_outputs
    from pdfbatch.bootstrap import boto3_client
    from pdfbatch.cli import common
    from pdfbatch.cli.common import endpoint_url, local_credentials, region
    from pdfbatch.config import Settings

    local_credentials()
    try:
        arn = stack_outputs(common.STACK_NAME, endpoint_url(), region()).get("CallbackTenantRootArn")
    except ApiError as exc:
        raise CliError(f"the tenants' signing root is needed: {exc}", EXIT_UNAVAILABLE) from exc
    if not arn:
        raise CliError("this stack has no CallbackTenantRoot (deploy it again with `pdfbatch stack up`)")
    client = boto3_client("secretsmanager", Settings(endpoint_url=endpoint_url(), region=region()))
    return str(client.get_secret_value(SecretId=arn)["SecretString"])


def _check_callback(url: str) -> None:
    from pdfbatch.config import Settings
    from pdfbatch.services import callback_delivery

    callback_delivery.check(Settings.from_env(), url)


def _set_callback(store: Any, tenant: str, url: str | None) -> str | None:
    from pdfbatch.config import Settings
    from pdfbatch.services import callback_delivery

    return callback_delivery.set_default(store, Settings.from_env(), tenant, url)


def keys_set_callback(args: argparse.Namespace) -> int:
    """Set (or --clear) a tenant's default callback URL: its new batches without a callbackUrl use it."""
    from pdfbatch.cli.common import stderr_console

    if (args.url is None) == (not args.clear):
        raise CliError("give either URL or --clear", EXIT_USAGE)
    with _errors():
        origin = _set_callback(tenant_keys(), args.name, args.url)
    if args.json:
        print(json.dumps({"tenant": args.name, "callback": origin}))
    elif origin is None:
        stderr_console().print(f"tenant {shown(args.name)}: no default callback URL")
    else:
        stderr_console().print(
            f"tenant {shown(args.name)}: new batches without a callbackUrl POST their summary to "
            f"{shown(origin)} (batches already created keep theirs)"
        )
    return EXIT_OK


def keys_list(args: argparse.Namespace) -> int:
    """Every key: its tenant, a short id (the start of its hash), when created and revoked."""
    from rich.table import Table

    from pdfbatch.cli.common import stderr_console
    from pdfbatch.services.callback_delivery import origin_of

    with _errors():
        store = tenant_keys()
        rows, defaults = store.list_keys(), store.callbacks()
    items = [
        {
            "tenant": k.tenant,
            "keyId": k.key_hash[:12],
            "createdAt": _iso(k.created_at),
            "revokedAt": _iso(k.revoked_at),
            "callback": origin_of(defaults.get(k.tenant)),  # scheme, host and port: no path or query
        }
        for k in rows
    ]
    if args.json:
        print(json.dumps({"keys": items}, indent=2))
        return EXIT_OK
    if not items:
        stderr_console().print("no tenant keys (create one with `pdfbatch keys create NAME`)")
        return EXIT_OK
    table = Table(title="tenant keys")
    for col in ("tenant", "key id", "created", "revoked", "default callback"):
        table.add_column(col)
    for item in items:
        table.add_row(
            *(shown(item[k] or "-") for k in ("tenant", "keyId", "createdAt", "revokedAt", "callback"))
        )
    stderr_console().print(table)
    return EXIT_OK


def keys_revoke(args: argparse.Namespace) -> int:
    """Revoke every live key of a tenant (its batches stay, seen by the admin key only)."""
    from pdfbatch import tenants
    from pdfbatch.cli.common import stderr_console

    with _errors():
        tenants.check_tenant(args.name)
        revoked = tenants.revoke_keys(tenant_keys(), args.name)
    if args.json:
        print(json.dumps({"tenant": args.name, "revoked": revoked}))
    else:
        stderr_console().print(f"tenant {shown(args.name)}: {revoked} key(s) revoked")
    return EXIT_OK


def add_keys(sub: Any) -> None:
    """The `keys` sub-command and its four actions."""
    fmt = argparse.RawDescriptionHelpFormatter
    keys = sub.add_parser(
        "keys",
        help="create, list or revoke tenant keys",
        formatter_class=fmt,
        description=(
            "A tenant key sees only its tenant's batches: those it creates (POST /batches, the upload\n"
            "page) and ZIPs dropped under uploads/NAME/ while the tenant has a live key. Any other batch\n"
            "is 404, as an unknown id. The admin key (PDFBATCH_API_KEY) sees every batch. Keys are shown\n"
            "once and stored as hashes; revoking refuses them from the next request on.\n\n"
            "A tenant may have a default callback URL: its batches created without a callbackUrl\n"
            "(POST /batches without one, ZIPs dropped under uploads/NAME/) POST their summary there,\n"
            "signed, when they end. Each batch keeps the default it was created with. Each tenant's\n"
            "summaries are signed with a secret of its own, shown once by `create` (its first key) and\n"
            "by `rotate-secret`."
        ),
        epilog=(
            "example:\n  pdfbatch keys create acme --callback-url https://hooks.acme.example/pdfbatch\n"
            "  pdfbatch keys list\n  pdfbatch keys set-callback acme --clear\n"
            "  pdfbatch keys rotate-secret acme --overlap-hours 24\n  pdfbatch keys revoke acme"
        ),
    )
    keys_sub = keys.add_subparsers(dest="action", required=True)
    for name, fn, text, needs_name in (
        ("create", keys_create, "create a key for tenant NAME and print it (once)", True),
        ("list", keys_list, "every key: tenant, key id, created, revoked", False),
        ("revoke", keys_revoke, "revoke every live key of tenant NAME", True),
        ("rotate-secret", keys_rotate_secret, "a new signing secret for tenant NAME, printed once", True),
    ):
        example = f"example:\n  pdfbatch keys {name}" + (" acme" if needs_name else " --json")
        p = keys_sub.add_parser(name, help=text, description=text, epilog=example, formatter_class=fmt)
        if needs_name:
            p.add_argument("name", metavar="NAME", help="tenant name: 3-32 of a-z, 0-9, '-'")
        p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
        p.set_defaults(func=fn)
        if name == "create":
            p.add_argument("--callback-url", metavar="URL", help=_CALLBACK_HELP)
        if name == "rotate-secret":
            p.add_argument(
                "--overlap-hours",
                type=float,
                default=24.0,
                metavar="H",
                help="hours the old secret still signs, next to the new one (default 24; 0: stop now)",
            )
    text = "set (or --clear) tenant NAME's default callback URL"
    p = keys_sub.add_parser(
        "set-callback",
        help=text,
        description=text + ": its batches created from now on without a callbackUrl use it",
        epilog="example:\n  pdfbatch keys set-callback acme https://hooks.acme.example/pdfbatch\n"
        "  pdfbatch keys set-callback acme --clear",
        formatter_class=fmt,
    )
    p.add_argument("name", metavar="NAME", help="tenant name: 3-32 of a-z, 0-9, '-'")
    p.add_argument("url", metavar="URL", nargs="?", help=_CALLBACK_HELP)
    p.add_argument("--clear", action="store_true", help="remove the default (new batches get no callback)")
    p.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    p.set_defaults(func=keys_set_callback)


_CALLBACK_HELP = (
    "default callback URL for the tenant's batches created without one (https; private addresses "
    "refused, as for a POSTed callbackUrl)"
)
