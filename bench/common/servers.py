"""The two servers under test, started as users start them, on loopback, and always stopped.

The adapter is the real `container/serve serve` process; the chat path is the
real llama-server with the command line the DLC's entry point builds (through
the chat container's own helpers), reached directly as nginx would reach it.
Both are handed over as the reliability drivers' `Server` (URL, log, `ready` line).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from bench.reliability.servers import START_TIMEOUT_S, Server
from scripts.local.chat_container import llama_server_argv, llama_server_binary
from scripts.local.endpoints import Container, start_decision_container, wait_settled
from scripts.local.processes import LOOPBACK, free_port, start_child, wait_for_ping


def _base_env(extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith(("SM_", "SEMIF_", "SAGEMAKER_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **extra}


@contextlib.contextmanager
def adapter(model: Path, extra_env: dict[str, str] | None = None) -> Iterator[Server]:
    """`container/serve serve` on a free loopback port with its own defaults (threads from the cgroup quota)."""
    env = _base_env({"SM_LLAMA_CPP_MODEL": str(model), **(extra_env or {})})
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        container = start_decision_container("semif-adapter", env, Path(logs))
        # settled, not only ready: the servers started next load beside an idle adapter
        with _ready(container, lambda started: wait_settled(started, START_TIMEOUT_S)) as running:
            yield running


@contextlib.contextmanager
def llama_server(model: Path, threads: int, settings: dict[str, str] | None = None) -> Iterator[Server]:
    """llama-server as the DLC starts it, with the adapter's thread count so both use the same CPUs;
    `settings` adds SM_LLAMA_CPP_* variables (the DLC's way to pass flags, e.g. PARALLEL=4 -> --parallel 4)."""
    port = free_port()
    env = _base_env({"SM_LLAMA_CPP_MODEL": str(model), "SM_LLAMA_CPP_THREADS": str(threads),
                     "SM_LLAMA_CPP_THREADS_BATCH": str(threads), **(settings or {})})
    argv = llama_server_argv(llama_server_binary(), env, port)
    with tempfile.TemporaryDirectory(prefix="semif-bench-") as logs:
        child = start_child("llama-server", argv, env, log_path=Path(logs) / "llama-server.log")
        container = Container("llama-server", child, f"http://{LOOPBACK}:{port}")
        with _ready(container, lambda started: wait_for_ping(started.child, started.url + "/health",
                                                             START_TIMEOUT_S)) as running:
            yield running


@contextlib.contextmanager
def _ready(container: Container, wait: Callable[[Container], object]) -> Iterator[Server]:
    """`wait` for the server, hand it over, always stop it."""
    try:
        wait(container)
        yield Server(container)
    finally:
        container.child.stop()
