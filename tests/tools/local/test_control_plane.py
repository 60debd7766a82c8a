"""The gateway's SageMaker control-plane reads through an unmodified boto3 `sagemaker` client (fast, no model).

The answers are checked against botocore's own service model (every member modeled, every required member
present, every value of its modeled type), so a shape the SDKs would trip on fails here first.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import boto3
import botocore.session
import httpx
import pytest
from botocore.config import Config
from botocore.model import Shape

from scripts.local.gateway import create_gateway
from scripts.local.processes import LOOPBACK

Serve = Callable[[Any], AbstractContextManager[str]]
SERVICE = botocore.session.get_session().get_service_model("sagemaker")
SCALARS: dict[str, type | tuple[type, ...]] = {
    "string": str, "boolean": bool, "integer": int, "long": int, "float": (int, float), "double": (int, float),
    "timestamp": datetime.datetime,
}
ROUTES = {"loc-chat": f"http://{LOOPBACK}:1", "loc-decision": f"http://{LOOPBACK}:2",
          "loc-models": {"loc-chat": f"http://{LOOPBACK}:3", "loc-decision": f"http://{LOOPBACK}:4"}}


def shape_errors(value: Any, shape: Shape, where: str = "") -> list[str]:
    """What in a parsed answer does not fit botocore's model of it (empty: it fits)."""
    if shape.type_name == "structure":
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        errors = [f"{where}.{m}: required, missing" for m in shape.required_members if m not in value]
        for key, item in value.items():
            if key not in shape.members:
                errors.append(f"{where}.{key}: not a member of {shape.name}")
            else:
                errors += shape_errors(item, shape.members[key], f"{where}.{key}")
        return errors
    if shape.type_name == "list":
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [e for i, item in enumerate(value) for e in shape_errors(item, shape.member, f"{where}[{i}]")]
    if not isinstance(value, SCALARS[shape.type_name]):
        return [f"{where}: {value!r} is not a {shape.type_name}"]
    if getattr(shape, "enum", None) and value not in shape.enum:  # StringShape only
        return [f"{where}: {value!r} is not one of {shape.name}'s values"]
    return []


def fits(operation: str, answer: dict[str, Any]) -> list[str]:
    bare = {k: v for k, v in answer.items() if k != "ResponseMetadata"}
    return shape_errors(bare, SERVICE.operation_model(operation).output_shape, operation)


def sagemaker_client(url: str | None, region: str = "eu-west-1") -> Any:
    return boto3.client("sagemaker", endpoint_url=url, region_name=region, aws_access_key_id="local",
                        aws_secret_access_key="local", config=Config(retries={"total_max_attempts": 1}))


@pytest.fixture
def gateway(threaded_server: Serve) -> Iterator[str]:
    with threaded_server(create_gateway(ROUTES)) as url:
        yield url


def test_describe_endpoint_answers_in_the_service_models_shape(gateway: str) -> None:
    described = sagemaker_client(gateway).describe_endpoint(EndpointName="loc-decision")
    assert fits("DescribeEndpoint", described) == []
    assert described["EndpointName"] == "loc-decision"
    assert described["EndpointArn"] == "arn:aws:sagemaker:eu-west-1:000000000000:endpoint/loc-decision"
    assert described["EndpointStatus"] == "InService"
    assert described["EndpointConfigName"] == "loc-decision"
    assert described["ProductionVariants"][0]["VariantName"] == "AllTraffic"
    assert isinstance(described["CreationTime"], datetime.datetime)
    assert described["LastModifiedTime"] >= described["CreationTime"]


def test_the_endpoint_url_comes_from_botocores_standard_environment_variable(
        gateway: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_SAGEMAKER", gateway)
    described = sagemaker_client(None, region="us-east-1").describe_endpoint(EndpointName="loc-chat")
    assert described["EndpointArn"] == "arn:aws:sagemaker:us-east-1:000000000000:endpoint/loc-chat"


def test_unknown_endpoint_is_sagemakers_validation_exception(gateway: str) -> None:
    client = sagemaker_client(gateway)
    with pytest.raises(client.exceptions.ClientError) as raised:
        client.describe_endpoint(EndpointName="nope")
    error = raised.value.response["Error"]
    assert (error["Code"], error["Message"]) == ("ValidationException", 'Could not find endpoint "nope".')
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 400
    with pytest.raises(client.exceptions.ClientError, match="Could not find endpoint configuration"):
        client.describe_endpoint_config(EndpointConfigName="nope")
    with pytest.raises(client.exceptions.ClientError, match="Could not find inference component"):
        client.describe_inference_component(InferenceComponentName="nope")


def test_endpoint_config_list_and_inference_components(gateway: str) -> None:
    client = sagemaker_client(gateway)
    config = client.describe_endpoint_config(EndpointConfigName="loc-chat")
    assert fits("DescribeEndpointConfig", config) == []
    assert config["ProductionVariants"][0]["ModelName"] == "loc-chat"
    shared = client.describe_endpoint_config(EndpointConfigName="loc-models")
    assert "ModelName" not in shared["ProductionVariants"][0]  # its models are the components'
    listed = client.list_endpoints()
    assert fits("ListEndpoints", listed) == []
    assert [e["EndpointName"] for e in listed["Endpoints"]] == ["loc-chat", "loc-decision", "loc-models"]
    assert [e["EndpointName"] for e in client.list_endpoints(NameContains="models")["Endpoints"]] == ["loc-models"]
    assert client.list_endpoints(StatusEquals="Failed")["Endpoints"] == []
    component = client.describe_inference_component(InferenceComponentName="loc-decision")
    assert fits("DescribeInferenceComponent", component) == []
    assert (component["EndpointName"], component["InferenceComponentStatus"]) == ("loc-models", "InService")


def test_other_control_plane_operations_and_bad_bodies_are_refused_by_name(gateway: str) -> None:
    client = sagemaker_client(gateway)
    with pytest.raises(client.exceptions.ClientError) as raised:
        client.delete_endpoint(EndpointName="loc-chat")
    assert raised.value.response["Error"]["Code"] == "UnknownOperationException"
    assert "DeleteEndpoint is not a SageMaker operation served locally" in raised.value.response["Error"]["Message"]
    garbled = httpx.post(gateway, content=b"{", headers={"X-Amz-Target": "SageMaker.DescribeEndpoint"})
    assert (garbled.status_code, garbled.json()["__type"]) == (400, "SerializationException")
    unnamed = httpx.post(gateway, content=b"{}", headers={"X-Amz-Target": "SageMaker.DescribeEndpoint"})
    assert unnamed.json()["__type"] == "ValidationException" and "endpointName" in unnamed.json()["Message"]
    runtime_shaped = httpx.post(gateway, content=b"{}")  # no X-Amz-Target: still the runtime's refusal
    assert runtime_shaped.status_code == 404
    assert runtime_shaped.headers["x-amzn-errortype"] == "UnknownOperationException"


def test_the_shape_check_catches_a_wrong_answer() -> None:
    wrong = {"EndpointName": "x", "EndpointStatus": "Ready", "Extra": 1}
    errors = fits("DescribeEndpoint", wrong)
    assert any("EndpointArn: required" in e for e in errors)
    assert any("Ready" in e for e in errors) and any("Extra: not a member" in e for e in errors)

