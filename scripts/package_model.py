"""Package a GGUF model as SageMaker's `model.tar.gz`, or check an existing artifact.

    python scripts/package_model.py MODEL.gguf -o model.tar.gz [--mmproj PROJECTOR.gguf]
    python scripts/package_model.py --check model.tar.gz

Every refusal is one line naming the file and the rule, with exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tqdm import tqdm

from semif_adapter.artifact import ArtifactReport, build_tarball, check_tarball, model_files_for
from semif_adapter.model_files import ModelFileError

PROGRESS_FROM_BYTES = 1 << 30  # a bar is noise for small files, welcome for multi-GB ones


@contextmanager
def progress_bar(total: int, label: str) -> Iterator[tqdm]:
    with tqdm(total=total, unit="B", unit_scale=True, desc=label, file=sys.stderr,
              disable=total < PROGRESS_FROM_BYTES) as bar:
        yield bar


def package(model: Path, output: Path, projector: Path | None) -> ArtifactReport:
    files, _ = model_files_for(model, projector)
    with progress_bar(sum(p.stat().st_size for p in files), "packaging") as bar:
        return build_tarball(model, output, projector=projector, progress=bar.update)


def check(tarball: Path, allow_projector: bool) -> ArtifactReport:
    with progress_bar(tarball.stat().st_size if tarball.is_file() else 0, "checking") as bar:
        return check_tarball(tarball, allow_projector=allow_projector, progress=bar.update)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path, nargs="?", help="the .gguf (first shard of a split model)")
    parser.add_argument("-o", "--output", type=Path, default=Path("model.tar.gz"))
    parser.add_argument("--mmproj", type=Path, help="also package this multimodal projector")
    parser.add_argument("--check", type=Path, metavar="TARBALL", help="validate an existing artifact")
    parser.add_argument("--allow-mmproj", action="store_true", help="with --check: accept a projector")
    args = parser.parse_args(argv)
    if (args.model is None) == (args.check is None):
        parser.error("give either MODEL.gguf or --check TARBALL")
    try:
        if args.check:
            report = check(args.check, args.allow_mmproj)
        else:
            report = package(args.model, args.output, args.mmproj)
    except ModelFileError as error:
        print(f"package_model: refused: {error}", file=sys.stderr)
        return 2
    print("\n".join(report.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
