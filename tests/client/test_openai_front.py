"""The front's OpenAI route (`semif_decision_client.api_front` on `POST /v1/decisions`), which the API's
forwarding Lambda and the local gateway both run: what reaches SageMaker, what the front answers itself, and in
which shape.

botocore's Stubber stands in for SageMaker (its answers and errors); the JSON parser is the container's own
(`semif_adapter.doors.strict_json`). That the front's own answers equal the container's: test_openai_gateway.py.
"""

from __future__ import annotations

import gzip
import io
import json
from typing import Any

import boto3
import pytest
from backports import zstd
from botocore.exceptions import EndpointConnectionError, NoCredentialsError, ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from support.openai_decisions import body

from client.test_api_front import Unreachable
from semif_adapter.doors.strict_json import load_json
from semif_adapter.settings import MAX_BODY_BYTES
from semif_decision_client.api_front import Admission, Limits, forward, refusal
from semif_decision_client.invoke_wire import DECISIONS_ATTRIBUTES, Call, Target

REQUEST = json.dumps(body(), ensure_ascii=False).encode()
ANSWER = json.dumps({"answers": [], "model": "m", "usage": {"input_tokens": 1}}).encode()
LIMITS = Limits(max_decoded_bytes=MAX_BODY_BYTES)


@pytest.fixture
def runtime() -> Any:
    return boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1").client(
        "sagemaker-runtime")


def call(content: bytes = REQUEST, headers: dict[str, str] | None = None, path: str = "/v1/decisions") -> Call:
    return Call("POST", path, {"content-type": "application/json", **(headers or {})}, content)


def through(runtime: Any, sent: Call, limits: Limits = LIMITS) -> tuple[int, dict[str, str], Any]:
    status, headers, content = forward(runtime, Target("e"), sent, request_id="front-1", limits=limits, timeout_s=28,
                                       parse=load_json)
    return status, headers, json.loads(content)


def answered(stub: Stubber, expected_body: bytes, content: bytes = ANSWER,
             attributes: str | None = DECISIONS_ATTRIBUTES) -> None:
    """SageMaker answers `content` to exactly `expected_body`, sent with the custom `attributes` (the transport names
    OpenAI's route; System One's goes without)."""
    stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(content), len(content)),
                                          "ContentType": "application/json",
                                          "ResponseMetadata": {"RequestId": "sm-1"}},
                      expected_params={"EndpointName": "e", "Body": expected_body, "ContentType": "application/json",
                                       "Accept": "application/json",
                                       **({"CustomAttributes": attributes} if attributes else {})})


def test_an_openai_body_reaches_sagemaker_as_sent_and_its_answer_comes_back(runtime: Any) -> None:
    """`/invocations` reads a body with `input` and a list of `questions` as OpenAI's whatever else it holds (SemIf's
    keys included), so the front sends it as it came."""
    with_semif_keys = json.dumps(body(decision={"id": "x"})).encode()
    with Stubber(runtime) as stub:
        answered(stub, REQUEST)
        answered(stub, with_semif_keys)
        status, headers, answer = through(runtime, call())
        assert through(runtime, call(with_semif_keys))[0] == 200
        stub.assert_no_pending_responses()
    assert (status, answer) == (200, json.loads(ANSWER))
    assert headers["x-request-id"] == headers["x-typesafe-request-id"] == "front-1"  # both SDKs' request id
    assert headers["x-amzn-sagemaker-request-id"] == "sm-1"


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_compressed_bodies_reach_sagemaker_decoded(runtime: Any, encoding: str) -> None:
    packed = gzip.compress(REQUEST) if encoding == "gzip" else zstd.compress(REQUEST)
    with Stubber(runtime) as stub:
        answered(stub, REQUEST)
        assert through(runtime, call(packed, {"content-encoding": encoding}))[0] == 200
        stub.assert_no_pending_responses()


