"""Streaming reader for the header of a GGUF file: its key/value pairs and its tensor table.

Why our own reader: the packaging check reads models straight out of a gzip
stream (a tarball member), where the `gguf` package's memory-mapped reader
cannot go, and only a handful of keys matter. The reader walks the header
once, never seeks and never loads tensor data, so multi-GB files cost a few
megabytes of reading (mostly the tokenizer vocabulary). From the tensor table
it computes where the tensor data ends, so a file cut short (an interrupted
copy or upload) is refused before SageMaker downloads it, not when llama.cpp
fails to load it on the endpoint. From the attention keys it computes the KV
cache a context costs per token, so the deployment can count it against the
instance's memory at synth, before a context is ever allocated.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Protocol

GGUF_MAGIC = b"GGUF"

# GGUF value types (gguf.h: enum gguf_type) -> struct format of a scalar.
_SCALAR_FORMATS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i",
    6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d",
}
_TYPE_STRING = 8
_STRING_LENGTH = struct.Struct("<Q")  # a string's byte count, before its bytes
_TYPE_ARRAY = 9
# Hostile-file guards: no real key or string value comes near these.
_MAX_STRING_BYTES = 64 * 1024 * 1024
_MAX_KV_PAIRS = 1_000_000
_MAX_TENSORS = 1_000_000
_MAX_DIMS = 4  # GGML_MAX_DIMS
_KEPT_ARRAY_ITEMS = 4096  # per-layer arrays (head counts) are kept; vocabularies (262k entries) are skipped
DEFAULT_ALIGNMENT = 32  # GGUF_DEFAULT_ALIGNMENT, unless `general.alignment` says otherwise
ALIGNMENT_KEY = "general.alignment"
# The model's chat template, and the tool-use variant llama-server falls back to when the default is missing
# (common_chat_templates_init); an empty string counts as none, as it does there.
CHAT_TEMPLATE_KEYS = ("tokenizer.chat_template", "tokenizer.chat_template.tool_use")
SYSTEMONE_TEMPLATE_KEY = "tokenizer.chat_template.systemone"  # a decision model's prompt (llama.cpp b11361+)
DECISION_TYPE_SUFFIX = ".decision.type"  # `<general.architecture>.decision.type`: the GGUF is a decision model
MAX_HEAD_TOKENS_SUFFIX = ".decision.max_head_tokens"
MASK_TOKEN_KEY = "tokenizer.ggml.mask_token_id"
SEPARATOR_TOKEN_KEY = "tokenizer.ggml.seperator_token_id"  # llama.cpp's spelling
VOCABULARY_KEY = "tokenizer.ggml.tokens"
KV_CACHE_ELEMENT_BYTES = 2  # f16 K and V: llama.cpp's default cache types (the adapter does not change them)

# ggml `enum ggml_type` -> (elements per block, bytes per block), from the pinned llama.cpp's ggml.c type traits
# (tests/adapter/engine/test_gguf_header.py compares it with the `gguf` package's GGML_QUANT_SIZES). A type missing
# here (one newer than the pin) leaves the data size unknown, and the completeness check is skipped, not failed.
GGML_BLOCKS: dict[int, tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 40),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18), 42: (64, 18),
}

# llama.cpp `enum llama_ftype` (general.file_type) -> the usual quantization name.
FILE_TYPE_NAMES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S",
    22: "IQ3_XS", 23: "IQ3_XXS", 24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M",
    28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS", 31: "IQ1_M", 32: "BF16", 36: "TQ1_0",
    37: "TQ2_0", 38: "MXFP4_MOE",
}


class ByteReader(Protocol):
    """What the header is read from: a file, or a stream that hashes what passes (the artifact's)."""

    def read(self, size: int = -1, /) -> bytes: ...

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
    data_offset: int = 0  # where the tensor data starts (the header's end, aligned)
    data_bytes: int | None = None  # where the last tensor ends, from data_offset; None: a tensor type unknown
    has_chat_template: bool | None = None  # None: not read from a header
    vocab_size: int | None = None
    # K and V of one context cell in every layer (f16), from the attention keys; None when the header does not say
    # (no attention heads, or MLA's compressed cache). Sliding-window layers (Gemma 3) count at full length, as
    # llama.cpp's library default (`swa_full`, which the adapter keeps) allocates them: llama-server's default
    # sizes them to the window, so there it is an upper bound.
    kv_bytes_per_token: int | None = None
    # `<arch>.decision.type` (openjev, lev, ...): a fine-tuned decision model, scored by its own head
    # (engine/decision_types.py); None for a generic chat model.
    decision_type: str | None = None
    systemone_template: str | None = None  # `tokenizer.chat_template.systemone`: the prompt of the decision head
    max_head_tokens: int | None = None  # `<arch>.decision.max_head_tokens`: laya cuts question and options to it
    mask_token_id: int | None = None  # laya's option marker
    separator_token_id: int | None = None  # laya's separator

    @property
    def has_systemone_template(self) -> bool:
        return bool(self.systemone_template)

    @property
    def decision_type_key(self) -> str:
        return f"{self.architecture}{DECISION_TYPE_SUFFIX}"

    @property
    def required_bytes(self) -> int | None:
        """The smallest file size that holds every tensor the header describes."""
        return None if self.data_bytes is None else self.data_offset + self.data_bytes

    @property
    def quantization(self) -> str | None:
        if self.file_type is None:
            return None
        return FILE_TYPE_NAMES.get(self.file_type, f"ftype-{self.file_type}")


@dataclass(frozen=True)
class _Array:
    count: int
    items: tuple[object, ...] | None  # None: not kept (strings, or too many to keep)


class _Reader:
    def __init__(self, stream: ByteReader) -> None:
        self._stream = stream
        self.position = 0  # bytes read so far: the stream may be a tarball member, which has no tell()

    def exact(self, size: int) -> bytes:
        data = self._stream.read(size)
        self.position += len(data)
        if len(data) != size:
            raise GGUFHeaderError("file ends inside the GGUF header")
        return data

    def unpack(self, fmt: str) -> int | float | bool:
        value: int | float | bool = struct.unpack(fmt, self.exact(struct.calcsize(fmt)))[0]
        return value

    def string(self) -> bytes:
        size: int = _STRING_LENGTH.unpack(self.exact(_STRING_LENGTH.size))[0]
        if size > _MAX_STRING_BYTES:
            raise GGUFHeaderError(f"GGUF string of {size} bytes is not plausible")
        return self.exact(size)

    def skip_strings(self, count: int) -> None:
        """Pass over `count` strings without decoding them: a vocabulary holds 50k-260k, and decoding each as a value
        doubles an adapter's header read (SmolLM2's: 0.04 s against 0.08 s; read twice per start)."""
        for _ in range(count):
            self.string()

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
            if item_type in _SCALAR_FORMATS and count <= _KEPT_ARRAY_ITEMS:
                return _Array(count, tuple(self.value(item_type) for _ in range(count)))
            if item_type in _SCALAR_FORMATS:
                self.skip(count * struct.calcsize(_SCALAR_FORMATS[item_type]))
            elif item_type == _TYPE_STRING:
                self.skip_strings(count)
            else:
                for _ in range(count):
                    self.value(item_type)
            return _Array(count, None)
        raise GGUFHeaderError(f"unknown GGUF value type {value_type}")


def read_gguf_info(stream: ByteReader) -> GGUFInfo:
    """Read the header (key/value pairs and tensor table) from the start of the stream; raises GGUFHeaderError."""
    reader = _Reader(stream)
    magic = stream.read(4)
    reader.position = len(magic)
    if magic != GGUF_MAGIC:
        raise GGUFHeaderError(f"does not start with the GGUF magic (found {magic!r})")
    version = int(reader.unpack("<I"))
    if version < 2:
        raise GGUFHeaderError(f"GGUF version {version} is too old (need 2 or later)")
    tensor_count = int(reader.unpack("<Q"))
    kv_count = int(reader.unpack("<Q"))
    if kv_count > _MAX_KV_PAIRS:
        raise GGUFHeaderError(f"{kv_count} header keys is not plausible")
    if tensor_count > _MAX_TENSORS:
        raise GGUFHeaderError(f"{tensor_count} tensors is not plausible")
    values: dict[str, object] = {}
    for _ in range(kv_count):
        key = reader.string().decode("utf-8", errors="replace")
        values[key] = reader.value(int(reader.unpack("<I")))
    alignment = _as_int(values.get(ALIGNMENT_KEY)) or DEFAULT_ALIGNMENT
    if alignment & (alignment - 1):
        raise GGUFHeaderError(f"{ALIGNMENT_KEY} {alignment} is not a power of 2")
    data_bytes = _tensor_data_end(reader, tensor_count)
    arch = _as_str(values.get("general.architecture"))
    return GGUFInfo(
        tensor_count=tensor_count,
        architecture=arch,
        name=_as_str(values.get("general.name")),
        file_type=_as_int(values.get("general.file_type")),
        context_length=_as_int(values.get(f"{arch}.context_length")) if arch else None,
        data_offset=-(-reader.position // alignment) * alignment if tensor_count else reader.position,
        data_bytes=data_bytes,
        has_chat_template=any(_as_str(values.get(key)) for key in CHAT_TEMPLATE_KEYS),
        vocab_size=vocabulary.count if isinstance(vocabulary := values.get(VOCABULARY_KEY), _Array) else None,
        kv_bytes_per_token=_kv_bytes_per_token(values, arch) if arch else None,
        decision_type=_as_str(values.get(f"{arch}{DECISION_TYPE_SUFFIX}")) if arch else None,
        systemone_template=_as_str(values.get(SYSTEMONE_TEMPLATE_KEY)),
        max_head_tokens=_as_int(values.get(f"{arch}{MAX_HEAD_TOKENS_SUFFIX}")) if arch else None,
        mask_token_id=_as_int(values.get(MASK_TOKEN_KEY)),
        separator_token_id=_as_int(values.get(SEPARATOR_TOKEN_KEY)),
    )


def _kv_bytes_per_token(values: dict[str, object], arch: str) -> int | None:
    """llama.cpp's KV cache per context cell: each layer's KV heads x (key + value width), in f16. The widths
    default to embedding / heads and the KV heads to the heads (llama-model.cpp); either count may be per layer."""
    def key(name: str) -> object:
        return values.get(f"{arch}.{name}")

    layers, embedding = _as_int(key("block_count")), _as_int(key("embedding_length"))
    if not layers or not embedding or key("attention.kv_lora_rank") is not None:
        return None
    heads = _per_layer(key("attention.head_count"), layers)
    kv_heads = _per_layer(key("attention.head_count_kv"), layers) or heads
    if heads is None or kv_heads is None:
        return None
    total = 0
    for head_count, kv_head_count in zip(heads, kv_heads, strict=True):
        if head_count:  # a recurrent layer (no attention) has no KV cells
            width = (_as_int(key("attention.key_length")) or embedding // head_count) \
                + (_as_int(key("attention.value_length")) or embedding // head_count)
            total += kv_head_count * width * KV_CACHE_ELEMENT_BYTES
    return total or None


def _per_layer(value: object, layers: int) -> list[int] | None:
    """A count given once for every layer, or per layer (an array of `layers` integers)."""
    if isinstance(value, _Array) and value.items is not None and len(value.items) == layers:
        counts = [count for item in value.items if (count := _as_int(item)) is not None]
        return counts if len(counts) == layers else None
    count = _as_int(value)
    return None if count is None else [count] * layers


def _tensor_data_end(reader: _Reader, tensor_count: int) -> int | None:
    """Read the tensor table (name, dims, type, offset each); the end of the furthest tensor's bytes."""
    end: int | None = 0
    for _ in range(tensor_count):
        name = reader.string().decode("utf-8", errors="replace")
        n_dims = int(reader.unpack("<I"))
        if n_dims > _MAX_DIMS:
            raise GGUFHeaderError(f"tensor {name!r} has {n_dims} dimensions (at most {_MAX_DIMS})")
        elements = 1
        shape = [int(reader.unpack("<Q")) for _ in range(n_dims)]
        for size in shape:
            elements *= size
        tensor_type = int(reader.unpack("<I"))
        offset = int(reader.unpack("<Q"))
        if end is None or tensor_type not in GGML_BLOCKS:
            end = None
            continue
        block_elements, block_bytes = GGML_BLOCKS[tensor_type]
        if shape and shape[0] % block_elements:
            raise GGUFHeaderError(f"tensor {name!r}: row of {shape[0]} elements is not a whole number of "
                                  f"type-{tensor_type} blocks ({block_elements})")
        end = max(end, offset + elements // block_elements * block_bytes)
    return end


def require_complete(info: GGUFInfo, file_bytes: int) -> None:
    """Refuse a file shorter than the tensor data its header describes (cut short by a copy or upload)."""
    required = info.required_bytes
    if required is not None and file_bytes < required:
        raise GGUFHeaderError(f"truncated: the header describes {info.tensor_count} tensors ending at byte "
                              f"{required:,}, but the file has {file_bytes:,} bytes "
                              f"({required - file_bytes:,} missing)")


def _as_int(value: object) -> int | None:
    return int(value) if isinstance(value, int) and not isinstance(value, bool) else None


def _as_str(value: object) -> str | None:
    return value if isinstance(value, str) else None
