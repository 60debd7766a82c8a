"""The containers under test, started exactly as `scripts/local` starts them, one at a time, on loopback.

The launchers of the local endpoints are reused (same command, same environment),
so what is measured here is the process a user runs. On top they add what
reliability needs to see: the process's resident memory, its JSON log lines,
and proof that stopping it leaves no process behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.local.endpoints import Container, container_env, start_chat_container, start_decision_container
from scripts.local.processes import descendants, survivors, wait_for_ping
from semif_adapter.engine.embedded_model import embedded_model_path

START_TIMEOUT_S = 180.0  # the model loads in seconds, but this machine is shared with other builds
STOP_TIMEOUT_S = 30.0  # SageMaker's SIGTERM-to-SIGKILL window
# The adapter's tests use this context; the local endpoints' default (2048) would refuse longer cases. No result
# cache: under load and faults every answer is computed by the engine, the harder case for the KV cache. A small
# host-memory cache fills within the first seconds of a load run, so RSS growth after that reads as a leak.
DECISION_CONTEXT = {"SM_LLAMA_CPP_CTX_SIZE": "4096", "SEMIF_RESULT_CACHE_ENTRIES": "0",
                    "SEMIF_CACHE_BYTES": str(32 * 1024 * 1024)}


def read_rss_kib(pid: int) -> int | None:
    """VmRSS of `pid` in KiB, from /proc (None once the process is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


@dataclass(frozen=True)
class Stopped:
    """How a server ended: its exit status, how long after SIGTERM, and what it left running."""

    status: int
    seconds: float
    survivors: tuple[int, ...]


@dataclass
class Server:
    """One started container process and its loopback URL."""

    container: Container

    @property
    def url(self) -> str:
        return self.container.url

    @property
    def pid(self) -> int:
        return self.container.child.pid

    @property
    def process(self) -> subprocess.Popen[bytes]:
        return self.container.child.process

    def alive(self) -> bool:
        return self.container.child.alive()

    def rss_kib(self) -> int | None:
        return read_rss_kib(self.pid)

    def log_text(self) -> str:
        path = self.container.child.log_path
        return path.read_text(errors="replace") if path is not None and path.exists() else ""

    def log_lines(self) -> list[dict[str, Any]]:
        """The adapter's JSON log lines (other output, such as a traceback, is skipped)."""
        lines = []
        for line in self.log_text().splitlines():
            with contextlib.suppress(ValueError):
                document = json.loads(line)
                if isinstance(document, dict):
                    lines.append(document)
        return lines

    def ready_fields(self) -> dict[str, Any]:
        return next((line for line in self.log_lines() if line.get("event") == "ready"), {})

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> None:
        wait_for_ping(self.container.child, f"{self.url}/ping", timeout_s)

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = STOP_TIMEOUT_S) -> Stopped:
        """Signal it and wait (SIGKILL after `timeout_s`); then list any descendant still alive."""
        family = descendants(self.pid)
        started = time.monotonic()
        if sig != signal.SIGTERM and self.alive():
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)
        status = self.container.child.stop(timeout_s)  # SIGTERM, bounded wait, then SIGKILL; closes the log
        seconds = time.monotonic() - started  # before the wait for stragglers
        return Stopped(status, seconds, tuple(sorted(survivors(family))))


def _env(overrides: Mapping[str, str]) -> dict[str, str]:
    """The local endpoints' container environment (embedded model, small defaults), then `overrides`."""
    return {**container_env(os.environ, embedded_model_path()), **overrides}


def settings_in_use() -> dict[str, dict[str, str]]:
    """The container settings (`SM_*`, `SEMIF_*`, model path aside) each container gets, for the report."""
    def visible(env: Mapping[str, str]) -> dict[str, str]:
        return {k: v for k, v in sorted(env.items()) if k.startswith(("SM_", "SEMIF_")) and not k.endswith("_MODEL")}

    return {"decision": visible(_env(DECISION_CONTEXT)), "chat": visible(_env({}))}


def start_decision(log_dir: Path, overrides: Mapping[str, str] | None = None, *, name: str = "decision",
                   wait: bool = True) -> Server:
    """`container/serve serve` as the local endpoints run it; ready unless `wait` is False."""
    server = Server(start_decision_container(name, _env({**DECISION_CONTEXT, **(overrides or {})}), log_dir))
    if wait:
        _ready_or_stopped(server)
    return server


def start_chat(log_dir: Path, overrides: Mapping[str, str] | None = None, *, name: str = "chat") -> Server:
    """`scripts.local.chat_container` (the DLC's entry point and nginx front) with llama-server behind it."""
    server = Server(start_chat_container(name, _env(overrides or {}), log_dir))
    _ready_or_stopped(server)
    return server


def _ready_or_stopped(server: Server) -> None:
    try:
        server.wait_ready()
    except BaseException:
        server.stop(signal.SIGKILL)
        raise
