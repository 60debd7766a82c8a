"""`SageMakerTransport`: the unmodified official SDK against a decision endpoint through SageMaker's runtime API.

End to end on the session's local endpoints, behind a recording stand-in for SageMaker's front door (it checks
each call's SigV4 signature and can answer SageMaker's own errors first); botocore's Stubber stands in for AWS
where AWS's own answers are needed (throttling, a wrapped container error, an unknown endpoint's ValidationError).
"""

from __future__ import annotations

import asyncio
import gzip
import hmac
import io
import json
import logging
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

import boto3
import httpx
import httpx2
import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from tools.local.test_systemone_gateway import LONG_STATE, QUESTIONS, check_answers
from typesafe_sdk import (
    AsyncTypeSafeClient,
    RetryPolicy,
    TypeSafeAPIConnectionError,
    TypeSafeAPIError,
    TypeSafeAPITimeoutError,
    TypeSafeBadRequestError,
    TypeSafeClient,
    TypeSafeInternalServerError,
    TypeSafeNotFoundError,
    TypeSafePermissionDeniedError,
    TypeSafeRateLimitError,
    TypeSafeUnprocessableEntityError,
)

from scripts.local.processes import LOOPBACK, free_port
from scripts.local.proxy import forwardable
from scripts.local.sagemaker_errors import COMPONENT_MISSING, error_response
from semif_decision_client import AsyncSageMakerTransport, SageMakerTransport

Serve = Callable[[Any], AbstractContextManager[str]]
CREDENTIALS = Credentials("AKIDSYSTEMONETEST", "systemone-test-secret")
REGION = "us-east-1"
PLACEHOLDER_URL = "https://sagemaker.invalid"  # never reached: the transport answers every call
NO_RETRY = RetryPolicy(max_retries=0)
AUTHORIZATION = re.compile(r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/\d{8}/(?P<region>[^/]+)/(?P<service>[^/]+)"
                           r"/aws4_request, SignedHeaders=(?P<signed>[a-z0-9;-]+), "
                           r"Signature=(?P<signature>[0-9a-f]{64})")


def session() -> boto3.Session:
    return boto3.Session(aws_access_key_id=CREDENTIALS.access_key, aws_secret_access_key=CREDENTIALS.secret_key,
                         region_name=REGION)


@dataclass(frozen=True)
class Seen:
    method: str
    url: str
    headers: dict[str, str]
    body: bytes

    @property
    def signature(self) -> str:
        return self.headers["authorization"].rsplit("Signature=", 1)[-1]


def signature_holds(seen: Seen, credentials: Credentials) -> bool:
    """Whether the call carries a SigV4 signature of exactly these bytes and headers by these credentials."""
    parts = AUTHORIZATION.fullmatch(seen.headers.get("authorization", ""))
    if parts is None or parts["key"] != credentials.access_key:
        return False
    signed = parts["signed"].split(";")
    request = AWSRequest(method=seen.method, url=seen.url, data=seen.body,
                         headers={name: seen.headers[name] for name in signed})
    request.context["timestamp"] = seen.headers["x-amz-date"]
    signer = SigV4Auth(credentials, parts["service"], parts["region"])
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    return hmac.compare_digest(expected, parts["signature"])


@dataclass
class SageMakerFront:
    """SageMaker's front door, as far as these tests need it: it records every call, answers the scripted errors
    first (after `delay_s`), and forwards the rest to the local gateway's runtime API."""

    upstream: str
    script: list[Response] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)
    delay_s: float = 0.0

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self.handle, methods=["GET", "POST"])])

    async def handle(self, request: Request) -> Response:
        body = await request.body()
        self.seen.append(Seen(request.method, str(request.url), dict(request.headers), body))
        await asyncio.sleep(self.delay_s)
        if self.script:
            return self.script.pop(0)
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.request(request.method, f"{self.upstream}{request.url.path}", content=body,
                                          headers=forwardable(request.headers.items()))
        return Response(answer.content, status_code=answer.status_code,
                        headers=forwardable(answer.headers.items(), drop=frozenset({"content-encoding"})))


