"""Endpoint discovery on AWS (scripts/common/discovery.py, as `semif smoke` uses it): stack outputs (botocore Stubber)
and endpoint status (moto and Stubber).

The waits run on a fake clock, so the bounded-timeout paths take no real time.
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from scripts.common import discovery
from scripts.common.discovery import DiscoveryError, Target, stack_outputs, target_from_outputs, wait_in_service
from scripts.common.polling import Poller, StillWaiting

REGION = "us-east-1"
NOW = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
OUTPUTS = {"ChatEndpointName": "semif-dev-chat", "ChatEndpointConfigName": "ChatConfig-new",
           "DecisionEndpointName": "semif-dev-decision", "DecisionEndpointConfigName": "DecisionConfig-new"}


class FakeTime:
    """A clock that advances only when the poller sleeps; records what it printed."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []
        self.lines: list[str] = []

    def poller(self, timeout_s: float = 60.0, interval_s: float = 10.0) -> Poller:
        return Poller(timeout_s=timeout_s, interval_s=interval_s, sleep=self._sleep, clock=lambda: self.now,
                      progress=self.lines.append)

    def _sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def stack(status: str, outputs: dict[str, str] | None = None) -> dict[str, Any]:
    return {"Stacks": [{"StackName": "semif-dev", "StackStatus": status, "CreationTime": NOW,
                        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in (outputs or OUTPUTS).items()]}]}


def endpoint(status: str, config: str = "ChatConfig-new", **extra: str) -> dict[str, Any]:
    return {"EndpointName": "semif-dev-chat", "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/x",
            "EndpointConfigName": config, "EndpointStatus": status, "CreationTime": NOW,
            "LastModifiedTime": NOW, **extra}


@pytest.fixture
def cloudformation() -> Any:
    return boto3.client("cloudformation", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


@pytest.fixture
def sagemaker() -> Any:
    return boto3.client("sagemaker", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def test_outputs_are_read_once_the_stack_settles(cloudformation: Any) -> None:
    clock = FakeTime()
    with Stubber(cloudformation) as stub:
        stub.add_response("describe_stacks", stack("UPDATE_IN_PROGRESS", {"ChatEndpointName": "old"}),
                          {"StackName": "semif-dev"})
        stub.add_response("describe_stacks", stack("UPDATE_COMPLETE"), {"StackName": "semif-dev"})
        outputs = stack_outputs(cloudformation, "semif-dev", clock.poller())
        stub.assert_no_pending_responses()
    assert outputs == OUTPUTS
    assert target_from_outputs(outputs, "decision", "semif-dev") == Target("semif-dev-decision", "DecisionConfig-new")
    assert clock.sleeps == [10.0]
    assert clock.lines == ["waiting for stack semif-dev: UPDATE_IN_PROGRESS (0/60 s)"]


def test_missing_stack_is_named(cloudformation: Any) -> None:
    with Stubber(cloudformation) as stub:
        stub.add_client_error("describe_stacks", "ValidationError", "Stack with id semif-dev does not exist")
        with pytest.raises(DiscoveryError, match="stack semif-dev: Stack with id semif-dev does not exist"):
            stack_outputs(cloudformation, "semif-dev", FakeTime().poller())


def test_failed_stack_is_refused_and_rolled_back_stack_warned(cloudformation: Any) -> None:
    clock = FakeTime()
    with Stubber(cloudformation) as stub:
        stub.add_response("describe_stacks", stack("ROLLBACK_COMPLETE"))
        stub.add_response("describe_stacks", stack("UPDATE_ROLLBACK_COMPLETE"))
        with pytest.raises(DiscoveryError, match="ROLLBACK_COMPLETE: deploy it again"):
            stack_outputs(cloudformation, "semif-dev", clock.poller())
        assert stack_outputs(cloudformation, "semif-dev", clock.poller()) == OUTPUTS
    assert "rolled back" in clock.lines[-1]


def test_missing_output_key_is_named() -> None:
    with pytest.raises(DiscoveryError, match="no output ChatEndpointName"):
        target_from_outputs({"Other": "x"}, "chat", "semif-dev")


def test_waits_for_in_service_with_progress(sagemaker: Any) -> None:
    clock = FakeTime()
    with Stubber(sagemaker) as stub:
        for status in ("Creating", "Updating", "InService"):
            stub.add_response("describe_endpoint", endpoint(status), {"EndpointName": "semif-dev-chat"})
        wait_in_service(sagemaker, Target("semif-dev-chat", "ChatConfig-new"), clock.poller())
    assert clock.sleeps == [10.0, 10.0]
    assert clock.lines == ["waiting for endpoint semif-dev-chat: Creating (0/60 s)",
                           "waiting for endpoint semif-dev-chat: Updating (10/60 s)"]


def test_wait_is_bounded(sagemaker: Any) -> None:
    clock = FakeTime()
    with Stubber(sagemaker) as stub:
        for _ in range(4):
            stub.add_response("describe_endpoint", endpoint("Updating"))
        with pytest.raises(StillWaiting, match="still Updating after 25 s"):
            wait_in_service(sagemaker, Target("semif-dev-chat"), clock.poller(timeout_s=25))
    assert sum(clock.sleeps) == 25.0  # the last sleep is cut to the deadline


def test_failed_endpoint_reports_the_reason(sagemaker: Any) -> None:
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", endpoint("Failed", FailureReason="health check timed out"))
        with pytest.raises(DiscoveryError, match="semif-dev-chat is Failed: health check timed out"):
            wait_in_service(sagemaker, Target("semif-dev-chat"), FakeTime().poller())


@pytest.fixture
def moto_endpoint() -> Any:
    """A real-looking endpoint in moto, InService on ChatConfig-old."""
    with mock_aws():
        client = boto3.client("sagemaker", region_name=REGION)
        client.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
                            PrimaryContainer={"Image": "x"})
        for name in ("ChatConfig-old", "ChatConfig-new"):
            client.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
                "VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": 1,
                "InstanceType": "ml.m5.large"}])
        client.create_endpoint(EndpointName="local-chat", EndpointConfigName="ChatConfig-old")
        yield client


