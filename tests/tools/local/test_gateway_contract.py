"""The gateway's SageMaker runtime contract, seen through unmodified boto3 (fast, no model).

The containers here are small scripted apps, because the behaviours under test
(a busy container, header echo, a stream cut mid-way) cannot be produced on
demand by the real ones; the gateway, botocore and the decision client are real.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import EventStreamError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK, free_port
from semif_decision_client import DecisionClient, DecisionRequest, DecisionUnavailableError, runtime_client

Serve = Callable[[Any], AbstractContextManager[str]]
ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"
DECISION = DecisionRequest.build("d-1", "evidence", "which?", {"yes": "Yes", "no": "No"})
HOLD_S = 30.0  # how long a scripted container holds the rest of a stream for a part that never arrives


class ScriptedContainer:
    """A container whose /invocations answers come from a script; it records what it received."""

    def __init__(self) -> None:
        self.script: list[tuple[int, Any]] = []
        self.received: list[dict[str, str]] = []
        self.sent: list[bytes] = []  # the chunks of its streams, as it sends them

    def app(self) -> Starlette:
        async def ping(request: Request) -> Response:
            return Response("", status_code=200)

        async def invocations(request: Request) -> Response:
            self.received.append({k.lower(): v for k, v in request.headers.items()})
            status, body = self.script.pop(0) if self.script else (200, {"echo": (await request.body()).decode()})
            if isinstance(body, list):  # chunks, pauses and holds: `_stream`
                return StreamingResponse(_stream(body, self.sent), status_code=status, media_type="text/event-stream")
            headers = {ATTRIBUTES: "echo=" + request.headers[ATTRIBUTES]} if ATTRIBUTES in request.headers else {}
            return JSONResponse(body, status_code=status, headers=headers)

        return Starlette(routes=[Route("/ping", ping), Route("/invocations", invocations, methods=["POST"])])


async def _stream(script: list[bytes | float | threading.Event], sent: list[bytes]) -> AsyncIterator[bytes]:
    """Each bytes item sent as a chunk (and noted in `sent`); a float, a pause of that many seconds; an Event, a hold
    until the test sets it (or HOLD_S passes: a gateway that kept the chunks before it would never let it be set)."""
    for item in script:
        if isinstance(item, threading.Event):
            await asyncio.to_thread(item.wait, HOLD_S)
        elif isinstance(item, float):
            await asyncio.sleep(item)
        else:
            sent.append(item)
            yield item


@pytest.fixture
def container(threaded_server: Serve) -> Iterator[tuple[ScriptedContainer, str]]:
    scripted = ScriptedContainer()
    with threaded_server(scripted.app()) as url:
        yield scripted, url


@pytest.fixture
def gateway(threaded_server: Serve, container: tuple[ScriptedContainer, str]) -> Iterator[str]:
    with threaded_server(create_gateway({"stub": container[1], "down": f"http://{LOOPBACK}:{free_port()}"})) as url:
        yield url


def decision_client(gateway: str, max_attempts: int) -> DecisionClient:
    """The decision client as a service builds it, with dummy credentials (the gateway ignores them)."""
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    return DecisionClient("stub", client=runtime_client(session=session, endpoint_url=gateway,
                                                        max_attempts=max_attempts))


def decision_body(decision_id: str = "d-1") -> dict[str, Any]:
    return {"decision_id": decision_id, "option_ids": ["yes", "no"], "probabilities": [0.75, 0.25],
            "option_logits": [1.0, -0.1]}


def test_headers_pass_through_both_ways(gateway: str, container: tuple[ScriptedContainer, str],
                                        runtime_for: Callable[..., Any]) -> None:
    scripted, _ = container
    response = runtime_for(gateway).invoke_endpoint(
        EndpointName="stub", Body=b'{"x": 1}', ContentType="application/json", Accept="application/json",
        CustomAttributes="trace=abc-123")
    received = scripted.received[-1]
    assert received["content-type"] == "application/json"
    assert received["accept"] == "application/json"
    assert received[ATTRIBUTES.lower()] == "trace=abc-123"
    assert response["CustomAttributes"] == "echo=trace=abc-123"  # set by the container, so echoed
    assert response["InvokedProductionVariant"] == "AllTraffic"
    assert json.loads(response["Body"].read()) == {"echo": '{"x": 1}'}


def test_custom_attributes_are_absent_unless_the_container_sets_them(gateway: str,
                                                                     runtime_for: Callable[..., Any]) -> None:
    response = runtime_for(gateway).invoke_endpoint(EndpointName="stub", Body=b"{}", ContentType="application/json")
    assert "CustomAttributes" not in response


def test_stream_accept_header_and_unbuffered_parts(gateway: str, container: tuple[ScriptedContainer, str],
                                                   runtime_for: Callable[..., Any]) -> None:
    scripted, _ = container
    parts = [b"data: one\n\n", b"data: two\n\n", b"data: [DONE]\n\n"]
    arrived = [threading.Event() for _ in parts]  # the container sends each next part only once the last one is here
    scripted.script.append((200, [item for part, event in zip(parts, arrived, strict=True) for item in (part, event)]))
    response = runtime_for(gateway).invoke_endpoint_with_response_stream(
        EndpointName="stub", Body=b"{}", ContentType="application/json", Accept="text/event-stream")
    received = []  # each part, and how many the container had sent when it arrived
    try:
        for event in response["Body"]:
            received.append((event["PayloadPart"]["Bytes"], len(scripted.sent)))
            arrived[len(received) - 1].set()
    finally:
        for event in arrived:
            event.set()
    assert scripted.received[-1]["accept"] == "text/event-stream"  # X-Amzn-SageMaker-Accept -> Accept
    assert response["ContentType"].startswith("text/event-stream")  # from X-Amzn-SageMaker-Content-Type
    # each part left as soon as the container sent it: it arrived before the container sent the next one
    assert received == [(part, number) for number, part in enumerate(parts, 1)]


@pytest.mark.parametrize("operation", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_unknown_endpoint_is_a_validation_error(gateway: str, runtime_for: Callable[..., Any],
                                                operation: str) -> None:
    client = runtime_for(gateway)
    with pytest.raises(client.exceptions.ValidationError) as raised:
        getattr(client, operation)(EndpointName="nope", Body=b"{}", ContentType="application/json")
    assert raised.value.response["Error"]["Message"] == "Endpoint nope of account 000000000000 not found."
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400


@pytest.mark.parametrize("operation", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_container_error_is_a_model_error_with_the_original(gateway: str, container: tuple[ScriptedContainer, str],
                                                            runtime_for: Callable[..., Any], operation: str) -> None:
    scripted, _ = container
    original = {"error": {"code": "too_few_options", "message": "2-16 options", "field": "decision.options"}}
    scripted.script.append((400, original))
    client = runtime_for(gateway)
    with pytest.raises(client.exceptions.ModelError) as raised:
        getattr(client, operation)(EndpointName="stub", Body=b"{}", ContentType="application/json")
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 424
    assert error["OriginalStatusCode"] == 400
    assert json.loads(error["OriginalMessage"]) == original
    assert error["LogStreamArn"].endswith("/aws/sagemaker/Endpoints/stub")
    assert "Received client error (400) from primary" in error["Error"]["Message"]


def test_unreachable_container_is_service_unavailable_and_botocore_retries_it(
        gateway: str, runtime_for: Callable[..., Any]) -> None:
    client = runtime_for(gateway, max_attempts=2)
    with pytest.raises(client.exceptions.ServiceUnavailable) as raised:
        client.invoke_endpoint(EndpointName="down", Body=b"{}", ContentType="application/json")
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == 1
    assert "not accepting connections" in raised.value.response["Error"]["Message"]


def test_errors_carry_their_code_in_the_json_body_too(gateway: str, container: tuple[ScriptedContainer, str]) -> None:
    unknown = httpx.get(f"{gateway}/endpoints")
    assert unknown.status_code == 404
    assert unknown.headers["x-amzn-errortype"] == unknown.json()["ErrorCode"] == "UnknownOperationException"
    assert "InvokeEndpoint" in unknown.json()["Message"]
    missing = httpx.post(f"{gateway}/endpoints/nope/invocations", content=b"{}")
    assert missing.json()["ErrorCode"] == "ValidationError" and "nope" in missing.json()["Message"]
    container[0].script.append((500, {"error": "boom"}))
    failed = httpx.post(f"{gateway}/endpoints/stub/invocations", content=b"{}")
    assert failed.status_code == 424 and failed.json()["ErrorCode"] == "SERVER_ERROR_FROM_MODEL"


def test_decision_client_retries_a_busy_container_with_botocore(
        gateway: str, container: tuple[ScriptedContainer, str]) -> None:
    scripted, _ = container
    busy = {"error": {"code": "busy", "message": "queue full"}}
    scripted.script += [(503, busy), (503, busy), (200, decision_body())]
    client = decision_client(gateway, max_attempts=3)
    decision = client.decide(DECISION)
    assert decision.best == "yes"
    assert len(scripted.received) == 3


def test_decision_client_gives_up_after_max_attempts(gateway: str, container: tuple[ScriptedContainer, str]) -> None:
    scripted, _ = container
    scripted.script += [(503, "busy")] * 2 + [(200, decision_body())]
    client = decision_client(gateway, max_attempts=2)
    with pytest.raises(DecisionUnavailableError, match="503"):
        client.decide(DECISION)
    assert len(scripted.received) == 2


def test_decision_client_does_not_retry_a_refusal(gateway: str, container: tuple[ScriptedContainer, str]) -> None:
    from semif_decision_client import DecisionRejectedError

    scripted, _ = container
    scripted.script.append((400, {"error": {"code": "duplicate_option_id", "message": "dup", "field": "options"}}))
    client = decision_client(gateway, max_attempts=3)
    with pytest.raises(DecisionRejectedError) as raised:
        client.decide(DECISION)
    assert (raised.value.status, raised.value.code, raised.value.field) == (400, "duplicate_option_id", "options")
    assert len(scripted.received) == 1


def _broken_container() -> tuple[str, threading.Thread]:
    """Promises 1000 bytes of stream, sends one event, then closes the connection."""
    listener = socket.socket()
    listener.bind((LOOPBACK, 0))
    listener.listen(1)
    port = listener.getsockname()[1]

    def serve() -> None:
        connection, _ = listener.accept()
        connection.recv(65536)
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 1000\r\n\r\n"
                           b"data: first\n\n")
        time.sleep(0.2)
        connection.close()
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://{LOOPBACK}:{port}", thread


def test_stream_cut_by_the_container_ends_with_model_stream_error(threaded_server: Serve,
                                                                 runtime_for: Callable[..., Any]) -> None:
    url, thread = _broken_container()
    with threaded_server(create_gateway({"broken": url})) as gateway:
        response = runtime_for(gateway).invoke_endpoint_with_response_stream(
            EndpointName="broken", Body=b"{}", ContentType="application/json")
        events = iter(response["Body"])
        assert next(events) == {"PayloadPart": {"Bytes": b"data: first\n\n"}}
        with pytest.raises(EventStreamError) as raised:
            next(events)
    thread.join(timeout=5)
    assert raised.value.response["Error"]["Code"] == "ModelStreamError"


def test_a_stream_past_its_time_limit_ends_with_model_stream_error(
        gateway: str, container: tuple[ScriptedContainer, str], runtime_for: Callable[..., Any],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from scripts.local import gateway as gateway_module

    limit_s = 2.0  # the first part must reach the gateway within it: milliseconds, busy machine or not
    monkeypatch.setattr(gateway_module, "STREAM_LIMIT_S", limit_s)
    second_arrived = threading.Event()
    # the second part once the limit has passed (the pause starts after the gateway's clock did), the third held
    # back until the second is here, so that the two cannot reach the gateway as one chunk
    container[0].script.append((200, [b"data: one\n\n", limit_s, b"data: two\n\n", second_arrived,
                                      b"data: three\n\n"]))
    response = runtime_for(gateway).invoke_endpoint_with_response_stream(
        EndpointName="stub", Body=b"{}", ContentType="application/json")
    received = []
    with pytest.raises(EventStreamError) as raised:
        try:
            for event in response["Body"]:
                received.append(event["PayloadPart"]["Bytes"])
                if len(received) == 2:
                    second_arrived.set()
        finally:
            second_arrived.set()
    assert received == [b"data: one\n\n", b"data: two\n\n"]  # the part that crossed the limit still arrives
    assert raised.value.response["Error"]["Code"] == "ModelStreamError"
    assert "allotted time" in raised.value.response["Error"]["Message"]


# --- inference components (shared hosting): routed by InferenceComponentName, as SageMaker does ----------------

@pytest.fixture
def components(threaded_server: Serve) -> Iterator[tuple[dict[str, ScriptedContainer], str]]:
    """A gateway with one endpoint hosting two components (each a scripted container) and one plain endpoint."""
    scripted = {"shared-chat": ScriptedContainer(), "shared-decision": ScriptedContainer()}
    with threaded_server(scripted["shared-chat"].app()) as chat_url, \
            threaded_server(scripted["shared-decision"].app()) as decision_url, \
            threaded_server(ScriptedContainer().app()) as plain_url, \
            threaded_server(create_gateway({"shared-models": {"shared-chat": chat_url, "shared-decision": decision_url},
                                            "plain": plain_url})) as url:
        yield scripted, url


@pytest.mark.parametrize("operation", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_each_component_gets_only_its_own_calls(components: tuple[dict[str, ScriptedContainer], str],
                                                runtime_for: Callable[..., Any], operation: str) -> None:
    scripted, url = components
    client = runtime_for(url)
    for component in ("shared-decision", "shared-decision", "shared-chat"):
        sent = json.dumps({"to": component})
        response = getattr(client, operation)(EndpointName="shared-models", InferenceComponentName=component,
                                              Body=sent.encode(), ContentType="application/json")
        body = response["Body"].read() if operation == "invoke_endpoint" else b"".join(
            e["PayloadPart"]["Bytes"] for e in response["Body"])
        assert json.loads(body) == {"echo": sent}
    assert len(scripted["shared-decision"].received) == 2 and len(scripted["shared-chat"].received) == 1
    # boto3 sent the component as SageMaker's header; the container receives no such header of ours to rely on.
    assert "x-amzn-sagemaker-inference-component" not in scripted["shared-chat"].received[0]


@pytest.mark.parametrize("operation", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_a_call_without_a_component_is_sagemakers_validation_error(
        components: tuple[dict[str, ScriptedContainer], str], runtime_for: Callable[..., Any], operation: str) -> None:
    scripted, url = components
    client = runtime_for(url)
    with pytest.raises(client.exceptions.ValidationError) as raised:
        getattr(client, operation)(EndpointName="shared-models", Body=b"{}", ContentType="application/json")
    error = raised.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"]["Message"] == (
        "Inference Component Name header is required for endpoints to which you plan to deploy inference "
        "components. Please include Inference Component Name header or consider using SageMaker models.")
    assert not scripted["shared-chat"].received and not scripted["shared-decision"].received
    raw = httpx.post(f"{url}/endpoints/shared-models/invocations", content=b"{}")
    assert raw.json()["ErrorCode"] == "INFERENCE_COMPONENT_NAME_MISSING"


def test_an_unknown_component_or_a_component_of_a_plain_endpoint_is_refused(
        components: tuple[dict[str, ScriptedContainer], str], runtime_for: Callable[..., Any]) -> None:
    _, url = components
    client = runtime_for(url)
    with pytest.raises(client.exceptions.ValidationError, match="Inference Component nope of account 000000000000 "
                                                                "not found on endpoint shared-models"):
        client.invoke_endpoint(EndpointName="shared-models", InferenceComponentName="nope", Body=b"{}",
                               ContentType="application/json")
    with pytest.raises(client.exceptions.ValidationError, match="Endpoint plain of account 000000000000 hosts no "
                                                                "inference components"):
        client.invoke_endpoint(EndpointName="plain", InferenceComponentName="shared-chat", Body=b"{}",
                               ContentType="application/json")
    assert client.invoke_endpoint(EndpointName="plain", Body=b"{}", ContentType="application/json")[
        "ResponseMetadata"]["HTTPStatusCode"] == 200


def test_a_components_error_names_its_log_group_and_the_client_passes_the_component(
        components: tuple[dict[str, ScriptedContainer], str], runtime_for: Callable[..., Any]) -> None:
    scripted, url = components
    scripted["shared-decision"].script += [(400, {"error": {"code": "invalid_request", "message": "no"}}),
                                           (200, decision_body())]
    client = runtime_for(url)
    with pytest.raises(client.exceptions.ModelError) as raised:
        client.invoke_endpoint(EndpointName="shared-models", InferenceComponentName="shared-decision", Body=b"{}",
                               ContentType="application/json")
    assert raised.value.response["LogStreamArn"].endswith("/aws/sagemaker/InferenceComponents/shared-decision")
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    decider = DecisionClient("shared-models", inference_component_name="shared-decision",
                             client=runtime_client(session=session, endpoint_url=url, max_attempts=1))
    assert decider.decide(DECISION).best == "yes"
    assert len(scripted["shared-decision"].received) == 2 and not scripted["shared-chat"].received
