"""Configuration: the shipped environments parse, and every class of mistake fails with its key named."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk.region_info import RegionInfo
from cdk_support import CDK_CONTEXT, load, problems

from stacks.config import ConfigError, S3Model
from stacks.config.deployment import load_deployment
from stacks.config.instances import InstanceTypeError, describe_instance, realtime_instance_types
from stacks.config.rules import CUDA13_AMI_VERSIONS
from stacks.endpoints.timeouts import MAX_SECONDS, STARTUP_FLOOR_SECONDS, derive_timeouts
from stacks.image.dlc import DlcRegistry

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def test_shipped_environments_parse_with_the_documented_defaults() -> None:
    dev, prod = load("dev"), load("prod")
    assert (dev.settings.accelerator, dev.settings.chat.instance_type, dev.settings.chat.autoscaling) == \
        ("cpu", "ml.m5.large", None)
    assert dev.settings.inference_ami_version is None
    assert prod.settings.accelerator == "gpu"
    assert prod.settings.inference_ami_version in CUDA13_AMI_VERSIONS
    for kind in ("chat", "decision"):
        scaling = prod.settings.endpoint(kind).autoscaling
        assert scaling is not None and (scaling.min_instances, scaling.max_instances) == (1, 4)
    assert dev.endpoint_name("chat") == "semif-dev-chat"
    assert prod.endpoint_name("decision") == "semif-prod-decision"
    assert dev.stack_name == "semif-dev"


def test_one_map_configures_both_endpoints_and_gpu_offloads_every_layer() -> None:
    dev, prod = load("dev"), load("prod")
    assert dev.settings.llama_env_for("chat") == dev.settings.llama_env_for("decision") == \
        {"SM_LLAMA_CPP_CTX_SIZE": "4096"}
    assert prod.settings.llama_env_for("chat")["SM_LLAMA_CPP_N_GPU_LAYERS"] == "999"
    overridden = load("dev", {"chat": {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": "2048"}}})
    assert overridden.settings.llama_env_for("chat")["SM_LLAMA_CPP_CTX_SIZE"] == "2048"
    assert overridden.settings.llama_env_for("decision")["SM_LLAMA_CPP_CTX_SIZE"] == "4096"


@pytest.mark.parametrize(("env_name", "changes", "key", "fragment"), [
    ("dev", {"chat": {"instance_type": "ml.g5.xlarge"}},
     "environments.dev.chat.instance_type", "is a GPU instance but accelerator is 'cpu'"),
    ("prod", {"decision": {"instance_type": "ml.c7i.xlarge"}},
     "environments.prod.decision.instance_type", "is a CPU instance but accelerator is 'gpu'"),
    ("prod", {"inference_ami_version": None},
     "environments.prod.inference_ami_version", "required for accelerator gpu"),
    ("prod", {"inference_ami_version": "al2-ami-sagemaker-inference-gpu-2"},
     "environments.prod.inference_ami_version", "driver too old for the DLC's CUDA 13 image"),
    ("prod", {"inference_ami_version": "al2-ami-sagemaker-inference-gpu-9"},
     "environments.prod.inference_ami_version", "is not an InferenceAmiVersion SageMaker knows"),
    ("dev", {"inference_ami_version": "al2-ami-sagemaker-inference-gpu-3-1"},
     "environments.dev.inference_ami_version", "only GPU endpoints"),
    ("dev", {"chat": {"instance_type": "ml.x9.large"}},
     "environments.dev.chat.instance_type", "not an instance type SageMaker real-time endpoints offer"),
    ("dev", {"decision": {"instance_type": "ml.c6g.large"}},
     "environments.dev.decision.instance_type", "Graviton2 (Neoverse-N1)"),
    ("dev", {"chat": {"instance_type": "ml.inf2.xlarge"}},
     "environments.dev.chat.instance_type", "Inferentia/Trainium"),
    ("prod", {"chat": {"instance_type": "ml.p3.2xlarge"}},
     "environments.prod.chat.instance_type", "CUDA 13"),
    ("dev", {"chat": {"instance_type": "ml.t2.medium", "autoscaling": {
        "min_instances": 1, "max_instances": 2, "target_invocations_per_instance": 10}}},
     "environments.dev.chat.autoscaling", "burstable (ml.t*)"),
    ("prod", {"chat": {"autoscaling": {"min_instances": 3, "max_instances": 2}}},
     "environments.prod.chat.autoscaling", "min_instances (3) is greater than max_instances (2)"),
    ("prod", {"decision": {"instance_count": 6}},
     "environments.prod.decision.instance_count", "outside autoscaling bounds 1..4"),
    ("dev", {"llama_env": {"SM_LLAMA_CPP_CTX_SZIE": "4096"}},
     "environments.dev.llama_env.SM_LLAMA_CPP_CTX_SZIE", "did you mean SM_LLAMA_CPP_CTX_SIZE?"),
    ("dev", {"decision": {"llama_env": {"SM_LLAMA_CPP_PORT": "9000"}}},
     "environments.dev.decision.llama_env.SM_LLAMA_CPP_PORT", "set by the stack"),
    ("dev", {"chat": {"llama_env": {"SM_LLAMA_CPP_HOST": "0.0.0.0"}}},
     "environments.dev.chat.llama_env.SM_LLAMA_CPP_HOST", "set by the DLC's entry point"),
    ("dev", {"llama_env": {"SM_LLAMA_CPP_CONT_BATCHING": "yes"}},
     "environments.dev.llama_env.SM_LLAMA_CPP_CONT_BATCHING", "is a switch"),
    ("dev", {"llama_env": {"SM_LLAMA_CPP_API_KEY": "hunter2"}},
     "environments.dev.llama_env.SM_LLAMA_CPP_API_KEY", "looks like a secret"),
    ("dev", {"llama_env": {"SM_LLAMA_CPP_HF_REPO": "Qwen/Qwen2.5-0.5B-Instruct-GGUF"}},
     "environments.dev.llama_env.SM_LLAMA_CPP_HF_REPO", "start-up downloads are refused"),
    ("dev", {"decision": {"env": {"SEMIF_API_TOKEN": "x"}}},
     "environments.dev.decision.env.SEMIF_API_TOKEN", "looks like a secret"),
    ("dev", {"decision": {"env": {"QUEUE_SIZE": "8"}}},
     "environments.dev.decision.env.QUEUE_SIZE", "start with SEMIF_"),
    ("dev", {"decision": {"env": {"SEMIF_QUEUE_SIZE": "lots"}}},
     "environments.dev.decision.env.SEMIF_QUEUE_SIZE", "expected an integer"),
    ("dev", {"decision": {"env": {"SEMIF_WORKERS": "40"}}},
     "environments.dev.decision.env.SEMIF_WORKERS", "at most 16"),
    ("dev", {"chat": {"env": {"SEMIF_QUEUE_SIZE": "8"}}},
     "environments.dev.chat.env", "reads only SM_LLAMA_CPP_*"),
    ("dev", {"chat": {"instance_count": 0}},
     "environments.dev.chat.instance_count", "greater than or equal to 1"),
    ("dev", {"chat": {"instance_typo": "ml.m5.large"}},
     "environments.dev.chat.instance_typo", "Extra inputs are not permitted"),
    ("dev", {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": 4096}},
     "environments.dev.llama_env.SM_LLAMA_CPP_CTX_SIZE", "valid string"),
    ("dev", {"region": "xx-north-1"},
     "environments.dev.region", "no Deep Learning Containers registry"),
    ("dev", {"log_retention_days": 10},
     "environments.dev.log_retention_days", "not a CloudWatch Logs retention"),
    ("dev", {"model": {"source": "s3", "uri": "s3://models-bucket/model.tar.gz", "model_file": "m.gguf"}},
     "environments.dev.model", "must be pinned"),
    ("dev", {"model": {"source": "s3", "uri": "s3://models-bucket/latest/model.tar.gz", "sha256": SHA,
                       "model_file": "m.gguf"}},
     "environments.dev.model", "needs a content-addressed key"),
    ("dev", {"model": {"source": "s3", "uri": "s3://models-bucket/m.tar.gz", "version_id": "null",
                       "model_file": "m.gguf"}},
     "environments.dev.model", "is not an S3 version id"),
    ("dev", {"model": {"source": "s3", "uri": f"s3://models-bucket/{SHA}/model.tar.gz", "sha256": SHA,
                       "model_file": "mmproj-f16.gguf"}},
     "environments.dev.model.model_file", "not a projector"),
    ("dev", {"model": {"source": "ftp", "path": "x"}},
     "environments.dev.model", "does not match any of the expected tags"),
    ("dev", {"model": {"source": "embedded", "convert": "Q9_9"}},
     "environments.dev.model.convert", "not a type this toolkit converts to; one of Q8_0"),
    ("dev", {"model": {"source": "tarball", "path": "m.tar.gz", "convert": "Q8_0"}},
     "environments.dev.model.convert", "Extra inputs are not permitted"),
])
def test_mistakes_fail_with_the_key_named(env_name: str, changes: dict[str, Any], key: str,
                                          fragment: str) -> None:
    found = problems(env_name, changes)
    assert key in found, f"expected a problem at {key}, got {found}"
    assert fragment in found[key]


def test_every_problem_is_reported_at_once() -> None:
    found = problems("dev", {"chat": {"instance_type": "ml.g5.xlarge"},
                             "decision": {"llama_env": {"SM_LLAMA_CPP_NOT_A_FLAG": "1"}}})
    assert set(found) == {"environments.dev.chat.instance_type",
                          "environments.dev.decision.llama_env.SM_LLAMA_CPP_NOT_A_FLAG"}


def test_environment_selection_is_explicit() -> None:
    semif = CDK_CONTEXT["semif"]
    shipped = r"\['api', 'decisions', 'dev', 'graviton', 'pooled', 'prod', 'scaletozero', 'serverless', 'shared'\]"
    with pytest.raises(ConfigError, match=r"choose an environment with -c env=NAME, one of " + shipped):
        load_deployment(semif, None)
    with pytest.raises(ConfigError, match="unknown environment 'staging'"):
        load_deployment(semif, "staging")
    with pytest.raises(ConfigError, match=r"missing from cdk\.json context"):
        load_deployment(None, "dev")


def test_a_broken_environment_does_not_block_the_others() -> None:
    context = {**CDK_CONTEXT["semif"], "environments": {**CDK_CONTEXT["semif"]["environments"],
                                                        "staging": {"region": "us-east-1"}}}
    assert load_deployment(context, "dev").environment_name == "dev"
    with pytest.raises(ConfigError) as caught:
        load_deployment(context, "staging")
    assert "environments.staging.accelerator" in caught.value.keys


def test_pinned_s3_sources_are_accepted() -> None:
    by_hash = S3Model.model_validate({"source": "s3", "uri": f"s3://models-bucket/m/{SHA}/model.tar.gz",
                                      "sha256": SHA, "model_file": "m.gguf"})
    assert (by_hash.bucket, by_hash.key) == ("models-bucket", f"m/{SHA}/model.tar.gz")
    by_version = S3Model.model_validate({"source": "s3", "uri": "s3://models-bucket/model.tar.gz",
                                         "version_id": "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY", "model_file": "m.gguf"})
    assert by_version.version_id == "3HL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY"


def test_instance_facts_come_from_the_pinned_sagemaker_model() -> None:
    known = realtime_instance_types()
    assert {"ml.m5.large", "ml.c7i.large", "ml.g5.xlarge", "ml.g6.xlarge"} <= known
    assert describe_instance("ml.g6e.2xlarge").accelerator == "gpu"
    assert describe_instance("ml.g5.xlarge").local_storage
    assert not describe_instance("ml.m5.large").local_storage
    assert describe_instance("ml.t2.medium").burstable
    # Every family this app classifies must be a family SageMaker still offers (no stale entries).
    from stacks.config.instances import CPU_FAMILIES, GPU_FAMILIES
    offered = {t.split(".")[1] for t in known}
    assert offered >= CPU_FAMILIES | GPU_FAMILIES
    with pytest.raises(InstanceTypeError):
        describe_instance("m5.large")


def test_dlc_registry_account_comes_from_cdk_region_facts() -> None:
    dev = load("dev").settings
    registry = DlcRegistry.for_region("ap-east-1", dev.dlc_image)
    assert registry.account == RegionInfo.get("ap-east-1").dlc_repository_account != "763104351884"
    assert registry.image_uri("cpu") == (
        f"{registry.account}.dkr.ecr.ap-east-1.amazonaws.com/llama-cpp:server-sagemaker-cpu-v1")
    china = DlcRegistry.for_region("cn-north-1", dev.dlc_image)
    assert china.image_uri("gpu").endswith(".amazonaws.com.cn/llama-cpp:server-sagemaker-cuda-v1")
    assert china.repository_arn().startswith("arn:aws-cn:ecr:cn-north-1:")
    assert china.repository_arn("arm64").endswith(":repository/llama-cpp-arm64")
    assert registry.image_uri("cpu", "arm64").endswith("/llama-cpp-arm64:server-sagemaker-cpu-v1")


def test_timeouts_grow_with_model_size_within_sagemaker_bounds() -> None:
    small = derive_timeouts(100 * 2**20, 95 * 2**20)
    large = derive_timeouts(40 * 2**30, 40 * 2**30)
    assert small.container_startup_health_check_s >= STARTUP_FLOOR_SECONDS
    assert small.container_startup_health_check_s < large.container_startup_health_check_s <= MAX_SECONDS
    assert small.model_data_download_s < large.model_data_download_s < MAX_SECONDS
    huge = derive_timeouts(200 * 2**30, 200 * 2**30)
    assert (huge.model_data_download_s, huge.container_startup_health_check_s) == (MAX_SECONDS, MAX_SECONDS)
    assert all(t % 60 == 0 for t in (small.model_data_download_s, small.container_startup_health_check_s))
    unknown = derive_timeouts(None)
    assert (unknown.model_data_download_s, unknown.container_startup_health_check_s) == (MAX_SECONDS, MAX_SECONDS)
