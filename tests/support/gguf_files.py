"""Small but genuine GGUF files, written by the reference writer (the `gguf` package)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import gguf
import numpy as np


def write_gguf(path: Path, *, architecture: str = "llama", context: int = 4096, file_type: int = 3,
               strings: dict[str, str] | None = None) -> Path:
    """A GGUF with the header facts the packaging rules read, a vocabulary array, one tensor, and `strings`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(str(path), architecture)
    writer.add_context_length(context)
    writer.add_file_type(file_type)
    writer.add_name(path.stem)
    writer.add_token_list([b"<s>", b"hello", b"world"])  # an array of strings, as real vocabularies are
    for key, value in (strings or {}).items():
        writer.add_string(key, value)
    writer.add_tensor("token_embd.weight", np.arange(32, dtype=np.float32).reshape(4, 8))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def declaring(path: Path, decision_type: str, *, systemone: bool = True) -> Path:
    """A small GGUF that declares `llama.decision.type` (with or without its systemone template)."""
    strings = {"llama.decision.type": decision_type}
    if systemone:
        strings["tokenizer.chat_template.systemone"] = "{{ state }}"
    return write_gguf(path, context=2048, strings=strings)


def tarball_of(model: Path) -> Path:
    """A model.tar.gz made without the packaging rules (as another tool could)."""
    output = model.with_suffix(".tar.gz")
    with tarfile.open(output, "w:gz") as tar:
        data = model.read_bytes()
        member = tarfile.TarInfo(model.name)
        member.size = len(data)
        tar.addfile(member, io.BytesIO(data))
    return output
