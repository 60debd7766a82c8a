"""Fixtures that make real GGUF files and real (hostile) tarballs on disk."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import gguf
import numpy as np
import pytest


def write_gguf(path: Path, *, architecture: str = "llama", context: int = 4096, file_type: int = 3) -> Path:
    """A small but genuine GGUF, written by the reference writer (the `gguf` package)."""
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(context)
    writer.add_file_type(file_type)
    writer.add_name(path.stem)
    writer.add_token_list([b"<s>", b"hello", b"world"])  # an array of strings, as real vocabularies are
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, **kwargs: object) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_gguf(path, **kwargs)  # type: ignore[arg-type]
    return make


@pytest.fixture
def make_tarball(tmp_path: Path) -> Callable[..., Path]:
    """Write a tar.gz from (name, content) pairs; content is bytes, or ('symlink'|'hardlink'|'fifo', target)."""
    def make(members: list[tuple[str, object]], name: str = "model.tar.gz") -> Path:
        path = tmp_path / name
        with tarfile.open(path, "w:gz") as tar:
            for member_name, content in members:
                info = tarfile.TarInfo(member_name)
                if isinstance(content, bytes):
                    info.size = len(content)
                    tar.addfile(info, io.BytesIO(content))
                else:
                    kind, target = content  # type: ignore[misc]
                    info.type = {"symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE,
                                 "fifo": tarfile.FIFOTYPE, "dir": tarfile.DIRTYPE}[kind]
                    info.linkname = target
                    tar.addfile(info)
        return path
    return make
