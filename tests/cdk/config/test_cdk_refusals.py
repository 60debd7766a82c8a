"""What deploys badly is refused at synth, each with its key named: values llama-server or the DLC's entry point
would choke on, unsafe flags, adapter settings the adapter would ignore or that break the SageMaker contract,
scaling and alarm values outside AWS's limits, and a model that cannot fit its instance or context."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from cdk_support import CDK_CONTEXT, load, problems, synth

from stacks.config import ConfigError
from stacks.config.deployment import load_deployment
from stacks.config.instances import GIB, describe_instance, instance_capacity, realtime_instance_types
from stacks.config.model_fit import check_model_fit

SHA = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
KEY_ARN = "arn:aws:kms:{region}:123456789012:key/0b1c2d3e-0000-4000-8000-0123456789ab"
S3_MODEL = {"source": "s3", "uri": f"s3://models-bucket/{SHA}/model.tar.gz", "sha256": SHA, "model_file": "m.gguf"}
PREFIX = "environments.dev."


@pytest.mark.parametrize(("changes", "key", "fragment"), [
    # Control characters: the DLC's entry point turns the environment into llama-server's arguments.
    ({"llama_env": {"SM_LLAMA_CPP_ALIAS": "chat\n--tools all"}}, "llama_env.SM_LLAMA_CPP_ALIAS", "control character"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_ALIAS": "a\x00b"}}}, "chat.llama_env.SM_LLAMA_CPP_ALIAS",
     "control character"),
    ({"decision": {"llama_env": {"SM_LLAMA_CPP_ALIAS": "\x1b[31m"}}}, "decision.llama_env.SM_LLAMA_CPP_ALIAS",
     "control character"),
    ({"decision": {"env": {"SEMIF_CHAT_TEMPLATE": "chatml\nllama3"}}}, "decision.env.SEMIF_CHAT_TEMPLATE",
     "control character"),
    # Flags documented as unsafe, or that open files, sockets or remote backends.
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_TOOLS": "all"}}}, "chat.llama_env.SM_LLAMA_CPP_TOOLS",
     "--tools is refused: an agent feature"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_AGENT": "true"}}}, "chat.llama_env.SM_LLAMA_CPP_AGENT",
     "--agent is refused"),
    ({"llama_env": {"SM_LLAMA_CPP_MCP_SERVERS_JSON": "{}"}}, "llama_env.SM_LLAMA_CPP_MCP_SERVERS_JSON",
     "--mcp-servers-json is refused"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_TOOLS_RUNTIME": "ssh:host"}}}, "chat.llama_env.SM_LLAMA_CPP_TOOLS_RUNTIME",
     "--tools-runtime is refused"),
    ({"llama_env": {"SM_LLAMA_CPP_RPC": "10.0.0.1:50052"}}, "llama_env.SM_LLAMA_CPP_RPC",
     "--rpc is refused: it opens a remote backend"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_LOG_PROMPTS_DIR": "/tmp/p"}}},
     "chat.llama_env.SM_LLAMA_CPP_LOG_PROMPTS_DIR", "write prompts"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_API_PREFIX": "/v2"}}}, "chat.llama_env.SM_LLAMA_CPP_API_PREFIX",
     "breaks the endpoint behind the DLC's nginx"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_SSL_KEY_FILE": "/k.pem"}}}, "chat.llama_env.SM_LLAMA_CPP_SSL_KEY_FILE",
     "TLS on llama-server"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_SSL_CERT_FILE": "/c.pem"}}}, "chat.llama_env.SM_LLAMA_CPP_SSL_CERT_FILE",
     "TLS on llama-server"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_SLOT_SAVE_PATH": "/tmp"}}}, "chat.llama_env.SM_LLAMA_CPP_SLOT_SAVE_PATH",
     "write prompts, KV caches"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_MEDIA_PATH": "/"}}}, "chat.llama_env.SM_LLAMA_CPP_MEDIA_PATH",
     "read or serve files"),
    # Values of chat-only keys, type-checked against the pinned --help (both endpoints).
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": "lots"}}}, "chat.llama_env.SM_LLAMA_CPP_CTX_SIZE",
     "takes an integer, not 'lots'"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_THREADS": "-5"}}}, "chat.llama_env.SM_LLAMA_CPP_THREADS",
     "takes an integer from -1 to 2147483647, not -5"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_N_GPU_LAYERS": "lots"}}}, "chat.llama_env.SM_LLAMA_CPP_N_GPU_LAYERS",
     "takes a number or 'auto', 'all'"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": "99999999999"}}}, "chat.llama_env.SM_LLAMA_CPP_CTX_SIZE",
     "not 99999999999"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_TEMP": "hot"}}}, "chat.llama_env.SM_LLAMA_CPP_TEMP", "takes a number"),
    ({"llama_env": {"SM_LLAMA_CPP_CACHE_TYPE_K": "q3"}}, "llama_env.SM_LLAMA_CPP_CACHE_TYPE_K", "takes f32, f16"),
    # Chat templates llama-server would render literally (Jinja on, its default) or refuse at start-up (Jinja off).
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_CHAT_TEMPLATE": "gemma"}}}, "chat.llama_env.SM_LLAMA_CPP_CHAT_TEMPLATE",
     "llama-server would send the literal text 'gemma' as the prompt of every chat; for a llama.cpp built-in "
     "template name, also set SM_LLAMA_CPP_NO_JINJA=true"),
    ({"llama_env": {"SM_LLAMA_CPP_CHAT_TEMPLATE": "llama3", "SM_LLAMA_CPP_JINJA": "true"}},
     "llama_env.SM_LLAMA_CPP_CHAT_TEMPLATE", "the literal text 'llama3'"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_CHAT_TEMPLATE": "gema", "SM_LLAMA_CPP_NO_JINJA": "true"}}},
     "chat.llama_env.SM_LLAMA_CPP_CHAT_TEMPLATE",
     "'gema' is not a template llama.cpp knows without Jinja (SM_LLAMA_CPP_NO_JINJA=true): llama-server would exit"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_CHAT_TEMPLATE": "{{ bad }}", "SM_LLAMA_CPP_NO_JINJA": "true"}}},
     "chat.llama_env.SM_LLAMA_CPP_CHAT_TEMPLATE", "one of its built-in names (bailing, "),
    # Adapter settings: typos, a bind address SageMaker cannot reach, a drain SIGKILL would cut.
    ({"decision": {"env": {"SEMIF_QUEUE_SIZ": "8"}}}, "decision.env.SEMIF_QUEUE_SIZ",
     "not an adapter setting (did you mean SEMIF_QUEUE_SIZE?"),
    ({"decision": {"env": {"SEMIF_HOST": "127.0.0.1"}}}, "decision.env.SEMIF_HOST", "bind all interfaces"),
    ({"decision": {"env": {"SEMIF_DRAIN_SECONDS": "28"}}}, "decision.env.SEMIF_DRAIN_SECONDS",
     "28 s of drain plus 5 s for an aborted decode to return do not fit in the 30 s"),
    ({"decision": {"env": {"SEMIF_BODY_TIMEOUT_SECONDS": "0"}}}, "decision.env.SEMIF_BODY_TIMEOUT_SECONDS",
     "must be at least 1, got 0"),
    # Scaling and alarms within AWS's limits, and a message instead of a jsii traceback.
    ({"chat": {"autoscaling": {"min_instances": 1, "max_instances": 1_000_000,
                               "target_invocations_per_instance": 10}}},
     "chat.autoscaling.max_instances", "less than or equal to 100"),
    ({"chat": {"autoscaling": {"min_instances": 1, "max_instances": 2, "target_invocations_per_instance": 1e-9}}},
     "chat.autoscaling.target_invocations_per_instance", "greater than or equal to 1"),
    ({"chat": {"alarms": {"period_s": 1800, "evaluation_periods": 60}}}, "chat.alarms",
     "1800 x 60 = 108000 s; CloudWatch evaluates at most one day"),
    ({"decision": {"alarms": {"latency_p90_ms": 1e308}}}, "decision.alarms.latency_p90_ms",
     "less than or equal to 3600000"),
    ({"decision": {"alarms": {"errors_5xx": 10**30}}}, "decision.alarms.errors_5xx", "less than or equal to"),
    ({"vpc": {"subnet_ids": ["subnet-0123456789abcdef0\n"], "security_group_ids": ["sg-0123456789abcdef0"]}},
     "vpc.subnet_ids", "is not a subnet id"),
    ({"vpc": {"subnet_ids": ["subnet-0123456789abcdef0"], "security_group_ids": ["sg-0123456789abcdef0\n"]}},
     "vpc.security_group_ids", "is not a security group id"),
    # The model's own settings.
    ({"model": {**S3_MODEL, "kms_key_arn": KEY_ARN.format(region="eu-west-1")}}, "model.kms_key_arn",
     "the key is in eu-west-1, the stack in us-east-1"),
    ({"model": {**S3_MODEL, "sha256": SHA + "\n"}}, "model", "is not 64 lower-case hex digits"),
    ({"model": {**S3_MODEL, "bucket_owner": "12345"}}, "model.bucket_owner", "should match pattern"),
])
def test_what_deploys_badly_is_refused_with_its_key(changes: dict[str, Any], key: str, fragment: str) -> None:
    found = problems("dev", changes)
    assert PREFIX + key in found, f"expected a problem at {key}, got {found}"
    assert fragment in found[PREFIX + key]


@pytest.mark.parametrize("llama_env", [
    {"SM_LLAMA_CPP_CHAT_TEMPLATE": "chatml"},  # the one name llama-server reads as a name with Jinja on
    {"SM_LLAMA_CPP_CHAT_TEMPLATE": "gemma", "SM_LLAMA_CPP_NO_JINJA": "true"},
    {"SM_LLAMA_CPP_CHAT_TEMPLATE": "{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}"},
    {"SM_LLAMA_CPP_CHAT_TEMPLATE": "false"},  # dropped by the DLC's entry point
])
def test_chat_templates_llama_server_applies_are_accepted(llama_env: dict[str, str]) -> None:
    assert load("dev", {"chat": {"llama_env": llama_env}}).settings.chat.llama_env == llama_env


def test_an_app_name_ending_in_a_newline_is_refused() -> None:
    context = copy.deepcopy(CDK_CONTEXT["semif"])
    context["app_name"] = "semif\n"
    with pytest.raises(ConfigError) as caught:
        load_deployment(context, "dev")
    assert caught.value.keys == ["app_name"]


def test_the_drain_that_fits_and_all_interfaces_are_accepted() -> None:
    settings = load("dev", {"decision": {"env": {"SEMIF_DRAIN_SECONDS": "25", "SEMIF_HOST": "0.0.0.0"}}}).settings
    assert settings.decision.adapter_env["SEMIF_DRAIN_SECONDS"] == "25"


def test_a_version_pin_may_also_carry_the_digest_every_instance_verifies() -> None:
    model = load("dev", {"model": {"source": "s3", "uri": "s3://models-bucket/llm/model.tar.gz", "version_id": "v2",
                                   "sha256": SHA, "model_file": "m.gguf"}}).settings.model
    assert model.sha256 == SHA  # type: ignore[union-attr]


def test_a_declared_model_larger_than_the_instance_is_refused_at_synth(tmp_path: Path) -> None:
    model = {**S3_MODEL, "model_bytes": 20 * GIB, "context_length": 2048}
    with pytest.raises(ConfigError) as caught:
        synth("dev", tmp_path, {"model": model})
    found = dict(caught.value.problems)
    for kind in ("chat", "decision"):
        message = found[f"{PREFIX}{kind}.instance_type"]
        assert message.startswith("ml.m5.large has 8 GiB of memory; the model is 20.0 GiB")
    # dev's shared context (4096) is above the declared trained context (2048).
    assert "more than the model was trained for (2048" in found[f"{PREFIX}llama_env.SM_LLAMA_CPP_CTX_SIZE"]


def test_a_context_beyond_the_embedded_models_is_refused_from_its_measured_header(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        synth("dev", tmp_path, {"chat": {"llama_env": {"SM_LLAMA_CPP_CTX_SIZE": "16384"}}})
    assert dict(caught.value.problems) == {
        f"{PREFIX}chat.llama_env.SM_LLAMA_CPP_CTX_SIZE":
            "16384 tokens is more than the model was trained for (8192, from its GGUF header); quality collapses "
            "past it unless you set up RoPE scaling (SM_LLAMA_CPP_ROPE_SCALING, ..._ROPE_SCALE)"}


def test_gpu_models_must_fit_the_gpus_and_rope_scaling_allows_a_longer_context() -> None:
    prod = load("prod").settings
    assert check_model_fit(prod, model_bytes=20 * GIB, context_length=8192) == []  # 24 GiB A10G
    found = dict(check_model_fit(prod, model_bytes=30 * GIB, context_length=8192))
    assert found["chat.instance_type"].startswith("ml.g5.xlarge has 1 x 24 GiB of GPU memory")
    extended = {"SM_LLAMA_CPP_CTX_SIZE": "16384", "SM_LLAMA_CPP_ROPE_SCALING": "yarn"}
    scaled = load("dev", {"llama_env": extended}).settings
    assert check_model_fit(scaled, model_bytes=None, context_length=8192) == []


def test_the_capacity_table_covers_the_shipped_types_and_only_types_that_exist() -> None:
    for name in ("ml.m5.large", "ml.g5.xlarge", "ml.c7i.xlarge", "ml.g6.xlarge", "ml.t2.medium"):
        memory = instance_capacity(name)
        assert memory is not None and memory.memory_gib > 0
        assert (memory.gpus > 0) == (describe_instance(name).accelerator == "gpu")
    assert instance_capacity("ml.m5.large").memory_gib == 8  # type: ignore[union-attr]
    from stacks.config.instances import _memory_table
    assert set(_memory_table()) <= realtime_instance_types()
