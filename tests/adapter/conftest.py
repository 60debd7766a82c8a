"""Run the adapter exactly as the image does (`container/serve serve`) on loopback, with the real model."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from semif_adapter.embedded_model import embedded_model_path

ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "container" / "serve"
START_TIMEOUT = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AdapterProcess:
    """One `serve` process; its stdout (JSON log lines) goes to a file the test can read."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = ("serve",)) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = tempfile.NamedTemporaryFile(prefix="adapter-", suffix=".log", delete=False)  # noqa: SIM115
        full_env = {
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "SAGEMAKER_BIND_TO_PORT": str(self.port), "SEMIF_HOST": "127.0.0.1",
            "SM_LLAMA_CPP_CTX_SIZE": "4096", **env,
        }
        self.proc = subprocess.Popen([str(SERVE), *args], env=full_env, stdout=self._log,
                                     stderr=subprocess.STDOUT)

    def logs(self) -> str:
        return Path(self._log.name).read_text()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"adapter exited with {self.proc.returncode}:\n{self.logs()}")
            try:
                if httpx.get(self.url + "/ping", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"adapter not ready within {timeout} s:\n{self.logs()}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        os.unlink(self._log.name)


@pytest.fixture
def start_adapter() -> Iterator:
    """Factory for short-lived adapters (contract and fault tests); all are stopped afterwards."""
    started: list[AdapterProcess] = []

    def start(env: dict[str, str] | None = None, args: tuple[str, ...] = ("serve",)) -> AdapterProcess:
        process = AdapterProcess(env or {}, args)
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture(scope="session")
def adapter() -> Iterator[AdapterProcess]:
    """The shared adapter on the embedded model, for request/response tests."""
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def client(adapter: AdapterProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=adapter.url, timeout=60) as session:
        yield session


def decision(state: object = "The invoice is 45 days overdue and two reminders went unanswered.",
             question: str = "What should accounts receivable do next?",
             options: list[tuple[str, str]] | None = None, **knobs: object) -> dict:
    options = options or [("remind", "Send another reminder email"), ("call", "Phone the customer"),
                          ("collections", "Hand the account to collections")]
    return {"decision": {"id": "case-1", "state": state, "question": question,
                         "options": [{"id": i, "description": d} for i, d in options]}, **knobs}


@pytest.fixture(scope="session")
def make_decision():
    """The request builder, as a fixture (test modules do not import conftest)."""
    return decision
