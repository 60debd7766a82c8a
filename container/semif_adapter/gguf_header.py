"""Streaming reader for the key/value header of a GGUF file.

Why our own reader: the packaging check reads models straight out of a gzip
stream (a tarball member), where the `gguf` package's memory-mapped reader
cannot go, and only a handful of keys matter. The reader walks the header
once, never seeks and never loads tensor data, so multi-GB files cost a few
megabytes of reading (mostly the tokenizer vocabulary).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import BinaryIO

GGUF_MAGIC = b"GGUF"

# GGUF value types (gguf.h: enum gguf_type) -> struct format of a scalar.
_SCALAR_FORMATS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i",
    6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_TYPE_STRING = 8
_TYPE_ARRAY = 9
# Hostile-file guards: no real key or string value comes near these.
_MAX_STRING_BYTES = 64 * 1024 * 1024
_MAX_KV_PAIRS = 1_000_000

# llama.cpp `enum llama_ftype` (general.file_type) -> the usual quantization name.
FILE_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}


class GGUFHeaderError(ValueError):
    """The bytes are not a readable GGUF header."""


@dataclass(frozen=True)
class GGUFInfo:
    """The header facts an operator wants to see before shipping a model."""

    tensor_count: int
    architecture: str | None
    name: str | None
    file_type: int | None
    context_length: int | None

    @property
    def quantization(self) -> str | None:
        if self.file_type is None:
            return None
        return FILE_TYPE_NAMES.get(self.file_type, f"ftype-{self.file_type}")


class _Reader:
    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def exact(self, size: int) -> bytes:
        data = self._stream.read(size)
        if len(data) != size:
            raise GGUFHeaderError("file ends inside the GGUF header")
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        return struct.unpack(fmt, self.exact(struct.calcsize(fmt)))[0]

    def string(self) -> bytes:
        size = int(self.unpack("<Q"))
        if size > _MAX_STRING_BYTES:
            raise GGUFHeaderError(f"GGUF string of {size} bytes is not plausible")
        return self.exact(size)

    def skip(self, size: int) -> None:
        while size > 0:
            size -= len(self.exact(min(size, 1 << 20)))

    def value(self, value_type: int) -> object:
        if value_type in _SCALAR_FORMATS:
            return self.unpack(_SCALAR_FORMATS[value_type])
        if value_type == _TYPE_STRING:
            return self.string().decode("utf-8", errors="replace")
        if value_type == _TYPE_ARRAY:
            item_type = int(self.unpack("<I"))
            count = int(self.unpack("<Q"))
            if item_type in _SCALAR_FORMATS:
                self.skip(count * struct.calcsize(_SCALAR_FORMATS[item_type]))
            else:
                for _ in range(count):
                    self.value(item_type)
            return None
        raise GGUFHeaderError(f"unknown GGUF value type {value_type}")


def read_gguf_info(stream: BinaryIO) -> GGUFInfo:
    """Read the header from the current position; raises GGUFHeaderError."""
    reader = _Reader(stream)
    magic = stream.read(4)
    if magic != GGUF_MAGIC:
        raise GGUFHeaderError(f"does not start with the GGUF magic (found {magic!r})")
    version = int(reader.unpack("<I"))
    if version < 2:
        raise GGUFHeaderError(f"GGUF version {version} is too old (need 2 or later)")
    tensor_count = int(reader.unpack("<Q"))
    kv_count = int(reader.unpack("<Q"))
    if kv_count > _MAX_KV_PAIRS:
        raise GGUFHeaderError(f"{kv_count} header keys is not plausible")
    values: dict[str, object] = {}
    for _ in range(kv_count):
        key = reader.string().decode("utf-8", errors="replace")
        values[key] = reader.value(int(reader.unpack("<I")))
    arch = _as_str(values.get("general.architecture"))
    return GGUFInfo(
        tensor_count=tensor_count,
        architecture=arch,
        name=_as_str(values.get("general.name")),
        file_type=_as_int(values.get("general.file_type")),
        context_length=_as_int(values.get(f"{arch}.context_length")) if arch else None,
    )


def _as_int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
