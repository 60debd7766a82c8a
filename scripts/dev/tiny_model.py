"""A tiny random-weight model with the embedded model's tokenizer and chat template: for tests of plumbing that must
run the whole path through llama.cpp (the adapter, llama-server, the benchmark's phases) but not read what the model
says. Two layers of width 128 instead of SmolLM2's thirty of 576: a token costs about a twentieth, mostly the output
layer over the same 49,152-token vocabulary. Its answers mean nothing, but by construction it answers with a capital
letter: every token's embedding carries one shared component and the option letters' a three times larger one, so the
output layer (tied to the embedding) ranks the letters first by about 20 logits, whatever the random part adds
(about 0.3). Option letters are then among the top tokens as a served model's are, which the paths that read them need.
Never quote a figure measured on it. Written once per user into the cache (weights from a fixed seed, so the file is
the same everywhere).

    python -m scripts.dev.tiny_model   # prints the path
"""

from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from .model_copies import cached_copy, cached_copy_path

WIDTH = 128
LAYERS = 2
HEADS = 2  # head size 64, as SmolLM2's
KV_HEADS = 1
FEED_FORWARD = 256
SEED = 135
SHARED = 1.0  # the component every embedding carries (dimension 0); the random part's norm is about 0.56
LETTER_SHARE = 3.0  # the option letters' multiple of it
LETTERS = [chr(code) for code in range(ord("A"), ord("Z") + 1)]
# Read from the source as they are: what the tokenizer and the chat template need, and the context the adapter sizes.
COPIED_PREFIXES = ("tokenizer.", "general.")
SIZES = {"embedding_length": WIDTH, "block_count": LAYERS, "feed_forward_length": FEED_FORWARD,
         "attention.head_count": HEADS, "attention.head_count_kv": KV_HEADS, "rope.dimension_count": WIDTH // HEADS}


def _field_value(field: gguf.ReaderField) -> tuple[object, gguf.GGUFValueType, gguf.GGUFValueType | None]:
    kind = field.types[0]
    sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
    return field.contents(), kind, sub


def _embedding(tokens: list[str], weights: np.ndarray) -> np.ndarray:
    """The random embedding with the shared component, the letters' (bare and after a space) larger."""
    weights[:, 0] = SHARED
    for letter in LETTERS:
        for text in (letter, "\u0120" + letter):  # GPT-2's byte for a leading space
            if text in tokens:
                weights[tokens.index(text), 0] = SHARED * LETTER_SHARE
    return weights.astype(np.float16)


def _tensors(tokens: list[str]) -> dict[str, np.ndarray]:
    """llama's tensors in numpy's (out, in) order, small normal weights and unit norms; the output layer is the
    embedding's (tied, as SmolLM2's)."""
    rng = np.random.default_rng(SEED)

    def weights(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * 0.05).astype(np.float32)

    head = WIDTH // HEADS
    tensors = {"token_embd.weight": _embedding(tokens, weights(len(tokens), WIDTH)),
               "output_norm.weight": np.ones(WIDTH, dtype=np.float32)}
    for layer in range(LAYERS):
        tensors |= {f"blk.{layer}.attn_norm.weight": np.ones(WIDTH, dtype=np.float32),
                    f"blk.{layer}.attn_q.weight": weights(WIDTH, WIDTH),
                    f"blk.{layer}.attn_k.weight": weights(KV_HEADS * head, WIDTH),
                    f"blk.{layer}.attn_v.weight": weights(KV_HEADS * head, WIDTH),
                    f"blk.{layer}.attn_output.weight": weights(WIDTH, WIDTH),
                    f"blk.{layer}.ffn_norm.weight": np.ones(WIDTH, dtype=np.float32),
                    f"blk.{layer}.ffn_gate.weight": weights(FEED_FORWARD, WIDTH),
                    f"blk.{layer}.ffn_up.weight": weights(FEED_FORWARD, WIDTH),
                    f"blk.{layer}.ffn_down.weight": weights(WIDTH, FEED_FORWARD)}
    return tensors


def write_tiny_model(source: Path, target: Path) -> Path:
    reader = gguf.GGUFReader(str(source))
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    partial = target.with_name(target.name + ".partial")
    writer = gguf.GGUFWriter(str(partial), arch=arch, endianess=reader.endianess)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == gguf.Keys.General.ARCHITECTURE:
            continue
        sized = name.removeprefix(f"{arch}.")
        if name.startswith(COPIED_PREFIXES) or (sized != name and sized not in SIZES):
            value, kind, sub = _field_value(field)
            if name == gguf.Keys.General.NAME:
                value = target.stem
            if name == gguf.Keys.General.FILE_TYPE:
                value = int(gguf.LlamaFileType.MOSTLY_F16)
            writer.add_key_value(name, value, kind, sub_type=sub)
    for key, size in SIZES.items():
        writer.add_uint32(f"{arch}.{key}", size)
    for name, tensor in _tensors(reader.fields[gguf.Keys.Tokenizer.LIST].contents()).items():
        writer.add_tensor(name, tensor)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(partial, target)
    return target


RECIPE = f"tiny {WIDTH} {LAYERS} {HEADS} {KV_HEADS} {FEED_FORWARD} {SEED} f16-embedding {SHARED} {LETTER_SHARE}"


def tiny_model() -> Path:
    """The cached file (written on first use)."""
    return cached_copy("tiny", "tiny", RECIPE, write_tiny_model)


def tiny_model_name() -> str:
    """The name an adapter serves the tiny model under (its file's stem), without writing the file."""
    return cached_copy_path("tiny", "tiny", RECIPE).stem


if __name__ == "__main__":
    print(tiny_model())
