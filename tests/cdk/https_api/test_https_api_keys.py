"""The System One API's keys end to end: `semif keys create|list|revoke` (scripts/keys) writes them, the Lambda
authorizer (stacks/https_api/handlers/key_authorizer.py) reads and checks them, and the forwarding
Lambda's event glue (stacks/https_api/handlers/endpoint_forwarder.py) turns API Gateway's events into the
front's calls.

moto stands in for SSM and KMS; botocore's Stubber for API Gateway and CloudFormation (moto's need
openapi-spec-validator, which the toolkit does not install) and where moto cannot fail on demand (SSM down after the
first read, a failed write)."""

from __future__ import annotations

import base64
import datetime
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from botocore.response import StreamingBody
from botocore.stub import ANY, Stubber
from moto import mock_aws

from scripts import keys
from scripts.common.command import parse
from scripts.common.polling import Poller
from scripts.keys.store import ApiKeyStore, KeysError, manage
from semif_adapter.doors.api_keys import HASH_PREFIX, digest
from semif_adapter.settings import MAX_BODY_BYTES
from semif_decision_client.api_front import Limits, keys_path
from semif_decision_client.invoke_wire import DECISIONS_ATTRIBUTES, Target
from stacks.https_api.handlers import endpoint_forwarder, key_authorizer
from stacks.https_api.handlers.key_authorizer import KeyStore, authorize, stage_arn

REGION = "us-east-1"
STACK = "semif-api"
PLAN = "plan123"
METHOD_ARN = "arn:aws:execute-api:us-east-1:123456789012:abc123/api/POST/v1/systemone"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(name, value)
    with mock_aws():
        yield boto3.Session(region_name=REGION)


class Capture:
    """An expected parameter that accepts any value and keeps it (Stubber compares with `!=`)."""

    def __init__(self) -> None:
        self.values: list[Any] = []

    def __ne__(self, other: object) -> bool:
        self.values.append(other)
        return False

    __hash__ = None  # type: ignore[assignment]


class ApiGateway:
    """API Gateway's key calls, stubbed in the order the tool makes them; `usage_keys` holds the values it sent."""

    def __init__(self, session: Any) -> None:
        self.client = session.client("apigateway")
        self.stubber = Stubber(self.client)
        self.stubber.activate()
        self.usage_keys = Capture()

    def expect_create(self, key_id: str, api_key_id: str) -> None:
        self.stubber.add_response("create_api_key", {"id": api_key_id, "name": f"{STACK}-{key_id}", "enabled": True},
                                  {"name": f"{STACK}-{key_id}", "description": ANY, "enabled": True,
                                   "value": self.usage_keys, "tags": {"semif:key-id": key_id}})
        self.stubber.add_response("create_usage_plan_key", {"id": api_key_id, "type": "API_KEY"},
                                  {"usagePlanId": PLAN, "keyId": api_key_id, "keyType": "API_KEY"})

    def expect_delete(self, api_key_id: str) -> None:
        self.stubber.add_response("delete_api_key", {}, {"apiKey": api_key_id})


