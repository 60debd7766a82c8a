"""Regenerate the committed llama-server flag list (names, arity, value types) from the pinned build's `--help`.

Run after changing the llama-cpp-python pin; tests/adapter/deploy/test_llama_flags.py fails until the
committed list matches the built binary again (and until every refused flag in
`llama_server_unsafe_flags.json` is still one of its flags).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
from pathlib import Path

from semif_adapter.deploy import llama_flags

FLAGS_PATH = Path(llama_flags.__file__).with_name(llama_flags.FLAGS_FILE)


def help_text(server: str) -> str:
    return subprocess.run([server, "--help"], capture_output=True, text=True, check=True).stdout


def render(source: str, flags: dict[str, llama_flags.Flag]) -> str:
    """One flag per line, so a llama.cpp upgrade shows up as a readable diff."""
    lines = [f" {json.dumps(name)}: {json.dumps(flag.to_json())}" for name, flag in flags.items()]
    return f'{{"source": {json.dumps(source)},\n"flags": {{\n' + ",\n".join(lines) + "\n}}\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=shutil.which("llama-server"), help="llama-server binary")
    parser.add_argument("--source", required=True, help="what the list was read from, e.g. the pin")
    args = parser.parse_args()
    if not args.server:
        parser.error("llama-server not found; run the bootstrap or pass --server")
    flags = llama_flags.parse_help(help_text(args.server))
    FLAGS_PATH.write_text(render(args.source, flags))
    print(f"{FLAGS_PATH}: {len(flags)} flags")


if __name__ == "__main__":
    main()
