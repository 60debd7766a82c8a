"""The README's demo: package the model, run both endpoints locally, smoke-test them, synthesize the stack.

    make demo        # or: semif demo [--skip-synth]

Steps, each named when it fails (exit status 1): package and check
model.tar.gz; start the local endpoints (gateway and both containers) and wait
for their /ping; smoke-test them in --local mode (chat, chat --stream,
decision); stop everything with SIGTERM within a bounded wait and prove no
process is left; `cdk synth` for env=dev, printing where the templates are.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..common.command import Subparsers, add_command, require_checkout


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "demo", __doc__,
                         summary="the README's demo: package, serve locally, smoke-test, synthesize (in a clone)")
    parser.add_argument("--model", type=Path, help="GGUF model (default: the embedded SmolLM2-135M)")
    parser.add_argument("--skip-synth", action="store_true", help="stop after the local endpoints")


def run(args: argparse.Namespace) -> int:
    require_checkout("it writes model.tar.gz and cdk.out/ there and synthesizes its CDK app")
    from semif_adapter.engine.embedded_model import embedded_model_path

    from .steps import DemoError, run_steps, say

    started = time.monotonic()
    try:
        run_steps((args.model or embedded_model_path()).resolve(), args.skip_synth)
    except DemoError as error:
        say(f"FAILED: {error}")
        return 1
    say(f"all steps passed in {time.monotonic() - started:.1f} s")
    return 0
