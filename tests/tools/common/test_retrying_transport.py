"""The tools' retrying transport (scripts/common/transport.py) against a scripted container on loopback: a busy
answer is asked again after its Retry-After (capped) or a bounded backoff, with the same body; nothing else is."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scripts.common.transport import ATTEMPT_STARTED, BACKOFF_BASE_S, RetryingTransport
from scripts.local.processes import LOOPBACK, free_port

Serve = Callable[[Starlette], AbstractContextManager[str]]


@dataclass
class Script:
    """The answers the container gives, in order (the last one again when they run out), and what it was sent."""

    answers: list[tuple[int, dict[str, str]]]
    bodies: list[bytes] = field(default_factory=list)

    def app(self) -> Starlette:
        async def invocations(request: Request) -> Response:
            self.bodies.append(await request.body())
            status, headers = self.answers[min(len(self.bodies), len(self.answers)) - 1]
            return JSONResponse({"error": {"code": "queue_full"}} if status != 200 else {"ok": True},
                                status_code=status, headers=headers)

        return Starlette(routes=[Route("/invocations", invocations, methods=["POST"])])


Start = Callable[..., tuple[Script, str]]


@pytest.fixture
def container(threaded_server: Serve) -> Iterator[Start]:
    """`container(*answers)`: a scripted container on loopback, and its URL."""
    with ExitStack() as stack:

        def start(*answers: tuple[int, dict[str, str]]) -> tuple[Script, str]:
            script = Script(list(answers))
            return script, stack.enter_context(threaded_server(script.app()))

        yield start


def post(url: str, transport: RetryingTransport, body: bytes = b'{"n": 1}') -> httpx.Response:
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.post(f"{url}/invocations", content=body)


def test_a_busy_container_is_asked_again_after_its_retry_after_with_the_same_body(container: Start) -> None:
    script, url = container((503, {"Retry-After": "0"}), (429, {"Retry-After": "0"}), (200, {}))
    slept: list[float] = []
    response = post(url, RetryingTransport(3, sleep=slept.append), body=b'{"decision": 1}')
    assert (response.status_code, response.json()) == (200, {"ok": True})
    assert script.bodies == [b'{"decision": 1}'] * 3
    assert slept == [0.0, 0.0]
    assert response.extensions[ATTEMPT_STARTED] > 0  # when the try that answered began (time.perf_counter)


def test_the_wait_is_retry_after_capped_or_else_a_bounded_backoff(container: Start) -> None:
    _, url = container((529, {"Retry-After": "30"}), (503, {}), (503, {}), (200, {}))
    slept: list[float] = []
    assert post(url, RetryingTransport(4, max_wait_s=5.0, sleep=slept.append)).status_code == 200
    assert slept[0] == 5.0  # System One's 529 is busy too; its 30 s capped
    assert 0 <= slept[1] <= BACKOFF_BASE_S * 2 and 0 <= slept[2] <= BACKOFF_BASE_S * 4  # no Retry-After: backoff


def test_the_last_busy_answer_goes_back_when_the_tries_run_out(container: Start) -> None:
    script, url = container((503, {"Retry-After": "0"}))
    response = post(url, RetryingTransport(2, sleep=lambda _: None))
    assert (response.status_code, response.json()) == (503, {"error": {"code": "queue_full"}})
    assert len(script.bodies) == 2


@pytest.mark.parametrize("status", [400, 404, 500])
def test_other_answers_are_not_asked_again(container: Start, status: int) -> None:
    script, url = container((status, {"Retry-After": "0"}), (200, {}))
    assert post(url, RetryingTransport(3, sleep=lambda _: None)).status_code == status
    assert len(script.bodies) == 1


def test_nothing_listening_is_the_callers_error_at_once() -> None:
    slept: list[float] = []
    with pytest.raises(httpx.ConnectError):
        post(f"http://{LOOPBACK}:{free_port()}", RetryingTransport(3, sleep=slept.append))
    assert slept == []
