"""The API key outside the function: generated once per local stack, found by every ApiClient, sent."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from tools import deploy as ops_deploy
from tools.build import project_root

from pdfbatch.api_client import (
    ApiClient,
    api_key_file,
    local_api_key,
    read_api_key,
    remember_api_url,
    stored_api_key,
)

URL = "http://127.0.0.1:4566/_aws/execute-api/abc123/v1/"

ROOT = project_root()


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder that find_root() takes for a checkout, as the current folder."""
    (tmp_path / "infra" / "localstack").mkdir(parents=True)
    (tmp_path / "infra" / "localstack" / "requirements.txt").write_text("")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PDFBATCH_API_KEY", raising=False)
    return tmp_path


def test_a_local_stack_gets_one_random_key_kept_private(checkout: Path) -> None:
    first = local_api_key(checkout, "pdfbatch")
    again = local_api_key(checkout, "pdfbatch")
    other = local_api_key(checkout, "pdfbatch-e2e")
    assert first == again != other and len(first) >= 32
    path = api_key_file(checkout, "pdfbatch")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert read_api_key(checkout, "pdfbatch") == first
    # and the operator's own key, when given, replaces it
    assert local_api_key(checkout, "pdfbatch", "operator-chosen-key-123") == "operator-chosen-key-123"
    assert read_api_key(checkout, "pdfbatch") == "operator-chosen-key-123"


def test_an_api_client_finds_the_key_of_the_stack_at_its_url(checkout: Path) -> None:
    key = local_api_key(checkout, "pdfbatch")
    remember_api_url(checkout, "pdfbatch", URL)
    assert stored_api_key(URL.rstrip("/")) == key
    assert ApiClient(URL).api_key == key
    assert ApiClient("http://127.0.0.1:4566/_aws/execute-api/other/v1/").api_key is None


def test_without_a_stored_key_the_environment_key_is_used(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PDFBATCH_API_KEY", "from-the-environment-0123")
    assert ApiClient(URL).api_key == "from-the-environment-0123"
    # an explicit empty key means "send none" (the auth tests use it)
    assert ApiClient(URL, api_key="").api_key == ""


def test_the_environment_key_wins_over_the_stored_one(
    checkout: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN the admin key `stack up` stored on the operator's machine
    local_api_key(checkout, "pdfbatch")
    remember_api_url(checkout, "pdfbatch", URL)
    # WHEN a tenant's key is given explicitly
    monkeypatch.setenv("PDFBATCH_API_KEY", "pdfbt_a-tenant-key-0123456789")
    # THEN the CLI acts as that tenant, not silently as the admin
    assert ApiClient(URL).api_key == "pdfbt_a-tenant-key-0123456789"


def test_a_corrupt_key_file_is_replaced_by_a_new_key(checkout: Path) -> None:
    path = api_key_file(checkout, "pdfbatch")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert read_api_key(checkout, "pdfbatch") is None
    assert len(local_api_key(checkout, "pdfbatch")) >= 32


def test_the_key_goes_to_the_stack_secret_never_to_a_parameter_or_a_repr() -> None:
    # On AWS the stack generates the key in ApiKeySecret; a PDFBATCH_API_KEY given to a deploy is put
    # there too (tools.deploy.sync_secrets), never passed as a template parameter.
    params = ops_deploy.DeployParams.from_env({"PDFBATCH_API_KEY": "k" * 20})
    assert params.api_key == "k" * 20
    assert "k" * 20 not in repr(params)
    assert "k" * 20 not in repr(params.template_parameters())


def test_credentials_in_the_mysql_url_go_to_the_secret_and_the_address_to_the_template() -> None:
    params = ops_deploy.DeployParams.from_env(
        {"PDFBATCH_MYSQL_URL": "mysql://app:pw@db.internal:3306/pdfbatch"}
    )
    assert params.template_parameters()["MysqlUrl"] == "mysql://db.internal:3306/pdfbatch"
    assert params.database_credentials() == {"username": "app", "password": "pw"}
    assert (
        ops_deploy.DeployParams.from_env({"PDFBATCH_MYSQL_URL": "mysql://db:3306/x"}).database_credentials()
        is None
    )


def test_a_redis_url_with_a_password_is_refused_with_what_to_do() -> None:
    params = ops_deploy.DeployParams.from_env({"PDFBATCH_REDIS_URL": "rediss://:pw@cache:6379/0"})
    with pytest.raises(ops_deploy.DeployError, match="RedisSecretArn"):
        params.template_parameters()


def test_a_secret_is_written_only_when_its_value_changes() -> None:
    class FakeSecrets:
        def __init__(self) -> None:
            self.values = {"db": '{"password": "", "username": "root"}', "key": "old"}
            self.puts: list[str] = []

        def get_secret_value(self, SecretId: str) -> dict[str, str]:
            return {"SecretString": self.values[SecretId]}

        def put_secret_value(self, SecretId: str, SecretString: str) -> None:
            self.puts.append(SecretId)
            self.values[SecretId] = SecretString

    sm = FakeSecrets()
    same_json = '{"username": "root", "password": ""}'
    assert ops_deploy.sync_secrets(sm, {"db": same_json, "key": None}) is False
    assert ops_deploy.sync_secrets(sm, {"db": same_json, "key": "new"}) is True
    assert sm.puts == ["key"] and sm.values["key"] == "new"


def test_the_template_is_deployed_with_each_code_uri_pointing_at_its_zip() -> None:
    template = (ROOT / "infra" / "template.yaml").read_text()
    keys = {
        fn: f"s/{fn}-abc.zip" for fn in ("unzip", "process_pdf", "ocr_pdf", "status", "deliver_callbacks")
    }
    packaged = ops_deploy.package_template(template, "artifacts", keys)
    assert "../functions/" not in packaged
    for key in keys.values():
        assert f"CodeUri: s3://artifacts/{key}" in packaged
    with pytest.raises(ops_deploy.DeployError, match="not built"):
        ops_deploy.package_template(template, "artifacts", {"unzip": "k"})


def test_stack_key_prints_the_stored_key_or_says_how_to_get_one(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from pdfbatch import cli
    from pdfbatch.cli import common

    monkeypatch.setattr(common, "STACK_NAME", "pdfbatch-test")
    assert cli.main(["stack", "key", "--root", str(checkout)]) == cli.EXIT_UNAVAILABLE
    assert "pdfbatch stack up" in capsys.readouterr().err
    key = local_api_key(checkout, "pdfbatch-test")
    assert cli.main(["stack", "key", "--root", str(checkout)]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == key
