"""OpenAI's Decisions API on the local gateway (`POST /v1/decisions`, `GET /v1/models`), seen through the unmodified
openai SDK (3.51.0): without keys the decision container's own routes, with `--api-keys` the front the CDK app
deploys on AWS (the same code as its Lambda functions).

The end-to-end tests run on the session's local endpoints (the real decision container on the embedded model); the
pass-through ones use a scripted container, because what they check (a 429 with Retry-After, the exact headers and
bytes that reach the container) cannot be produced on demand by the real one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from starlette.responses import JSONResponse
from support.openai_decisions import INPUT, MODEL, QUESTIONS, check_decision

from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK, free_port
from tools.local.test_api_front_local import KEY, ScriptedInvocations, keys_file
from tools.local.test_api_front_local import scripted_front as scripted_front  # noqa: PLC0414 (a fixture)
from tools.local.test_systemone_gateway import ScriptedDecision
from tools.local.test_systemone_gateway import scripted as scripted  # noqa: PLC0414 (a fixture)

Serve = Callable[[Any], AbstractContextManager[str]]
BUSY = {"error": {"message": "all slots busy", "type": "rate_limit_error", "param": None, "code": "queue_full"}}
# Bodies SageMaker's /invocations would not read as OpenAI's: the front answers them as the container's own
# /v1/decisions does (checked against it below), where the problem is at the top level (a body without `input` whose
# `questions` list has problems of its own may be told of another one: api_front._openai_problem).
UNREADABLE = [(b'{"model": "jev-latest", "input": "x", "questions": [', "application/json"),
              (b"[]", "application/json"), (b"{}", "application/json"),
              (b'{"model": "jev-latest", "questions": [{"type": "predicate", "instructions": "ok?"}]}',
               "application/json"),
              (b'{"model": "jev-latest", "input": "x"}', "application/json"),
              (b'{"model": "jev-latest", "input": "x", "questions": {"q": {}}}', "application/json"),
              (b'{"model": 7, "input": "x", "questions": {}}', "application/json"),
              (b'{"model": "jev-latest", "input": 7, "questions": {}}', "application/json"),
              (b'{"input": "a", "input": "b", "questions": []}', "application/json"),
              (b'{"model": "jev-latest", "input": "x", "questions": []}', "text/plain")]


def test_the_openai_sdk_through_the_gateway(local_endpoints: Any) -> None:
    with OpenAI(base_url=f"{local_endpoints.url}/v1", api_key="local") as client:
        decision = client.decisions.with_raw_response.create(model=MODEL, input=INPUT,
                                                             questions=QUESTIONS)  # type: ignore[arg-type]
        models = client.models.list()
    check_decision(decision.parse(), QUESTIONS)
    assert decision.headers["x-request-id"]  # the container's request id, passed back
    ids = [model.id for model in models.data]
    assert decision.parse().model in ids and "jev-latest" in ids


def test_a_refusal_reaches_the_sdk_as_the_container_gave_it(local_endpoints: Any) -> None:
    with OpenAI(base_url=f"{local_endpoints.url}/v1", api_key="local", max_retries=0) as client, \
            pytest.raises(openai.BadRequestError) as refused:
        client.decisions.create(model=MODEL, input=INPUT, questions=[
            {"type": "score", "instructions": "How?", "levels": [{"label": "only"}]}])
    assert refused.value.param == "questions[0].levels" and refused.value.code == "array_too_short"


def test_status_headers_and_bytes_pass_through_both_ways(scripted: tuple[ScriptedDecision, str]) -> None:
    container, gateway = scripted
    listing = {"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "semif"}]}
    container.script += [JSONResponse(BUSY, status_code=429, headers={"Retry-After": "7"}),
                         JSONResponse(listing, headers={"x-request-id": "r-1"})]
    with OpenAI(base_url=f"{gateway}/v1", api_key="sk-test-1", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as overloaded:
            client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
        models = client.models.with_raw_response.list()
    assert (overloaded.value.status_code, overloaded.value.body) == (429, BUSY["error"])
    assert overloaded.value.response.headers["retry-after"] == "7"
    assert [model.id for model in models.parse().data] == ["m"] and models.headers["x-request-id"] == "r-1"
    (path, headers, body), (models_path, models_headers, _) = container.received
    assert (path, models_path) == ("/v1/decisions", "/v1/models")
    assert headers["authorization"] == models_headers["authorization"] == "Bearer sk-test-1"
    assert headers["content-type"] == "application/json"
    assert json.loads(body) == {"model": MODEL, "input": INPUT, "questions": QUESTIONS}


@pytest.mark.parametrize(("routes", "raised", "code", "says"), [
    (lambda down: {"a-chat": down}, openai.NotFoundError, "not_found", "no decision endpoint is served"),
    (lambda down: {"a-decision": down, "b-decision": down}, openai.NotFoundError, "not_found",
     "several decision endpoints"),
    (lambda down: {"models": {"x-chat": down, "x-decision": down}}, openai.InternalServerError, "service_unavailable",
     "models/x-decision"),
], ids=["none", "several", "shared-component-down"])
def test_what_the_gateway_answers_itself_is_in_openais_shape(threaded_server: Serve, routes: Callable[[str], Any],
                                                             raised: type[openai.APIStatusError], code: str,
                                                             says: str) -> None:
    """No decision container to ask (none, or no way to choose among several), or the one chosen is down."""
    with threaded_server(create_gateway(routes(f"http://{LOOPBACK}:{free_port()}"))) as gateway, \
            OpenAI(base_url=f"{gateway}/v1", api_key="local", max_retries=0) as client, pytest.raises(raised) as failed:
        client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
    assert failed.value.code == code and says in failed.value.message
    assert ("retry-after" in failed.value.response.headers) == (failed.value.status_code == 503)


# ---- with --api-keys: the front as on AWS ----------------------------------------------------------------------

@pytest.fixture
def keys(tmp_path: Path) -> Path:
    return keys_file(tmp_path / "keys.txt", ("tester", KEY))


def test_the_fronts_refusals_are_openai_errors_too(scripted_front: tuple[ScriptedInvocations, str, Path]) -> None:
    """API Gateway's refusals cannot tell the route, so the local front's (its stand-in) carry both shapes."""
    _, gateway, _ = scripted_front
    with OpenAI(base_url=f"{gateway}/v1", api_key="sk-semif-not-a-key", max_retries=0) as client, \
            pytest.raises(openai.AuthenticationError) as refused:
        client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
    assert (refused.value.code, refused.value.type) == ("invalid_api_key", "invalid_request_error")
    assert refused.value.response.json()["detail"]["error_type"] == "authentication_error"
    basic = httpx.post(f"{gateway}/v1/decisions", json={}, headers={"authorization": f"Basic {KEY}"})
    assert (basic.status_code, basic.json()["error"]["type"]) == (403, "permission_error")


def test_what_reaches_the_container_and_what_comes_back(
        scripted_front: tuple[ScriptedInvocations, str, Path]) -> None:
    container, gateway, _ = scripted_front
    busy = {"error": {"message": "all slots busy", "type": "server_error", "param": None, "code": "queue_full"}}
    container.script += [JSONResponse(busy, status_code=503, headers={"Retry-After": "1"})]
    with OpenAI(base_url=f"{gateway}/v1", api_key=KEY, max_retries=0) as client, \
            pytest.raises(openai.InternalServerError) as overloaded:
        client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
    assert (overloaded.value.status_code, overloaded.value.body) == (503, busy["error"])  # retried by default
    assert overloaded.value.request_id  # the front's request id, under the openai SDK's header
    headers, content = container.received[0]
    assert json.loads(content) == {"model": MODEL, "input": INPUT, "questions": QUESTIONS}  # the body as sent
    assert "authorization" not in headers and headers["content-type"] == "application/json"


def test_the_front_end_to_end_and_its_answers_to_unreadable_bodies(threaded_server: Serve, local_endpoints: Any,
                                                                   keys: Path) -> None:
    """Through the front to the real container (its SageMaker API reaching the session's gateway), and the front's
    own answers to bodies SageMaker would not read as OpenAI's equal the container's own /v1/decisions answers."""
    decision = f"{local_endpoints.url}/endpoints/local-decision"  # the session's gateway, as a container's URL
    with threaded_server(create_gateway({"t-decision": decision}, api_keys=keys)) as front:
        with OpenAI(base_url=f"{front}/v1", api_key=KEY) as client:
            check_decision(client.decisions.create(model=MODEL, input=INPUT,
                                                   questions=QUESTIONS), QUESTIONS)  # type: ignore[arg-type]
            assert "jev-latest" in [model.id for model in client.models.list().data]
        for content, content_type in UNREADABLE:
            headers = {"content-type": content_type}
            container = httpx.post(f"{local_endpoints.url}/v1/decisions", content=content, headers=headers)
            ours = httpx.post(f"{front}/v1/decisions", content=content,
                              headers={**headers, "authorization": f"Bearer {KEY}"})
            assert (ours.status_code, ours.json()) == (container.status_code, container.json()), content
