"""`SageMakerTransport` under the unmodified openai SDK (3.51.0): OpenAI's Decisions API on a decision endpoint
through SageMaker's runtime API, signed with boto3.

End to end on the session's local endpoints, behind the recording stand-in for SageMaker's front door of
test_systemone_transport.py (it checks each call's SigV4 signature and can answer SageMaker's own errors first);
botocore's Stubber stands in for AWS where AWS's own answers are needed (throttling, an unknown endpoint).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import httpx2
import openai
import pytest
from botocore.credentials import Credentials
from botocore.stub import Stubber
from openai import AsyncOpenAI, OpenAI
from starlette.responses import Response
from support.openai_decisions import INPUT, MODEL, QUESTIONS, check_decision

from client.test_systemone_transport import (
    CREDENTIALS,
    REGION,
    SageMakerFront,
    client_error,
    session,
    signature_holds,
)
from scripts.local.sagemaker_errors import error_response
from semif_adapter.doors.openai_contract import ERROR_TYPES
from semif_decision_client import AsyncSageMakerTransport, SageMakerTransport
from semif_decision_client.invoke_wire import ERROR_TYPES as SYSTEMONE_TYPES
from semif_decision_client.invoke_wire import OPENAI_TYPES, error_document

Serve = Callable[[Any], AbstractContextManager[str]]
BASE_URL = "https://sagemaker.invalid/v1"  # never reached: the transport answers every call


@pytest.fixture
def front(threaded_server: Serve, local_endpoints: Any) -> Iterator[tuple[SageMakerFront, str]]:
    recording = SageMakerFront(local_endpoints.url)
    with threaded_server(recording.app()) as url:
        yield recording, url


def sdk(endpoint: str, endpoint_url: str | None = None, max_retries: int = 2, **options: Any) -> OpenAI:
    """The openai SDK as a SageMaker user builds it: a placeholder key and URL, the transport doing the rest."""
    transport = SageMakerTransport(endpoint, region=REGION, session=session(), endpoint_url=endpoint_url, **options)
    return OpenAI(base_url=BASE_URL, api_key="iam", http_client=httpx2.Client(transport=transport),
                  max_retries=max_retries)


def test_decisions_signed_and_resigned_per_retry_end_to_end(front: tuple[SageMakerFront, str],
                                                            local_endpoints: Any) -> None:
    recording, url = front
    busy = error_response("ServiceUnavailable", "A transient error occurred. Please try again.")
    busy.headers["Retry-After"] = "1"  # the SDK waits a second: the retry is signed at another X-Amz-Date
    recording.script.append(busy)
    with sdk("local-decision", url) as client:
        decision = client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
        models = client.models.list()
    check_decision(decision, QUESTIONS)
    assert decision.model in [model.id for model in models.data]
    assert {model.object for model in models.data} == {"model"}

    first, retry, listing = recording.seen
    assert all(signature_holds(seen, CREDENTIALS) for seen in recording.seen)
    assert not signature_holds(first, Credentials(CREDENTIALS.access_key, "another-secret"))
    assert first.url == retry.url == f"{url}/endpoints/local-decision/invocations"
    assert first.headers["x-amz-date"] != retry.headers["x-amz-date"] and first.signature != retry.signature
    assert json.loads(first.body)["questions"][2]["choices"][0]["value"] is True  # the body as the SDK wrote it
    assert "iam" not in json.dumps(first.headers)  # the SDK's api_key is never sent
    assert listing.headers["x-amzn-sagemaker-custom-attributes"] == "route=/v1/models"

    # SageMaker's /invocations answers as the container's own /v1/decisions does (the gateway forwards it there).
    with OpenAI(base_url=f"{local_endpoints.url}/v1", api_key="local") as direct_client:
        direct = direct_client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
    assert [a.model_dump(exclude={"x_timing"}) for a in decision.answers] == \
        [a.model_dump(exclude={"x_timing"}) for a in direct.answers]


def test_the_async_client_through_the_transport(local_endpoints: Any) -> None:
    async def ask() -> Any:
        transport = AsyncSageMakerTransport("local-decision", region=REGION, session=session(),
                                            endpoint_url=local_endpoints.url)
        async with AsyncOpenAI(base_url=BASE_URL, api_key="iam",
                               http_client=httpx2.AsyncClient(transport=transport)) as client:
            models = await client.models.list()
            decision = await client.decisions.create(model=models.data[0].id, input=INPUT,
                                                     questions=QUESTIONS)  # type: ignore[arg-type]
            return models, decision

    models, decision = asyncio.run(ask())
    check_decision(decision, QUESTIONS)
    assert decision.model == models.data[0].id


@pytest.mark.parametrize(("change", "raised", "status", "code"), [
    ({"model": "gpt-6-luna"}, openai.NotFoundError, 404, "model_not_found"),
    ({"questions": [{"type": "choice", "instructions": "Which?", "choices": [{"value": "only"}]}]},
     openai.BadRequestError, 400, "array_too_short"),
    ({"input": "word " * 20_000}, openai.BadRequestError, 400, "context_length_exceeded"),
], ids=["unknown-model", "one-choice", "input-too-long"])
def test_the_containers_refusals_reach_the_sdk_as_it_gave_them(local_endpoints: Any, change: dict[str, Any],
                                                               raised: type[openai.APIStatusError], status: int,
                                                               code: str) -> None:
    request = {"model": MODEL, "input": INPUT, "questions": QUESTIONS, **change}
    with sdk("local-decision", local_endpoints.url, max_retries=0) as client, pytest.raises(raised) as refused:
        client.decisions.create(**request)
    error = refused.value
    assert (error.status_code, error.code) == (status, code)
    assert error.type == "invalid_request_error" and isinstance(error.body, dict) and error.body["message"]


def stubbed_sdk(add: Callable[[Stubber], None]) -> tuple[OpenAI, Stubber]:
    runtime = session().client("sagemaker-runtime")
    stubber = Stubber(runtime)
    add(stubber)
    stubber.activate()
    client = OpenAI(base_url=BASE_URL, api_key="iam", max_retries=0,
                    http_client=httpx2.Client(transport=SageMakerTransport("e", client=runtime)))
    return client, stubber


@pytest.mark.parametrize(("aws", "expected"), [
    (("ThrottlingException", 400, {}), (openai.RateLimitError, 429, "rate_limit_error", "rate_limit_exceeded")),
    (("ValidationError", 400, {"message": "Endpoint e of account 123456789012 not found."}),
     (openai.NotFoundError, 404, "invalid_request_error", "not_found")),
    (("ServiceUnavailable", 503, {}), (openai.InternalServerError, 503, "server_error", "service_unavailable")),
    (("ModelNotReadyException", 429, {}), (openai.InternalServerError, 503, "server_error", "service_unavailable")),
    (("ModelError", 424, {}), (openai.InternalServerError, 504, "timeout", "timeout")),  # no answer within 60 s
    (("AccessDeniedException", 403, {}), (openai.PermissionDeniedError, 403, "permission_error", "invalid_api_key")),
], ids=["throttled", "unknown-endpoint", "unavailable", "not-ready", "container-silent", "access-denied"])
def test_sagemakers_errors_reach_the_openai_sdk_in_openais_shape(
        aws: tuple[str, int, dict[str, Any]], expected: tuple[type[openai.APIStatusError], int, str, str]) -> None:
    """The same statuses as on System One's route (the SDKs retry 408, 429 and 5xx alike), OpenAI's error body."""
    (code, aws_status, fields), (raised, status, error_type, error_code) = aws, expected
    message, add = client_error(code, aws_status, fields)
    client, stubber = stubbed_sdk(add)
    with client, pytest.raises(raised) as failed:
        client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]
    stubber.assert_no_pending_responses()
    error = failed.value
    assert error.status_code == status and error.request_id == "aws-request-1"  # SageMaker's request id
    assert error.body == {"message": f"SageMaker {code}: {message}", "type": error_type, "param": None,
                          "code": error_code}
    assert error.response.headers["x-typesafe-request-id"] == "aws-request-1"


def test_no_answer_is_the_sdks_own_connection_error(threaded_server: Serve) -> None:
    slow = SageMakerFront("http://unused", delay_s=2.0)
    slow.script.append(Response("{}", media_type="application/json"))
    with threaded_server(slow.app()) as url, sdk("local-decision", url, max_retries=0, read_timeout_s=0.5) as client, \
            pytest.raises(openai.APITimeoutError):
        client.decisions.create(model=MODEL, input=INPUT, questions=QUESTIONS)  # type: ignore[arg-type]


def test_what_is_refused_before_aws_speaks_openais_shape_on_its_route() -> None:
    """A Content-Encoding SageMaker cannot carry: the caller's 415, without a call to AWS, as OpenAI's error."""
    runtime = session().client("sagemaker-runtime")
    with Stubber(runtime), httpx2.Client(transport=SageMakerTransport("e", client=runtime)) as http:
        refused = http.post(f"{BASE_URL}/decisions", content=b"...",
                            headers={"content-type": "application/json", "content-encoding": "br"})
        elsewhere = http.post(f"{BASE_URL}/systemone", content=b"...",
                              headers={"content-type": "application/json", "content-encoding": "br"})
    assert refused.status_code == elsewhere.status_code == 415
    assert refused.json()["error"]["type"] == "invalid_request_error" and "'br'" in refused.json()["error"]["message"]
    assert elsewhere.json()["detail"]["error_type"] == "invalid_request_error"


def test_the_openai_types_agree_with_the_containers_door() -> None:
    """What the transport and the front answer themselves on /v1/decisions has the error type the container's own
    /v1/decisions gives that status."""
    assert OPENAI_TYPES == ERROR_TYPES
    for status, kind in SYSTEMONE_TYPES.items():
        assert json.loads(error_document(status, "m", kind, "/v1/decisions"))["error"]["type"] == ERROR_TYPES[status]


def test_a_body_that_is_not_openais_still_gets_openais_error_through_the_transport(
        front: tuple[SageMakerFront, str], local_endpoints: Any) -> None:
    """The transport names the route in the custom attributes, so the container answers in OpenAI's shape even a
    body that reads as System One's (an object of questions, no `input`)."""
    _, url = front
    transport = SageMakerTransport("local-decision", region=REGION, session=session(), endpoint_url=url)
    with httpx2.Client(transport=transport) as client:
        response = client.post(BASE_URL + "/decisions", json={"model": MODEL, "questions": {"q": {"type": "noul"}}})
    assert response.status_code == 400, response.text
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
