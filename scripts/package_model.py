"""Package a GGUF model as SageMaker's `model.tar.gz`, or check an existing artifact.

    python scripts/package_model.py MODEL.gguf -o model.tar.gz [--mmproj PROJECTOR.gguf]
                                    [--convert TYPE [--agreement N]] [--accelerator cpu|gpu]
    python scripts/package_model.py --check model.tar.gz

`--convert TYPE` re-encodes the model with llama.cpp's own quantizer first (e.g. Q8_0: the embedded Q4_1 has
no fast CPU kernel) and prints how far the converted model's decisions are from the original's on a fixed set
of decisions, per scoring method. Packaging says when the model's weight types have no fast kernel on the
accelerator it is meant for, and what the chat endpoint will do with a model that has no chat template (--check
too: the warning needs only the header). Every refusal is one line naming the file and the rule, with exit
status 2.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if not __package__:  # `python scripts/package_model.py`: run as the module of its package (relative imports)
    import runpy
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    sys.exit(runpy.run_module("scripts.package_model", run_name="__main__", alter_sys=True) and 0)

from tqdm import tqdm

from semif_adapter.agreement_cases import DECISIONS
from semif_adapter.artifact import (
    ArtifactReport,
    build_tarball,
    chat_template_warning,
    check_tarball,
    model_files_for,
)
from semif_adapter.kernel_paths import KernelReport, kernel_report
from semif_adapter.model_files import ModelFileError
from semif_adapter.quantize import CONVERT_TYPES, ConversionError, convert

from .usage import command_parser

PROGRESS_FROM_BYTES = 1 << 30  # a bar is noise for small files, welcome for multi-GB ones


@contextmanager
def progress_bar(total: int, label: str) -> Iterator[tqdm]:
    with tqdm(total=total, unit="B", unit_scale=True, desc=label, file=sys.stderr,
              disable=total < PROGRESS_FROM_BYTES) as bar:
        yield bar


Packaged = tuple[ArtifactReport, KernelReport | None]


def package(model: Path, output: Path, projector: Path | None, accelerator: str) -> Packaged:
    """The tarball, and which of the model's weight types have a fast kernel on the accelerator."""
    files, _ = model_files_for(model, projector)
    with progress_bar(sum(p.stat().st_size for p in files), "packaging") as bar:
        report = build_tarball(model, output, projector=projector, progress=bar.update)
    try:
        return report, kernel_report(model, accelerator)
    except ValueError as error:  # the packaging rules passed; the check is advice, never a refusal
        print(f"package_model: kernel check skipped: {error}", file=sys.stderr)
        return report, None


def check(tarball: Path, allow_projector: bool) -> ArtifactReport:
    with progress_bar(tarball.stat().st_size if tarball.is_file() else 0, "checking") as bar:
        return check_tarball(tarball, allow_projector=allow_projector, progress=bar.update)


def converted_package(args: argparse.Namespace) -> Packaged:
    """Convert into a scratch directory beside the output (same file system), measure, package, clean up."""
    model_files_for(args.model, args.mmproj)  # the source's packaging rules first: refusals before minutes of work
    args.output.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".convert-", dir=args.output.parent) as scratch:
        conversion = convert(args.model, Path(scratch), args.convert)
        print("\n".join(conversion.lines()), flush=True)
        if args.agreement:
            from semif_adapter.agreement import measure  # loads llama.cpp: only when converting
            from semif_adapter.llama_runtime import RuntimeStartError

            try:
                agreement = measure(args.model, conversion.output, decisions=DECISIONS[:args.agreement])
            except RuntimeStartError as error:  # the adapter cannot serve the model: one line, not a traceback
                raise ConversionError(f"{args.model}: the agreement cannot be measured: {error} (--agreement 0 "
                                      "packages the converted model without it)") from None
            print("\n".join(agreement.lines()), flush=True)
        return package(conversion.output, args.output, args.mmproj, args.accelerator)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = command_parser(__doc__, "package_model")
    parser.add_argument("model", type=Path, nargs="?", help="the .gguf (first shard of a split model)")
    parser.add_argument("-o", "--output", type=Path, default=Path("model.tar.gz"))
    parser.add_argument("--mmproj", type=Path, help="also package this multimodal projector")
    parser.add_argument("--convert", metavar="TYPE", type=str.upper, choices=CONVERT_TYPES,
                        help=f"re-encode the model first with llama.cpp's quantizer: {', '.join(CONVERT_TYPES)}")
    parser.add_argument("--agreement", type=int, default=len(DECISIONS), metavar="N",
                        help=f"with --convert: decisions of the fixed set to compare (0 to {len(DECISIONS)}, "
                             f"default {len(DECISIONS)}; each is scored 3 ways by both models)")
    parser.add_argument("--accelerator", choices=("cpu", "gpu"), default="cpu",
                        help="what the endpoint runs on, for the kernel check (default cpu)")
    parser.add_argument("--check", type=Path, metavar="TARBALL", help="validate an existing artifact")
    parser.add_argument("--allow-mmproj", action="store_true", help="with --check: accept a projector")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.check is None):
        parser.error("give either MODEL.gguf or --check TARBALL")
    if args.check and args.convert:
        parser.error("--convert applies to a MODEL.gguf, not to --check")
    if not 0 <= args.agreement <= len(DECISIONS):
        parser.error(f"--agreement: between 0 and {len(DECISIONS)} decisions")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    kernels: KernelReport | None = None  # --check reads a gzip stream, which ggml's GGUF reader cannot open
    try:
        if args.check:
            report = check(args.check, args.allow_mmproj)
        elif args.convert:
            report, kernels = converted_package(args)
        else:
            report, kernels = package(args.model, args.output, args.mmproj, args.accelerator)
    except (ModelFileError, ConversionError) as error:
        print(f"package_model: refused: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines() + (kernels.lines() if kernels else [])))
    for warning in (kernels.warning() if kernels else None, chat_template_warning(report.info.has_chat_template)):
        if warning:
            print(f"package_model: warning: {warning}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
