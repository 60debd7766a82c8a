"""`semif smoke systemone`: where the API's URL comes from, and what fails the smoke test (the passing run against
the local API is in test_api_front_local.py). botocore's Stubber stands in for CloudFormation and SageMaker."""

from __future__ import annotations

import argparse
import datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from scripts import smoke
from scripts.common.command import alias, parse
from scripts.common.polling import Poller
from scripts.smoke.answers import SmokeFailure
from scripts.smoke.systemone import api_url, resolve_url

NOW = datetime.datetime(2026, 12, 2, tzinfo=datetime.UTC)
OUTPUTS = {"DecisionEndpointName": "semif-api-decision", "DecisionEndpointConfigName": "DecisionConfig-new",
           "SystemOneApiUrl": "https://abc123.execute-api.us-east-1.amazonaws.com/api"}


class StubbedSession:
    """CloudFormation and SageMaker clients with their answers queued."""

    def __init__(self) -> None:
        session = boto3.Session(aws_access_key_id="x", aws_secret_access_key="x", region_name="us-east-1")
        self.clients = {name: session.client(name) for name in ("cloudformation", "sagemaker")}
        self.stubbers = {name: Stubber(client) for name, client in self.clients.items()}

    def client(self, name: str) -> Any:
        return self.clients[name]


def test_a_front_that_answers_a_wrong_key_fails_the_smoke_test(local_endpoints: Any,
                                                               monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The session's gateway serves System One without keys (no --api-keys): an API like that must not pass."""
    monkeypatch.setenv("TYPESAFE_API_KEY", "sk-semif-anything")
    assert alias(smoke, ["systemone", "--local", str(local_endpoints.port)]) == 1
    assert "a wrong key was answered: the API does not check keys" in capsys.readouterr().err


def test_without_a_key_the_smoke_test_says_where_it_looked(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv("MY_KEY", raising=False)
    assert alias(smoke, ["systemone", "--api-url", "https://api.invalid", "--key-env", "MY_KEY"]) == 1
    assert "no API key in $MY_KEY: make one with `semif keys create ENV NAME`" in capsys.readouterr().err


def test_the_url_is_the_stacks_once_its_decision_endpoint_is_in_service() -> None:
    session = StubbedSession()
    session.stubbers["cloudformation"].add_response("describe_stacks", {"Stacks": [{
        "StackName": "semif-api", "StackStatus": "UPDATE_COMPLETE", "CreationTime": NOW,
        "Outputs": [{"OutputKey": k, "OutputValue": v} for k, v in OUTPUTS.items()]}]}, {"StackName": "semif-api"})
    session.stubbers["sagemaker"].add_response("describe_endpoint", {
        "EndpointName": "semif-api-decision", "EndpointArn": "arn:aws:sagemaker:us-east-1:1:endpoint/x",
        "EndpointConfigName": "DecisionConfig-new", "EndpointStatus": "InService", "CreationTime": NOW,
        "LastModifiedTime": NOW}, {"EndpointName": "semif-api-decision"})
    args = argparse.Namespace(api_url=None, local=False, stack=None, app="semif", env="api")
    for stubber in session.stubbers.values():
        stubber.activate()
    assert resolve_url(args, session, Poller(timeout_s=0)) == OUTPUTS["SystemOneApiUrl"]
    for stubber in session.stubbers.values():
        stubber.assert_no_pending_responses()


def test_a_stack_without_the_api_is_named() -> None:
    with pytest.raises(SmokeFailure, match="stack semif-dev has no output SystemOneApiUrl: its environment has no "
                                           "https_api"):
        api_url({"DecisionEndpointName": "semif-dev-decision"}, "semif-dev")


@pytest.mark.parametrize("argv", [["systemone", "--endpoint", "semif-api-decision"],
                                  ["decision", "--api-url", "https://api.invalid"]])
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        parse(smoke, argv)
    assert exited.value.code == 2
