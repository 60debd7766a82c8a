"""The constructs in someone else's CDK app: its own App and Stack, no cdk.json, settings made in code."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from stacks.config import Alarms, Component, ConfigError, EmbeddedModel, Endpoint, EnvironmentSettings, SharedEndpoint
from stacks.image.decision_image import image_tag, source_fingerprint
from stacks.pair import DecisionEndpointPair, DecisionEndpointPairProps

REPO = Path(__file__).resolve().parents[2]


def settings(**changes: object) -> EnvironmentSettings:
    fields: dict[str, object] = {
        "region": "eu-west-1", "accelerator": "cpu", "model": EmbeddedModel(source="embedded"),
        "chat": Endpoint(instance_type="ml.m5.large", alarms=Alarms(latency_p90_ms=30_000)),
        "decision": Endpoint(instance_type="ml.c5.xlarge", env={"SEMIF_QUEUE_SIZE": "8"},
                             alarms=Alarms(latency_p90_ms=5_000)),
    }
    return EnvironmentSettings(**{**fields, **changes})


def test_the_pair_synthesizes_inside_a_foreign_stack(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "out"), analytics_reporting=False)  # no context at all: no cdk.json
    stack = Stack(app, "CheckoutService", env=Environment(account="123456789012", region="eu-west-1"))
    s3.Bucket(stack, "Orders")  # the stack's own resources, beside ours
    props = DecisionEndpointPairProps.build(app_name="checkout", environment_name="live", settings=settings(),
                                            cache_dir=tmp_path / "cache")  # the toolkit's own build context
    pair = DecisionEndpointPair(stack, "Decisions", props)
    template = Template.from_stack(stack)

    template.resource_count_is("AWS::S3::Bucket", 1)
    endpoints = template.find_resources("AWS::SageMaker::Endpoint")
    assert sorted(e["Properties"]["EndpointName"] for e in endpoints.values()) == \
        ["checkout-live-chat", "checkout-live-decision"]
    template.resource_count_is("AWS::SageMaker::Model", 2)
    template.has_resource_properties("AWS::SageMaker::EndpointConfig", {
        "ProductionVariants": [Match.object_like({"InstanceType": "ml.c5.xlarge"})]})
    template.has_resource_properties("AWS::CodeBuild::Project", {"Environment": Match.object_like({
        "PrivilegedMode": True})})
    decision_model = template.find_resources("AWS::SageMaker::Model", {"Properties": {"PrimaryContainer": {
        "Environment": Match.object_like({"SEMIF_QUEUE_SIZE": "8", "SEMIF_ENDPOINT_NAME": "checkout-live-decision"})}}})
    assert len(decision_model) == 1
    chat_image = template.find_resources("AWS::SageMaker::Model", {"Properties": {"PrimaryContainer": {
        "Image": Match.string_like_regexp(r"dkr\.ecr\.eu-west-1\.amazonaws\.com/llama-cpp:server-sagemaker-cpu")}}})
    assert len(chat_image) == 1, "the chat model runs the stock DLC of the stack's region"
    assert set(pair.endpoints) == {"chat", "decision"}
    assert pair.endpoints["decision"].endpoint_name == "checkout-live-decision"
    assert pair.image.tag == image_tag(source_fingerprint(REPO / "container"), pair.image.base_image, "cpu",
                                       pair.image.build_args)


def test_settings_made_in_code_are_checked_like_cdk_json(tmp_path: Path) -> None:
    bad = settings(decision=Endpoint(instance_type="ml.c5.xlarge", alarms=Alarms(latency_p90_ms=5_000),
                                     env={"SEMIF_MODEL_SHA256": "ab" * 32}))
    with pytest.raises(ConfigError) as caught:
        DecisionEndpointPairProps.build(app_name="checkout", environment_name="live", settings=bad,
                                        container_dir=REPO / "container", cache_dir=tmp_path / "cache")
    assert any("SEMIF_MODEL_SHA256" in key for key in caught.value.keys), caught.value.problems


def test_settings_made_in_code_get_the_decision_memory_check_of_cdk_synth(tmp_path: Path) -> None:
    """The pair's props run the app's own preparation: the KV cache of every worker counts against the instance, as
    `cdk synth` counts it (16 workers x 16,384 tokens x the embedded model's 23,040 bytes: 5.6 GiB on 4 GiB)."""
    heavy = settings(decision=Endpoint(
        instance_type="ml.c5.large", alarms=Alarms(latency_p90_ms=5_000), env={"SEMIF_WORKERS": "16"},
        llama_env={"SM_LLAMA_CPP_CTX_SIZE": "16384", "SM_LLAMA_CPP_ROPE_SCALING": "yarn"}))
    with pytest.raises(ConfigError) as caught:
        DecisionEndpointPairProps.build(app_name="checkout", environment_name="live", settings=heavy,
                                        cache_dir=tmp_path / "cache")
    problems = dict(caught.value.problems)
    assert "16 worker KV cache(s) of 16384 tokens" in problems["decision.instance_type"], problems


SHARED_HOSTING: dict[str, object] = {
    "hosting": "shared",
    "shared_endpoint": SharedEndpoint(instance_type="ml.m5.large"),
    "chat": Endpoint(component=Component(cpu_cores=1, memory_mb=3072), alarms=Alarms(latency_p90_ms=30_000)),
    "decision": Endpoint(component=Component(cpu_cores=1, memory_mb=3072), alarms=Alarms(latency_p90_ms=5_000)),
}


def sagemaker_arn(resource: str) -> dict[str, object]:
    """An ARN as the template writes it in the foreign stack (account and region given, the partition a Ref)."""
    return {"Fn::Join": ["", ["arn:", {"Ref": "AWS::Partition"}, f":sagemaker:eu-west-1:123456789012:{resource}"]]}


def granted(template: Template, role_id: str) -> list[dict[str, object]]:
    """Every statement of every policy attached to the foreign app's role `role_id`."""
    policies = template.find_resources("AWS::IAM::Policy", {"Properties": {"Roles": [{"Ref": role_id}]}})
    return [statement for policy in policies.values() for statement in policy["Properties"]["PolicyDocument"]
            ["Statement"]]


@pytest.mark.parametrize(("hosting", "decision_arns", "pair_arns"), [
    ({}, ["endpoint/checkout-live-decision"], ["endpoint/checkout-live-chat", "endpoint/checkout-live-decision"]),
    (SHARED_HOSTING, ["endpoint/checkout-live-models", "inference-component/checkout-live-decision"],
     ["endpoint/checkout-live-models", "inference-component/checkout-live-chat",
      "inference-component/checkout-live-decision"]),
], ids=["dedicated", "shared"])
def test_grant_invoke_gives_a_foreign_role_invoke_endpoint_on_the_models_and_nothing_else(
        hosting: dict[str, object], decision_arns: list[str], pair_arns: list[str],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    app = App(outdir=str(tmp_path_factory.mktemp("out")), analytics_reporting=False)
    stack = Stack(app, "CheckoutService", env=Environment(account="123456789012", region="eu-west-1"))
    props = DecisionEndpointPairProps.build(app_name="checkout", environment_name="live", settings=settings(**hosting),
                                            cache_dir=tmp_path_factory.getbasetemp() / "models")
    pair = DecisionEndpointPair(stack, "Decisions", props)
    checkout = iam.Role(stack, "Checkout", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    support = iam.Role(stack, "Support", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"))
    pair.endpoints["decision"].grant_invoke(checkout)
    pair.grant_invoke(support)
    template = Template.from_stack(stack)

    def role_id(role: iam.Role) -> str:
        return stack.get_logical_id(role.node.default_child)  # type: ignore[arg-type]

    for role, arns in ((checkout, decision_arns), (support, pair_arns)):
        resources = [sagemaker_arn(arn) for arn in arns]
        assert granted(template, role_id(role)) == [{"Action": "sagemaker:InvokeEndpoint", "Effect": "Allow",
                                                    "Resource": resources[0] if len(resources) == 1 else resources}]
