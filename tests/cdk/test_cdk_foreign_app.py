"""The constructs in someone else's CDK app: its own App and Stack, no cdk.json, settings made in code."""

from __future__ import annotations

from pathlib import Path

import pytest
from aws_cdk import App, Environment, Stack
from aws_cdk import aws_s3 as s3
from aws_cdk.assertions import Match, Template

from stacks.config import Alarms, ConfigError, EmbeddedModel, Endpoint
from stacks.config import Environment as Settings
from stacks.decision_image import image_tag, source_fingerprint
from stacks.pair import DecisionEndpointPair, DecisionEndpointPairProps

REPO = Path(__file__).resolve().parents[2]


def settings(**changes: object) -> Settings:
    fields: dict[str, object] = {
        "region": "eu-west-1", "accelerator": "cpu", "model": EmbeddedModel(source="embedded"),
        "chat": Endpoint(instance_type="ml.m5.large", alarms=Alarms(latency_p90_ms=30_000)),
        "decision": Endpoint(instance_type="ml.c5.xlarge", env={"SEMIF_QUEUE_SIZE": "8"},
                             alarms=Alarms(latency_p90_ms=5_000)),
    }
    return Settings(**{**fields, **changes})


def test_the_pair_synthesizes_inside_a_foreign_stack(tmp_path: Path) -> None:
    app = App(outdir=str(tmp_path / "out"), analytics_reporting=False)  # no context at all: no cdk.json
    stack = Stack(app, "CheckoutService", env=Environment(account="123456789012", region="eu-west-1"))
    s3.Bucket(stack, "Orders")  # the stack's own resources, beside ours
    props = DecisionEndpointPairProps.build(app_name="checkout", env_name="live", settings=settings(),
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
        DecisionEndpointPairProps.build(app_name="checkout", env_name="live", settings=bad,
                                        container_dir=REPO / "container", cache_dir=tmp_path / "cache")
    assert any("SEMIF_MODEL_SHA256" in key for key in caught.value.keys), caught.value.problems
