"""The contract every tool package keeps, and the one way into it.

A tool package has `add_parser(subparsers)`, which adds its subcommand(s) with `add_command`, and `run(args)`,
which runs one and returns the exit status; one whose options must agree with each other also has
`validate(args)`, raising UsageError. A tool's `run` imports its implementation when it runs, so that building
the parsers (`semif --help`) needs none of it: some of it needs an extra (the adapter's llama.cpp bindings, the
CDK) or the checkout. `semif X` (semif_sagemaker/cli.py) builds one tree from every tool;
`python -m scripts.X` (the tool's `__main__`, for a checkout whose `semif` is not on the PATH) builds the same
subcommand alone. Either way --help names it `semif X`, so a tool's examples are written once, in its docstring.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

PROG = "semif"
CHECKOUT_FILES = ("cdk.json", "container/serve")  # what only a clone of the repository has
# A missing import names the extra that brings it (pyproject's optional dependencies).
EXTRAS = {"llama_cpp": "adapter", "aws_cdk": "cdk", "constructs": "cdk", "cdk_nag": "cdk", "sagemaker": "sagemaker"}
Subparsers = Any  # argparse's private _SubParsersAction


class UsageError(Exception):
    """Options that parse but do not go together: argparse's usage error of the subcommand (exit status 2)."""


class CheckoutRequired(Exception):  # noqa: N818 (a verdict on where the command runs)
    """The command runs only inside a clone of the repository; the message says why."""


def examples(doc: str) -> str:
    """The docstring's indented command lines: its examples, shown under --help."""
    lines = [line for line in doc.splitlines() if line.startswith("    ") and line.strip()]
    return "examples:\n" + "\n".join(lines) if lines else ""


def add_command(subparsers: Subparsers, name: str, doc: str, *, summary: str,
                epilog: str = "") -> argparse.ArgumentParser:
    """A subcommand described by `doc`: its first line, then its examples (and `epilog`) under --help."""
    return subparsers.add_parser(
        name, help=summary, description=doc.splitlines()[0],
        epilog="\n\n".join(part for part in (examples(doc), epilog) if part),
        formatter_class=argparse.RawDescriptionHelpFormatter)


def program_parser(doc: str, module: str) -> argparse.ArgumentParser:
    """The parser of a program run as `python -m MODULE` (a measuring program, not a `semif` command)."""
    return argparse.ArgumentParser(prog=f"python -m {module}", description=doc.splitlines()[0], epilog=examples(doc),
                                   formatter_class=argparse.RawDescriptionHelpFormatter)


def checkout_root() -> Path | None:
    """The repository the tools run from, when they run from one (an editable install or `python -m`)."""
    root = Path(__file__).resolve().parents[2]
    return root if all((root / name).is_file() for name in CHECKOUT_FILES) else None


def require_checkout(why: str) -> Path:
    root = checkout_root()
    if root is None:
        raise CheckoutRequired(f"runs only in a clone of the semif-sagemaker repository ({why})")
    return root


def missing_extra(error: ModuleNotFoundError) -> str:
    package = (error.name or "").split(".")[0]
    extra = EXTRAS.get(package)
    how = f"pip install 'semif-sagemaker[{extra}]'" if extra else f"pip install {package}"
    return f"needs the Python package {package!r} ({how})"


class Commands:
    """The argparse tree of some tools, and which tool owns each subcommand."""

    def __init__(self, tools: Sequence[ModuleType], **parser_options: Any) -> None:
        self.parser = argparse.ArgumentParser(prog=PROG, **parser_options)
        self._subparsers = self.parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
        self.owners: dict[str, ModuleType] = {}
        for tool in tools:
            known = set(self._subparsers.choices)
            tool.add_parser(self._subparsers)
            self.owners.update((name, tool) for name in self._subparsers.choices if name not in known)

    def subparser(self, name: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = self._subparsers.choices[name]
        return parser

    def parse(self, argv: Sequence[str]) -> argparse.Namespace:
        """Parsed and checked arguments; a usage error exits 2 with the subcommand's usage line, as argparse does."""
        args = self.parser.parse_args(list(argv))
        validate = getattr(self.owners[args.command], "validate", None)
        if validate is not None:
            try:
                validate(args)
            except UsageError as error:
                self.subparser(args.command).error(str(error))
        return args

    def main(self, argv: Sequence[str]) -> int:
        args = self.parse(argv)
        try:
            return int(self.owners[args.command].run(args) or 0)
        except CheckoutRequired as error:
            print(f"{PROG} {args.command}: {error}; run it there", file=sys.stderr)
        except ModuleNotFoundError as error:
            print(f"{PROG} {args.command}: {missing_extra(error)}", file=sys.stderr)
        return 2


def parse(tool: ModuleType, argv: Sequence[str], command: str | None = None) -> argparse.Namespace:
    """`semif COMMAND ARGV` parsed and checked with this tool's parser alone (COMMAND: the tool's first)."""
    commands = Commands([tool])
    return commands.parse([command or next(iter(commands.owners)), *argv])


def alias(tool: ModuleType, argv: Sequence[str] | None = None) -> int:
    """`python -m scripts.X ARGS`: `semif X ARGS`, the tool's own (first) subcommand with the same parser and run."""
    commands = Commands([tool])
    return commands.main([next(iter(commands.owners)), *(sys.argv[1:] if argv is None else argv)])
