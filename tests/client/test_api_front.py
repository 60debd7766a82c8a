"""The System One front's logic (`semif_decision_client.api_front`), which the API's Lambda functions and the
local gateway both run: who is admitted, what reaches SageMaker, what comes back.

botocore's Stubber stands in for SageMaker (its answers and errors); the key checker and the JSON parser are the
container's own (`semif_adapter.doors.api_keys`, `semif_adapter.doors.strict_json`).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from backports import zstd
from botocore.exceptions import EndpointConnectionError, NoCredentialsError, ReadTimeoutError
from botocore.response import StreamingBody
from botocore.stub import Stubber
from support.systemone import QUESTIONS, body

from semif_adapter.doors.api_keys import HASH_PREFIX, ApiKeys, digest
from semif_adapter.doors.strict_json import load_json
from semif_adapter.settings import MAX_BODY_BYTES
from semif_decision_client.api_front import (
    DENIED_MESSAGE,
    UNAUTHORIZED_MESSAGE,
    Admission,
    KeyRecord,
    Limits,
    admit,
    forward,
    read_timeout_s,
    refusal,
)
from semif_decision_client.invoke_wire import Call, Target

KEY = "sk-semif-front-test"
REQUEST = json.dumps(body(QUESTIONS)).encode()
ANSWER = json.dumps({"model": "m", "answers": {}, "usage": {"input_tokens": 1, "output_tokens": 0}},
                    ensure_ascii=False).encode()
LIMITS = Limits(max_decoded_bytes=MAX_BODY_BYTES)
JSON_HEADERS = {"content-type": "application/json"}


@pytest.fixture
def runtime() -> Any:
    return boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1").client(
        "sagemaker-runtime")


def call(content: bytes = REQUEST, headers: dict[str, str] | None = None, method: str = "POST",
         path: str = "/v1/systemone") -> Call:
    return Call(method, path, {**JSON_HEADERS, **(headers or {})}, content)


ENDPOINT = Target("e")


def through(runtime: Any, sent: Call, *, target: Target = ENDPOINT, limits: Limits = LIMITS) -> tuple[int, dict[
        str, str], Any]:
    status, headers, content = forward(runtime, target, sent, request_id="front-1", limits=limits, timeout_s=28,
                                       parse=load_json)
    return status, headers, json.loads(content)


def answered(stub: Stubber, expected_body: bytes, content: bytes = ANSWER, **expected: Any) -> None:
    stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(content), len(content)),
                                          "ContentType": "application/json"},
                      expected_params={"EndpointName": "e", "Body": expected_body, "ContentType": "application/json",
                                       "Accept": "application/json", **expected})


# ---- who is admitted ---------------------------------------------------------------------------------------

def test_admission_follows_api_gateways_order_with_the_containers_checker(tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text(f"laptop {HASH_PREFIX}{digest(KEY).hex()}\n")
    keys = ApiKeys(str(keys_file))
    assert admit(f"Bearer {KEY}", keys.check) == (Admission.ALLOWED, "laptop")
    assert admit(None, keys.check) == (Admission.NO_HEADER, None)
    assert admit(f"Basic {KEY}", keys.check) == (Admission.NOT_BEARER, None)
    assert admit("Bearer sk-semif-someone-else", keys.check) == (Admission.WRONG_KEY, None)
    statuses = {admission: refusal(admission) for admission in Admission if admission is not Admission.ALLOWED}
    for admission, (status, _, content) in statuses.items():
        detail = json.loads(content)["detail"]
        assert detail["error_type"] == "authentication_error"
        assert (status, detail["message"]) == ((403, DENIED_MESSAGE) if admission is Admission.NOT_BEARER
                                               else (401, UNAUTHORIZED_MESSAGE))


# ---- what reaches SageMaker, and what comes back -----------------------------------------------------------

def test_the_containers_answer_comes_back_byte_for_byte_with_the_fronts_request_id(runtime: Any) -> None:
    unicode_answer = '{"answers":{"q":{"choice":"Größe 🎯"}}}'.encode()
    with Stubber(runtime) as stub:
        answered(stub, REQUEST, unicode_answer)
        status, headers, content = forward(runtime, Target("e"), call(), request_id="front-1", limits=LIMITS,
                                           timeout_s=28, parse=load_json)
        stub.assert_no_pending_responses()
    assert (status, content) == (200, unicode_answer)
    assert headers["x-typesafe-request-id"] == "front-1" and headers["content-type"] == "application/json"


@pytest.mark.parametrize("encoding", ["gzip", "zstd"])
def test_compressed_bodies_reach_sagemaker_decoded(runtime: Any, encoding: str) -> None:
    packed = gzip.compress(REQUEST) if encoding == "gzip" else zstd.compress(REQUEST)
    with Stubber(runtime) as stub:
        answered(stub, REQUEST)
        status, _, _ = through(runtime, call(packed, {"content-encoding": encoding}))
        stub.assert_no_pending_responses()
    assert status == 200


def test_the_models_list_and_an_inference_component(runtime: Any) -> None:
    with Stubber(runtime) as stub:
        answered(stub, b"{}", EndpointName="semif-shared-models", CustomAttributes="route=/v1/models",
                 InferenceComponentName="semif-shared-decision")
        status, _, _ = through(runtime, call(b"", method="GET", path="/v1/models"),
                               target=Target("semif-shared-models", "semif-shared-decision"))
        stub.assert_no_pending_responses()
    assert status == 200


def test_semif_keys_are_dropped_as_any_unknown_field_so_the_container_reads_system_one(runtime: Any) -> None:
    """On /invocations a body with `decision` is SemIf's: the front drops it, as System One ignores unknown fields."""
    document = body(QUESTIONS, decision={"id": "x"}, decisions=[])
    with Stubber(runtime) as stub:
        answered(stub, json.dumps(body(QUESTIONS), ensure_ascii=False).encode())
        status, _, _ = through(runtime, call(json.dumps(document).encode()))
        stub.assert_no_pending_responses()
    assert status == 200


