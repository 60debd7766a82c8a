"""Test models made from a GGUF (the embedded one unless another is named), each written once per user into the cache
under a name that hashes its source and its recipe, so that a changed recipe or source makes a new file and
concurrent test sessions write it once."""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Callable
from pathlib import Path

from semif_adapter.engine.embedded_model import embedded_model_path

from .build_llama_cpp import cache_root


def cached_copy_path(folder: str, name: str, recipe: str, source: Path | None = None) -> Path:
    """Where `cached_copy` keeps this recipe's file, written or not: its name is the model name a server gives it."""
    source = source or embedded_model_path()
    key = hashlib.sha256(f"{source.name}\n{source.stat().st_size}\n{recipe}".encode()).hexdigest()[:12]
    return cache_root() / "models" / folder / f"smollm2-135m-{name}-{key}.gguf"


def cached_copy(folder: str, name: str, recipe: str, write: Callable[[Path, Path], Path],
                source: Path | None = None) -> Path:
    """`write(source, target)`'s file for this recipe, made from `source` (the embedded model by default) on first
    use. A source made here carries its own recipe's hash in its name, which the key takes in."""
    source = source or embedded_model_path()
    target = cached_copy_path(folder, name, recipe, source)
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.parent / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not target.exists():
                write(source, target)
    return target
