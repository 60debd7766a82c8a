"""Fixtures that make real GGUF files and real (hostile) tarballs on disk."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest

from support.gguf_files import write_gguf


@pytest.fixture
def make_gguf(tmp_path: Path) -> Callable[..., Path]:
    def make(name: str, **kwargs: object) -> Path:
        return write_gguf(tmp_path / name, **kwargs)  # type: ignore[arg-type]
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
