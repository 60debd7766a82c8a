"""Build `container/` with buildah on the stand-in DLC and run it with podman, as SageMaker runs it, on loopback.

The build is the committed Dockerfile, unmodified, with the build args the CDK app passes for a CPU
environment. `--layers` keeps every step in the containers storage (root: /var/lib/containers/storage), so a
second run rebuilds only from the first step whose input changed; one build at a time per machine (a lock
in the per-user cache). `--format docker` because the OCI format drops `SHELL`; `--isolation chroot` and
podman's `--runtime runc` because this kind of sandbox has no user namespaces for buildah's default and
cgroups that crun refuses; `--ulimit`s explicit because the sandbox forbids raising them to podman's defaults.

`build_decision_image("arm64")` builds the Graviton image (`--platform linux/arm64`, the build args the CDK app
passes for an arm64 environment) FROM the arm64 stand-in: its RUN steps run under the qemu-user emulator that
binfmt_misc registers (`emulator_problem` says why not), except llama.cpp's compile, which the Dockerfile's `llama`
stage does on this machine's platform with the cross builder (`ensure_cross_builder`); its own tag, log and lock,
so an x86-64 image build on this machine never waits for it.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import os
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from standin_dlc import ensure_cross_builder, ensure_standin_image

from scripts.dev.build_llama_cpp import cache_root
from scripts.local.processes import LOOPBACK, free_port
from stacks.config import ImageBuild
from stacks.image.decision_image import CONTAINER_DIR, build_args_for

IMAGE = "localhost/semif-decision-test:latest"
TOOLS = ("buildah", "podman", "runc", "mmdebstrap", "gcc")
BUILD_TIMEOUT_S = 45 * 60  # a cold build is about 6-10 minutes on 2 cores
# Per Debian architecture: the image's tag, the instance type whose build args it gets, extra tools, the timeout.
ARM64_IMAGE = "localhost/semif-decision-test-arm64:latest"
ARM64_TOOLS = ("aarch64-linux-gnu-gcc",)
ARM64_BUILD_TIMEOUT_S = 90 * 60  # the steps of the image's platform emulated: docs/image-tests.md, "The arm64 image"
# binfmt_misc's entry for aarch64 ELF files: Debian's qemu-user-static (with binfmt-support) registers it.
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
QEMU_AARCH64 = BINFMT_DIR / "qemu-aarch64"
PODMAN = ("podman", "--runtime", "runc")
_names = itertools.count()


def work_dir() -> Path:
    path = cache_root() / "image-test"
    path.mkdir(parents=True, exist_ok=True)
    return path


def missing_tools(arch: str = "amd64") -> list[str]:
    tools = TOOLS + (ARM64_TOOLS if arch == "arm64" else ())
    return [tool for tool in tools if shutil.which(tool) is None]


def emulator_problem() -> str | None:
    """Why this machine cannot run arm64 programs (for a build's RUN steps and the container), or None.

    The kernel hands an aarch64 ELF file to the interpreter registered in binfmt_misc; it must be enabled and
    carry the F flag (the interpreter opened when registered, so it runs inside the build's chroot too)."""
    fix = ("`apt-get install qemu-user-static binfmt-support` (Debian), then "
           "`update-binfmts --enable qemu-aarch64`")
    if not (BINFMT_DIR / "status").exists():
        return (f"binfmt_misc is not mounted at {BINFMT_DIR}: `mount -t binfmt_misc binfmt_misc {BINFMT_DIR}`, "
                f"then {fix}")
    if not QEMU_AARCH64.exists():
        return f"no aarch64 emulator is registered ({QEMU_AARCH64} is missing): {fix}"
    entry = QEMU_AARCH64.read_text()
    flags = next((line.split(":", 1)[1].strip() for line in entry.splitlines() if line.startswith("flags:")), "")
    if not entry.startswith("enabled"):
        return f"{QEMU_AARCH64} is registered but disabled: `update-binfmts --enable qemu-aarch64`"
    if "F" not in flags:
        return (f"{QEMU_AARCH64} lacks the F flag (flags: {flags or 'none'}): the build's chroot cannot reach the "
                "interpreter; Debian's qemu-user-static registers it with F")
    return None


@dataclass(frozen=True)
class BuiltImage:
    reference: str
    base: str
    build_args: dict[str, str]
    seconds: float
    log: Path


def build_decision_image(arch: str = "amd64") -> BuiltImage:
    """Build (or find in the layer cache) the decision image FROM the stand-in base of `arch` (amd64, arm64)."""
    work = work_dir()
    suffix = "" if arch == "amd64" else f"-{arch}"
    log, image_id = work / f"build{suffix}.log", work / f"image-id{suffix}.{os.getpid()}"
    with (work / f"build{suffix}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # never two builds of one architecture at once on one machine
        started = time.monotonic()
        base = ensure_standin_image(work, arch)
        if arch == "arm64":  # what the stack passes for a Graviton CPU environment, and the emulated platform;
            # llama.cpp cross-compiled on this machine's platform (the Dockerfile's `llama` stage), not emulated
            args = {**build_args_for(ImageBuild(), "cpu", ["ml.c7g.xlarge"], "arm64"),
                    "LLAMA_BUILDER_IMAGE": ensure_cross_builder(work, arch)}
            # BUILDPLATFORM given: BuildKit sets it, Debian 12's buildah (1.28) does not (the cross builder is amd64)
            platform = ["--platform", "linux/arm64", "--build-arg", "BUILDPLATFORM=linux/amd64"]
            tag, timeout_s = ARM64_IMAGE, ARM64_BUILD_TIMEOUT_S
        else:  # what the stack passes for a CPU environment
            args = build_args_for(ImageBuild(), "cpu", ["ml.m5.large"])
            platform, tag, timeout_s = [], IMAGE, BUILD_TIMEOUT_S
        command = ["buildah", "bud", "--isolation", "chroot", "--format", "docker", "--layers", "--pull=never",
                   *platform, "--build-arg", f"BASE_IMAGE={base}", *(f"--build-arg={k}={v}" for k, v in args.items()),
                   "--label", f"org.opencontainers.image.base.name={base}", "--iidfile", str(image_id),
                   "--tag", tag, str(CONTAINER_DIR)]
        with log.open("w") as sink:
            result = subprocess.run(command, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout_s,
                                    check=False)
        if result.returncode != 0:
            raise AssertionError(f"buildah bud failed ({result.returncode}); end of {log}:\n"
                                 + log.read_text(errors="replace")[-6000:])
        # Run by id: another checkout's build on this machine may move the tag meanwhile.
        reference = image_id.read_text().strip()
        image_id.unlink()
        return BuiltImage(reference, base, args, time.monotonic() - started, log)


def inspect(reference: str) -> dict[str, Any]:
    output = subprocess.run([*PODMAN, "image", "inspect", reference], capture_output=True, text=True, check=True)
    return json.loads(output.stdout)[0]


def ulimits() -> list[str]:
    """This process's own limits, as the sandbox refuses podman's higher defaults; nproc at most kernel.pid_max,
    which is as far as the sandbox lets runc set it (measured: 32768 passes, 32769 is refused)."""
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    flags = []
    for name, limit, cap in (("nofile", resource.RLIMIT_NOFILE, None), ("nproc", resource.RLIMIT_NPROC, pid_max)):
        soft, hard = (value if cap is None else min(value, cap) for value in resource.getrlimit(limit))
        flags += ["--ulimit", f"{name}={soft}:{hard}"]
    return flags


@dataclass
class Container:
    """One `podman run IMAGE serve`, published on a loopback port."""

    name: str
    port: int
    removed: bool = field(default=False)

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def host_pid(self) -> int:
        """The pid of the container's entry point as this machine's /proc knows it."""
        return int(self._podman("inspect", "--format", "{{.State.Pid}}", self.name))

    def logs(self) -> str:
        result = subprocess.run([*PODMAN, "logs", self.name], capture_output=True, text=True, check=False)
        return result.stdout + result.stderr

    def exec(self, *command: str) -> subprocess.CompletedProcess[str]:
        """Run a command inside the running container (its user, its environment)."""
        return subprocess.run([*PODMAN, "exec", self.name, *command], capture_output=True, text=True, timeout=60,
                              check=False)

    def send_signal(self, signal_name: str) -> None:
        self._podman("kill", "--signal", signal_name, self.name)

    def wait_exit(self, timeout_s: float) -> int:
        return int(self._podman("wait", self.name, timeout_s=timeout_s))

    def remove(self) -> None:
        if not self.removed:
            subprocess.run([*PODMAN, "rm", "--force", "--time", "0", self.name], capture_output=True, check=False)
            self.removed = True

    def _podman(self, *args: str, timeout_s: float = 60) -> str:
        return subprocess.run([*PODMAN, *args], capture_output=True, text=True, check=True,
                              timeout=timeout_s).stdout.strip()


@dataclass
class Serving:
    """The image serving the embedded model, and the /ping answers seen from its start until ready."""

    container: Container
    pings: list[int]


def run_container(image: str, models: dict[str, Path], env: dict[str, str],
                  args: tuple[str, ...] = ("serve",), arch: str | None = None) -> Container:
    """Start `IMAGE serve` with each file of `models` bind-mounted read-only under /opt/ml/model (`arch`: the
    image's architecture where it is not this machine's, which the kernel then runs through qemu-user)."""
    name = f"semif-image-test-{os.getpid()}-{next(_names)}"
    port = free_port()
    mounts = [arg for target, source in models.items()
              for arg in ("--volume", f"{source}:/opt/ml/model/{target}:ro")]
    environment = [arg for key, value in env.items() for arg in ("--env", f"{key}={value}")]
    platform = ["--arch", arch] if arch else []
    subprocess.run([*PODMAN, "run", "--detach", "--name", name, *platform, *ulimits(),
                    "--publish", f"{LOOPBACK}:{port}:8080", *mounts, *environment, image, *args],
                   capture_output=True, text=True, check=True, timeout=120)
    return Container(name, port)
