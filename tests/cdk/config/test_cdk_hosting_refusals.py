"""What each hosting mode cannot do is refused at synth with the key named and the reason (issues 14 and 15)."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_support import load, problems

from stacks.config.hosting.shared import _Copy, _placeable
from stacks.config.hosting_rules import TRANSFORM_MAX_PAYLOAD_BYTES
from stacks.config.instances import GIB, instance_capacity
from stacks.config.model_fit import check_model_fit

COMPONENT = {"cpu_cores": 1, "memory_mb": 3072}
SERVERLESS = {"hosting": "serverless", "serverless": {"memory_mb": 2048, "max_concurrency": 2},
              "network_isolation": False, "instance_type": None, "instance_count": None}


def refused(env_name: str, changes: dict[str, Any], key: str) -> str:
    found = problems(env_name, changes)
    full = f"environments.{env_name}.{key}"
    assert full in found, f"expected a problem at {key}, got {found}"
    return found[full]


# --- shared -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "key", "fragment"), [
    ({"shared_endpoint": None}, "shared_endpoint", "required for shared hosting"),
    ({"chat": {"component": None}}, "chat.component", "required for shared hosting: cpu_cores and memory_mb"),
    ({"chat": {"instance_type": "ml.m5.large"}}, "chat.instance_type", "belong to shared_endpoint.instance_type"),
    ({"decision": {"instance_count": 2}}, "decision.instance_count", "shared_endpoint.instance_count"),
    ({"chat": {"autoscaling": {"min_instances": 1, "max_instances": 2, "target_invocations_per_instance": 10}}},
     "chat.autoscaling", "does not scale its variant: each component scales its copies"),
    ({"chat": {"data_capture": {"sampling_percentage": 10}}}, "chat.data_capture",
     "set on the endpoint config, which in shared hosting serves both models"),
    ({"decision": {"network_isolation": False}}, "decision.network_isolation",
     "sets network isolation for every container on it"),
    ({"hosting": "dedicated", "chat": {"hosting": "shared"}, "decision": {"instance_type": "ml.m5.large"}},
     "chat.hosting", "puts both models on one endpoint; set it for both"),
    ({"shared_endpoint": {"instance_type": "ml.g5.xlarge"}}, "shared_endpoint.instance_type",
     "is a GPU instance but accelerator is 'cpu'"),
    ({"chat": {"component": {"cpu_cores": 4}}}, "chat.component.cpu_cores",
     "one copy needs 4 vCPUs, but ml.m5.large has 2; it can never be placed"),
    ({"decision": {"component": {"memory_mb": 9000}}}, "decision.component.memory_mb",
     "one copy needs 9000 MB of memory, but ml.m5.large has 8192"),
    ({"chat": {"component": {"accelerators": 1}}}, "chat.component.accelerators", "cannot reserve GPUs there"),
    ({"chat": {"component": {"max_memory_mb": 9000}}}, "chat.component.max_memory_mb",
     "9000 MB is more than ml.m5.large's 8192 MB"),
    ({"chat": {"component": {"copy_count": 2}}}, "shared_endpoint.instance_count",
     "1 x ml.m5.large (2 vCPU, 8192 MB each) cannot hold the initial copies (2 x chat: 1 vCPU, 3072 MB; "
     "1 x decision: 1 vCPU, 3072 MB)"),
    ({"shared_endpoint": {"managed_scaling": None},
      "decision": {"component": {"autoscaling": {"min_copies": 1, "max_copies": 3,
                                                 "target_invocations_per_copy": 50}}}},
     "shared_endpoint.managed_scaling", "at their autoscaling maximum the copies"),
    ({"shared_endpoint": {"managed_scaling": {"min_instances": 1, "max_instances": 2}},
      "decision": {"component": {"autoscaling": {"min_copies": 1, "max_copies": 5,
                                                 "target_invocations_per_copy": 50}}}},
     "shared_endpoint.managed_scaling.max_instances", "do not fit 2 x ml.m5.large"),
    ({"chat": {"alarms": {"auto_rollback": True}}}, "chat.alarms.auto_rollback",
     "with copy_count 1 nothing can roll"),
    ({"chat": {"component": {"copy_count": 5, "autoscaling": {"min_copies": 1, "max_copies": 3,
                                                             "target_invocations_per_copy": 5}}}},
     "chat.component", "copy_count 5 is outside autoscaling bounds 1..3"),
    ({"decision": {"component": {"max_memory_mb": 1024}}}, "decision.component",
     "max_memory_mb (1024) is below memory_mb (3072)"),
    ({"shared_endpoint": {"instance_count": 3, "managed_scaling": {"min_instances": 1, "max_instances": 2}}},
     "shared_endpoint", "instance_count 3 is outside managed_scaling bounds 1..2"),
])
def test_what_shared_hosting_cannot_do_is_refused(changes: dict[str, Any], key: str, fragment: str) -> None:
    assert fragment in refused("shared", changes, key)


def test_a_component_where_nothing_is_shared_and_a_gpu_component_without_gpus_are_refused() -> None:
    assert "only shared hosting has inference components" in refused(
        "dev", {"chat": {"component": COMPONENT}}, "chat.component")
    assert "only shared hosting has a shared endpoint" in refused(
        "dev", {"shared_endpoint": {"instance_type": "ml.m5.large"}}, "shared_endpoint")
    prod_shared = {"hosting": "shared", "shared_endpoint": {"instance_type": "ml.g5.12xlarge"},
                   "chat": {"instance_type": None, "instance_count": None, "autoscaling": None,
                            "alarms": {"auto_rollback": False}, "component": COMPONENT},
                   "decision": {"instance_type": None, "instance_count": None, "autoscaling": None,
                                "alarms": {"auto_rollback": False}, "component": {**COMPONENT, "accelerators": 1}}}
    assert "each copy needs at least one GPU" in refused("prod", prod_shared, "chat.component.accelerators")
    fine = load("prod", {**prod_shared, "chat": {**prod_shared["chat"], "component": {**COMPONENT, "accelerators": 2}}})
    assert fine.settings.shared and fine.endpoint_name("chat") == "semif-prod-models"


def test_a_component_too_small_for_the_model_is_refused_once_the_model_is_known() -> None:
    settings = load("shared").settings
    assert check_model_fit(settings, model_bytes=2 * GIB, context_length=None) == []
    found = dict(check_model_fit(settings, model_bytes=4 * GIB, context_length=None))
    assert found["chat.component.memory_mb"].startswith("one copy reserves 3 GiB of memory; the model is 4.0 GiB")
    assert "decision.component.memory_mb" in found


def test_placement_is_first_fit_onto_the_instances() -> None:
    large = instance_capacity("ml.m5.large")
    assert large is not None and (large.vcpus, large.memory_mb) == (2, 8192)
    half = _Copy(cores=1, memory_mb=4096, gpus=0)
    assert _placeable([half, half], large, 1) and not _placeable([half, half, half], large, 1)
    assert _placeable([half] * 4, large, 2)
    # Memory, not cores, is what runs out: 3 x 3000 MB fits two instances, not one.
    wide = _Copy(cores=0.5, memory_mb=3000, gpus=0)
    assert not _placeable([wide] * 3, large, 1) and _placeable([wide] * 3, large, 2)


# --- serverless ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("env_name", "changes", "key", "fragment"), [
    ("dev", {"decision": {**SERVERLESS, "network_isolation": None}}, "decision.network_isolation",
     "does not support network isolation; set decision.network_isolation: false"),
    ("dev", {"decision": {**SERVERLESS, "network_isolation": True}}, "decision.network_isolation",
     "does not support network isolation"),
    ("dev", {"decision": {**SERVERLESS, "instance_type": "ml.m5.large"}}, "decision.instance_type",
     "a serverless endpoint has no instance type"),
    ("dev", {"decision": {**SERVERLESS, "instance_count": 2}}, "decision.instance_count",
     "a serverless endpoint has no instances"),
    ("dev", {"decision": {**SERVERLESS, "autoscaling": {"min_instances": 1, "max_instances": 2,
                                                        "target_invocations_per_instance": 10}}},
     "decision.autoscaling", "scales itself up to serverless.max_concurrency"),
    ("dev", {"decision": {**SERVERLESS, "data_capture": {"sampling_percentage": 5}}}, "decision.data_capture",
     "does not support data capture"),
    ("dev", {"vpc": {"subnet_ids": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0"]},
             "decision": SERVERLESS}, "decision.hosting", "does not support a VPC configuration"),
    ("dev", {"decision": {**SERVERLESS, "env": {"SEMIF_MAX_BODY_BYTES": "6291456"}}},
     "decision.env.SEMIF_MAX_BODY_BYTES", "above SageMaker Serverless Inference's payload limit of 4 MB"),
    ("dev", {"decision": {**SERVERLESS, "serverless": None}}, "decision.serverless",
     "required for serverless hosting: memory_mb (1024-6144)"),
    ("dev", {"decision": {**SERVERLESS, "serverless": {"memory_mb": 1500, "max_concurrency": 1}}},
     "decision.serverless.memory_mb", "multiple of 1024"),
    ("dev", {"decision": {**SERVERLESS, "serverless": {"memory_mb": 8192, "max_concurrency": 1}}},
     "decision.serverless.memory_mb", "less than or equal to 6144"),
    ("dev", {"decision": {**SERVERLESS, "serverless": {"memory_mb": 2048, "max_concurrency": 201}}},
     "decision.serverless.max_concurrency", "less than or equal to 200"),
    ("dev", {"decision": {**SERVERLESS, "serverless": {"memory_mb": 2048, "max_concurrency": 2,
                                                       "provisioned_concurrency": 3}}},
     "decision.serverless", "provisioned_concurrency (3) is above max_concurrency (2)"),
    ("dev", {"chat": {"hosting": "serverless"}}, "chat.hosting", "offered for the decision endpoint only"),
    ("dev", {"hosting": "serverless"}, "hosting", "serverless hosts the decision endpoint only"),
    ("dev", {"decision": {"serverless": {"memory_mb": 2048, "max_concurrency": 2}}}, "decision.serverless",
     "only serverless hosting takes a ServerlessConfig"),
    ("prod", {"decision": {**SERVERLESS, "autoscaling": None, "alarms": {"auto_rollback": False}}},
     "decision.hosting", "runs on CPU only, and accelerator is 'gpu'"),
])
def test_what_serverless_inference_cannot_do_is_refused_with_its_reason(env_name: str, changes: dict[str, Any],
                                                                       key: str, fragment: str) -> None:
    assert fragment in refused(env_name, changes, key)


def test_the_shipped_serverless_environment_turns_isolation_off_explicitly_and_gets_the_4_mb_limit() -> None:
    settings = load("serverless").settings
    assert settings.hosting_of("decision") == "serverless" and settings.decision.network_isolation is False
    assert settings.network_isolation_for("decision") is False and settings.network_isolation_for("chat") is True


def test_a_model_that_does_not_fit_the_serverless_memory_with_the_adapters_overhead_is_refused() -> None:
    settings = load("serverless").settings  # 2048 MB
    assert check_model_fit(settings, model_bytes=1024 * 2**20, context_length=None) == []
    found = dict(check_model_fit(settings, model_bytes=1600 * 2**20, context_length=None))
    assert found["decision.serverless.memory_mb"].startswith(
        "2048 MB does not hold the model (1,600 MB) and the adapter's own 512 MB")


# --- Batch Transform (issue 14) -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("env_name", "changes", "key", "fragment"), [
    ("dev", {"decision": {"batch_transform": {"instance_type": "ml.t2.medium"}}},
     "decision.batch_transform.instance_type", "not an instance type SageMaker Batch Transform jobs offer"),
    ("dev", {"decision": {"batch_transform": {"instance_type": "ml.g5.xlarge"}}},
     "decision.batch_transform.instance_type", "is a GPU instance but accelerator is 'cpu'"),
    ("prod", {"decision": {"batch_transform": {"instance_type": "ml.g5.xlarge"}}},
     "decision.batch_transform.instance_type", "the DLC's CUDA 13 image needs 580"),
    ("serverless", {"decision": {"batch_transform": {"instance_type": "ml.m5.large"}}}, "decision.batch_transform",
     "this app runs Batch Transform only on an instance-based decision model"),
    ("dev", {"decision": {"batch_transform": {"instance_type": "ml.m5.large"},
                          "env": {"SEMIF_MAX_BODY_BYTES": "65536"}}},
     "decision.env.SEMIF_MAX_BODY_BYTES", f"below the {TRANSFORM_MAX_PAYLOAD_BYTES} bytes (MaxPayloadInMB 1"),
    ("dev", {"chat": {"batch_transform": {"instance_type": "ml.m5.large"}}}, "chat.batch_transform",
     "Batch Transform runs the decision model"),
    ("dev", {"decision": {"batch_transform": {"instance_type": "ml.m5.large", "expire_days": 0}}},
     "decision.batch_transform.expire_days", "greater than or equal to 1"),
])
def test_what_a_transform_job_needs_is_checked_at_synth(env_name: str, changes: dict[str, Any], key: str,
                                                        fragment: str) -> None:
    assert fragment in refused(env_name, changes, key)


def test_a_transform_instance_too_small_for_the_model_is_refused() -> None:
    settings = load("dev", {"decision": {"batch_transform": {"instance_type": "ml.c5.xlarge"}}}).settings  # 8 GiB
    found = dict(check_model_fit(settings, model_bytes=10 * GIB, context_length=None))
    assert found["decision.batch_transform.instance_type"].startswith("ml.c5.xlarge has 8 GiB of memory")


def test_the_adapters_execution_parameters_match_the_transform_payload_the_stack_checks() -> None:
    from semif_adapter.doors.http_app import EXECUTION_PARAMETERS

    assert EXECUTION_PARAMETERS["MaxPayloadInMB"] * 2**20 == TRANSFORM_MAX_PAYLOAD_BYTES


# --- notifications and stack-owned settings -----------------------------------------------------------------------

@pytest.mark.parametrize(("changes", "key", "fragment"), [
    ({"notifications": {"emails": ["ops"]}}, "notifications.emails", "'ops' is not an email address"),
    ({"notifications": {"emails": ["a@example.com\nb@example.com"]}}, "notifications.emails", "not an email"),
    ({"notifications": {"emails": ["a@example.com", "a@example.com"]}}, "notifications.emails", "listed twice"),
    ({"notifications": {"topic_arn": "arn:aws:sqs:us-east-1:123456789012:q"}}, "notifications.topic_arn",
     "is not an SNS topic ARN"),
    ({"notifications": {"topic_arn": "arn:aws:sns:eu-west-1:123456789012:paging"}}, "notifications.topic_arn",
     "CloudWatch alarms notify SNS topics of their own region"),
    ({"decision": {"env": {"SEMIF_ENDPOINT_NAME": "mine"}}}, "decision.env.SEMIF_ENDPOINT_NAME",
     "set by the stack to the endpoint's name"),
    ({"chat": {"alarms": {"warning_rate": 0.5}}}, "chat.alarms.warning_rate", "writes no decision metrics"),
    ({"decision": {"alarms": {"warning_rate": 1.5}}}, "decision.alarms.warning_rate", "less than or equal to 1"),
])
def test_notification_and_alarm_mistakes_are_refused(changes: dict[str, Any], key: str, fragment: str) -> None:
    assert fragment in refused("dev", changes, key)
