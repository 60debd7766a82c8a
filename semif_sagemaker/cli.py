"""semif: package a GGUF model for SageMaker, run both endpoints locally, smoke-test, evaluate and batch them.

One argparse tree built from each tool's `add_parser`: `semif smoke decision --local` and `python -m scripts.smoke
decision --local` (in a checkout) are the same parser and the same `run`, with the same options, output and exit
status (the contract: scripts/common/command.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .tools import batch, demo, evaluate, keys, local, package, smoke
from .tools.common.command import Commands

# In the order `semif --help` lists them: the product's tools, then the checkout-only demo. The measuring harness is
# not a command: it runs from a checkout as `python -m bench.<subject>` (docs/development.md).
TOOLS = (package, local, smoke, keys, evaluate, batch, demo)
EPILOG = """\
`semif COMMAND --help` shows a command's options and examples:
  semif local --port 8080 &
  semif smoke decision --local
  semif batch in.jsonl -o out.jsonl --local"""


def commands() -> Commands:
    return Commands(TOOLS, description=__doc__.splitlines()[0], epilog=EPILOG, formatter_class=_Formatter)


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """Every command's name on its summary's line: Python 3.11's argparse sizes the column without the commands."""

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        for name in getattr(action, "choices", None) or ():
            width = len(name) + self._current_indent + 2 * self._indent_increment
            self._action_max_length = max(self._action_max_length, width)


def main(argv: Sequence[str] | None = None) -> int:
    return commands().main(sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(main())