class Session:
    """The operator's boto3 session: moto's SSM and KMS, API Gateway stubbed, and a stack with these outputs."""

    def __init__(self, session: Any, apigateway: ApiGateway, outputs: dict[str, str]) -> None:
        self.session, self.apigateway, self.outputs = session, apigateway, outputs

    def client(self, name: str, **options: Any) -> Any:
        if name == "apigateway":
            return self.apigateway.client
        if name != "cloudformation":
            return self.session.client(name, **options)
        cloudformation = self.session.client("cloudformation")
        stubber = Stubber(cloudformation)
        stubber.add_response("describe_stacks", {"Stacks": [{
            "StackName": STACK, "StackStatus": "UPDATE_COMPLETE", "CreationTime": datetime.datetime(2026, 12, 1),
            "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in self.outputs.items()]}]})
        stubber.activate()
        return cloudformation


@pytest.fixture
def deployed(aws: Any) -> dict[str, str]:
    """What the stack leaves behind for the tools: the outputs naming the keys' path, usage plan and KMS key."""
    return {"SystemOneApiKeysPath": keys_path(STACK), "SystemOneApiUsagePlanId": PLAN,
            "SystemOneApiKeysKeyArn": aws.client("kms").create_key()["KeyMetadata"]["Arn"]}


@pytest.fixture
def apigateway(aws: Any) -> ApiGateway:
    return ApiGateway(aws)


def tool(aws: Any, apigateway: ApiGateway, *argv: str, outputs: dict[str, str] | None = None) -> str:
    """`semif keys ...` as an operator runs it (no waiting: the stack is settled)."""
    if outputs is None:
        outputs = {"SystemOneApiKeysPath": keys_path(STACK), "SystemOneApiUsagePlanId": PLAN,
                   "SystemOneApiKeysKeyArn": aws.client("kms").list_keys()["Keys"][0]["KeyArn"]}
    return manage(parse(keys, list(argv)), session=Session(aws, apigateway, outputs),
                  poller=Poller(timeout_s=0, progress=print))


def authorizer(aws: Any, tmp_path: Path, clock: Clock) -> KeyStore:
    return KeyStore(aws.client("ssm"), keys_path(STACK), tmp_path, clock=clock)


def token(key: str, scheme: str = "Bearer") -> dict[str, str]:
    return {"type": "TOKEN", "authorizationToken": f"{scheme} {key}", "methodArn": METHOD_ARN}


def test_a_key_is_shown_once_stored_as_its_hash_and_admitted_by_the_authorizer(
        aws: Any, deployed: dict[str, str], apigateway: ApiGateway, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    apigateway.expect_create("ops-laptop", "apikey-1")
    key = tool(aws, apigateway, "create", "api", "ops-laptop")
    apigateway.stubber.assert_no_pending_responses()
    assert key.startswith("sk-semif-") and len(key) > 40
    stored = aws.client("ssm").get_parameter(Name=f"{keys_path(STACK)}/ops-laptop", WithDecryption=True)["Parameter"]
    assert stored["Type"] == "SecureString" and key not in stored["Value"]
    record = json.loads(stored["Value"])
    assert record["hash"] == f"{HASH_PREFIX}{digest(key).hex()}"
    assert (record["api_key_id"], [record["usage_key"]]) == ("apikey-1", apigateway.usage_keys.values)

    store = authorizer(aws, tmp_path, Clock())
    allowed = authorize(token(key), store)
    assert allowed["principalId"] == "ops-laptop" and allowed["context"] == {"keyId": "ops-laptop"}
    assert allowed["usageIdentifierKey"] == record["usage_key"]  # the usage plan counts this key's requests
    assert allowed["policyDocument"]["Statement"] == [{"Action": "execute-api:Invoke", "Effect": "Allow",
                                                       "Resource": "arn:aws:execute-api:us-east-1:123456789012:"
                                                                   "abc123/api/*/*"}]
    with pytest.raises(PermissionError, match=r"^Unauthorized$"):  # API Gateway's 401
        authorize(token("sk-semif-not-ours"), store)
    denied = authorize(token(key, "Basic"), store)  # API Gateway's 403
    assert denied["policyDocument"]["Statement"][0]["Effect"] == "Deny" and "usageIdentifierKey" not in denied
    printed = capsys.readouterr()
    assert key not in printed.out + printed.err + "".join(p.read_text() for p in tmp_path.iterdir())


def test_keys_arrive_and_leave_without_a_deployment(aws: Any, deployed: dict[str, str], apigateway: ApiGateway,
                                                    tmp_path: Path) -> None:
    clock = Clock()
    apigateway.expect_create("first", "apikey-1")
    first = tool(aws, apigateway, "create", "api", "first")
    store = authorizer(aws, tmp_path, clock)
    apigateway.expect_create("second", "apikey-2")
    second = tool(aws, apigateway, "create", "api", "second")
    # A key made after the last read: the miss makes the authorizer read again (at most every MISS_REFRESH_S).
    clock.now += key_authorizer.MISS_REFRESH_S
    assert authorize(token(second), store)["principalId"] == "second"
    assert tool(aws, apigateway, "list", "api").splitlines()[0].startswith("first\tcreated ")
    apigateway.expect_delete("apikey-1")  # the usage-plan key goes with it
    assert "revoked first" in tool(aws, apigateway, "revoke", "api", "first")
    apigateway.stubber.assert_no_pending_responses()
    assert authorize(token(first), store)["principalId"] == "first"  # until the next read
    clock.now += key_authorizer.REFRESH_S
    with pytest.raises(PermissionError, match="Unauthorized"):
        authorize(token(first), store)
    assert [line.split("\t")[0] for line in tool(aws, apigateway, "list", "api").splitlines()] == ["second"]


def test_a_failing_key_store_keeps_the_last_good_keys(aws: Any, deployed: dict[str, str], apigateway: ApiGateway,
                                                      tmp_path: Path) -> None:
    apigateway.expect_create("steady", "apikey-1")
    key = tool(aws, apigateway, "create", "api", "steady")
    clock = Clock()
    store = authorizer(aws, tmp_path, clock)
    stubber = Stubber(store.ssm)
    stubber.add_client_error("get_parameters_by_path", "InternalServerError", "SSM is down", 500)
    stubber.activate()
    clock.now += key_authorizer.REFRESH_S
    assert authorize(token(key), store)["principalId"] == "steady"
    with pytest.raises(PermissionError, match="Unauthorized"):
        authorize(token("sk-semif-unknown"), store)  # a miss right after a failed read does not read again
    stubber.assert_no_pending_responses()


def test_the_tool_refuses_before_it_writes(aws: Any, deployed: dict[str, str], apigateway: ApiGateway) -> None:
    apigateway.expect_create("taken", "apikey-1")
    tool(aws, apigateway, "create", "api", "taken")
    with pytest.raises(KeysError, match="key taken exists"):
        tool(aws, apigateway, "create", "api", "taken")
    with pytest.raises(KeysError, match="lower-case letters"):
        tool(aws, apigateway, "create", "api", "Not A Key Id")
    with pytest.raises(KeysError, match="no key ghost"):
        tool(aws, apigateway, "revoke", "api", "ghost")
    apigateway.stubber.assert_no_pending_responses()  # and nothing more was asked of API Gateway


def test_a_failed_write_leaves_no_usage_plan_key_behind(aws: Any, deployed: dict[str, str],
                                                        apigateway: ApiGateway) -> None:
    store = ApiKeyStore.from_outputs(STACK, deployed, Session(aws, apigateway, deployed))
    stubber = Stubber(store.ssm)
    stubber.add_client_error("get_parameter", "ParameterNotFound", "not there", 400)
    stubber.add_client_error("put_parameter", "AccessDeniedException", "no kms:Encrypt on the data key", 400)
    apigateway.expect_create("half", "apikey-9")
    apigateway.expect_delete("apikey-9")
    with stubber, pytest.raises(ClientError, match="AccessDeniedException"):
        store.create("half")
    apigateway.stubber.assert_no_pending_responses()


def test_a_stack_without_the_api_is_named(aws: Any, apigateway: ApiGateway) -> None:
    with pytest.raises(KeysError, match="stack semif-dev has no System One API"):
        tool(aws, apigateway, "list", "dev", outputs={"DecisionEndpointName": "semif-dev-decision"})


def test_the_stage_arn_covers_every_route_of_the_stage() -> None:
    assert stage_arn(METHOD_ARN) == "arn:aws:execute-api:us-east-1:123456789012:abc123/api/*/*"


# ---- the forwarding Lambda's glue ------------------------------------------------------------------------

def _event(resource: str, sent: bytes, request_id: str) -> dict[str, Any]:
    """API Gateway's proxy event for a POST to `resource`, the body as sent (base64: the API treats it as binary)."""
    return {"httpMethod": "POST", "resource": resource, "path": resource,
            "headers": {"Content-Type": "application/json", "Authorization": "Bearer never-forwarded"},
            "body": base64.b64encode(sent).decode(), "isBase64Encoded": True,
            "requestContext": {"requestId": request_id, "authorizer": {"keyId": "ops"}}}


def _forwarded(forwarder: endpoint_forwarder.Forwarder, event: dict[str, Any], sent: bytes,
               answer: bytes, attributes: str | None = None) -> dict[str, Any]:
    """The forwarder's answer to `event` where SageMaker, sent exactly `sent` (with the custom `attributes`, if
    any), answers `answer`."""
    expected = {"EndpointName": "semif-api-decision", "Body": sent, "ContentType": "application/json",
                "Accept": "application/json", **({"CustomAttributes": attributes} if attributes else {})}
    with Stubber(forwarder.client) as stubber:
        stubber.add_response("invoke_endpoint", {"Body": _streaming(answer), "ContentType": "application/json"},
                             expected_params=expected)
        return forwarder.answer(event)


def test_the_forwarder_reads_api_gateways_event_and_answers_its_proxy_shape(aws: Any) -> None:
    runtime = aws.client("sagemaker-runtime")
    forwarder = endpoint_forwarder.Forwarder(runtime, Target("semif-api-decision"), Limits(MAX_BODY_BYTES), 28.0)
    sent = json.dumps({"state": "Grüße", "questions": {"q": {"type": "noul", "instructions": "ok?"}}},
                      ensure_ascii=False).encode()
    answer = '{"answers": {"q": {"noul": 0.5}}, "x": "Größe"}'.encode()
    event = _event("/v1/systemone", sent, "apigw-1")
    response = _forwarded(forwarder, event, sent, answer)
    assert response["statusCode"] == 200 and response["isBase64Encoded"] is False
    assert response["body"].encode() == answer  # UTF-8 text, byte for byte
    assert response["headers"]["x-typesafe-request-id"] == "apigw-1"
    broken = forwarder.answer({**event, "body": "%%% not base64"})
    assert broken["statusCode"] == 400 and json.loads(broken["body"])["detail"]["error_type"] == \
        "invalid_request_error"
    assert endpoint_forwarder.proxy_response((200, {}, b"\xff\xfe"))["isBase64Encoded"] is True


def test_the_forwarder_serves_openais_route_in_openais_shape(aws: Any) -> None:
    """`POST /v1/decisions`: the body goes to InvokeEndpoint as sent (the container reads it as OpenAI's); what the
    forwarder answers itself speaks OpenAI's error shape there."""
    runtime = aws.client("sagemaker-runtime")
    forwarder = endpoint_forwarder.Forwarder(runtime, Target("semif-api-decision"), Limits(MAX_BODY_BYTES), 28.0)
    sent = json.dumps({"model": "jev-latest", "input": "Grüße", "questions": [
        {"type": "predicate", "instructions": "ok?"}]}, ensure_ascii=False).encode()
    answer = b'{"answers": [{"type": "predicate", "name": null, "probability": 0.5}]}'
    event = _event("/v1/decisions", sent, "apigw-2")
    response = _forwarded(forwarder, event, sent, answer, DECISIONS_ATTRIBUTES)  # the container reads it as OpenAI's
    assert (response["statusCode"], response["body"].encode()) == (200, answer)
    assert response["headers"]["x-request-id"] == response["headers"]["x-typesafe-request-id"] == "apigw-2"
    broken = forwarder.answer({**event, "body": "%%% not base64"})
    assert broken["statusCode"] == 400 and json.loads(broken["body"])["error"]["type"] == "invalid_request_error"
    missing = forwarder.answer({**event, "body": base64.b64encode(b'{"model": "m", "questions": []}').decode()})
    assert missing["statusCode"] == 400 and json.loads(missing["body"])["error"]["param"] == "input"


def test_the_forwarder_is_configured_by_its_environment_alone(aws: Any) -> None:
    forwarder = endpoint_forwarder.Forwarder.from_environment({
        "SEMIF_ENDPOINT_NAME": "semif-shared-models", "SEMIF_INFERENCE_COMPONENT_NAME": "semif-shared-decision",
        "SEMIF_MAX_BODY_BYTES": "4194304", "SEMIF_READ_TIMEOUT_S": "28.0"})
    assert forwarder.target == Target("semif-shared-models", "semif-shared-decision")
    assert forwarder.limits.max_decoded_bytes == 4 * 2**20 and forwarder.timeout_s == 28.0
    assert forwarder.client.meta.config.read_timeout == 28.0
    assert forwarder.client.meta.config.retries["total_max_attempts"] == 1  # the SDK's retries are the only ones


def _streaming(content: bytes) -> StreamingBody:
    return StreamingBody(io.BytesIO(content), len(content))


def test_key_records_carry_a_utc_creation_time(aws: Any, deployed: dict[str, str], apigateway: ApiGateway) -> None:
    store = ApiKeyStore.from_outputs(STACK, deployed, Session(aws, apigateway, deployed))
    apigateway.expect_create("dated", "apikey-1")
    fixed = datetime.datetime(2026, 12, 2, 18, 0, tzinfo=datetime.UTC)
    store.create("dated", now=lambda: fixed, new_secret=lambda n: "s" * n)
    record = json.loads(aws.client("ssm").get_parameter(Name=f"{keys_path(STACK)}/dated", WithDecryption=True)
                        ["Parameter"]["Value"])
    assert record["created"] == "2026-12-02T18:00:00+00:00" and record["usage_key"] == "s" * 24
