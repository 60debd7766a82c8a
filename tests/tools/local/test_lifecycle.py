"""`semif local` as a process: refusals, clean stops, failures, and no orphans (slow)."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from scripts.local.processes import LOOPBACK, descendants, pid_alive, wait_until
from semif_adapter.settings import SAGEMAKER_STOP_SECONDS

pytestmark = pytest.mark.slow
Spawn = Callable[..., Any]


def command_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_setting_typo_is_refused_before_anything_starts(spawn_gateway: Spawn) -> None:
    gateway = spawn_gateway(env={**os.environ, "SM_LLAMA_CPP_THREAD": "2"})
    assert gateway.process.wait(timeout=30) == 2
    output = gateway.output.read_text()
    assert "refused: SM_LLAMA_CPP_THREAD:" in output and "SM_LLAMA_CPP_THREADS" in output


def test_port_in_use_is_refused(spawn_gateway: Spawn) -> None:
    with socket.socket() as busy:
        busy.bind((LOOPBACK, 0))
        busy.listen(1)
        gateway = spawn_gateway("--port", str(busy.getsockname()[1]))  # the later --port wins
        assert gateway.process.wait(timeout=30) == 2
    assert "is in use" in gateway.output.read_text()


def test_missing_model_is_refused(spawn_gateway: Spawn, tmp_path: Path) -> None:
    gateway = spawn_gateway("--model", str(tmp_path / "none.gguf"))
    assert gateway.process.wait(timeout=30) == 2
    assert "model file does not exist" in gateway.output.read_text()


def test_ctrl_c_stops_everything(spawn_gateway: Spawn) -> None:
    gateway = spawn_gateway()
    gateway.wait_ready()
    family = descendants(gateway.process.pid)
    assert any("llama-server" in command_of(pid) for pid in family)
    assert any("container/serve" in command_of(pid) for pid in family)
    status, left = gateway.stop(signal.SIGINT)
    assert status == 0
    assert not left
    assert gateway.output.read_text().rstrip().endswith("local endpoints: stopped")


def test_a_dying_model_server_stops_the_gateway_with_the_reason(spawn_gateway: Spawn) -> None:
    gateway = spawn_gateway()
    gateway.wait_ready()
    family = descendants(gateway.process.pid)
    (llama,) = [pid for pid in family if "llama-server" in command_of(pid)]
    os.kill(llama, signal.SIGKILL)
    assert gateway.process.wait(timeout=30) == 1
    output = gateway.output.read_text()
    assert "failed: local-chat: exited with status 1" in output
    wait_until(lambda: not any(pid_alive(p) for p in family), timeout_s=10, what="children")


def test_even_a_killed_gateway_leaves_no_model_server(spawn_gateway: Spawn) -> None:
    gateway = spawn_gateway()
    gateway.wait_ready()
    family = descendants(gateway.process.pid)
    started = time.monotonic()
    os.kill(gateway.process.pid, signal.SIGKILL)  # no clean-up code runs: the kernel's PDEATHSIG does it
    gateway.process.wait(timeout=10)
    # PDEATHSIG is a SIGTERM: each child may take what SageMaker allows after one (the adapter finishes the
    # partial-reuse probe it may still be running, seconds on a busy machine), and no more
    wait_until(lambda: not any(pid_alive(p) for p in family), timeout_s=SAGEMAKER_STOP_SECONDS, what="orphans")
    assert time.monotonic() - started < SAGEMAKER_STOP_SECONDS