@pytest.mark.parametrize(("content", "content_type", "status", "error"), [
    (b"[]", "application/json", 400, {"message": "the request body must be a JSON object", "param": None,
                                      "code": "invalid_type"}),
    (b'{"model": "m", "questions": []}', "application/json", 400,
     {"message": "input: Field required", "param": "input", "code": "missing_required_parameter"}),
    (b'{"model": "m", "input": "x", "questions": {}}', "application/json", 400,
     {"message": "questions: Input should be a valid list", "param": "questions", "code": "invalid_value"}),
    (b'{"model": "m", "input": "x", "questions": [', "application/json", 400, {"param": None, "code": "invalid_json"}),
    (REQUEST, "text/plain", 415, {"message": "Content-Type must be application/json, not 'text/plain'",
                                  "param": "Content-Type", "code": "unsupported_media_type"}),
], ids=["not-an-object", "no-input", "questions-an-object", "not-json", "not-json-media-type"])
def test_a_body_the_container_would_not_read_as_openais_gets_its_v1_decisions_answer(
        runtime: Any, content: bytes, content_type: str, status: int, error: dict[str, Any]) -> None:
    """Where SageMaker's /invocations would read it in another contract (or not at all); no call to AWS."""
    with Stubber(runtime):
        got, _, document = through(runtime, call(content, {"content-type": content_type}))
    assert got == status and document["error"]["type"] == "invalid_request_error"
    assert {key: document["error"][key] for key in error} == error


def test_limits_are_openai_errors_on_its_route(runtime: Any) -> None:
    small = Limits(max_decoded_bytes=4096, max_sent_bytes=2048, max_answer_bytes=len(ANSWER) - 1)
    bomb = zstd.compress(b" " * 10_000_000)
    with Stubber(runtime) as stub:
        sent = through(runtime, call(b" " * 2049), limits=small)
        decoded = through(runtime, call(bomb, {"content-encoding": "zstd"}), limits=small)
        encoding = through(runtime, call(REQUEST, {"content-encoding": "br"}))
        answered(stub, REQUEST)
        answer = through(runtime, call(), limits=Limits(MAX_BODY_BYTES, max_answer_bytes=small.max_answer_bytes))
        stub.assert_no_pending_responses()
    assert [(status, document["error"]["code"]) for status, _, document in (sent, decoded, encoding, answer)] == [
        (413, "body_too_large"), (413, "body_too_large"), (415, "unsupported_encoding"), (413, "body_too_large")]
    assert "ask fewer questions per request" in answer[2]["error"]["message"]


@pytest.mark.parametrize(("error", "status", "error_type", "code"), [
    (ReadTimeoutError(endpoint_url="https://runtime.sagemaker"), 504, "timeout", "timeout"),
    (EndpointConnectionError(endpoint_url="https://runtime.sagemaker"), 503, "server_error", "service_unavailable"),
    (NoCredentialsError(), 500, "server_error", "internal_error"),
], ids=["read-timeout", "unreachable", "no-credentials"])
def test_botocores_own_failures_are_openai_errors_never_a_4xx(error: Exception, status: int, error_type: str,
                                                              code: str) -> None:
    got, headers, document = through(Unreachable(error), call())
    assert (got, document["error"]["type"], document["error"]["code"]) == (status, error_type, code)
    assert (headers.get("retry-after") == "1") is (status == 503)


def test_a_system_one_body_beside_openais_input_is_still_read_as_system_one(runtime: Any) -> None:
    """`input` beside a list of `questions` would make /invocations read a /v1/systemone body as OpenAI's: the front
    drops it (System One ignores unknown fields), so the container answers in System One's shape."""
    document = {"state": "s", "input": "i", "questions": []}
    with Stubber(runtime) as stub:
        answered(stub, json.dumps({"state": "s", "questions": []}).encode(), attributes=None)
        assert through(runtime, call(json.dumps(document).encode(), path="/v1/systemone"))[0] == 200
        stub.assert_no_pending_responses()


def test_a_refused_key_carries_both_shapes_as_api_gateways_refusals_do() -> None:
    for admission, status, openai_type in ((Admission.NO_HEADER, 401, "invalid_request_error"),
                                           (Admission.NOT_BEARER, 403, "permission_error")):
        got, _, content = refusal(admission)
        document = json.loads(content)
        assert got == status and document["detail"]["error_type"] == "authentication_error"
        assert document["error"] == {"message": document["detail"]["message"], "type": openai_type, "param": None,
                                     "code": "invalid_api_key"}
