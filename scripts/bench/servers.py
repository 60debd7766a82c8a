"""The two servers under test, started as users start them, on loopback, and always stopped.

The adapter is the real `container/serve serve` process; the chat path is the
real llama-server with the command line the DLC's entry point builds (through
the chat container's own helpers), reached directly as nginx would reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scripts.local.chat_container import llama_server_argv, llama_server_binary
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import LOOPBACK, Child, free_port, start_child, wait_for_ping

START_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Running:
    url: str
    child: Child

    def ready_fields(self) -> dict[str, object]:
        """The adapter's `ready` log line (threads, head tokens, ...), or {} for other servers."""
        for line in (self.child.log_path.read_text(errors="replace") if self.child.log_path else "").splitlines():
            with contextlib.suppress(ValueError):
                document = json.loads(line)
                if document.get("event") == "ready":
                    return document
        return {}


def _base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SM_", "SEMIF_", "SAGEMAKER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


@contextlib.contextmanager
def adapter(model: Path, extra_env: dict[str, str] | None = None) -> Iterator[Running]:
    """`container/serve serve` on a free loopback port with its own defaults (threads from the cgroup quota)."""
    env = _base_env({"SM_LLAMA_CPP_MODEL": str(model), **(extra_env or {})})
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        container = start_decision_container("semif-adapter", env, Path(logs))
        with _ready(container.child, container.url, "/ping") as running:
            yield running


@contextlib.contextmanager
def llama_server(model: Path, threads: int) -> Iterator[Running]:
    """llama-server as the DLC starts it, with the adapter's thread count so both use the same CPUs."""
    port = free_port()
    env = _base_env({"SM_LLAMA_CPP_MODEL": str(model), "SM_LLAMA_CPP_THREADS": str(threads),
                     "SM_LLAMA_CPP_THREADS_BATCH": str(threads)})
    argv = llama_server_argv(llama_server_binary(), env, port)
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        child = start_child("llama-server", argv, env, log_path=Path(logs) / "llama-server.log")
        with _ready(child, f"http://{LOOPBACK}:{port}", "/health") as running:
            yield running


@contextlib.contextmanager
def _ready(child: Child, url: str, health: str) -> Iterator[Running]:
    """Wait until `health` answers 200, hand the server over, always stop it."""
    try:
        wait_for_ping(child, url + health, START_TIMEOUT_S)
        yield Running(url, child)
    finally:
        child.stop()
