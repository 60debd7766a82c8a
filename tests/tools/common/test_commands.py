"""One way into each tool: `semif X` builds one argparse tree from the tools' `add_parser`, `python -m scripts.X`
builds the same subcommand alone (scripts/common/command.py); what the tree does with a usage error, a command that
needs a clone, and a missing extra."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from scripts import evaluate, package
from scripts.common.command import CheckoutRequired, Commands, Subparsers, UsageError, add_command, alias, parse
from semif_sagemaker import cli

REPO = Path(__file__).resolve().parents[3]


def test_every_subcommand_has_its_help_and_examples(capsys: pytest.CaptureFixture[str]) -> None:
    commands = cli.commands()
    assert list(commands.owners) == ["package", "check", "local", "smoke", "keys", "evaluate", "calibrate", "batch",
                                     "demo"]
    for name in commands.owners:
        with pytest.raises(SystemExit) as stopped:
            commands.main([name, "--help"])
        shown = capsys.readouterr().out
        assert stopped.value.code == 0 and shown.startswith(f"usage: semif {name} "), shown[:200]
        assert f"semif {name} " in shown.split("examples:")[1], name


@pytest.mark.parametrize("name", ["smoke", "evaluate", "demo"])
def test_python_m_is_the_same_parser_as_semif(name: str) -> None:
    command = name.rpartition(".")[2]
    semif = subprocess.run([str(Path(sys.executable).with_name("semif")), command, "--help"], capture_output=True,
                           text=True, check=True, cwd=REPO, env={"COLUMNS": "120", "PATH": "/usr/bin"})
    module = subprocess.run([sys.executable, "-m", f"scripts.{name}", "--help"], capture_output=True, text=True,
                            check=True, cwd=REPO, env={"COLUMNS": "120", "PATH": "/usr/bin"})
    assert module.stdout == semif.stdout


def test_a_tool_with_two_subcommands_is_reached_by_its_first_as_a_module() -> None:
    assert parse(package, ["model.gguf"]).command == "package"
    assert parse(package, ["model.tar.gz"], "check").tarball == Path("model.tar.gz")
    calibrate = parse(evaluate, ["cases.jsonl", "-o", "cal.json", "--local"], "calibrate")
    assert (calibrate.command, calibrate.fit_calibration) == ("calibrate", Path("cal.json"))
    assert parse(evaluate, ["cases.jsonl", "--local"]).fit_calibration is None


def stand_in(failure: BaseException | None = None, problem: str | None = None) -> ModuleType:
    """A tool as the contract wants one: its own parser, a check of its options, and a run."""
    tool = ModuleType("stand_in")

    def add_parser(subparsers: Subparsers) -> None:
        add_command(subparsers, "try", "Try something.\n\n    semif try --twice\n", summary="try it").add_argument(
            "--twice", action="store_true")

    def validate(args: argparse.Namespace) -> None:
        if problem:
            raise UsageError(problem)

    def run(args: argparse.Namespace) -> int:
        if failure:
            raise failure
        return 7 if args.twice else 0

    tool.add_parser, tool.validate, tool.run = add_parser, validate, run
    return tool


def test_the_tools_exit_status_is_the_commands() -> None:
    assert alias(stand_in(), ["--twice"]) == 7
    assert Commands([stand_in()]).main(["try"]) == 0


def test_a_usage_error_is_argparses_for_the_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        alias(stand_in(problem="--twice needs a reason"), ["--twice"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1] == "semif try: error: --twice needs a reason"


@pytest.mark.parametrize(("failure", "said"), [
    (ModuleNotFoundError("no llama_cpp", name="llama_cpp"),
     "semif try: needs the Python package 'llama_cpp' (pip install 'semif-sagemaker[adapter]')"),
    (CheckoutRequired("runs only in a clone of the semif-sagemaker repository (it reads container/)"),
     "semif try: runs only in a clone of the semif-sagemaker repository (it reads container/); run it there"),
])
def test_what_the_command_cannot_do_here_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str],
                                                                  failure: BaseException, said: str) -> None:
    assert alias(stand_in(failure), []) == 2
    assert capsys.readouterr().err == said + "\n"
