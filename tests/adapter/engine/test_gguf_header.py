"""Our streaming GGUF header reader (key/value pairs, tensor table) against files of the reference writer."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import gguf
import pytest
from support.models import MATRIX, MatrixModel

from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.gguf_header import GGML_BLOCKS, GGUFHeaderError, read_gguf_info, require_complete


def test_reads_the_facts_the_reference_writer_wrote(make_gguf):
    path = make_gguf("m.gguf", architecture="qwen2", context=32768, file_type=7)
    with path.open("rb") as stream:
        info = read_gguf_info(stream)
    assert (info.architecture, info.context_length, info.quantization, info.tensor_count) == \
        ("qwen2", 32768, "Q8_0", 1)
    assert info.name == "m"


def test_unknown_file_type_is_named_not_dropped(make_gguf):
    with make_gguf("m.gguf", file_type=99).open("rb") as stream:
        assert read_gguf_info(stream).quantization == "ftype-99"


def test_truncated_header_is_refused(make_gguf):
    data = make_gguf("m.gguf").read_bytes()
    with pytest.raises(GGUFHeaderError, match="ends inside the GGUF header"):
        read_gguf_info(io.BytesIO(data[:40]))


def test_absurd_string_length_is_refused_without_allocating():
    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 62)
    with pytest.raises(GGUFHeaderError, match="not plausible"):
        read_gguf_info(io.BytesIO(header))


def test_the_tensor_table_locates_the_end_of_the_data(make_gguf):
    path = make_gguf("m.gguf")
    with path.open("rb") as stream:
        info = read_gguf_info(stream)
    assert info.data_offset % 32 == 0 and info.data_bytes == 32 * 4  # one 4x8 float32 tensor
    assert info.required_bytes == path.stat().st_size


@pytest.mark.parametrize("model", MATRIX)
def test_each_matrix_model_is_exactly_as_long_as_its_header_says_and_has_its_facts(model: MatrixModel) -> None:
    """The matrix's facts (tests/support/models.py) are the headers', so they cannot go stale."""
    path = model.path
    with path.open("rb") as stream:
        info = read_gguf_info(stream)
    assert info.required_bytes == path.stat().st_size
    require_complete(info, path.stat().st_size)
    assert (info.architecture, info.quantization, info.context_length, info.vocab_size, info.has_chat_template,
            info.kv_bytes_per_token) == (model.architecture, model.quantization, model.context_length,
                                         model.vocab_size, model.has_chat_template, model.kv_bytes_per_token)


def test_a_truncated_model_is_named_with_where_its_data_should_end():
    path = embedded_model_path()
    with path.open("rb") as stream:
        info = read_gguf_info(stream)
    assert info.tensor_count == 272
    with pytest.raises(GGUFHeaderError, match=r"truncated: .* ending at byte 98,362,432, but the file has "):
        require_complete(info, path.stat().st_size // 2)


def write_attention_gguf(path: Path, keys: dict[str, object], template: str | None = None) -> Path:
    """A header with attention keys (lists become per-layer arrays) and optionally a chat template."""
    writer = gguf.GGUFWriter(str(path), "test")
    for key, value in keys.items():
        if isinstance(value, list):
            writer.add_array(f"test.{key}", value)
        else:
            writer.add_uint32(f"test.{key}", value)  # type: ignore[arg-type]
    if template is not None:
        writer.add_chat_template(template)
    writer.add_token_list([b"a", b"b", b"c"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(("keys", "kv_bytes"), [
    # llama-style: widths from embedding / heads, 2 KV heads of 8 x (64 + 64) x f16 x 3 layers
    ({"block_count": 3, "embedding_length": 512, "attention.head_count": 8, "attention.head_count_kv": 2},
     3 * 2 * (64 + 64) * 2),
    # no KV head count: every head has its own KV
    ({"block_count": 2, "embedding_length": 512, "attention.head_count": 8}, 2 * 8 * (64 + 64) * 2),
    # gemma3-style: explicit key/value widths that are not embedding / heads
    ({"block_count": 18, "embedding_length": 640, "attention.head_count": 4, "attention.head_count_kv": 1,
      "attention.key_length": 256, "attention.value_length": 256}, 18 * 1 * 512 * 2),
    # per-layer KV heads, a recurrent layer (no heads) in between
    ({"block_count": 3, "embedding_length": 256, "attention.head_count": [4, 0, 4],
      "attention.head_count_kv": [1, 0, 2]}, (1 + 2) * (64 + 64) * 2),
    # MLA (a compressed KV cache) and a recurrent-only model: not known
    ({"block_count": 2, "embedding_length": 256, "attention.head_count": 4, "attention.kv_lora_rank": 64}, None),
    ({"block_count": 2, "embedding_length": 256, "attention.head_count": 0}, None),
    ({"embedding_length": 256, "attention.head_count": 4}, None),
])
def test_the_kv_cache_per_token_follows_llama_cpps_defaults(tmp_path, keys, kv_bytes):
    with write_attention_gguf(tmp_path / "m.gguf", keys).open("rb") as stream:
        assert read_gguf_info(stream).kv_bytes_per_token == kv_bytes


@pytest.mark.parametrize(("template", "has"), [("{{ messages }}", True), ("", False), (None, False)])
def test_a_chat_template_is_one_that_is_present_and_not_empty(tmp_path, template, has):
    with write_attention_gguf(tmp_path / "m.gguf", {}, template).open("rb") as stream:
        info = read_gguf_info(stream)
    assert (info.has_chat_template, info.vocab_size) == (has, 3)


def test_block_sizes_match_the_reference_writer():
    from gguf.constants import GGML_QUANT_SIZES
    reference = {int(kind): sizes for kind, sizes in GGML_QUANT_SIZES.items()}
    assert {kind: GGML_BLOCKS[kind] for kind in reference} == reference
    assert set(GGML_BLOCKS) - set(reference) == {42}  # Q2_0: in the pinned llama.cpp, newer than gguf 0.19


def test_an_unknown_tensor_type_leaves_the_size_unknown_instead_of_failing():
    name = b"t"
    header = (b"GGUF" + struct.pack("<IQQ", 3, 1, 0) + struct.pack("<Q", len(name)) + name
              + struct.pack("<I", 1) + struct.pack("<Q", 64) + struct.pack("<I", 250) + struct.pack("<Q", 0))
    info = read_gguf_info(io.BytesIO(header))
    assert info.data_bytes is None and info.required_bytes is None
    require_complete(info, len(header))
