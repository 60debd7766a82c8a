"""Instance pools and Graviton (issue 54): an ordered list of up to five instance types per endpoint, each checked
like a single type; the arm64 DLC on Graviton3 and newer, Graviton2 refused; the two architectures never mixed
under one model."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cdk_support import Synth, as_list, load, problems, synth

from stacks.config.instances import GIB
from stacks.config.model_fit import check_model_fit

ARM64_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp-arm64:server-sagemaker-cpu-v1"
X86_DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1"
SIX = ["ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge", "ml.g5.4xlarge", "ml.g6.4xlarge"]


def pools(kind: str, types: list[str], **extra: Any) -> dict[str, Any]:
    return {kind: {"instance_type": None, "instance_pools": types, **extra}}


def variant(synthesized: Synth, kind: str) -> dict[str, Any]:
    _, config = synthesized.one("AWS::SageMaker::EndpointConfig", f"/{kind}/Config")
    (only,) = config["Properties"]["ProductionVariants"]
    return dict(only)


def test_a_pooled_variant_lists_its_pools_by_priority_and_scales_and_alarms_as_one_variant(pooled: Synth) -> None:
    decision = variant(pooled, "Decision")
    assert "InstanceType" not in decision
    assert decision["InstancePools"] == [
        {"InstanceType": t, "Priority": p} for p, t in
        enumerate(["ml.g6e.xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge", "ml.g4dn.2xlarge"], start=1)]
    assert [pool["Priority"] for pool in variant(pooled, "Chat")["InstancePools"]] == [1, 2, 3]
    targets = pooled.resources("AWS::ApplicationAutoScaling::ScalableTarget")
    assert {t["Properties"]["ResourceId"] for t in targets.values()} == {
        "endpoint/semif-pooled-chat/variant/AllTraffic", "endpoint/semif-pooled-decision/variant/AllTraffic"}
    # The CUDA build targets every pool's GPU (sm_75 g4dn, sm_86 g5, sm_89 g6/g6e).
    _, project = pooled.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    args = next(e["Value"] for e in project["Properties"]["Environment"]["EnvironmentVariables"]
                if e["Name"] == "DOCKER_BUILD_ARGS_JSON")
    assert "-DCMAKE_CUDA_ARCHITECTURES=75;86;89" in json.loads(args)["LLAMA_CMAKE_ARGS"]


def test_a_pool_of_six_is_refused_naming_the_key() -> None:
    found = problems("prod", pools("decision", SIX))
    assert "6 instance pools; SageMaker takes 1 to 5" in found["environments.prod.decision.instance_pools"]


@pytest.mark.parametrize(("changes", "key", "fragment"), [
    (pools("decision", ["ml.g5.xlarge", "ml.m5.xlarge"]), "decision.instance_pools.1",
     "ml.m5.xlarge is a CPU instance but accelerator is 'gpu'"),
    (pools("decision", ["ml.g5.xlarge", "ml.p3.2xlarge"]), "decision.instance_pools.1", "V100"),
    (pools("decision", ["ml.g5.xlarge", "ml.g5.xlarge"]), "decision.instance_pools", "listed twice"),
    ({"decision": {"instance_pools": ["ml.g5.xlarge"]}}, "decision.instance_pools",
     "give instance_type or instance_pools, not both"),
])
def test_each_pool_is_checked_like_a_single_instance_type(changes: dict[str, Any], key: str, fragment: str) -> None:
    assert fragment in problems("prod", changes)[f"environments.prod.{key}"]


def test_each_pool_must_hold_the_model() -> None:
    settings = load("dev", pools("decision", ["ml.m5.xlarge", "ml.c5.large"])).settings
    found = dict(check_model_fit(settings, model_bytes=5 * GIB, context_length=None))
    assert "ml.c5.large has 4 GiB of memory" in found["decision.instance_pools.1"]
    assert "decision.instance_pools.0" not in found


def test_pools_belong_to_an_endpoint_of_its_own() -> None:
    found = problems("shared", {"chat": {"instance_pools": ["ml.m5.large"]}})
    assert "belong to shared_endpoint" in found["environments.shared.chat.instance_pools"]


def test_a_pool_mixing_architectures_without_a_model_per_image_is_refused_naming_the_key() -> None:
    found = problems("dev", pools("chat", ["ml.m5.xlarge", "ml.c7g.xlarge"]))
    message = found["environments.dev.chat.instance_pools"]
    assert "mix x86-64: ml.m5.xlarge and arm64 (Graviton): ml.c7g.xlarge." in message
    assert "chat.model_per_image: true" in message
    decision = problems("dev", pools("decision", ["ml.m5.xlarge", "ml.c7g.xlarge"], model_per_image=True))
    assert "built once per environment" in decision["environments.dev.decision.instance_pools"]
    assert "one architecture" in decision["environments.dev.decision.model_per_image"]


def test_a_pool_on_the_other_architecture_gets_a_model_of_its_own(tmp_path: Any) -> None:
    mixed = Synth(*synth("dev", tmp_path, pools("chat", ["ml.m5.xlarge", "ml.c7g.xlarge"], model_per_image=True)))
    models = {k: v["Properties"]["PrimaryContainer"] for k, v in mixed.resources("AWS::SageMaker::Model").items()
              if "Chat" in k}
    primary = next(k for k in models if k.startswith("ChatModel"))
    other = next(k for k in models if k.startswith("ChatPoolModel"))
    assert models[primary]["Image"] == X86_DLC and models[other]["Image"] == ARM64_DLC
    assert models[primary]["Environment"] == models[other]["Environment"]
    chat = variant(mixed, "Chat")
    assert chat["ModelName"] == {"Fn::GetAtt": [primary, "ModelName"]}
    assert chat["InstancePools"] == [
        {"InstanceType": "ml.m5.xlarge", "Priority": 1},
        {"InstanceType": "ml.c7g.xlarge", "Priority": 2, "ModelNameOverride": {"Fn::GetAtt": [other, "ModelName"]}}]
    _, policy = mixed.one("AWS::IAM::Policy", "/Chat/ExecutionPolicy")
    pull = next(s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s.get("Sid") == "PullImage")
    assert sorted(as_list(pull["Resource"])) == [
        "arn:aws:ecr:us-east-1:763104351884:repository/llama-cpp",
        "arn:aws:ecr:us-east-1:763104351884:repository/llama-cpp-arm64"]


def test_graviton_deploys_both_endpoints_on_the_arm64_dlc_built_on_an_arm_host(graviton: Synth, dev: Synth) -> None:
    _, chat = graviton.one("AWS::SageMaker::Model", "/Chat/Model")
    assert chat["Properties"]["PrimaryContainer"]["Image"] == ARM64_DLC
    assert variant(graviton, "Decision")["InstanceType"] == "ml.c7g.xlarge"
    _, project = graviton.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    environment = project["Properties"]["Environment"]
    assert environment["Type"] == "ARM_CONTAINER"
    assert environment["Image"] == "aws/codebuild/amazonlinux-aarch64-standard:3.0"
    variables = {e["Name"]: e["Value"] for e in environment["EnvironmentVariables"]}
    assert variables["BASE_IMAGE"] == ARM64_DLC
    assert variables["IMAGE_TAG"].startswith("arm64-cpu-")
    assert json.loads(variables["DOCKER_BUILD_ARGS_JSON"]) == {
        "LLAMA_PORTABLE_CMAKE_ARGS": "-DGGML_NATIVE=OFF -DGGML_CPU_ARM_ARCH=armv8.4-a+sve+i8mm+bf16"}
    # The same build and checks as x86-64's: one buildspec (the pins are in the context and its lock files).
    _, x86 = dev.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    assert project["Properties"]["Source"]["BuildSpec"] == x86["Properties"]["Source"]["BuildSpec"]


@pytest.mark.parametrize("instance_type", ["ml.c6g.xlarge", "ml.m6g.large", "ml.r6g.large", "ml.c6gn.xlarge"])
def test_graviton2_is_refused_naming_the_instance_and_why(instance_type: str) -> None:
    message = problems("dev", {"decision": {"instance_type": instance_type}})["environments.dev.decision.instance_type"]
    assert instance_type in message and "Graviton2 (Neoverse-N1)" in message and "Neoverse-V1" in message


def test_graviton_is_cpu_only_and_keeps_batch_transform_and_a_digest_on_one_architecture() -> None:
    gpu = problems("prod", {"decision": {"instance_type": "ml.c7g.xlarge"}})
    assert "is a CPU instance but accelerator is 'gpu'" in gpu["environments.prod.decision.instance_type"]
    batch = problems("graviton", {"decision": {"batch_transform": {"instance_type": "ml.m5.xlarge"}}})
    assert "offers no Graviton instance" in batch["environments.graviton.decision.batch_transform.instance_type"]
    digest = problems("dev", {"chat": {"instance_type": "ml.c7g.xlarge"},
                              "dlc_image": {"digest": "sha256:" + "a" * 64}})
    assert "both architectures" in digest["environments.dev.dlc_image.digest"]


SHARED_POOLS = {"shared_endpoint": {"instance_type": None, "instance_pools": ["ml.m5.large", "ml.m5.xlarge"]}}


def test_the_shared_endpoint_takes_pools_too_and_each_must_place_the_copies(tmp_path: Any) -> None:
    pooled_shared = Synth(*synth("shared", tmp_path, SHARED_POOLS))
    _, config = pooled_shared.one("AWS::SageMaker::EndpointConfig", "/Shared/Config")
    (only,) = config["Properties"]["ProductionVariants"]
    assert "InstanceType" not in only
    assert only["InstancePools"] == [{"InstanceType": "ml.m5.large", "Priority": 1},
                                     {"InstanceType": "ml.m5.xlarge", "Priority": 2}]
    small = problems("shared", {"shared_endpoint": {"instance_type": None,
                                                    "instance_pools": ["ml.m5.large", "ml.t2.medium"]}})
    assert "1 x ml.t2.medium" in small["environments.shared.shared_endpoint.instance_count"]
    mixed = problems("shared", {"shared_endpoint": {"instance_type": None,
                                                    "instance_pools": ["ml.m5.large", "ml.c7g.large"]}})
    assert "one architecture" in mixed["environments.shared.shared_endpoint.instance_pools"]
    both = problems("shared", {"shared_endpoint": {"instance_pools": ["ml.m5.large"]}})
    assert "not both" in both["environments.shared.shared_endpoint.instance_pools"]
    six = problems("shared", {"shared_endpoint": {"instance_type": None, "instance_pools": SIX}})
    assert "6 instance pools" in six["environments.shared.shared_endpoint.instance_pools"]
