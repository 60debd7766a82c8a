"""Our streaming GGUF header reader (key/value pairs, tensor table) against files of the reference writer."""

from __future__ import annotations

import io
import struct

import pytest

from semif_adapter.embedded_model import embedded_model_path
from semif_adapter.gguf_header import GGML_BLOCKS, GGUFHeaderError, read_gguf_info, require_complete


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


def test_the_embedded_model_is_exactly_as_long_as_its_header_says():
    path = embedded_model_path()
    with path.open("rb") as stream:
        info = read_gguf_info(stream)
    assert info.tensor_count == 272
    assert info.required_bytes == path.stat().st_size
    require_complete(info, path.stat().st_size)
    with pytest.raises(GGUFHeaderError, match=r"truncated: .* ending at byte 98,362,432, but the file has "):
        require_complete(info, path.stat().st_size // 2)


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
