"""How a command names itself in `--help`: `python -m scripts.X` in the repository, `semif X` once installed.

The `semif` command (semif_sagemaker/cli.py) sets COMMAND before it hands over to a module's `main(argv)`, so
one parser serves both ways in, and its examples come from the module's docstring, where they are written once.
"""

from __future__ import annotations

import argparse
import re

COMMAND: str | None = None  # e.g. "semif smoke", set by the `semif` command
_INVOCATION = re.compile(r"(?:\.venv/bin/)?python3? (?:-m scripts\.\w+|scripts/\w+\.py)")


def examples(doc: str) -> str:
    """The docstring's indented command lines, rewritten to the way this command was started."""
    lines = [line for line in doc.splitlines() if line.startswith("    ") and line.strip()]
    if COMMAND is not None:
        lines = [_INVOCATION.sub(COMMAND, line) for line in lines]
    return "examples:\n" + "\n".join(lines) if lines else ""


def command_parser(doc: str, module: str, *, epilog: str = "") -> argparse.ArgumentParser:
    """The module's parser: its docstring's first line, its examples (then `epilog`), and the right name."""
    return argparse.ArgumentParser(
        prog=COMMAND or f"python -m scripts.{module}", description=doc.splitlines()[0],
        epilog="\n\n".join(part for part in (examples(doc), epilog) if part),
        formatter_class=argparse.RawDescriptionHelpFormatter)
