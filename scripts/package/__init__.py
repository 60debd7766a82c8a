"""Package a GGUF model as SageMaker's `model.tar.gz` (`semif package`), or check an existing one (`semif check`).

    semif package MODEL.gguf -o model.tar.gz [--mmproj PROJECTOR.gguf]
                  [--convert TYPE [--agreement N]] [--accelerator cpu|gpu]

`--convert TYPE` re-encodes the model with llama.cpp's own quantizer first (e.g. Q8_0: the embedded Q4_1 has
no fast CPU kernel) and prints how far the converted model's decisions are from the original's on a fixed set
of decisions, per scoring method. Packaging says when the model's weight types have no fast kernel on the
accelerator it is meant for, and what the chat endpoint will do with a model that has no chat template (`semif
check` too: the warning needs only the header). Both say what the header makes of the model and who will score
it on the decision endpoint (`decisions: decision model: openjev (llama.cpp's own decision engine)` for a GGUF
that declares `<arch>.decision.type`, `generic chat model: our engine` for any other), and refuse a decision type
the pinned llama.cpp does not serve (naming the key and the supported types) and a decision model without
`tokenizer.chat_template.systemone`. Every refusal is one line naming the file and the rule, with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from semif_adapter.deploy.agreement_cases import DECISIONS
from semif_adapter.deploy.quantize import CONVERT_TYPES

from ..common.command import Subparsers, UsageError, add_command

CHECK = """Validate an existing model.tar.gz as both endpoints will load it.

    semif check model.tar.gz
    semif check model.tar.gz --allow-mmproj
"""


def add_parser(subparsers: Subparsers) -> None:
    parser = add_command(subparsers, "package", __doc__,
                         summary="package a GGUF model as SageMaker's model.tar.gz (or --convert it)")
    parser.add_argument("model", type=Path, help="the .gguf (first shard of a split model)")
    parser.add_argument("-o", "--output", type=Path, default=Path("model.tar.gz"))
    parser.add_argument("--mmproj", type=Path, help="also package this multimodal projector")
    parser.add_argument("--convert", metavar="TYPE", type=str.upper, choices=CONVERT_TYPES,
                        help=f"re-encode the model first with llama.cpp's quantizer: {', '.join(CONVERT_TYPES)}")
    parser.add_argument("--agreement", type=int, default=len(DECISIONS), metavar="N",
                        help=f"with --convert: decisions of the fixed set to compare (0 to {len(DECISIONS)}, "
                             f"default {len(DECISIONS)}; each is scored 3 ways by both models)")
    parser.add_argument("--accelerator", choices=("cpu", "gpu"), default="cpu",
                        help="what the endpoint runs on, for the kernel check (default cpu)")
    check = add_command(subparsers, "check", CHECK, summary="validate an existing model.tar.gz")
    check.add_argument("tarball", type=Path, help="the artifact (model.tar.gz)")
    check.add_argument("--allow-mmproj", action="store_true", help="accept a multimodal projector beside the model")


def validate(args: argparse.Namespace) -> None:
    if args.command == "package" and not 0 <= args.agreement <= len(DECISIONS):
        raise UsageError(f"--agreement: between 0 and {len(DECISIONS)} decisions")


def run(args: argparse.Namespace) -> int:
    from semif_adapter.deploy.quantize import ConversionError
    from semif_adapter.engine.model_files import ModelFileError

    from .packaging import check, converted_package, package, report

    try:
        if args.command == "check":
            return report(check(args.tarball, args.allow_mmproj), None)
        if args.convert:
            return report(*converted_package(args))
        return report(*package(args.model, args.output, args.mmproj, args.accelerator))
    except (ModelFileError, ConversionError) as error:
        print(f"package_model: refused: {error}", file=sys.stderr)
        return 2