@pytest.fixture
def front(threaded_server: Serve, local_endpoints: Any) -> Iterator[tuple[SageMakerFront, str]]:
    recording = SageMakerFront(local_endpoints.url)
    with threaded_server(recording.app()) as url:
        yield recording, url


def sdk(endpoint: str, endpoint_url: str, retry: RetryPolicy | None = None, **options: Any) -> TypeSafeClient:
    """The SDK as a SageMaker user builds it: a placeholder key and URL, the transport doing the rest."""
    transport = SageMakerTransport(endpoint, region=REGION, session=session(), endpoint_url=endpoint_url, **options)
    return TypeSafeClient(api_key="iam", base_url=PLACEHOLDER_URL, transport=transport, retry=retry)


def test_signed_and_resigned_per_retry_end_to_end(front: tuple[SageMakerFront, str], local_endpoints: Any,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    recording, url = front
    busy = error_response("ServiceUnavailable", "A transient error occurred. Please try again.")
    busy.headers["Retry-After"] = "1"  # the SDK waits a second: the retry is signed at another X-Amz-Date
    recording.script.append(busy)
    with sdk("local-decision", url) as client:
        result = client.system_one(state=LONG_STATE, questions=QUESTIONS)
        models = client.models.list()
    check_answers(result)
    assert result.model in [model.name for model in models.models]

    first, retry, listing = recording.seen
    assert all(signature_holds(seen, CREDENTIALS) for seen in recording.seen)
    assert not signature_holds(first, Credentials(CREDENTIALS.access_key, "another-secret"))
    assert first.url == retry.url == f"{url}/endpoints/local-decision/invocations"
    assert first.headers["x-amz-date"] != retry.headers["x-amz-date"] and first.signature != retry.signature
    # The SDK zstd-compressed the body (over 1 KiB); SageMaker would drop the encoding, so it goes decoded.
    assert "content-encoding" not in first.headers and json.loads(first.body)["state"] == LONG_STATE
    assert listing.headers["x-amzn-sagemaker-custom-attributes"] == "route=/v1/models"
    assert CREDENTIALS.secret_key not in caplog.text

    # The System One answer on SageMaker's /invocations is the one the container gives on /v1/systemone.
    with TypeSafeClient(api_key="local", base_url=local_endpoints.url) as direct_client:
        direct = direct_client.system_one(state=LONG_STATE, questions=QUESTIONS)
    assert result.nouls["urgent"].noul == direct.nouls["urgent"].noul
    assert result.choices["tone"].probabilities == direct.choices["tone"].probabilities
    assert result.scores["severity"].probabilities == direct.scores["severity"].probabilities


def test_an_unknown_endpoint_is_a_404_the_sdk_does_not_retry(front: tuple[SageMakerFront, str]) -> None:
    recording, url = front
    with sdk("no-such-endpoint", url) as client, pytest.raises(TypeSafeNotFoundError) as missing:
        client.system_one(state="s", questions=QUESTIONS)
    assert missing.value.body["detail"]["error_type"] == "not_found_error"
    assert "Endpoint no-such-endpoint of account" in missing.value.body["detail"]["message"]
    assert len(recording.seen) == 1


def test_the_async_client_through_the_transport(local_endpoints: Any) -> None:
    async def ask() -> Any:
        transport = AsyncSageMakerTransport("local-decision", region=REGION, session=session(),
                                            endpoint_url=local_endpoints.url)
        async with AsyncTypeSafeClient(api_key="iam", base_url=PLACEHOLDER_URL, transport=transport) as client:
            return await client.system_one(state=LONG_STATE, questions=QUESTIONS)

    check_answers(asyncio.run(ask()))


@pytest.mark.parametrize(("read_timeout_s", "delay_s", "raised"), [
    (0.5, 2.0, TypeSafeAPITimeoutError),  # the runtime client's read timeout: the SDK's own timeout error
    (5.0, 0.0, TypeSafeAPIConnectionError),  # nothing listening at endpoint_url
], ids=["read-timeout", "unreachable"])
def test_no_answer_is_the_sdks_own_connection_error(threaded_server: Serve, read_timeout_s: float, delay_s: float,
                                                    raised: type[Exception]) -> None:
    slow = SageMakerFront("http://unused", delay_s=delay_s)
    slow.script.append(Response("{}", media_type="application/json"))
    with threaded_server(slow.app()) as url:
        endpoint_url = url if delay_s else f"http://{LOOPBACK}:{free_port()}"
        with sdk("local-decision", endpoint_url, NO_RETRY, read_timeout_s=read_timeout_s) as client, \
                pytest.raises(raised) as failed:
            client.models.list()
    assert not isinstance(failed.value, TypeSafeAPIError)


def stubbed_sdk(add: Callable[[Stubber], None], **options: Any) -> tuple[TypeSafeClient, Stubber]:
    runtime = session().client("sagemaker-runtime")
    stubber = Stubber(runtime)
    add(stubber)
    stubber.activate()
    transport = SageMakerTransport("e", client=runtime, **options)
    return TypeSafeClient(api_key="iam", base_url=PLACEHOLDER_URL, transport=transport, retry=NO_RETRY), stubber


def client_error(code: str, aws_status: int, fields: dict[str, Any]) -> tuple[str, Callable[[Stubber], None]]:
    """SageMaker's error `code` as Stubber answers it (request id `aws-request-1`, Retry-After 2), and its message
    (`fields`' `message`, or one made up)."""
    fields = dict(fields)
    message = fields.pop("message", f"{code} from SageMaker")
    return message, lambda stub: stub.add_client_error(
        "invoke_endpoint", code, message, aws_status, modeled_fields=fields or None,
        response_meta={"RequestId": "aws-request-1", "HTTPHeaders": {"retry-after": "2"}})


CONTAINER_422 = {"detail": [{"loc": ["body", "state"], "msg": "state must not be empty", "type": "value_error"}]}
CONTAINER_503 = {"detail": {"error_type": "service_unavailable", "message": "all slots busy"}}


@pytest.mark.parametrize(("aws", "expected"), [
    (("ModelError", 424, {"OriginalStatusCode": 422, "OriginalMessage": json.dumps(CONTAINER_422)}),
     (TypeSafeUnprocessableEntityError, 422, None)),
    (("ModelError", 424, {"OriginalStatusCode": 503, "OriginalMessage": json.dumps(CONTAINER_503)}),
     (TypeSafeInternalServerError, 503, None)),
    # No status from the container: it did not answer within SageMaker's 60 s.
    (("ModelError", 424, {}), (TypeSafeInternalServerError, 504, "timeout_error")),
    (("ThrottlingException", 400, {}), (TypeSafeRateLimitError, 429, "rate_limit_error")),
    (("ServiceUnavailable", 503, {}), (TypeSafeInternalServerError, 503, "service_unavailable")),
    (("ModelNotReadyException", 429, {}), (TypeSafeInternalServerError, 503, "service_unavailable")),
    (("InternalDependencyException", 530, {}), (TypeSafeInternalServerError, 530, "internal_error")),
    (("ValidationError", 400, {"message": "Endpoint e of account 123456789012 not found."}),
     (TypeSafeNotFoundError, 404, "not_found_error")),
    (("ValidationError", 400, {"message": COMPONENT_MISSING}), (TypeSafeBadRequestError, 400, "invalid_request_error")),
    (("AccessDeniedException", 403, {}), (TypeSafePermissionDeniedError, 403, "authentication_error")),
], ids=["container-422", "container-503", "container-silent", "throttled", "unavailable", "not-ready",
        "dependency", "unknown-endpoint", "component-missing", "access-denied"])
def test_sagemakers_errors_become_answers_the_sdk_handles(aws: tuple[str, int, dict[str, Any]],
                                                          expected: tuple[type[TypeSafeAPIError], int, str | None]) \
        -> None:
    """A client's mistake stays a 4xx (the SDK retries 408, 429 and 5xx only); the container's answer comes back as
    it gave it."""
    (code, aws_status, fields), (raised, status, error_type) = aws, expected
    message, add = client_error(code, aws_status, fields)
    client, stubber = stubbed_sdk(add)
    with client, pytest.raises(raised) as failed:
        client.system_one(state="s", questions=QUESTIONS)
    stubber.assert_no_pending_responses()
    error = failed.value
    assert error.status == status and error.request_id == "aws-request-1"
    if error_type is None:  # the container's own answer
        assert error.body == json.loads(fields["OriginalMessage"])
    else:
        assert error.body == {"detail": {"error_type": error_type, "message": f"SageMaker {code}: {message}"}}
    if status == 429:
        assert isinstance(error, TypeSafeRateLimitError) and error.retry_after_ms == 2000


def test_models_list_on_an_inference_component() -> None:
    listing = json.dumps({"models": [{"name": "m", "description": "d", "release_date": "2026-12-01"}]}).encode()

    def add(stub: Stubber) -> None:
        stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(listing), len(listing)),
                                              "ContentType": "application/json"},
                          expected_params={"EndpointName": "e", "InferenceComponentName": "shared-decision",
                                           "CustomAttributes": "route=/v1/models", "Body": ANY,
                                           "ContentType": "application/json", "Accept": "application/json"})

    client, stubber = stubbed_sdk(add, inference_component="shared-decision")
    with client:
        assert [model.name for model in client.models.list().models] == ["m"]
    stubber.assert_no_pending_responses()


