"""The model file's digest, computed on every instance before llama.cpp reads a byte of it.

An S3 object "pinned" by digest at deploy time can still change under an instance that starts later (autoscaling,
host replacement): the only check that holds for every instance is the instance's own. The digest is the one the
packaging step prints (sha256 over the model's file(s) in shard order), streamed in 4 MiB reads: about one
second per GB on one core, and the reads warm the page cache that llama.cpp's mmap then uses.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass
from pathlib import Path

from .model_files import SHARD_PATTERN

CHUNK_BYTES = 4 * 1024 * 1024
HASH_WITHOUT_PIN_BELOW = 1 << 30  # no digest to verify: hash small models for the response, fingerprint big ones


class ModelIntegrityError(RuntimeError):
    """The model on disk is not the model the deployment pinned."""


@dataclass(frozen=True)
class ModelDigest:
    files: tuple[Path, ...]
    bytes: int
    sha256: str | None  # None: not hashed (large and not pinned); the response carries a fingerprint instead
    hash_ms: float
    fingerprint: str


def model_files(first: Path) -> tuple[Path, ...]:
    """The file llama.cpp is pointed at, and the other shards of a split model in order."""
    match = SHARD_PATTERN.match(first.name)
    if match is None:
        return (first,)
    count = int(match["count"])
    return tuple(first.with_name(f"{match['stem']}-{index:05d}-of-{count:05d}.gguf") for index in range(1, count + 1))


def digest(first: Path, expected: str | None) -> ModelDigest:
    """Hash the model (always when `expected` is given) and refuse it when it is not the expected one."""
    files = model_files(first)
    stats = [path.stat() for path in files]
    size = sum(stat.st_size for stat in stats)
    fingerprint = f"size={size};mtime_ns={max(stat.st_mtime_ns for stat in stats)}"
    if expected is None and size >= HASH_WITHOUT_PIN_BELOW:
        return ModelDigest(files, size, None, 0.0, fingerprint)
    started = time.perf_counter()
    hasher = hashlib.sha256()
    for path in files:
        with path.open("rb") as stream:
            while block := stream.read(CHUNK_BYTES):
                hasher.update(block)
    sha = hasher.hexdigest()
    hash_ms = (time.perf_counter() - started) * 1000
    if expected is not None and sha != expected:
        raise ModelIntegrityError(f"{first}: sha256 {sha} does not match SEMIF_MODEL_SHA256 {expected} "
                                  f"({size:,} bytes hashed in {hash_ms:.0f} ms); refusing to serve another model")
    return ModelDigest(files, size, sha, hash_ms, fingerprint)
