"""The API key outside the function: generated once per local stack, found by every ApiClient, sent."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from pdfbatch.ops import deploy as ops_deploy
from pdfbatch.ops.api import (
    ApiClient,
    api_key_file,
    local_api_key,
    read_api_key,
    remember_api_url,
    stored_api_key,
)

URL = "http://127.0.0.1:4566/_aws/execute-api/abc123/v1/"


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


def test_a_corrupt_key_file_is_replaced_by_a_new_key(checkout: Path) -> None:
    path = api_key_file(checkout, "pdfbatch")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert read_api_key(checkout, "pdfbatch") is None
    assert len(local_api_key(checkout, "pdfbatch")) >= 32


def test_deploying_to_aws_without_a_key_is_refused_before_anything_is_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PDFBATCH_API_KEY", raising=False)

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("built although the deploy cannot succeed")

    monkeypatch.setattr(ops_deploy, "build", no_build)
    with pytest.raises(ops_deploy.DeployError, match="PDFBATCH_API_KEY"):
        ops_deploy.deploy(ops_deploy.DeployParams.from_env(), endpoint_url=None, stack_name="pdfbatch")


def test_the_key_is_a_template_parameter_and_never_printed() -> None:
    params = ops_deploy.DeployParams.from_env({"PDFBATCH_API_KEY": "k" * 20})
    assert params.template_parameters()["ApiKey"] == "k" * 20
    assert "k" * 20 not in repr(params)


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
