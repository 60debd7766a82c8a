"""Which `.gguf` in a model directory or tarball is THE model: the one rule set.

The DLC's entry point takes the first `*.gguf` it finds up to two levels under
`/opt/ml/model`, which silently picks a projector or the wrong model when a
tarball holds two. Everything in this project (the adapter at start-up, the
packaging script, the CDK config check) asks this module instead, so a layout
that would be ambiguous on SageMaker is refused everywhere, with the rule named.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .gguf_header import GGUF_MAGIC

MODEL_SUFFIX = ".gguf"
MAX_DEPTH = 2  # the DLC searches $MODEL_DIR/*.gguf and $MODEL_DIR/*/*.gguf
DEFAULT_MODEL_DIR = "/opt/ml/model"
PROJECTOR_PREFIX = "mmproj"
SHARD_PATTERN = re.compile(r"^(?P<stem>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$")


class ModelFileError(ValueError):
    """A model layout that SageMaker would load wrongly, or not at all."""


@dataclass(frozen=True)
class ModelLayout:
    """The model found in a layout, as paths relative to its root."""

    model: PurePosixPath  # the file llama.cpp is pointed at (first shard of a split model)
    files: tuple[PurePosixPath, ...]  # every file of the model, shards in order
    projector: PurePosixPath | None = None


def is_projector(path: PurePosixPath) -> bool:
    return path.name.startswith(PROJECTOR_PREFIX)


def select_model(
    paths: Iterable[PurePosixPath], *, source: str, allow_projector: bool = False
) -> ModelLayout:
    """Pick the single model among relative file paths, or explain why not."""
    ggufs = sorted(p for p in paths if p.name.endswith(MODEL_SUFFIX) and len(p.parts) <= MAX_DEPTH)
    projectors = [p for p in ggufs if is_projector(p)]
    if projectors and not allow_projector:
        raise ModelFileError(
            f"{source}: projector file {projectors[0]} refused (mmproj*.gguf is only packaged "
            "when asked for, because the DLC could load it as the model)"
        )
    if len(projectors) > 1:
        raise ModelFileError(f"{source}: {len(projectors)} projector files; at most one is allowed")
    groups: dict[tuple[PurePosixPath, str, int], dict[int, PurePosixPath]] = {}
    for path in (p for p in ggufs if not is_projector(p)):
        match = SHARD_PATTERN.match(path.name)
        if match is None:
            groups[(path, "", 1)] = {1: path}
            continue
        key = (path.parent, match["stem"], int(match["count"]))
        groups.setdefault(key, {})[int(match["index"])] = path
    if not groups:
        raise ModelFileError(f"{source}: no model .gguf file within {MAX_DEPTH} levels")
    if len(groups) > 1:
        names = ", ".join(str(min(g.values())) for g in groups.values())
        raise ModelFileError(f"{source}: {len(groups)} models found ({names}); exactly one is allowed")
    ((_, _, count), shards), = groups.items()
    missing = [i for i in range(1, count + 1) if i not in shards]
    extra = [i for i in shards if not 1 <= i <= count]
    if missing or extra:
        first = next(iter(shards.values()))
        detail = f"missing shard(s) {missing}" if missing else f"shard number(s) {extra} out of range"
        raise ModelFileError(f"{source}: split model {first.name} is incomplete: {detail} of {count}")
    files = tuple(shards[i] for i in range(1, count + 1))
    return ModelLayout(model=files[0], files=files, projector=projectors[0] if projectors else None)


def require_file(path: Path, what: str, hint: str = "") -> None:
    """Refuse a path that is not a regular file, saying what it is instead (a directory is not "missing")."""
    if path.is_dir():
        raise ModelFileError(f"{path}: is a directory, not {what}{hint}")
    if not path.exists():
        raise ModelFileError(f"{path}: {what} does not exist")
    if not path.is_file():
        raise ModelFileError(f"{path}: is not a regular file ({what} expected)")


def require_gguf_name(path: Path | PurePosixPath) -> None:
    """The DLC and the adapter find the model by its suffix: a GGUF named `model.bin` would never be found."""
    if not path.name.endswith(MODEL_SUFFIX):
        raise ModelFileError(f"{path}: the model file name must end in {MODEL_SUFFIX} (the DLC and the adapter "
                             f"look for *{MODEL_SUFFIX}); rename it")


def check_magic(path: Path) -> None:
    """Refuse a file that is not GGUF before llama.cpp gets to crash on it."""
    try:
        with path.open("rb") as stream:
            head = stream.read(len(GGUF_MAGIC))
    except OSError as error:
        raise ModelFileError(f"{path}: cannot be read ({error.strerror or error})") from error
    if head != GGUF_MAGIC:
        raise ModelFileError(f"{path}: does not start with the GGUF magic bytes (found {head!r})")


def scan_model_dir(model_dir: Path, *, allow_projector: bool = False) -> ModelLayout:
    """Apply the rules to a directory as SageMaker unpacks it (links are not followed)."""
    if not model_dir.is_dir():
        raise ModelFileError(f"{model_dir}: model directory does not exist")
    found: list[PurePosixPath] = []
    for root, dirs, files in os.walk(model_dir):
        relative_root = PurePosixPath(Path(root).relative_to(model_dir).as_posix())
        depth = 0 if str(relative_root) == "." else len(relative_root.parts)
        if depth + 1 >= MAX_DEPTH:
            dirs.clear()
        found.extend(
            PurePosixPath(name) if depth == 0 else relative_root / name
            for name in files
            if name.endswith(MODEL_SUFFIX)
        )
    return select_model(found, source=str(model_dir), allow_projector=allow_projector)


def resolve_model_path(explicit: str | None, model_dir: str | os.PathLike[str]) -> Path:
    """The model file to load: an explicit path wins, else the single model in the dir."""
    if explicit:
        files = [Path(explicit)]
        require_file(files[0], "a model file")
    else:
        root = Path(model_dir)
        files = [root / relative for relative in scan_model_dir(root).files]
    for path in files:
        check_magic(path)
    return files[0]  # the first shard of a split model
