"""Small but genuine GGUF files, written by the reference writer (the `gguf` package)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np


def write_gguf(path: Path, *, architecture: str = "llama", context: int = 4096, file_type: int = 3) -> Path:
    """A GGUF with the header facts the packaging rules read, a vocabulary array and one tensor."""
    path.parent.mkdir(parents=True, exist_ok=True)
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
