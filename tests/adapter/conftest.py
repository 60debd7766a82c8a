"""Run the adapter exactly as the image does (`container/serve serve`) on loopback, with the real model."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.adapter_process import AdapterProcess
from support.models import MATRIX, MatrixModel

from bench.reliability.bodies import decision
from scripts.dev.tiny_model import tiny_model
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.llama_runtime import LlamaRuntime
from semif_adapter.settings import load_settings


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
    yield from _settled(embedded_model_path())


def _settled(model: Path) -> Iterator[AdapterProcess]:
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(model), "SEMIF_RESULT_CACHE_ENTRIES": "0",
                              "SEMIF_SCORING": "letters"})
    try:
        process.wait_settled()  # its probe done: a test's own adapters load beside an idle one
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def tiny_adapter() -> Iterator[AdapterProcess]:
    """The shared adapter's settings on the tiny random-weight model (scripts/dev/tiny_model.py), for the doors' tests:
    what each contract answers to what it is sent (shapes, errors, routes, one question through every door), not what
    a model says, which the tests on `adapter` and the model matrix check."""
    yield from _settled(tiny_model())


@pytest.fixture(scope="session")
def tiny_client(tiny_adapter: AdapterProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=tiny_adapter.url, timeout=60) as session:
        yield session


@pytest.fixture(scope="module", params=MATRIX)
def matrix_adapter(request: pytest.FixtureRequest) -> Iterator[tuple[MatrixModel, AdapterProcess]]:
    """The adapter on each model of the matrix in turn (every answer computed: no result cache)."""
    model: MatrixModel = request.param
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(model.path), "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    try:
        process.wait_settled()  # its probe done: a test's own adapters load beside an idle one
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
