"""Fixtures of the image test: the decision image built once per session, containers removed after each test."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from decision_container import BuiltImage, Container, Serving, build_decision_image, missing_tools, run_container

from scripts.dev.decision_models import decision_model
from scripts.local.endpoints import start_decision_container
from scripts.local.processes import Child, wait_for_ping
from semif_adapter.engine.embedded_model import embedded_model_path

START_TIMEOUT_S = 120.0
# The same llama.cpp settings for the image and the local process: their answers are compared bit for bit.
LLAMA_ENV = {"SM_LLAMA_CPP_CTX_SIZE": "4096", "SM_LLAMA_CPP_THREADS": "2", "SM_LLAMA_CPP_THREADS_BATCH": "2"}


@pytest.fixture(scope="session")
def decision_image() -> BuiltImage:
    missing = missing_tools()
    if missing:  # `make test` installs them (scripts/dev/bootstrap.sh); a bare pytest run may not have
        pytest.fail(f"{', '.join(missing)} not installed: run `make bootstrap` (it installs the image test's tools)")
    return build_decision_image()


@pytest.fixture(scope="session")
def model() -> dict[str, Path]:
    """The embedded model under its own name, as the mount that SageMaker's unpacked artifact would be."""
    path = embedded_model_path()
    return {path.name: path}


@pytest.fixture
def start_container(decision_image: BuiltImage) -> Iterator[Callable[..., Container]]:
    """`start_container(models, env=...)`: a container of the decision image; all are removed afterwards."""
    started: list[Container] = []

    def start(models: dict[str, Path], env: dict[str, str] | None = None) -> Container:
        container = run_container(decision_image.reference, models, {**LLAMA_ENV, **(env or {})})
        started.append(container)
        return container

    yield start
    for container in started:
        container.remove()


def serve_until_ready(image: BuiltImage, models: dict[str, Path]) -> Iterator[Serving]:
    """A container of the image on these models, polled on /ping from its start until it answers 200."""
    container = run_container(image.reference, models, LLAMA_ENV)
    pings: list[int] = []
    deadline = time.monotonic() + START_TIMEOUT_S
    try:
        while not pings or pings[-1] != 200:
            if time.monotonic() > deadline:
                pytest.fail(f"the image never answered /ping 200; seen {pings[-5:]}\n{container.logs()}")
            try:
                pings.append(httpx.get(container.url + "/ping", timeout=2).status_code)
                time.sleep(0.05)  # poll, do not spin: a busy loop here slows the loading it watches (2 cores)
            except httpx.TransportError:
                time.sleep(0.005)  # not listening yet
        yield Serving(container, pings)
    finally:
        container.remove()


@pytest.fixture(scope="module")
def serving(decision_image: BuiltImage, model: dict[str, Path]) -> Iterator[Serving]:
    yield from serve_until_ready(decision_image, model)


@pytest.fixture(scope="module")
def native_serving(decision_image: BuiltImage) -> Iterator[Serving]:
    """The image on a decision-typed GGUF (clef, a joint head that reads the embeddings output:
    scripts/dev/decision_models.py), which llama.cpp's own decision engine scores: the adapter runs the image's
    llama-server as its child."""
    path = decision_model("clef")
    yield from serve_until_ready(decision_image, {path.name: path})


@pytest.fixture(scope="module")
def local_adapter() -> Iterator[str]:
    """The same adapter as a local process (`container/serve serve` on the venv), for the same requests."""
    with tempfile.TemporaryDirectory(prefix="image-test-local-") as log_dir:
        env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               "SM_LLAMA_CPP_MODEL": str(embedded_model_path()), **LLAMA_ENV}
        local = start_decision_container("image-test-local", env, Path(log_dir))
        child: Child = local.child
        try:
            wait_for_ping(child, local.url + "/ping", START_TIMEOUT_S)
            yield local.url
        finally:
            child.stop(timeout_s=30)
