"""The adapter maps one copy of each llama.cpp library, even where each of a library's names is a file of its own.

A wheel has no symlinks: a `llama_cpp/lib` installed from one holds `libggml.so`, `libggml.so.0` and
`libggml.so.0.26.0` as three files (the image now keeps one copy and its symlinks; a user's own install may not).
libllama is linked against `libggml.so.0`; anything that opens `libggml.so` by path maps a second ggml, with a
backend registry of its own. Here the local build is copied
into that layout (each name its own file) with a stray `libggml-cuda.so` beside it, the trigger of the old
path-based loader, and a fresh interpreter reports which files it mapped.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import llama_cpp

REPORT_MAPPED = """
import collections, json, os
from semif_adapter.engine import llama_runtime
llama_runtime.load_backends()
mapped = {line.split()[-1] for line in open("/proc/self/maps") if ".so" in line}
copies = collections.Counter(os.path.basename(p).split(".so")[0] for p in mapped if "llama_cpp_lib" in p)
print(json.dumps(copies))
"""


def test_one_mapped_copy_of_each_library_in_the_wheel_layout(tmp_path: Path) -> None:
    wheel_lib = tmp_path / "llama_cpp_lib"
    shutil.copytree(Path(llama_cpp.llama_cpp._base_path), wheel_lib, symlinks=False)  # three files per library
    shutil.copy(wheel_lib / "libggml-cpu.so", wheel_lib / "libggml-cuda.so")
    assert not any(path.is_symlink() for path in wheel_lib.iterdir())
    result = subprocess.run([sys.executable, "-c", REPORT_MAPPED], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "LLAMA_CPP_LIB_PATH": str(wheel_lib)}, check=False)
    assert result.returncode == 0, result.stderr
    copies = json.loads(result.stdout)
    assert copies["libllama"] == 1 and copies["libggml-base"] == 1
    assert copies["libggml"] == 1, f"ggml mapped {copies['libggml']} times: {copies}"
    assert "libggml-cuda" not in copies, "a library the bindings do not link was loaded"


def test_ggml_runs_its_own_thread_pool_not_openmp() -> None:
    """With OpenMP each thread that ever decoded keeps a libgomp pool, and past one pool per CPU every call pays
    throttled wake-ups (docs/benchmarks.md): the adapter decodes on several threads, so the build must not use it."""
    features = llama_cpp.llama_print_system_info().decode()
    assert "AVX2 = 1" in features, features  # the report is the CPU backend's, and it was read
    assert "OPENMP" not in features, features
    mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if ".so" in line}
    assert not [path for path in mapped if "libgomp" in path], "libgomp is mapped into the process"
