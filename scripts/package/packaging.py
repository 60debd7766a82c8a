"""Packaging and checking the artifact, with a progress bar for multi-GB models and the kernel advice.

`semif check` reads a gzip stream, which ggml's GGUF reader cannot open: only packaging gives the kernel report.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from semif_adapter.deploy.agreement_cases import DECISIONS
from semif_adapter.deploy.artifact import (
    ArtifactReport,
    build_tarball,
    chat_template_warning,
    check_tarball,
    model_files_for,
)
from semif_adapter.deploy.kernel_paths import KernelReport, kernel_report
from semif_adapter.deploy.quantize import ConversionError, convert

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
            from semif_adapter.deploy.agreement import measure  # loads llama.cpp: only when converting
            from semif_adapter.engine.llama_runtime import RuntimeStartError

            try:
                agreement = measure(args.model, conversion.output, decisions=DECISIONS[:args.agreement])
            except RuntimeStartError as error:  # the adapter cannot serve the model: one line, not a traceback
                raise ConversionError(f"{args.model}: the agreement cannot be measured: {error} (--agreement 0 "
                                      "packages the converted model without it)") from None
            print("\n".join(agreement.lines()), flush=True)
        return package(conversion.output, args.output, args.mmproj, args.accelerator)


def report(artifact: ArtifactReport, kernels: KernelReport | None) -> int:
    """What was packaged or checked, then the warnings (on stderr); exit status 0."""
    print("\n".join(artifact.lines() + (kernels.lines() if kernels else [])))
    for warning in (kernels.warning() if kernels else None, chat_template_warning(artifact.info.has_chat_template)):
        if warning:
            print(f"package_model: warning: {warning}", file=sys.stderr)
    return 0
