"""Fixtures for the local endpoints: real servers, started once, stopped with proof of no orphans; and the `slow` mark
of every test that needs the model, a server or the image (what `make test-fast` leaves out).

`local_endpoints` runs `semif local` exactly as a user does (`python -m scripts.local`, a
subprocess on a free port, the embedded model) once per test session; its
teardown sends SIGTERM and fails if the gateway does not exit 0 or leaves any
process behind. `spawn_gateway` starts extra instances for lifecycle tests;
`threaded_server` runs an app in-process, for contract tests that need a
container with scripted behaviour.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import uvicorn
from botocore.config import Config
from support import background
from support.module_marks import ON_ONE_THREAD, RUN_FIRST, RUN_LAST, SLOW_FIXTURES, SLOW_MODULES, SLOW_WITHOUT_MODEL

from scripts.local.processes import LOOPBACK, descendants, free_port, http_status, survivors, wait_until
from semif_adapter.engine.embedded_model import embedded_model_path

REPO = Path(__file__).resolve().parents[1]
pytest_plugins = ("support.file_fixtures",)  # make_gguf, make_tarball: real GGUF files and (hostile) tarballs
STARTUP_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 30.0


def _module(item: pytest.Item) -> str:
    return item.path.relative_to(REPO / "tests").as_posix()


def _rank(item: pytest.Item) -> int:
    module = _module(item)
    return 0 if module in RUN_FIRST else 2 if module in RUN_LAST else 1


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # The arm64 image (tests/image/test_arm64_image.py, every step emulated: the better part of an hour cold) runs
    # only when `-m` names its marker (`make test-arm64`); elsewhere it is deselected, and pytest's summary counts it.
    if "arm64" not in (config.option.markexpr or ""):
        arm64 = [item for item in items if item.get_closest_marker("arm64")]
        if arm64:
            config.hook.pytest_deselected(items=arm64)
            items[:] = [item for item in items if not item.get_closest_marker("arm64")]
    for item in items:
        module = _module(item)
        if module in SLOW_MODULES or SLOW_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)
        if module in SLOW_WITHOUT_MODEL:
            item.add_marker(pytest.mark.without_model)
        if module in ON_ONE_THREAD:
            item.add_marker(pytest.mark.one_thread)
    items.sort(key=_rank)  # stable: every other order kept


@dataclass
class RunningGateway:
    """One `semif local` process and where its output went."""

    url: str
    port: int
    process: subprocess.Popen[bytes]
    log_dir: Path
    output: Path

    def log(self) -> str:
        parts = [self.output.read_text(errors="replace")]
        parts += [p.read_text(errors="replace")[-4000:] for p in sorted(self.log_dir.glob("*.log"))]
        return "\n".join(parts)

    def wait_ready(self) -> None:
        try:
            wait_until(lambda: http_status(f"{self.url}/ping") == 200, timeout_s=STARTUP_TIMEOUT_S,
                       what="local endpoints", alive=lambda: self.process.poll() is None)
        except (TimeoutError, RuntimeError) as error:
            self.stop(signal.SIGKILL)
            pytest.fail(f"{error}\n{self.log()}")

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, set[int]]:
        """Signal it; its exit status and the pids of its family still alive afterwards."""
        family = descendants(self.process.pid)
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            status = self.process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            status = self.process.wait(timeout=STOP_TIMEOUT_S)
        return status, survivors(family)


def _start(tmp: Path, extra: tuple[str, ...], env: dict[str, str] | None) -> RunningGateway:
    port = free_port()
    tmp.mkdir(parents=True, exist_ok=True)
    log_dir, output = tmp / "logs", tmp / "local_endpoints.out"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "scripts.local", "--port", str(port), "--log-dir", str(log_dir), *extra],
            cwd=REPO, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    return RunningGateway(f"http://{LOOPBACK}:{port}", port, process, log_dir, output)


@pytest.fixture(scope="session", autouse=True)
def _background_work(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Begins the work of each selected test module that has `begin_in_background` (tests/support/background.py)."""
    modules = {item.module.__name__: item.module for item in request.session.items if isinstance(item, pytest.Function)}
    for name in sorted(modules):
        begin = getattr(modules[name], "begin_in_background", None)
        if begin is not None:
            begin(tmp_path_factory)
    yield
    background.shutdown()


@pytest.fixture(scope="session")
def model_path() -> Path:
    return embedded_model_path()


@pytest.fixture(scope="session")
def local_endpoints(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """The session's local endpoints (gateway + chat + decision containers on the embedded model)."""
    gateway = _start(tmp_path_factory.mktemp("local-endpoints"), (), None)
    gateway.wait_ready()
    yield gateway
    status, left = gateway.stop()
    assert status == 0, f"local endpoints exited {status} on SIGTERM\n{gateway.log()}"
    assert not left, f"processes {left} outlived the local endpoints"


@pytest.fixture
def spawn_gateway(tmp_path: Path) -> Iterator[Callable[..., RunningGateway]]:
    """Start more instances (`spawn_gateway(*args, env=...)`); any still running are killed at the end."""
    started: list[RunningGateway] = []

    def spawn(*extra: str, env: dict[str, str] | None = None) -> RunningGateway:
        gateway = _start(tmp_path / str(len(started)), extra, env)
        started.append(gateway)
        return gateway

    yield spawn
    for gateway in started:
        gateway.stop(signal.SIGKILL)


@pytest.fixture(scope="module")
def uncached_gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningGateway]:
    """Local endpoints whose adapter keeps no result cache (each answer computed afresh), shared by a module's tests
    that compare answers: one start instead of one per test."""
    gateway = _start(tmp_path_factory.mktemp("uncached-gateway"), (), {**os.environ, "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    gateway.wait_ready()
    yield gateway
    gateway.stop(signal.SIGKILL)


def runtime_client_for(url: str, max_attempts: int = 1) -> Any:
    """An unmodified boto3 sagemaker-runtime client pointed at a gateway (no retries unless asked)."""
    return boto3.client(
        "sagemaker-runtime", endpoint_url=url, region_name="us-east-1", aws_access_key_id="local",
        aws_secret_access_key="local",
        config=Config(retries={"mode": "standard", "total_max_attempts": max_attempts}, read_timeout=120))


@pytest.fixture(scope="session")
def runtime(local_endpoints: RunningGateway) -> Any:
    return runtime_client_for(local_endpoints.url)


@pytest.fixture
def runtime_for() -> Callable[..., Any]:
    return runtime_client_for


@contextmanager
def _serve_in_thread(app: Any) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the in-process server did not start")
        time.sleep(0.02)
    try:
        yield f"http://{LOOPBACK}:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@pytest.fixture
def threaded_server() -> Callable[[Any], AbstractContextManager[str]]:
    """`with threaded_server(app) as url:` serves an ASGI app on loopback in this process."""
    return _serve_in_thread
