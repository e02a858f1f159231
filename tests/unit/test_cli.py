"""The command line's contract: every command explains itself, data has --json, exit codes are fixed."""

from __future__ import annotations

import argparse
import sys

import pytest

from pdfbatch import cli
from pdfbatch.cli import common
from pdfbatch.cli.operator import _service_errors
from pdfbatch.errors import DependencyUnavailable, InvalidInput, NotFound


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every leaf command by its words (`stack up`, `retry`, ...)."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                words = f"{parser.prog.removeprefix('pdfbatch').strip()} {name}".strip()
                nested = subcommands(sub)
                found.update(nested or {words: sub})
    return found


COMMANDS = subcommands(cli.build_parser())
# Commands whose output is data a script may want.
DATA_COMMANDS = {
    "upload",
    "status",
    "files",
    "find",
    "retry",
    "dlq",
    "report",
    "check",
    "gc",
    "stack up",
    "stack status",
}


def test_the_operator_commands_exist() -> None:
    assert {"retry", "dlq", "report", "gc", "upload", "status", "files"} <= set(COMMANDS)


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_command_has_help_with_an_example(words: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main([*words.split(), "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    # stack's sub-commands share the example of `stack --help`
    text = out if not words.startswith("stack ") else out + cli.build_parser().format_help()
    assert "example" in text, words


@pytest.mark.parametrize("words", sorted(DATA_COMMANDS))
def test_commands_that_print_data_have_json(words: str) -> None:
    assert "--json" in COMMANDS[words].format_help()


@pytest.mark.parametrize("words", ["retry", "dlq", "report", "gc"])
def test_operator_commands_document_their_exit_codes(words: str) -> None:
    text = COMMANDS[words].format_help()
    assert "0 ok" in text and "1 the batch FAILED" in text and "2 bad usage" in text and "3 a service" in text


def test_retry_help_says_what_happens_to_linked_files() -> None:
    text = " ".join(COMMANDS["retry"].format_help().split())
    assert "Linked files are never re-run" in text and "--failed-only" in text


def test_bad_usage_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        cli.main(["retry"])  # no batch id
    assert done.value.code == cli.EXIT_USAGE
    with pytest.raises(SystemExit) as done:
        cli.main(["dlq", "--limit", "many"])
    assert done.value.code == cli.EXIT_USAGE


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (NotFound("no such batch"), cli.EXIT_USAGE),
        (InvalidInput("batch FAILED as a whole"), cli.EXIT_USAGE),
        (DependencyUnavailable("redis", "ConnectionError"), cli.EXIT_UNAVAILABLE),
    ],
)
def test_service_errors_become_one_sentence_and_the_documented_code(error: Exception, code: int) -> None:
    with pytest.raises(cli.CliError) as raised, _service_errors():
        raise error
    assert raised.value.code == code
    assert str(error) in str(raised.value)


def test_exit_codes_are_the_documented_numbers() -> None:
    assert (cli.EXIT_OK, cli.EXIT_BATCH_FAILED, cli.EXIT_USAGE, cli.EXIT_UNAVAILABLE) == (0, 1, 2, 3)


def test_gc_is_a_dry_run_unless_told_to_delete_and_keeps_a_day_of_grace_by_default() -> None:
    args = cli.build_parser().parse_args(["gc"])
    assert (args.delete, args.older_than) == (False, "1d")
    text = " ".join(COMMANDS["gc"].format_help().split())
    assert "Dry run by default" in text and "--delete" in text


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, "http://127.0.0.1:4566"),
        ({"PDFBATCH_LOCALSTACK_PORT": "4599"}, "http://127.0.0.1:4599"),
        (
            {"PDFBATCH_LOCALSTACK_PORT": "4599", "AWS_ENDPOINT_URL": "http://elsewhere:1"},
            "http://elsewhere:1",
        ),
        ({"PDFBATCH_LOCALSTACK_PORT": "4599", "AWS_ENDPOINT_URL": ""}, None),  # empty: real AWS
    ],
)
def test_the_cli_finds_the_local_stack_where_the_tests_bench_and_soak_do(
    env: dict[str, str], expected: str | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN an environment that names (or not) a LocalStack port and an endpoint
    for name in ("PDFBATCH_LOCALSTACK_PORT", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    # THEN `pdfbatch stack up`, `demo` and every other command talk to that endpoint
    assert common.endpoint_url() == expected


def test_demo_outside_a_checkout_says_where_it_runs(monkeypatch, capsys):
    # GIVEN an installed pdfbatch without the checkout's dev tooling (tools/ is not in the wheel)
    monkeypatch.setitem(sys.modules, "tools", None)
    # WHEN the operator runs the demo
    code = cli.main(["demo"])
    # THEN one sentence says to run it from a checkout, before any stack is started
    assert code == 2
    assert "make demo" in capsys.readouterr().err
