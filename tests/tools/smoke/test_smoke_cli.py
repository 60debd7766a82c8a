"""The smoke scripts end to end: `--local` against the real gateway, and the AWS path with moto + Stubber."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from scripts import smoke
from scripts.common.command import parse
from scripts.common.discovery import DiscoveryError
from scripts.smoke.endpoints import smoke as smoke_test

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]


def run_smoke(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "scripts.smoke", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.mark.parametrize("args", [["chat"], ["chat", "--stream"], ["decision"]])
def test_local_smoke_passes(local_endpoints: Any, args: list[str]) -> None:
    result = run_smoke(*args, "--local", "--port", str(local_endpoints.port))
    assert result.returncode == 0, result.stderr
    line = result.stdout.strip()
    assert line.startswith(f"smoke {' '.join(args)}: OK: local-{args[0]}: ")
    assert " s" in line and ("streamed" in line if "--stream" in args else True)


def test_aws_path_runs_unchanged_against_the_gateway_through_botocores_endpoint_variables(
        local_endpoints: Any) -> None:
    """No --local: smoke waits on DescribeEndpoint (the gateway's control plane) and invokes, as against AWS."""
    env = {**os.environ, "AWS_ENDPOINT_URL_SAGEMAKER": local_endpoints.url,
           "AWS_ENDPOINT_URL_SAGEMAKER_RUNTIME": local_endpoints.url, "AWS_ACCESS_KEY_ID": "local",
           "AWS_SECRET_ACCESS_KEY": "local"}
    result = subprocess.run([sys.executable, "-m", "scripts.smoke", "decision", "--endpoint", "local-decision",
                             "--region", "us-east-1"], cwd=REPO, capture_output=True, text=True, timeout=120,
                            check=False, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("smoke decision: OK: local-decision: decided in ")
    missing = subprocess.run([sys.executable, "-m", "scripts.smoke", "chat", "--endpoint", "local-nope",
                              "--region", "us-east-1"], cwd=REPO, capture_output=True, text=True, timeout=120,
                             check=False, env=env)
    assert missing.returncode == 1
    assert 'FAILED: endpoint local-nope: Could not find endpoint "local-nope".' in missing.stderr


def test_unknown_endpoint_fails_with_the_reason(local_endpoints: Any) -> None:
    result = run_smoke("chat", "--local", "--port", str(local_endpoints.port), "--prefix", "nope")
    assert result.returncode == 1
    assert "smoke chat: FAILED: endpoint nope-chat: ValidationError: Endpoint nope-chat of account" in result.stderr


def test_refused_decision_fails_naming_the_field(local_endpoints: Any, tmp_path: Path) -> None:
    payload = json.loads((REPO / "scripts" / "payloads" / "decision.json").read_text())
    payload["decision"]["options"] = payload["decision"]["options"][:1]
    (tmp_path / "one.json").write_text(json.dumps(payload))
    result = run_smoke("decision", "--local", "--port", str(local_endpoints.port), "--payload",
                       str(tmp_path / "one.json"))
    assert result.returncode == 1
    assert "FAILED: endpoint local-decision:" in result.stderr and "decision.options" in result.stderr


def test_nothing_listening_fails_clearly(tmp_path: Path) -> None:
    from scripts.local.processes import free_port

    result = run_smoke("chat", "--local", "--port", str(free_port()))
    assert result.returncode == 1
    assert "Could not connect to the endpoint URL" in result.stderr


def test_usage_errors_exit_2() -> None:
    assert run_smoke("decision", "--stream", "--local").returncode == 2
    assert run_smoke("chat", "--local", "--endpoint", "x").returncode == 2


class _Session:
    """A boto3 session whose CloudFormation client is stubbed; everything else is real (moto or HTTP)."""

    def __init__(self, cloudformation: Any) -> None:
        self._real = boto3.Session(region_name="us-east-1")
        self._cloudformation = cloudformation
        self.region_name = "us-east-1"

    def client(self, name: str, **kwargs: Any) -> Any:
        return self._cloudformation if name == "cloudformation" else self._real.client(name, **kwargs)


@pytest.mark.parametrize(("deployed", "passes"), [("ChatConfig-new", True), ("ChatConfig-old", False)])
def test_aws_path_checks_the_stack_and_endpoint_then_invokes(local_endpoints: Any, deployed: str,
                                                              passes: bool) -> None:
    """Names from the stack's outputs, status from SageMaker (moto), the invocation through the gateway."""
    args = parse(smoke, ["chat", "--env", "dev", "--endpoint-url", local_endpoints.url, "--wait-timeout", "5"])
    with mock_aws():
        sagemaker = boto3.client("sagemaker", region_name="us-east-1")
        sagemaker.create_model(ModelName="m", ExecutionRoleArn="arn:aws:iam::123456789012:role/r",
                               PrimaryContainer={"Image": "x"})
        sagemaker.create_endpoint_config(EndpointConfigName=deployed, ProductionVariants=[{
            "VariantName": "AllTraffic", "ModelName": "m", "InitialInstanceCount": 1, "InstanceType": "ml.m5.large"}])
        sagemaker.create_endpoint(EndpointName="local-chat", EndpointConfigName=deployed)
        cloudformation = boto3.client("cloudformation", region_name="us-east-1")
        outputs = {"ChatEndpointName": "local-chat", "ChatEndpointConfigName": "ChatConfig-new"}
        with Stubber(cloudformation) as stub:
            stub.add_response("describe_stacks", {"Stacks": [{
                "StackName": "semif-dev", "StackStatus": "UPDATE_COMPLETE",
                "CreationTime": datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC),
                "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in outputs.items()]}]},
                {"StackName": "semif-dev"})
            if passes:
                report = smoke_test(args, session=_Session(cloudformation))
                assert report.startswith("local-chat: answered in ")
            else:
                with pytest.raises(DiscoveryError, match="InService on endpoint config ChatConfig-old"):
                    smoke_test(args, session=_Session(cloudformation))


def test_shared_local_endpoints_serve_both_models_as_components_of_one_endpoint(spawn_gateway: Any,
                                                                              runtime_for: Any) -> None:
    """`semif local --shared` (the real containers) and `smoke --local --shared`, as shared hosting runs."""
    gateway = spawn_gateway("--shared")
    gateway.wait_ready()
    for role in ("decision", "chat"):
        result = run_smoke(role, "--local", "--shared", "--port", str(gateway.port))
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"smoke {role}: OK: local-models/local-{role}: ")
    client = runtime_for(gateway.url)
    with pytest.raises(client.exceptions.ValidationError, match="Inference Component Name header is required"):
        client.invoke_endpoint(EndpointName="local-models", Body=b"{}", ContentType="application/json")
    dedicated = run_smoke("decision", "--local", "--port", str(gateway.port))  # no such endpoint when shared
    assert dedicated.returncode == 1 and "Endpoint local-decision of account" in dedicated.stderr
    status, left = gateway.stop()
    assert status == 0 and not left
