"""Our streaming GGUF header reader against files written by the reference writer."""

from __future__ import annotations

import io
import struct

import pytest

from semif_adapter.gguf_header import GGUFHeaderError, read_gguf_info


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