# ---- refused before SageMaker sees anything (no stubbed answer: a call to AWS would fail the test) ----------

@pytest.mark.parametrize(("content", "headers", "status", "expected"), [
    (b'{"state": "x", "questions": {', {}, 422,
     {"detail": [{"loc": ["body"], "msg": "body is not valid UTF-8 JSON: Expecting property name enclosed in double "
                                          "quotes: line 1 column 30 (char 29)", "type": "invalid_json"}]}),
    (b"[]", {}, 422, {"detail": [{"loc": ["body"], "msg": "Input should be a valid dictionary", "type": "dict_type"}]}),
    (b"{}", {}, 422, {"detail": [{"loc": ["body", "state"], "msg": "Field required", "type": "missing"},
                                 {"loc": ["body", "questions"], "msg": "Field required", "type": "missing"}]}),
    (b'{"state": "a", "state": "b", "questions": {}}', {}, 422,
     {"detail": [{"loc": ["body", "state"], "msg": "key 'state' appears more than once in one object",
                  "type": "duplicate_key"}]}),
    (REQUEST, {"content-type": "text/plain"}, 415,
     {"detail": {"error_type": "invalid_request_error", "message": "Content-Type must be application/json, not "
                                                                   "'text/plain'"}}),
], ids=["not-json", "not-an-object", "no-questions", "duplicate-key", "not-json-media-type"])
def test_a_body_the_container_would_not_read_as_system_one_gets_its_v1_systemone_answer(
        runtime: Any, content: bytes, headers: dict[str, str], status: int, expected: dict[str, Any]) -> None:
    """What the container's own /v1/systemone answers (checked against it: test_api_front_local.py), where
    SageMaker's /invocations would answer in SemIf's shape."""
    with Stubber(runtime):
        assert through(runtime, call(content, headers))[::2] == (status, expected)


