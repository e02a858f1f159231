"""Two local stacks in one checkout (two ports) keep their own state, and tooling acts on the checkout it
is run from (issue 24, item 8)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tools import deploy as ops_deploy
from tools import localstack
from tools.build import project_root

from pdfbatch.api_client import local_api_key, remember_api_url, stored_api_key

A, B = "http://127.0.0.1:4591", "http://127.0.0.1:4592"


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder that find_root() and project_root() take for a checkout, as the current folder."""
    (tmp_path / "infra" / "localstack").mkdir(parents=True)
    (tmp_path / "infra" / "localstack" / "requirements.txt").write_text("")
    (tmp_path / "infra" / "template.yaml").write_text("Resources: {}\n")
    (tmp_path / "src" / "pdfbatch").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PDFBATCH_API_KEY", raising=False)
    return tmp_path


@pytest.fixture()
def fake_stacks(checkout: Path) -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """A 'LocalStack' and one of its function processes per port, with the state `start` leaves."""
    procs: dict[str, subprocess.Popen[bytes]] = {}
    for endpoint in (A, B):
        layout = localstack.layout_for(checkout, endpoint)
        layout.home.mkdir(parents=True)
        env = {**os.environ, localstack.HOME_ENV: str(layout.home)}
        # the LocalStack leads its own process group; the function process carries only the marker
        main = subprocess.Popen(["sleep", "300"], start_new_session=True, env=env)
        function = subprocess.Popen(["sleep", "300"], start_new_session=True, env=env)
        layout.pid_file.write_text(f"{main.pid}\n")
        (layout.home / "auto-stop").touch()
        procs[f"{endpoint}/main"], procs[f"{endpoint}/function"] = main, function
    yield procs
    for proc in procs.values():
        proc.kill()
        proc.wait()


def _alive(proc: subprocess.Popen[bytes]) -> bool:
    return proc.poll() is None


def test_stopping_one_port_leaves_the_other_ports_stack_and_its_functions(
    checkout: Path, fake_stacks: dict[str, subprocess.Popen[bytes]]
) -> None:
    # WHEN the stack on port B is stopped
    assert localstack.stop(checkout, B, timeout=5)
    # THEN B's LocalStack and function process are gone, A's and A's state are untouched
    fake_stacks[f"{B}/main"].wait(timeout=5)
    fake_stacks[f"{B}/function"].wait(timeout=5)
    assert _alive(fake_stacks[f"{A}/main"]) and _alive(fake_stacks[f"{A}/function"])
    a = localstack.layout_for(checkout, A)
    assert a.pid_file.read_text().strip() == str(fake_stacks[f"{A}/main"].pid)
    assert (a.home / "auto-stop").exists()
    assert localstack.status(checkout, A).pid == fake_stacks[f"{A}/main"].pid
    assert localstack.status(checkout, B).pid is None


def test_the_port_in_the_environment_chooses_the_stack_the_command_line_stops(
    checkout: Path, fake_stacks: dict[str, subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN PDFBATCH_LOCALSTACK_PORT=B, as a second engineer's shell has it
    monkeypatch.setenv(localstack.PORT_ENV, B.rsplit(":", 1)[1])
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    # WHEN `python -m tools.localstack down` runs
    assert localstack.main(["down"]) == 0
    # THEN only B's stack stopped
    fake_stacks[f"{B}/main"].wait(timeout=5)
    assert _alive(fake_stacks[f"{A}/main"]) and _alive(fake_stacks[f"{A}/function"])


def test_the_last_lease_on_one_port_does_not_stop_the_other_port(
    checkout: Path, fake_stacks: dict[str, subprocess.Popen[bytes]]
) -> None:
    # GIVEN this process held a lease on B only
    leases = localstack.layout_for(checkout, B).home / "leases"
    leases.mkdir()
    (leases / str(os.getpid())).write_text(B)
    # WHEN it releases it (the last holder out stops what a holder started)
    assert localstack.release(checkout, B)
    # THEN B stopped and A, whose auto-stop marker is its own, still runs
    fake_stacks[f"{B}/main"].wait(timeout=5)
    assert _alive(fake_stacks[f"{A}/main"])
    assert (localstack.layout_for(checkout, A).home / "auto-stop").exists()


def test_each_ports_stack_keeps_its_own_api_key_file(checkout: Path) -> None:
    # GIVEN one stack name deployed on two ports of one checkout
    url_a, url_b = f"{A}/_aws/execute-api/aaa/v1/", f"{B}/_aws/execute-api/bbb/v1/"
    key_a = local_api_key(checkout, "pdfbatch", endpoint=A)
    remember_api_url(checkout, "pdfbatch", url_a, endpoint=A)
    key_b = local_api_key(checkout, "pdfbatch", endpoint=B)
    remember_api_url(checkout, "pdfbatch", url_b, endpoint=B)
    # THEN each URL finds its own stack's key: B's deploy did not rewrite A's record
    assert stored_api_key(url_a) == key_a and stored_api_key(url_b) == key_b
    assert (checkout / ".localstack" / "4591" / "api-keys" / "pdfbatch.json").is_file()


def test_tooling_acts_on_the_checkout_it_is_run_from(checkout: Path, tmp_path: Path) -> None:
    # The package here is installed from the worktree the tests run in, not from `checkout`.
    assert Path(ops_deploy.__file__).resolve().is_relative_to(checkout) is False
    assert project_root() == checkout
    (checkout / "src" / "pdfbatch" / "deep").mkdir()
    assert project_root(checkout / "src" / "pdfbatch" / "deep") == checkout


def test_deploy_run_as_a_module_builds_and_keys_the_current_checkout(checkout: Path) -> None:
    # GIVEN a checkout without functions, with the command run from inside it
    # (tools/ is not installed: it is found in the checkout the tests run from)
    tooling = str(Path(ops_deploy.__file__).resolve().parents[1])
    env = {**os.environ, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "PYTHONPATH": tooling}
    # WHEN `python -m tools.deploy` runs there
    done = subprocess.run(
        [sys.executable, "-m", "tools.deploy"],
        cwd=checkout,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # THEN it fails on that checkout's missing handler (not building the installed package's checkout),
    # before any request, and writes no key into the installed package's checkout
    assert done.returncode == 1
    assert str(checkout / "functions") in done.stderr, done.stderr
    assert not (checkout / ".localstack").exists()
