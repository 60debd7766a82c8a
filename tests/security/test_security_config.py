"""No secret reaches a template through the configuration: secret-looking keys and credential values are refused
at synth, with the key named, in every map that becomes a container or build environment variable."""

from __future__ import annotations

from typing import Any

import pytest
from cdk_support import load, problems

from stacks.config.secrets import looks_like_secret

AWS_KEY = "AKIAIOSFODNN7EXAMPLE"  # AWS's documented example access key id
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"  # AWS's documented example secret access key
PEM = "-----BEGIN RSA PRIVATE KEY-----"
HF_TOKEN = "hf_" + "x" * 34
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
URL_PASSWORD = "https://deploy:s3cr3t-pass@models.example.com/v1"
# Each credential kind the detector must see in a value, whatever the variable is called.
CREDENTIALS = [AWS_KEY, AWS_SECRET, PEM, HF_TOKEN, GITHUB_PAT, JWT, URL_PASSWORD]


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


@pytest.mark.parametrize("credential", CREDENTIALS)
def test_every_kind_of_credential_is_found_in_llama_env_decision_env_and_build_args(credential: str) -> None:
    found = problems("dev", {"chat": {"llama_env": {"SM_LLAMA_CPP_ALIAS": credential}},
                             "decision": {"env": {"SEMIF_CHAT_TEMPLATE": f"x {credential}"}}})
    assert "looks like a secret" in found["environments.dev.chat.llama_env.SM_LLAMA_CPP_ALIAS"]
    assert "looks like a secret" in found["environments.dev.decision.env.SEMIF_CHAT_TEMPLATE"]
    built = problems("dev", {"image_build": {"build_args": {"LLAMA_CMAKE_ARGS": f"-DX={credential}"}}})
    assert built["environments.dev.image_build.build_args"].startswith("LLAMA_CMAKE_ARGS: looks like a secret")


@pytest.mark.parametrize("value", [
    "b179c9523d0e6a0f98a330c7562b682750a6f8c8", "SmolLM2-135M-Instruct.Q4_1", "https://models.example.com/v1",
    "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=75;80;86;89;90", "s3://models-bucket/llm/model.tar.gz",
])
def test_look_alikes_of_the_new_patterns_are_not_secrets(value: str) -> None:
    """A sha1 (lower-case hex), model names, URLs without a password, CMake flags."""
    assert not looks_like_secret("SM_LLAMA_CPP_ALIAS", value)


def test_ordinary_values_are_not_mistaken_for_secrets() -> None:
    deployment = load("dev", {"llama_env": {"SM_LLAMA_CPP_ALIAS": "akia-lowercase-model-name"},
                              "image_build": {"build_args": {"LLAMA_CMAKE_ARGS": "-DGGML_NATIVE=OFF"}}})
    assert deployment.settings.llama_env["SM_LLAMA_CPP_ALIAS"] == "akia-lowercase-model-name"