def test_in_service_on_the_expected_config_passes(moto_endpoint: Any) -> None:
    described = wait_in_service(moto_endpoint, Target("local-chat", "ChatConfig-old"), FakeTime().poller())
    assert described["EndpointStatus"] == "InService"


def test_in_service_on_an_old_config_is_a_rollback(moto_endpoint: Any) -> None:
    with pytest.raises(DiscoveryError) as raised:
        wait_in_service(moto_endpoint, Target("local-chat", "ChatConfig-new"), FakeTime().poller())
    message = str(raised.value)
    assert "ChatConfig-old" in message and "ChatConfig-new" in message and "rolled it back" in message


def test_unknown_endpoint_is_named(moto_endpoint: Any) -> None:
    with pytest.raises(DiscoveryError, match="endpoint semif-dev-chat: Could not find endpoint"):
        wait_in_service(moto_endpoint, Target("semif-dev-chat"), FakeTime().poller())


def test_stack_name_and_region_follow_cdk_json(tmp_path: Path) -> None:
    config = {"context": {"semif": {"app_name": "acme", "environments": {"prod": {"region": "eu-west-1"}}}}}
    (tmp_path / "cdk.json").write_text(json.dumps(config))
    assert discovery.deployment_defaults("prod", tmp_path / "cdk.json") == ("acme", "eu-west-1")
    assert discovery.deployment_defaults("dev", tmp_path / "cdk.json") == ("acme", None)
    assert discovery.deployment_defaults("dev", tmp_path / "missing.json") == ("semif", None)


def test_output_keys_are_the_ones_the_stack_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """The stack names its outputs `{CONSTRUCT_IDS[kind]}EndpointName` / `...EndpointConfigName` (and, shared,
    `...InferenceComponentName`; tests/cdk checks the shared template declares them)."""
    monkeypatch.setenv("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
    from stacks.semif_stack import CONSTRUCT_IDS

    assert set(CONSTRUCT_IDS) == set(discovery.OUTPUT_KEYS)
    for role, construct_id in CONSTRUCT_IDS.items():
        assert discovery.OUTPUT_KEYS[role] == (f"{construct_id}EndpointName", f"{construct_id}EndpointConfigName",
                                           f"{construct_id}InferenceComponentName")


# --- shared hosting: the stack names an inference component per role -------------------------------------------

SHARED_OUTPUTS = {"DecisionEndpointName": "semif-shared-models", "DecisionEndpointConfigName": "SharedConfig-new",
                  "DecisionInferenceComponentName": "semif-shared-decision"}


def component(status: str, endpoint_name: str = "semif-shared-models", **extra: str) -> dict[str, Any]:
    return {"InferenceComponentName": "semif-shared-decision", "EndpointName": endpoint_name,
            "InferenceComponentArn": "arn:aws:sagemaker:us-east-1:1:inference-component/semif-shared-decision",
            "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/semif-shared-models",
            "InferenceComponentStatus": status, "CreationTime": NOW, "LastModifiedTime": NOW, **extra}


def test_a_shared_stack_names_the_component_to_invoke() -> None:
    target = target_from_outputs(SHARED_OUTPUTS, "decision", "semif-shared")
    assert target == Target("semif-shared-models", "SharedConfig-new", "semif-shared-decision")
    assert target.invoke_args == {"InferenceComponentName": "semif-shared-decision"}
    assert target.label == "semif-shared-models/semif-shared-decision"
    assert Target("semif-dev-chat").invoke_args == {}  # dedicated: no component, boto3 sends no header


def test_the_component_is_waited_for_after_the_endpoint(sagemaker: Any) -> None:
    clock = FakeTime()
    target = target_from_outputs(SHARED_OUTPUTS, "decision", "semif-shared")
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_endpoint", {**endpoint("InService", "SharedConfig-new"),
                                                "EndpointName": "semif-shared-models"},
                          {"EndpointName": "semif-shared-models"})
        for status in ("Creating", "InService"):
            stub.add_response("describe_inference_component", component(status),
                              {"InferenceComponentName": "semif-shared-decision"})
        wait_in_service(sagemaker, target, clock.poller())
        stub.assert_no_pending_responses()
    assert clock.lines == ["waiting for inference component semif-shared-decision: Creating (0/60 s)"]


@pytest.mark.parametrize(("described", "message"), [
    (component("Failed", FailureReason="not enough memory on the instance"),
     "semif-shared-decision is Failed: not enough memory on the instance"),
    (component("InService", endpoint_name="other-endpoint"),
     "runs on endpoint other-endpoint, not semif-shared-models"),
])
def test_a_failed_or_misplaced_component_fails_the_smoke_test(sagemaker: Any, described: dict[str, Any],
                                                              message: str) -> None:
    with Stubber(sagemaker) as stub:
        stub.add_response("describe_inference_component", described)
        with pytest.raises(DiscoveryError, match=message):
            discovery.wait_component_in_service(sagemaker, Target("semif-shared-models", None, "semif-shared-decision"),
                                            FakeTime().poller())
