"""A stand-in for the llama.cpp DLC, made here from Debian packages, to build the decision image FROM.

The real base (Amazon Linux 2023, in the AWS DLC registry) cannot be pulled offline. What the Dockerfile relies
on is reproduced: the DLC's layout and environment (`/opt/llama.cpp/bin` first on `PATH` and on an
`LD_LIBRARY_PATH` ending with `:`, entry point `/usr/bin/serve`, port 8080), a `dnf` that installs the AL2023
package names the Dockerfile uses (mapped onto Debian's), decoy `libllama`/`libggml*` where the DLC keeps
its own build (they abort the process if the loader ever hands them to the adapter) and a `llama-server` there
that reports the -v1 tags' build (b10964) and refuses to serve. pip and Python's `ssl` inside the build trust this
machine's CA bundle (copied in at AL2023's path, which OpenSSL's default CA file then names, as on AL2023).

The image is tagged with a hash of everything that makes it, and made only when that tag is missing from
the containers storage, so it persists across runs and clones on one machine.

For the arm64 DLC (`llama-cpp-arm64`, Graviton) the same stand-in is made for Debian's arm64 (`arch="arm64"`):
mmdebstrap runs the arm64 packages' scripts through the qemu-user emulator that binfmt_misc registers, and the
decoys are cross-compiled with Debian's aarch64 gcc, so the arm64 loader would really load them. Beside it,
`ensure_cross_builder` makes the amd64 stand-in plus Debian's aarch64 cross compilers and a CMake toolchain file
named by CMAKE_TOOLCHAIN_FILE: the Dockerfile's `llama` stage (LLAMA_BUILDER_IMAGE) compiles llama.cpp there at
native speed, where an emulated compile is about 20 times slower (docs/image-tests.md, "The arm64 image").
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

RECIPE = Path(__file__).resolve().parent / "standin"
REPOSITORY = "localhost/semif-standin-dlc"
HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
IMAGE_CA_BUNDLE = "/etc/pki/tls/certs/ca-bundle.crt"  # where AL2023 keeps it
LLAMA_DIR = "/opt/llama.cpp/bin"
# The DLC's llama.cpp build: shared libraries with versioned sonames, CPU variants as loadable modules.
DECOY_LIBRARIES = ("libllama", "libllama-common", "libmtmd", "libggml", "libggml-base", "libggml-cpu")
DECOY_MODULES = ("libggml-cpu-x64", "libggml-cpu-haswell", "libggml-cpu-skylakex")
# Per Debian architecture: the C compiler of the decoys and the CPU variants llama.cpp names for it.
ARCHITECTURES = {
    "amd64": ("gcc", DECOY_MODULES),
    "arm64": ("aarch64-linux-gnu-gcc", ("libggml-cpu-armv8.2_1", "libggml-cpu-armv8.6_1", "libggml-cpu-armv9.2_1")),
}
ENV = {
    "PATH": f"{LLAMA_DIR}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LD_LIBRARY_PATH": f"{LLAMA_DIR}:",  # the DLC's `${LD_LIBRARY_PATH}` was empty: it ends with ':'
    "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "DLC_CONTAINER_TYPE": "general",
    "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1", "PYTHONIOENCODING": "UTF-8",
}
PIP_CONF = f"[global]\ncert = {IMAGE_CA_BUNDLE}\n"
OPENSSL_CA_FILE = "/usr/lib/ssl/cert.pem"  # Debian's OpenSSL default CA file (AL2023's is IMAGE_CA_BUNDLE itself)
# Bump when `customize` or the mmdebstrap options change what the stand-in holds (its tag hashes this, the
# recipe files and the machine's inputs, not this module's text: a comment here must not rebuild the image).
RECIPE_VERSION = "2"


def run(*command: str, **kwargs: object) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True, **kwargs).stdout.strip()


def host_codename() -> str:
    for line in Path("/etc/os-release").read_text().splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip('"')
    raise RuntimeError("/etc/os-release names no Debian codename: the stand-in base needs a Debian host")


def host_sources(codename: str) -> list[Path]:
    """This machine's Debian apt sources for its release (its mirrors are the ones it may reach)."""
    candidates = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*.sources")),
                  *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]
    found = [path for path in candidates if path.is_file() and codename in path.read_text()
             and "/debian" in path.read_text()]
    if not found:
        raise RuntimeError(f"no apt source of Debian {codename} on this machine")
    return found


def recipe_key(codename: str, sources: list[Path], arch: str = "amd64") -> str:
    """Hash of every input of the stand-in: recipe version and data, recipe files, CA bundle, apt sources (and the
    architecture, when not amd64: the amd64 stand-in's key is the one it had before arm64 was added)."""
    facts = [RECIPE_VERSION, ENV, PIP_CONF, IMAGE_CA_BUNDLE, OPENSSL_CA_FILE, LLAMA_DIR, DECOY_LIBRARIES, DECOY_MODULES,
             codename]
    if arch != "amd64":
        facts += [arch, ARCHITECTURES[arch]]
    digest = hashlib.sha256(json.dumps(facts, sort_keys=True).encode())
    for path in [*sorted(RECIPE.iterdir()), HOST_CA_BUNDLE, *sources]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def image_exists(reference: str) -> bool:
    return subprocess.run(["podman", "image", "exists", reference], check=False).returncode == 0


