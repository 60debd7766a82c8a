"""Run the adapter exactly as the image does (`container/serve serve`) on loopback, with the real model."""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.models import MATRIX, MatrixModel

from scripts.harness.reliability.bodies import decision
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import ChildError, wait_for_ping
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.settings import load_settings

# A bound on a start that failed, not a speed target: loading and the warm-up took 3 s here idle, 30 s beside six busy
# loops. SageMaker waits at least 600 s (the health-check timeout the CDK app sets: stacks/endpoints/timeouts.py).
START_TIMEOUT = 180.0


class AdapterProcess:
    """One `serve` process started by the project's one adapter launcher; its JSON log lines in a file."""

    def __init__(self, env: dict[str, str], args: tuple[str, ...] = ("serve",)) -> None:
        self.env = env  # what it was started with: another adapter like it is `start_adapter({**env, ...})`
        self._log_dir = tempfile.TemporaryDirectory(prefix="adapter-")
        full_env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    "SM_LLAMA_CPP_CTX_SIZE": "4096", **env}
        self.container = start_decision_container("adapter", full_env, Path(self._log_dir.name), args)
        self.url = self.container.url
        self.proc = self.container.child.process

    def logs(self) -> str:
        log_path = self.container.child.log_path
        return log_path.read_text() if log_path else ""

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        try:
            wait_for_ping(self.container.child, self.url + "/ping", timeout)
        except (ChildError, TimeoutError) as error:
            raise AssertionError(f"adapter not ready: {error}\n{self.logs()}") from error

    def wait_exit(self, timeout: float = 30.0) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        self.container.child.stop(timeout_s=30)
        self._log_dir.cleanup()


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
    """The shared adapter on the embedded model, for request/response tests: every answer is computed (no
    result cache), and a request without `scoring` uses letters whatever the shipped default is."""
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_RESULT_CACHE_ENTRIES": "0",
                              "SEMIF_SCORING": "letters"})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module", params=MATRIX)
def matrix_adapter(request: pytest.FixtureRequest) -> Iterator[tuple[MatrixModel, AdapterProcess]]:
    """The adapter on each model of the matrix in turn (every answer computed: no result cache)."""
    model: MatrixModel = request.param
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(model.path), "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    try:
        process.wait_ready()
        yield model, process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def client(adapter: AdapterProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=adapter.url, timeout=60) as session:
        yield session


@pytest.fixture(scope="session")
def make_decision() -> Callable[..., dict[str, Any]]:
    """The project's one request builder (id "case-1", three options), as a fixture."""
    return decision


@pytest.fixture(scope="module")
def runtime() -> Iterator[LlamaRuntime]:
    """The real model in process, one per test module (engines on it see every cache state)."""
    runtime = LlamaRuntime(embedded_model_path(), load_settings({"SM_LLAMA_CPP_CTX_SIZE": "2048"}))
    yield runtime
    runtime.close()
