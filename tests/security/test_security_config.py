"""No secret reaches a template through the configuration: secret-looking keys and credential values are refused
at synth, with the key named, in every map that becomes a container or build environment variable."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_support import load, problems

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example access key id
PEM = "-----BEGIN RSA PRIVATE KEY-----"
HF_TOKEN = "hf_" + "x" * 34


@pytest.mark.parametrize(("changes", "key"), [
    ({"llama_env": {"SM_LLAMA_CPP_API_KEY_FILE": "/opt/ml/model/key"}}, "llama_env.SM_LLAMA_CPP_API_KEY_FILE"),
    ({"decision": {"llama_env": {"SM_LLAMA_CPP_HF_TOKEN": "x"}}}, "decision.llama_env.SM_LLAMA_CPP_HF_TOKEN"),
    ({"decision": {"env": {"SEMIF_DB_PASSWORD": "x"}}}, "decision.env.SEMIF_DB_PASSWORD"),
    ({"llama_env": {"SM_LLAMA_CPP_ALIAS": AWS_KEY}}, "llama_env.SM_LLAMA_CPP_ALIAS"),
    ({"chat": {"llama_env": {"SM_LLAMA_CPP_ALIAS": HF_TOKEN}}}, "chat.llama_env.SM_LLAMA_CPP_ALIAS"),
    ({"decision": {"env": {"SEMIF_QUEUE_SIZE": f"{PEM}\nMIIE"}}}, "decision.env.SEMIF_QUEUE_SIZE"),
])
def test_secret_keys_and_credential_values_in_container_environments_are_refused(changes: dict[str, Any],
                                                                                 key: str) -> None:
    found = problems("dev", changes)
    assert "looks like a secret" in found[f"environments.dev.{key}"]


@pytest.mark.parametrize("build_args", [
    {"HF_TOKEN": "x"},
    {"npm_token": "x"},
    {"LLAMA_CMAKE_ARGS": f"-DX={AWS_KEY}"},
])
def test_secret_build_args_are_refused_they_would_be_a_plain_text_codebuild_variable(
        build_args: dict[str, str]) -> None:
    found = problems("dev", {"image_build": {"build_args": build_args}})
    message = found["environments.dev.image_build.build_args"]
    assert message.startswith(f"{next(iter(build_args))}: looks like a secret") and "CodeBuild" in message


def test_ordinary_values_are_not_mistaken_for_secrets() -> None:
    deployment = load("dev", {"llama_env": {"SM_LLAMA_CPP_ALIAS": "akia-lowercase-model-name"},
                              "image_build": {"build_args": {"LLAMA_CMAKE_ARGS": "-DGGML_NATIVE=OFF"}}})
    assert deployment.env.llama_env["SM_LLAMA_CPP_ALIAS"] == "akia-lowercase-model-name"