def compile_decoys(target: Path, arch: str = "amd64") -> None:
    """Each decoy under its real-file name and its soname, as the DLC's build has them."""
    compiler, modules = ARCHITECTURES[arch]
    target.mkdir(parents=True)
    for name in DECOY_LIBRARIES + modules:
        versioned = name in DECOY_LIBRARIES
        flags = [f"-Wl,-soname,{name}.so.0"] if versioned else []
        run(compiler, "-shared", "-fPIC", "-O1", f'-DDECOY_NAME="{name}.so"', *flags, str(RECIPE / "decoy.c"),
            "-o", str(target / f"{name}.so"))
        if versioned:
            (target / f"{name}.so.0").symlink_to(f"{name}.so")


def customize(root: Path, decoys: Path) -> None:
    """Lay the DLC's layout over the Debian rootfs."""
    llama_dir = root / LLAMA_DIR.lstrip("/")
    llama_dir.parent.mkdir(parents=True)
    shutil.copytree(decoys, llama_dir, symlinks=True)
    for name, target in (("dnf", "usr/bin/dnf"), ("serve", "usr/bin/serve"),
                         ("llama-server", f"{LLAMA_DIR.lstrip('/')}/llama-server")):
        (root / target).write_bytes((RECIPE / name).read_bytes())
        (root / target).chmod(0o755)
    bundle = root / IMAGE_CA_BUNDLE.lstrip("/")
    bundle.parent.mkdir(parents=True, exist_ok=True)
    bundle.write_bytes(HOST_CA_BUNDLE.read_bytes())
    default = root / OPENSSL_CA_FILE.lstrip("/")
    default.parent.mkdir(parents=True, exist_ok=True)
    default.unlink(missing_ok=True)
    default.symlink_to(IMAGE_CA_BUNDLE)
    (root / "etc/pip.conf").write_text(PIP_CONF)


CROSS_REPOSITORY = "localhost/semif-cross-builder"
CROSS_PACKAGES = {"arm64": "g++-aarch64-linux-gnu"}
TOOLCHAIN_FILE = "/opt/cross/toolchain.cmake"
TOOLCHAINS = {"arm64": """\
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
"""}


def repository(arch: str) -> str:
    return REPOSITORY if arch == "amd64" else f"{REPOSITORY}-{arch}"


def ensure_standin_image(work_dir: Path, arch: str = "amd64") -> str:
    """The stand-in base's reference (for Debian architecture `arch`), made first if this machine's storage does
    not hold it yet."""
    codename = host_codename()
    sources = host_sources(codename)
    repo = repository(arch)
    reference = f"{repo}:{recipe_key(codename, sources, arch)}"
    if image_exists(reference):
        return reference
    container = run("buildah", "from", "--arch", arch, "scratch")
    try:
        root = Path(run("buildah", "mount", container))
        with tempfile.TemporaryDirectory(dir=work_dir) as scratch:
            compile_decoys(Path(scratch) / "decoys", arch)
            run("mmdebstrap", "--variant=minbase", "--include=ca-certificates", "--mode=root", "--quiet",
                f"--arch={arch}", codename, str(root), *map(str, sources), stdin=subprocess.DEVNULL)
            customize(root, Path(scratch) / "decoys")
        run("buildah", "umount", container)
        config = [arg for key, value in ENV.items() for arg in ("--env", f"{key}={value}")]
        run("buildah", "config", *config, "--entrypoint", json.dumps(["/usr/bin/serve"]), "--port", "8080",
            "--arch", arch, "--os", "linux",
            "--label", f"org.semif.test.standin-dlc={codename}", container)
        run("buildah", "commit", "--quiet", "--format", "docker", container, reference)
    finally:
        subprocess.run(["buildah", "rm", container], check=False, capture_output=True)
    for old in run("podman", "images", "--format", "{{.Repository}}:{{.Tag}}", repo).splitlines():
        if old != reference:  # an earlier recipe; kept while a build cache still uses it (`podman image prune`)
            subprocess.run(["podman", "rmi", old], check=False, capture_output=True)
    return reference


def ensure_cross_builder(work_dir: Path, arch: str) -> str:
    """An amd64 builder image that cross-compiles for `arch`: the amd64 stand-in with Debian's cross compilers and
    a CMake toolchain file in CMAKE_TOOLCHAIN_FILE (CMake reads it from the environment); made once per input."""
    base = ensure_standin_image(work_dir)
    facts = json.dumps([base, CROSS_PACKAGES[arch], TOOLCHAIN_FILE, TOOLCHAINS[arch]])
    reference = f"{CROSS_REPOSITORY}-{arch}:{hashlib.sha256(facts.encode()).hexdigest()[:16]}"
    if image_exists(reference):
        return reference
    container = run("buildah", "from", "--pull=never", base)
    try:
        install = (f"apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                   f"--no-install-recommends {CROSS_PACKAGES[arch]} > /dev/null && apt-get clean "
                   "&& rm -rf /var/lib/apt/lists/*")
        run("buildah", "run", "--isolation", "chroot", container, "--", "/bin/sh", "-c", install)
        root = Path(run("buildah", "mount", container))
        toolchain = root / TOOLCHAIN_FILE.lstrip("/")
        toolchain.parent.mkdir(parents=True, exist_ok=True)
        toolchain.write_text(TOOLCHAINS[arch])
        run("buildah", "umount", container)
        run("buildah", "config", "--env", f"CMAKE_TOOLCHAIN_FILE={TOOLCHAIN_FILE}",
            "--label", f"org.semif.test.cross-builder={arch}", container)
        run("buildah", "commit", "--quiet", "--format", "docker", container, reference)
    finally:
        subprocess.run(["buildah", "rm", container], check=False, capture_output=True)
    return reference


if __name__ == "__main__":  # make it by hand: python tests/image/standin_dlc.py [arm64]
    cache = Path(os.environ.get("TMPDIR", "/tmp"))
    print(ensure_standin_image(cache, *sys.argv[1:2]))