def test_the_client_package_imports_without_httpx2() -> None:
    script = ("import sys; sys.modules['httpx2'] = None\n"
              "import semif_decision_client as c\n"
              "assert c.DecisionClient\n"
              "try:\n    c.SageMakerTransport\nexcept ImportError as error:\n    print(error)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "pip install 'semif-decision-client[systemone]'" in result.stdout


def test_bodies_go_decoded_and_what_sagemaker_cannot_carry_is_refused_before_aws() -> None:
    """SageMaker drops Content-Encoding, so the transport decodes (custom attributes travel as InvokeEndpoint's); an
    encoding it cannot decode, or a route that SageMaker cannot serve, is the caller's 4xx without a call to AWS."""
    document = json.dumps({"state": "s", "questions": {}}).encode()
    runtime = session().client("sagemaker-runtime")
    with Stubber(runtime) as stubber, httpx2.Client(transport=SageMakerTransport("e", client=runtime)) as http:
        stubber.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(b"{}"), 2)},
                             expected_params={"EndpointName": "e", "Body": document, "ContentType": "application/json",
                                              "Accept": "application/json", "CustomAttributes": "trace=t-1"})
        sent = http.post(f"{PLACEHOLDER_URL}/v1/systemone", content=gzip.compress(document),
                         headers={"content-type": "application/json", "content-encoding": "gzip",
                                  "x-amzn-sagemaker-custom-attributes": "trace=t-1"})
        stubber.assert_no_pending_responses()
        unknown = http.post(f"{PLACEHOLDER_URL}/v1/systemone", content=b"...",
                            headers={"content-type": "application/json", "content-encoding": "br"})
        elsewhere = http.get(f"{PLACEHOLDER_URL}/v1/files")
    assert sent.status_code == 200
    assert unknown.status_code == 415 and "'br'" in unknown.json()["detail"]["message"]
    assert elsewhere.status_code == 404 and elsewhere.json()["detail"]["error_type"] == "not_found_error"
