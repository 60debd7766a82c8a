"""System One on the local gateway (`POST /v1/systemone`, `GET /v1/models`), seen through the unmodified official SDK.

The first tests run on the session's local endpoints (the real decision container on the embedded model); the
pass-through ones use a scripted container, because what they check (a 529 with Retry-After, the exact headers and
bytes that reach the container) cannot be produced on demand by the real one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx
import pytest
from backports.zstd import decompress
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from typesafe_sdk import (
    Choice,
    Noul,
    RetryPolicy,
    Score,
    SystemOneResponse,
    TypeSafeClient,
    TypeSafeInternalServerError,
    TypeSafeUnprocessableEntityError,
)

from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK, free_port

Serve = Callable[[Any], AbstractContextManager[str]]
QUESTIONS = {
    "urgent": Noul(instructions="Does the customer need help today?"),
    "tone": Choice(instructions="What is the customer's tone?", criteria={"calm": None, "angry": "Angry, upset"}),
    "severity": Score(instructions="How bad is the damage?", criteria=["none", "minor", "severe"]),
}
# Over the SDK's 1 KiB threshold, so the body travels zstd-compressed (typesafe-sdk[zstd] is installed).
LONG_STATE = "The parcel arrived today and the screen is cracked; I need a replacement before Friday. " * 16
NO_RETRY = RetryPolicy(max_retries=0)


def check_answers(result: SystemOneResponse) -> None:
    """Every question answered in its own type, with the numbers SPEC 0.1 defines."""
    assert set(result.answers) == set(QUESTIONS)
    assert 0.0 <= result.nouls["urgent"].noul <= 1.0
    tone = result.choices["tone"]
    assert tone.choice in {"calm", "angry"} and set(tone.probabilities) == {"calm", "angry"}
    assert tone.probabilities[tone.choice] == max(tone.probabilities.values())
    assert sum(tone.probabilities.values()) == pytest.approx(1.0)
    severity = result.scores["severity"]
    assert severity.legend == {0: "none", 1: "minor", 2: "severe"}
    assert severity.score == pytest.approx(sum(level * p for level, p in severity.probabilities.items()))
    assert result.usage.input_tokens > 0 and result.usage.output_tokens == 0


def test_the_official_sdk_through_the_gateway(local_endpoints: Any) -> None:
    with TypeSafeClient(api_key="local", base_url=local_endpoints.url) as client:
        result = client.system_one(state=LONG_STATE, questions=QUESTIONS)
        models = client.models.list()
    check_answers(result)
    assert result.request_id  # the container's x-typesafe-request-id, passed back
    names = [model.name for model in models.models]
    assert result.model in names and "jev-latest" in names


def test_a_refusal_reaches_the_sdk_as_the_container_gave_it(local_endpoints: Any) -> None:
    with TypeSafeClient(api_key="local", base_url=local_endpoints.url, retry=NO_RETRY) as client, \
            pytest.raises(TypeSafeUnprocessableEntityError) as refused:
        client.system_one(state="s", questions=QUESTIONS,
                          extra_body={"questions": {"q": {"type": "score", "criteria": {"0": "low", "1": "high"}}}})
    assert refused.value.status == 422
    assert refused.value.body["detail"][0]["loc"][:3] == ["body", "questions", "q"]


class ScriptedDecision:
    """A decision container's own routes (System One's, OpenAI's, the models list): the next scripted answer, and
    what each request carried."""

    def __init__(self) -> None:
        self.script: list[Response] = []
        self.received: list[tuple[str, dict[str, str], bytes]] = []

    def app(self) -> Starlette:
        async def answer(request: Request) -> Response:
            self.received.append((request.url.path, dict(request.headers), await request.body()))
            return self.script.pop(0)

        return Starlette(routes=[Route("/v1/systemone", answer, methods=["POST"]),
                                 Route("/v1/decisions", answer, methods=["POST"]),
                                 Route("/v1/models", answer, methods=["GET"])])


@pytest.fixture
def scripted(threaded_server: Serve) -> Iterator[tuple[ScriptedDecision, str]]:
    container = ScriptedDecision()
    with threaded_server(container.app()) as url, \
            threaded_server(create_gateway({"t-chat": f"http://{LOOPBACK}:{free_port()}", "t-decision": url})) \
            as gateway:
        yield container, gateway


def test_status_headers_and_bytes_pass_through_both_ways(scripted: tuple[ScriptedDecision, str]) -> None:
    container, gateway = scripted
    busy = {"detail": {"error_type": "overloaded_error", "message": "all slots busy"}}
    listing = {"models": [{"name": "m", "description": "d", "release_date": "2026-12-01"}]}
    container.script += [JSONResponse(busy, status_code=529, headers={"Retry-After": "7"}),
                         JSONResponse(listing, headers={"x-typesafe-request-id": "r-1"})]
    with TypeSafeClient(api_key="sk-test-1", base_url=gateway, retry=NO_RETRY) as client:
        with pytest.raises(TypeSafeInternalServerError) as overloaded:
            client.system_one(state=LONG_STATE, questions=QUESTIONS)
        models = client.models.list()
    assert (overloaded.value.status, overloaded.value.body) == (529, busy)
    assert overloaded.value.headers["retry-after"] == "7"
    assert [model.name for model in models.models] == ["m"] and models.request_id == "r-1"
    (path, headers, body), (models_path, models_headers, _) = container.received
    assert (path, models_path) == ("/v1/systemone", "/v1/models")
    assert headers["authorization"] == models_headers["authorization"] == "Bearer sk-test-1"
    assert headers["content-type"] == "application/json" and headers["content-encoding"] == "zstd"
    assert json.loads(decompress(body))["state"] == LONG_STATE  # the compressed bytes, untouched


@pytest.mark.parametrize(("routes", "decision", "status", "says"), [
    (lambda down: {"a-chat": down}, None, 404, "no decision endpoint is served here"),
    (lambda down: {"a-decision": down, "b-decision": down}, None, 404, "several decision endpoints"),
    (lambda down: {"models": {"x-chat": down, "x-decision": down}}, None, 503, "models/x-decision"),
    (lambda down: {"a-decision": down, "b-decision": down}, "b-decision", 503, "b-decision"),
], ids=["none", "several", "shared-component-down", "named-down"])
def test_what_the_gateway_answers_itself_is_in_system_ones_shape(
        threaded_server: Serve, routes: Callable[[str], Any], decision: str | None, status: int, says: str) -> None:
    """No decision container to ask (none, or no way to choose among several), or the one chosen is down."""
    with threaded_server(create_gateway(routes(f"http://{LOOPBACK}:{free_port()}"), decision)) as gateway:
        answer = httpx.post(f"{gateway}/v1/systemone", json={"state": "s", "questions": {}}, timeout=10)
    assert answer.status_code == status
    assert answer.json()["detail"]["error_type"] == {404: "not_found_error", 503: "service_unavailable"}[status]
    assert says in answer.json()["detail"]["message"]
    assert ("retry-after" in answer.headers) == (status == 503)


def test_naming_a_decision_endpoint_the_gateway_does_not_serve_is_refused_at_start() -> None:
    with pytest.raises(ValueError, match="is not served by this gateway"):
        create_gateway({"a-decision": "http://unused"}, decision="b-decision")
