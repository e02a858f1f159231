"""Secrets: the functions get ARNs in their environment and read the values with Powertools Parameters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from pdfbatch import bootstrap
from pdfbatch.config import Settings, parse_mysql_url, split_mysql_credentials
from pdfbatch.errors import ConfigError, DependencyUnavailable

ADDRESS = "mysql://db.internal:3307/pdfbatch"


@pytest.fixture()
def secrets(moto_aws: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """moto's Secrets Manager with a database secret and an API key, named in the environment."""
    import boto3

    sm = boto3.client("secretsmanager", region_name="us-east-1")
    db = sm.create_secret(Name="t/mysql", SecretString=json.dumps({"username": "app", "password": "p@ss:/w"}))
    key = sm.create_secret(Name="t/api-key", SecretString="first-key-0123456789")
    monkeypatch.setenv("PDFBATCH_MYSQL_URL", ADDRESS)
    monkeypatch.setenv("PDFBATCH_MYSQL_SECRET", db["ARN"])
    monkeypatch.setenv("PDFBATCH_API_KEY_SECRET", key["ARN"])
    bootstrap.override(None)  # forget settings and secrets read by an earlier test
    yield sm
    bootstrap.override(None)


def test_settings_name_the_secrets_they_read() -> None:
    s = Settings.from_env(
        {
            "PDFBATCH_MYSQL_SECRET": "arn:db",
            "PDFBATCH_REDIS_SECRET": "arn:redis",
            "PDFBATCH_API_KEY_SECRET": "arn:key",
            "PDFBATCH_SECRETS_MAX_AGE": "60",
        }
    )
    assert (s.mysql_secret, s.redis_secret, s.api_key_secret, s.secrets_max_age) == (
        "arn:db",
        "arn:redis",
        "arn:key",
        60,
    )
    assert Settings.from_env({}).secrets_max_age == 300


def test_the_database_secret_supplies_who_and_the_url_where() -> None:
    s = Settings(mysql_url=ADDRESS).with_secrets(mysql={"username": "app", "password": "p@ss:/w%"})
    p = parse_mysql_url(s.mysql_url)
    assert (p.host, p.port, p.database, p.user, p.password) == (
        "db.internal",
        3307,
        "pdfbatch",
        "app",
        "p@ss:/w%",
    )


def test_a_deploy_splits_an_operator_url_into_address_and_credentials() -> None:
    address, creds = split_mysql_credentials("mysql://root:s3cr%40t@127.0.0.1:3306/pdfbatch_e2e")
    assert address == "mysql://127.0.0.1:3306/pdfbatch_e2e"
    assert creds == {"username": "root", "password": "s3cr@t"}
    assert Settings(mysql_url=address).with_secrets(mysql=creds).mysql_url == (
        "mysql://root:s3cr%40t@127.0.0.1:3306/pdfbatch_e2e"
    )


@pytest.mark.parametrize(
    "secret", [{"password": "x"}, {"username": ""}, ["app", "pw"], {"username": "a", "password": 1}]
)
def test_a_malformed_database_secret_is_a_config_error(secret: Any) -> None:
    with pytest.raises(ConfigError, match="database secret"):
        Settings(mysql_url=ADDRESS).with_secrets(mysql=secret)


def test_a_redis_secret_must_be_a_redis_url() -> None:
    assert (
        Settings().with_secrets(redis_url="rediss://:pw@cache:6379/0").redis_url
        == "rediss://:pw@cache:6379/0"
    )
    with pytest.raises(ConfigError, match="Redis secret"):
        Settings().with_secrets(redis_url="http://cache")


def test_the_function_reads_its_secrets_at_run_time(secrets: Any) -> None:
    s = bootstrap.get_settings()
    assert s.api_key == "first-key-0123456789"
    assert parse_mysql_url(s.mysql_url).user == "app" and parse_mysql_url(s.mysql_url).password == "p@ss:/w"
    assert parse_mysql_url(s.mysql_url).host == "db.internal"


def _advance_clock(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Make Powertools' parameter cache see ``seconds`` more on the clock."""
    from datetime import datetime, timedelta

    from aws_lambda_powertools.utilities.parameters import base

    class Later(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + timedelta(seconds=seconds)

    monkeypatch.setattr(base, "datetime", Later)


def test_a_rotation_takes_effect_after_max_age_without_a_deploy(
    secrets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a function that read its key (kept PDFBATCH_SECRETS_MAX_AGE, 300 s)
    assert bootstrap.get_settings().api_key == "first-key-0123456789"
    # WHEN the key is rotated THEN the cached key is still used until its age passes...
    secrets.put_secret_value(SecretId="t/api-key", SecretString="second-key-0123456789")
    _advance_clock(monkeypatch, 290)
    assert bootstrap.get_settings().api_key == "first-key-0123456789"
    # ...and once it has, the next read returns the new key
    _advance_clock(monkeypatch, 301)
    assert bootstrap.get_settings().api_key == "second-key-0123456789"


def test_new_database_credentials_give_new_clients(secrets: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def fake_build(settings: Settings, *, need_queue: bool = False, io: Any = None) -> Any:
        built.append(settings.mysql_url)
        return object()

    monkeypatch.setattr(bootstrap, "build_deps", fake_build)
    first = bootstrap.get_deps()
    assert bootstrap.get_deps() is first  # same secret: the same clients, no rebuild
    secrets.put_secret_value(
        SecretId="t/mysql", SecretString=json.dumps({"username": "app", "password": "new"})
    )
    assert bootstrap.get_deps() is first  # read again only once the cached value is older than max age
    _advance_clock(monkeypatch, 301)
    second = bootstrap.get_deps()
    assert second is not first
    assert [parse_mysql_url(u).password for u in built] == ["p@ss:/w", "new"]


def test_an_unreadable_secret_is_a_dependency_error_a_retry_may_fix(
    secrets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDFBATCH_API_KEY_SECRET", "t/does-not-exist")
    bootstrap._settings.cache_clear()
    with pytest.raises(DependencyUnavailable, match="secretsmanager"):
        bootstrap.get_settings()


def test_without_secrets_nothing_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PDFBATCH_MYSQL_SECRET", "PDFBATCH_REDIS_SECRET", "PDFBATCH_API_KEY_SECRET"):
        monkeypatch.delenv(name, raising=False)
    s = Settings.from_env({"PDFBATCH_MYSQL_URL": "mysql://root@127.0.0.1:3306/x"})
    assert bootstrap.read_secrets(s) is s


def test_deliver_callbacks_reads_the_signing_secret_and_never_shows_it(
    secrets: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    signing = secrets.create_secret(Name="t/callbacks", SecretString="whsec-0123456789abcdef")
    monkeypatch.setenv("PDFBATCH_CALLBACK_SECRET", signing["ARN"])
    bootstrap.override(None)
    s = bootstrap.get_settings()
    assert s.callback_secret == signing["ARN"] and s.callback_key == "whsec-0123456789abcdef"
    assert "whsec" not in repr(s)
