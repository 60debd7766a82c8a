"""`semif`: one command for what the repository's scripts do, each subcommand the script's own `main(argv)`.

`semif smoke decision --local` and `python -m scripts.smoke decision --local` (in a checkout) are the same code
with the same options, output and exit status; this module only picks the script and names it in `--help`.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import tools
from .tools import usage

PROG = "semif"
EXTRAS = {"llama_cpp": "adapter", "aws_cdk": "cdk", "constructs": "cdk", "cdk_nag": "cdk", "sagemaker": "sagemaker"}
HELP = frozenset({"-h", "--help"})
CHECKOUT_FILES = ("cdk.json", "container/serve")  # what only a clone of the repository has


@dataclass(frozen=True)
class Command:
    module: str  # under semif_sagemaker.tools
    summary: str
    needs_checkout: str | None = None  # why, when the command runs only inside a clone of the repository
    translate: Callable[[list[str]], list[str]] | None = None  # this subcommand's argv -> the module's


def checkout_root() -> Path | None:
    """The repository the tools run from, when they run from one (an editable install or `python -m`)."""
    root = Path(tools.__file__).resolve().parents[1]
    return root if all((root / name).is_file() for name in CHECKOUT_FILES) else None


def _check_argv(argv: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} check", description="Validate an existing model.tar.gz as both endpoints will load it.",
        epilog="examples:\n    semif check model.tar.gz\n    semif check model.tar.gz --allow-mmproj",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("tarball", help="the artifact (model.tar.gz)")
    parser.add_argument("--allow-mmproj", action="store_true", help="accept a multimodal projector beside the model")
    args = parser.parse_args(argv)
    return ["--check", args.tarball, *(["--allow-mmproj"] if args.allow_mmproj else [])]


def _calibrate_argv(argv: list[str]) -> list[str]:
    parser = argparse.ArgumentParser(
        prog=f"{PROG} calibrate", description="Fit a SEMIF_CALIBRATION document on labelled cases (held-out split "
                                              "by decision id) and print the figures before and after.",
        epilog="examples:\n"
               "    semif calibrate cases.jsonl -o calibration.json --local --scoring letters,pmi\n"
               "    semif calibrate cases.jsonl -o calibration.json --endpoint-url http://127.0.0.1:8080\n\n"
               "every other option is `semif evaluate`'s (target, --scoring, --debias, --json ...): "
               "semif evaluate --help",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cases", help="labelled cases, JSON Lines")
    parser.add_argument("-o", "--output", required=True, metavar="CALIBRATION.json", help="the fitted document")
    args, rest = parser.parse_known_args(argv)
    return [args.cases, *rest, "--fit-calibration", args.output]


COMMANDS: dict[str, Command] = {
    "package": Command("package_model", "package a GGUF model as SageMaker's model.tar.gz (or --convert it)"),
    "check": Command("package_model", "validate an existing model.tar.gz", translate=_check_argv),
    "local": Command("local_endpoints", "both endpoints on this machine behind a SageMaker-runtime gateway"),
    "smoke": Command("smoke", "smoke-test the chat or decision endpoint, or the System One API (AWS or --local)"),
    "keys": Command("keys", "create, list or revoke the keys of an environment's System One API (AWS)"),
    "evaluate": Command("evaluate", "decision quality on labelled cases: accuracy, order flips, calibration"),
    "calibrate": Command("evaluate", "fit a calibration on labelled cases (evaluate --fit-calibration)",
                         translate=_calibrate_argv),
    "batch": Command("batch", "answer a JSON Lines file through an endpoint or Batch Transform, resumably"),
    "bench": Command("bench_decisions", "decision latency and throughput against the floor and the alternatives",
                     needs_checkout="it builds against the repository's llama-server and container/ and writes "
                                    "docs/bench/"),
}


def top_parser() -> argparse.ArgumentParser:
    width = max(map(len, COMMANDS))
    listing = "\n".join(f"  {name:<{width}}  {command.summary}" for name, command in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog=PROG, description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"commands:\n{listing}\n\n`{PROG} COMMAND --help` shows a command's options and examples:\n"
               f"  {PROG} local --port 8080 &\n  {PROG} smoke decision --local\n"
               f"  {PROG} batch in.jsonl -o out.jsonl --local")
    parser.add_argument("command", choices=COMMANDS, metavar="COMMAND", help="one of the commands below")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the command's own arguments")
    return parser


def offline_help(name: str, command: Command) -> str:
    """`--help` of a command that runs only in a checkout, from its docstring (its imports need the checkout)."""
    spec = importlib.util.find_spec(f"{tools.__name__}.{command.module}")
    assert spec is not None and spec.origin is not None
    doc = ast.get_docstring(ast.parse(Path(spec.origin).read_text())) or command.summary
    return (f"usage: {PROG} {name} [options]\n\n{doc.splitlines()[0]}\n\nIt runs only in a clone of the "
            f"semif-sagemaker repository ({command.needs_checkout}); there, `{PROG} {name} --help` lists its "
            f"options.\n\n{usage.examples(doc)}")


def missing_extra(error: ModuleNotFoundError) -> str:
    package = (error.name or "").split(".")[0]
    extra = EXTRAS.get(package)
    how = f"pip install 'semif-sagemaker[{extra}]'" if extra else f"pip install {package}"
    return f"needs the Python package {package!r} ({how})"


def main(argv: Sequence[str] | None = None) -> int:
    args = top_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    name, command = args.command, COMMANDS[args.command]
    usage.COMMAND = f"{PROG} {name}"
    if command.needs_checkout and checkout_root() is None:
        if HELP & set(args.args):
            print(offline_help(name, command))
            return 0
        print(f"{PROG} {name}: runs only in a clone of the semif-sagemaker repository ({command.needs_checkout}); "
              f"run it there: `{PROG} {name}` or `python -m scripts.{command.module}`", file=sys.stderr)
        return 2
    try:
        module = importlib.import_module(f"{tools.__name__}.{command.module}")
    except ModuleNotFoundError as error:
        print(f"{PROG} {name}: {missing_extra(error)}", file=sys.stderr)
        return 2
    forwarded = command.translate(args.args) if command.translate else args.args
    return int(module.main(forwarded) or 0)


if __name__ == "__main__":
    sys.exit(main())
