"""`semif local --shared --scale-to-zero`: a component idle long enough stops; a request to it gets SageMaker's own
no-capacity error through unmodified boto3 and starts it again; the decision client's runtime client retries that
error until the copy is up (issue 54). The container is a small scripted app in a child process (fast, no model):
what is under test is the gateway's scaler and botocore's retry loop, both real."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from scripts.local.endpoints import Container
from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK, free_port, start_child, wait_for_ping, wait_until
from scripts.local.scale_to_zero import NO_CAPACITY, ZeroScaler
from semif_decision_client import runtime_client

Serve = Callable[[Any], AbstractContextManager[str]]
IDLE_S = 1.0
STUB = """
import sys, uvicorn
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
async def ping(request): return Response("", status_code=200)
async def invocations(request): return JSONResponse({"echo": (await request.body()).decode()})
app = Starlette(routes=[Route("/ping", ping), Route("/invocations", invocations, methods=["POST"])])
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""


def start_stub(port: int, log_dir: Path) -> Container:
    child = start_child("loc-decision", [sys.executable, "-c", STUB, str(port)], {"PATH": ""},
                        log_dir / "stub.log")
    return Container("loc-decision", child, f"http://{LOOPBACK}:{port}")


@pytest.fixture
def scaled(threaded_server: Serve, tmp_path: Path) -> Iterator[tuple[str, ZeroScaler]]:
    first = start_stub(free_port(), tmp_path)
    wait_for_ping(first.child, f"{first.url}/ping", 30)
    scaler = ZeroScaler([first], lambda c: start_stub(int(c.url.rsplit(":", 1)[1]), tmp_path), idle_s=IDLE_S,
                        startup_timeout_s=30)
    try:
        with threaded_server(create_gateway({"loc-models": {"loc-decision": first.url}}, scaler=scaler)) as url:
            yield url, scaler
    finally:
        scaler.close()


def runtime(url: str, **options: Any) -> Any:
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    return runtime_client(session=session, endpoint_url=url, **options)


def invoke(client: Any) -> Any:
    return client.invoke_endpoint(EndpointName="loc-models", InferenceComponentName="loc-decision",
                                  ContentType="application/json", Body=b"{}")


def test_an_idle_component_scales_to_zero_and_answers_sagemakers_no_capacity_error(
        scaled: tuple[str, ZeroScaler]) -> None:
    url, scaler = scaled
    assert invoke(runtime(url))["Body"].read() == b'{"echo":"{}"}'
    copy = scaler._copies["loc-decision"].container
    wait_until(lambda: not copy.child.alive(), timeout_s=IDLE_S + 10, what="the idle copy's stop")
    with pytest.raises(ClientError) as refused:
        invoke(runtime(url, max_attempts=1, capacity_attempts=1))
    error = refused.value.response
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400
    assert error["Error"] == {"Code": "ValidationError", "Message": NO_CAPACITY}


def test_the_client_retries_until_a_copy_is_up_again(scaled: tuple[str, ZeroScaler]) -> None:
    url, scaler = scaled
    copy = scaler._copies["loc-decision"].container
    wait_until(lambda: not copy.child.alive(), timeout_s=IDLE_S + 10, what="the idle copy's stop")
    started = time.monotonic()
    assert invoke(runtime(url))["Body"].read() == b'{"echo":"{}"}'  # the default budget waits it out
    assert len(scaler.cold_starts) == 1 and scaler.cold_starts[0] <= time.monotonic() - started


def test_the_system_one_transport_answers_a_component_at_zero_with_a_503_the_sdks_retry() -> None:
    from semif_decision_client.invoke_wire import error_answer

    error = ClientError({"Error": {"Code": "ValidationError", "Message": NO_CAPACITY},
                         "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}}, "InvokeEndpoint")
    status, headers, body = error_answer(error)
    assert status == 503 and headers["retry-after"] == "10" and b"no capacity" in body
    other = ClientError({"Error": {"Code": "ValidationError", "Message": "Endpoint x of account 1 not found."},
                         "ResponseMetadata": {"HTTPStatusCode": 400, "HTTPHeaders": {}}}, "InvokeEndpoint")
    assert error_answer(other)[0] == 404
