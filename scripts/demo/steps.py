"""The demo's steps, each named when it fails: package, start the local endpoints, smoke-test them, stop them
with proof that nothing outlived them, synthesize the stack."""


from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from semif_adapter.deploy.artifact import build_tarball, check_tarball
from semif_adapter.engine.model_files import ModelFileError

from ..local.processes import (
    LOOPBACK,
    Child,
    ChildError,
    descendants,
    free_port,
    http_status,
    start_child,
    survivors,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]
TOOLS = __package__.rpartition(".")[0]  # scripts, or semif_sagemaker.tools when installed
ARTIFACT = REPO / "model.tar.gz"
STARTUP_TIMEOUT_S = 240.0
SMOKE_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0  # SageMaker's own SIGTERM-to-SIGKILL grace
SYNTH_TIMEOUT_S = 600.0
SMOKES = (["chat"], ["chat", "--stream"], ["decision"])
T = TypeVar("T")


class DemoError(Exception):
    """A step failed; the message says why."""


def say(message: str) -> None:
    print(f"demo: {message}", flush=True)


def package(model: Path) -> None:
    try:
        build_tarball(model, ARTIFACT)
        report = check_tarball(ARTIFACT)
    except ModelFileError as error:
        raise DemoError(str(error)) from error
    for line in report.lines():
        print(f"  {line}")


def start_endpoints(model: Path, port: int, log_dir: Path) -> Child:
    argv = [sys.executable, "-m", f"{TOOLS}.local", "--port", str(port), "--model", str(model),
            "--log-dir", str(log_dir)]
    gateway = start_child("local endpoints", argv, os.environ, log_dir / "gateway.log", cwd=REPO)
    try:
        waited = wait_until(lambda: http_status(f"http://{LOOPBACK}:{port}/ping") == 200,
                            timeout_s=STARTUP_TIMEOUT_S, what="local endpoints", alive=gateway.alive)
    except (ChildError, TimeoutError) as error:
        gateway.stop()
        raise DemoError(str(gateway.failure(str(error)))) from error
    say(f"gateway http://{LOOPBACK}:{port} ready after {waited:.1f} s (logs in {log_dir})")
    return gateway


def smoke(port: int, args: list[str]) -> None:
    command = [sys.executable, "-m", f"{TOOLS}.smoke", *args, "--local", "--port", str(port)]
    try:
        result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S,
                                check=False)
    except subprocess.TimeoutExpired as error:
        raise DemoError(f"{' '.join(args)}: no answer within {SMOKE_TIMEOUT_S:.0f} s") from error
    for line in (result.stdout + result.stderr).splitlines():
        print(f"  {line}")
    if result.returncode != 0:
        raise DemoError(f"semif smoke {' '.join(args)} exited with status {result.returncode}")


def stop_endpoints(gateway: Child) -> None:
    """SIGTERM, a bounded wait, and proof that no server (llama-server included) outlived it."""
    family = descendants(gateway.pid)
    started = time.monotonic()
    status = gateway.stop(timeout_s=STOP_TIMEOUT_S)
    left = survivors(family)
    if left:
        raise DemoError(f"processes {sorted(left)} outlived the local endpoints")
    if status != 0:
        raise DemoError(f"the local endpoints exited with status {status} (log: {gateway.log_path})")
    say(f"stopped {len(family) + 1} processes in {time.monotonic() - started:.1f} s, none left behind")


def synth() -> None:
    cdk = REPO / "node_modules" / ".bin" / "cdk"
    if not cdk.exists():
        raise DemoError(f"{cdk} is missing: run `make demo` (or `make bootstrap`)")
    env = {**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "true",
           "JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION": "20"}
    command = [str(cdk), "synth", "--no-notices", "--quiet", "-c", "env=dev"]
    try:
        result = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                                timeout=SYNTH_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as error:
        raise DemoError(f"cdk synth took over {SYNTH_TIMEOUT_S:.0f} s") from error
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
        raise DemoError(f"cdk synth exited with status {result.returncode}:\n{tail}")
    templates = sorted((REPO / "cdk.out").glob("*.template.json"))
    if not templates:
        raise DemoError("cdk synth wrote no *.template.json under cdk.out")
    for template in templates:
        print(f"  {template.relative_to(REPO)}")


def step(name: str, action: Callable[[], T]) -> T:
    say(f"-- {name}")
    started = time.monotonic()
    try:
        result = action()
    except DemoError as error:
        raise DemoError(f"step '{name}' failed: {error}") from error
    say(f"   {name}: ok ({time.monotonic() - started:.1f} s)")
    return result


def run_steps(model: Path, skip_synth: bool) -> None:
    step("package model.tar.gz", lambda: package(model))
    port = free_port()
    log_dir = Path(tempfile.mkdtemp(prefix="demo-local-endpoints-"))
    gateway = step("start local endpoints", lambda: start_endpoints(model, port, log_dir))
    failure: DemoError | None = None
    try:
        for args in SMOKES:
            step(f"smoke {' '.join(args)} --local", lambda args=args: smoke(port, args))
    except DemoError as error:
        failure = error  # stop first, then report
    finally:
        try:
            step("stop local endpoints", lambda: stop_endpoints(gateway))
        except DemoError as error:
            failure = DemoError(f"{failure}; then {error}") if failure else error
        finally:
            gateway.stop()  # a no-op unless Ctrl-C or an error cut the step short
    if failure is not None:
        raise failure
    if not skip_synth:
        step("cdk synth -c env=dev", synth)