def test_limits_as_sent_decoded_and_answered(runtime: Any) -> None:
    small = Limits(max_decoded_bytes=4096, max_sent_bytes=2048, max_answer_bytes=len(ANSWER) - 1)
    bomb = zstd.compress(b" " * 10_000_000)  # 10 MB of spaces in a few hundred bytes
    with Stubber(runtime) as stub:
        assert through(runtime, call(b" " * 2049), limits=small)[0] == 413
        status, _, refused = through(runtime, call(bomb, {"content-encoding": "zstd"}), limits=small)
        assert (status, refused["detail"]["error_type"]) == (413, "request_too_large")
        assert through(runtime, call(REQUEST, {"content-encoding": "br"}))[0] == 415
        answered(stub, REQUEST)
        status, _, too_long = through(runtime, call(), limits=Limits(MAX_BODY_BYTES,
                                                                     max_answer_bytes=small.max_answer_bytes))
        stub.assert_no_pending_responses()
    assert status == 413 and "ask fewer questions per request" in too_long["detail"]["message"]


class Unreachable:
    """A runtime client whose calls fail on the way (what botocore raises when SageMaker does not answer)."""

    def __init__(self, error: Exception) -> None:
        self.error = error

    def invoke_endpoint(self, **_: Any) -> Any:
        raise self.error


@pytest.mark.parametrize(("error", "status", "error_type"), [
    (ReadTimeoutError(endpoint_url="https://runtime.sagemaker"), 504, "timeout_error"),
    (EndpointConnectionError(endpoint_url="https://runtime.sagemaker"), 503, "service_unavailable"),
    (NoCredentialsError(), 500, "internal_error"),
], ids=["read-timeout", "unreachable", "no-credentials"])
def test_botocores_own_failures_are_never_a_4xx(error: Exception, status: int, error_type: str) -> None:
    got, headers, content = through(Unreachable(error), call())
    assert (got, content["detail"]["error_type"]) == (status, error_type)
    assert (headers.get("retry-after") == "1") is (status == 503)  # only where a retry soon can help


def test_sagemakers_errors_reach_the_caller_as_the_transport_maps_them(runtime: Any) -> None:
    """The SDK transport's mapping (invoke_wire), here through the front: spot checks, the full table is
    test_systemone_transport.py's."""
    with Stubber(runtime) as stub:
        stub.add_client_error("invoke_endpoint", "ModelError", "container said 422", 424, modeled_fields={
            "OriginalStatusCode": 422, "OriginalMessage": json.dumps({"detail": [{"loc": ["body"], "msg": "m",
                                                                                  "type": "t"}]})})
        stub.add_client_error("invoke_endpoint", "ThrottlingException", "slow down", 400)
        stub.add_client_error("invoke_endpoint", "ModelError", "container said 503", 424, modeled_fields={
            "OriginalStatusCode": 503, "OriginalMessage": json.dumps({"detail": {"error_type": "service_unavailable",
                                                                                  "message": "busy"}})})
        outcomes = [through(runtime, call())[::2] for _ in range(3)]
    assert [status for status, _ in outcomes] == [422, 429, 503]
    assert outcomes[0][1]["detail"][0]["type"] == "t" and outcomes[2][1]["detail"]["message"] == "busy"


def test_the_read_timeout_sits_under_the_integration_timeout() -> None:
    assert read_timeout_s(29) == 28 and read_timeout_s(60) == 59 and read_timeout_s(1) == 0.5


# ---- the keys store's record -------------------------------------------------------------------------------

def test_a_key_record_holds_the_hash_never_the_key_and_is_a_keys_file_line() -> None:
    record = KeyRecord(key_id="ops-laptop", hash=f"{HASH_PREFIX}{digest(KEY).hex()}", usage_key="u" * 32,
                       api_key_id="abc123", created="2026-12-02T18:00:00+00:00")
    stored = record.to_json()
    assert KEY not in stored and "ops-laptop" not in stored  # the id is the parameter's name
    assert KeyRecord.from_json("ops-laptop", stored) == record
    assert record.keys_line == f"ops-laptop {HASH_PREFIX}{digest(KEY).hex()}"
    with pytest.raises(ValueError, match="key id"):
        KeyRecord(key_id="Ops Laptop", hash=record.hash, usage_key="u", api_key_id="a", created="c")
    with pytest.raises(ValueError, match="sha256"):
        KeyRecord(key_id="ops", hash="md5:00", usage_key="u", api_key_id="a", created="c")

