"""The real servers for the reliability tests, started as the local endpoints start them (bench.reliability).

One decision adapter serves the whole session. Its queue admits 8 instead of 32,
so the disconnect test proves "no slot leaked" with a burst of 8 decisions
rather than 32; the load test keeps 6 clients + 2 slow senders within it, so a
503 there is still a failure. Its body timeout is 9 s instead of 30, so the load
test's stalled sender meets it within the load rather than 20 s after it (the
sender that finishes trickles its body over 5 s). Tests that must kill or break
an adapter start their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from bench.reliability.bodies import REQUEST_TIMEOUT_S, post_json
from bench.reliability.servers import Server, start_decision
from scripts.dev.tiny_model import tiny_model

QUEUE_SIZE = 8
BODY_TIMEOUT_SECONDS = 9


def _served(folder: Path, overrides: dict[str, str]) -> Iterator[Server]:
    """The session's adapter with this module's queue and body timeout, and `overrides`; exits 0 on SIGTERM."""
    settings = {"SEMIF_QUEUE_SIZE": str(QUEUE_SIZE), "SEMIF_BODY_TIMEOUT_SECONDS": str(BODY_TIMEOUT_SECONDS),
                **overrides}
    server = start_decision(folder, settings)
    yield server
    stopped = server.stop()
    assert stopped.status == 0, f"the adapter exited {stopped.status} on SIGTERM\n{server.log_text()[-3000:]}"


@pytest.fixture(scope="session")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    yield from _served(tmp_path_factory.mktemp("reliability-adapter"), {})


@pytest.fixture(scope="session")
def tiny_adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same adapter on the tiny random-weight model (scripts/dev/tiny_model.py), for the generated inputs: they
    test what the doors answer to what they are sent, in hundreds of requests, not what a model says."""
    yield from _served(tmp_path_factory.mktemp("reliability-tiny-adapter"), {"SM_LLAMA_CPP_MODEL": str(tiny_model())})


@pytest.fixture(scope="session")
def post(tiny_adapter: Server) -> Iterator[Callable[[bytes], httpx.Response]]:
    """POST raw bytes as application/json to the shared tiny adapter."""
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as client:
        yield lambda raw: post_json(client, tiny_adapter.url, raw)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "logs"
