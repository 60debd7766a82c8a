"""Scale to zero for inference-component hosting (issue 54): `min_instances: 0` on the shared endpoint and
`min_copies: 0` on each component, validated at synth with what it implies, the template carrying what brings
capacity back, refused where SageMaker does not scale to zero."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_support import Synth, load, problems
from test_cdk_hosting import dashboard_body, widget_metrics

from stacks.prepare import hosting_notices

ZERO_COPIES = {"autoscaling": {"min_copies": 0, "max_copies": 1, "target_invocations_per_copy": 10}}


def test_the_endpoint_may_release_its_last_instance_and_each_component_its_last_copy(scaletozero: Synth) -> None:
    _, config = scaletozero.one("AWS::SageMaker::EndpointConfig", "/Shared/Config")
    (variant,) = config["Properties"]["ProductionVariants"]
    assert variant["ManagedInstanceScaling"] == {"Status": "ENABLED", "MinInstanceCount": 0, "MaxInstanceCount": 2}
    targets = scaletozero.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    assert sorted((t["Properties"]["ResourceId"], t["Properties"]["ScalableDimension"], t["Properties"]["MinCapacity"])
                  for t in targets.values()) == [
        ("inference-component/semif-scaletozero-chat", "sagemaker:inference-component:DesiredCopyCount", 0),
        ("inference-component/semif-scaletozero-decision", "sagemaker:inference-component:DesiredCopyCount", 0)]


@pytest.mark.parametrize("kind", ["Chat", "Decision"])
def test_a_request_that_finds_no_copy_brings_one_back_by_a_step_policy(scaletozero: Synth, kind: str) -> None:
    target_id, _ = scaletozero.one("AWS::ApplicationAutoScaling::ScalableTarget", f"/{kind}/ScalableTarget")
    policy_id, policy = scaletozero.one("AWS::ApplicationAutoScaling::ScalingPolicy", f"/{kind}/ScaleOutFromZero")
    assert policy["Properties"]["PolicyType"] == "StepScaling"
    assert policy["Properties"]["ScalingTargetId"] == {"Ref": target_id}
    assert policy["Properties"]["StepScalingPolicyConfiguration"]["StepAdjustments"] == [
        {"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]
    _, alarm = scaletozero.one("AWS::CloudWatch::Alarm", f"/{kind}/NoCapacityAlarm")
    properties = alarm["Properties"]
    assert properties["MetricName"] == "NoCapacityInvocationFailures" and properties["Namespace"] == "AWS/SageMaker"
    assert properties["Dimensions"] == [{"Name": "InferenceComponentName",
                                         "Value": f"semif-scaletozero-{kind.lower()}"}]
    assert properties["Threshold"] == 1 and properties["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert properties["AlarmActions"] == [{"Ref": policy_id}]


def test_the_dashboard_shows_idle_periods_and_requests_that_found_no_copy(scaletozero: Synth, shared: Synth) -> None:
    metrics = widget_metrics(dashboard_body(scaletozero))
    expressions = [m[0]["expression"] for m in metrics if isinstance(m[0], dict) and "expression" in m[0]]
    assert expressions.count("IF(FILL(invocations, 0) > 0, 0, 1)") == 2
    assert sum(1 for m in metrics if len(m) > 1 and m[1] == "NoCapacityInvocationFailures") == 2
    assert "NoCapacityInvocationFailures" not in dashboard_body(shared)  # only where copies can reach zero


def test_synth_says_what_scale_to_zero_implies() -> None:
    (notice,) = hosting_notices(load("scaletozero").settings)
    key, message = notice
    assert key == "shared_endpoint.managed_scaling.min_instances"
    assert "NoCapacityInvocationFailures" in message and "loads the model" in message and "minutes" in message
    assert hosting_notices(load("shared").settings) == []


@pytest.mark.parametrize(("env_name", "changes", "key", "fragment"), [
    ("dev", {"decision": {"autoscaling": {"min_instances": 0, "max_instances": 2,
                                          "target_invocations_per_instance": 10}}},
     "decision.autoscaling.min_instances", "only for an endpoint that hosts inference components"),
    ("serverless", {"decision": {"autoscaling": {"min_instances": 0, "max_instances": 2,
                                                 "target_invocations_per_instance": 10}}},
     "decision.autoscaling", "a serverless endpoint scales itself"),
    ("scaletozero", {"shared_endpoint": {"managed_scaling": {"min_instances": 3, "max_instances": 2}}},
     "shared_endpoint.managed_scaling", "min_instances (3) is greater than max_instances (2)"),
    ("scaletozero", {"decision": {"component": {"autoscaling": {"min_copies": 2, "max_copies": 1}}}},
     "decision.component.autoscaling", "min_copies (2) is greater than max_copies (1)"),
    ("scaletozero", {"decision": {"component": {"autoscaling": {"min_copies": 1}}}},
     "decision.component.autoscaling.min_copies", "releases the last instance only once no copy is left"),
    ("scaletozero", {"chat": {"component": {"autoscaling": None}}},
     "chat.component.autoscaling", "let this component's copies scale to 0 too"),
    ("shared", {"decision": {"component": ZERO_COPIES}},
     "decision.component.autoscaling.min_copies", "needs shared_endpoint.managed_scaling.min_instances: 0"),
])
def test_scale_to_zero_is_refused_where_sagemaker_does_not_do_it(env_name: str, changes: dict[str, Any], key: str,
                                                                  fragment: str) -> None:
    found = problems(env_name, changes)
    assert fragment in found[f"environments.{env_name}.{key}"], json.dumps(found, indent=1)
