"""The decision image's build configuration: what is refused at synth, the build args, the pinned base image.

One test per refusal, each asserting the message names the key; the build args the stack computes, run through
the Dockerfile's own composition of the CMake flags; a pinned DLC digest used by both endpoints.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.region_info import RegionInfo
from cdk_support import Synth, as_list, load, problems, shared_synth

from stacks.config.cuda_architectures import CUDA_ARCHITECTURES
from stacks.config.image import CUDA_BUILDER_IMAGE, ImageBuild
from stacks.config.instances import GPU_FAMILIES
from stacks.image.decision_image import CONTAINER_DIR, build_args_for, image_tag, source_fingerprint

BUILD_ARGS_KEY = "environments.dev.image_build.build_args"
DIGEST = "sha256:" + "0123456789abcdef" * 4
MIRROR_REPOSITORY = "docker-hub/nvidia/cuda"
MIRROR = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/{MIRROR_REPOSITORY}:13.0.2-devel-amzn2023"


def build_arg_problem(build_args: dict[str, str]) -> str:
    return problems("dev", {"image_build": {"build_args": build_args}})[BUILD_ARGS_KEY]


@pytest.mark.parametrize("value", ["-DX=1\n--network=host", "-DX=1\r", "-DX=\x00", "-DX=\t1", "\x1b[2J"])
def test_control_characters_in_a_build_arg_value_are_refused(value: str) -> None:
    message = build_arg_problem({"LLAMA_CMAKE_ARGS": value})
    assert message.startswith("LLAMA_CMAKE_ARGS: the value holds control characters (U+00"), message


def test_control_characters_in_a_build_arg_name_are_refused() -> None:
    message = build_arg_problem({"LLAMA_CMAKE_ARGS\n--network": "x"})
    assert message == "'LLAMA_CMAKE_ARGS\\n--network' is not a Docker build-arg name (letters, digits and '_')"


@pytest.mark.parametrize(("name", "owner"), [("BASE_IMAGE", "dlc_image"), ("BUILDER_IMAGE", "cuda_builder_image")])
def test_build_args_the_stack_sets_are_refused(name: str, owner: str) -> None:
    message = build_arg_problem({name: "registry.example/x:1"})
    assert message.startswith(f"{name} is set by the stack from") and owner in message


@pytest.mark.parametrize("value", [
    pytest.param("-DKEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", id="aws-secret-access-key"),
    pytest.param("-DURL=https://deploy:s3cr3t@git.example.com/llama.git", id="password-in-url",
),
    pytest.param("-DT=github_pat_11ABCDEFG0123456789abc_" + "x" * 59, id="github-pat"),
    pytest.param("-DJWT=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjaSJ9.c2lnbmF0dXJlLW9mLXRoZS10b2tlbg",
                 id="jwt"),
    pytest.param("-DKEY=AKIAIOSFODNN7EXAMPLE", id="aws-access-key-id"),
])
def test_credentials_in_build_args_are_refused(value: str) -> None:
    message = build_arg_problem({"LLAMA_CMAKE_ARGS": value})
    assert message.startswith("LLAMA_CMAKE_ARGS: looks like a secret"), message


@pytest.mark.parametrize("repository", ["llama/../other", "llama..cpp", "llama//cpp", "llama-cpp/", "Llama"])
def test_a_dlc_repository_that_is_no_ecr_name_is_refused(repository: str) -> None:
    message = problems("dev", {"dlc_image": {"repository": repository}})["environments.dev.dlc_image.repository"]
    assert message.startswith(f"{repository!r} is not an ECR repository name"), message


def test_a_malformed_dlc_digest_is_refused() -> None:
    found = problems("dev", {"dlc_image": {"digest": "sha256:abc"}})
    assert "environments.dev.dlc_image.digest" in found


def test_a_malformed_cuda_builder_image_is_refused() -> None:
    found = problems("prod", {"image_build": {"cuda_builder_image": "nvidia/cuda:13.0.2 --network=host"}})
    assert "is not an image reference" in found["environments.prod.image_build.cuda_builder_image"]


def test_a_gpu_build_on_small_compute_is_refused_with_the_reason() -> None:
    message = problems("prod", {"image_build": {"compute_type": "small"}})["environments.prod.image_build.compute_type"]
    assert message.startswith("small (2 vCPUs and 4 GiB of memory) cannot build the CUDA image: nvcc"), message


def test_a_gpu_build_timeout_too_short_to_finish_is_refused_with_the_reason() -> None:
    found = problems("prod", {"image_build": {"compute_type": "small", "timeout_minutes": 10}})
    message = found["environments.prod.image_build.timeout_minutes"]
    assert message.startswith("10 minutes is too short for the CUDA image") and "at least 30" in message
    assert "environments.prod.image_build.compute_type" in found, "both problems are listed"


def test_a_cpu_build_on_small_compute_with_a_short_timeout_is_accepted() -> None:
    build = load("dev", {"image_build": {"compute_type": "small", "timeout_minutes": 10}}).settings.image_build
    assert (build.compute_type, build.timeout_minutes) == ("small", 10)


def test_every_gpu_family_has_a_cuda_architecture() -> None:
    assert set(CUDA_ARCHITECTURES) == set(GPU_FAMILIES)
    assert all(int(arch) >= 75 for arch in CUDA_ARCHITECTURES.values()), "the CUDA 13 runtime starts at 7.5"


def test_gpu_build_args_derive_the_architecture_from_the_instance_family() -> None:
    assert build_args_for(ImageBuild(), "gpu", ["ml.g5.xlarge"]) == {
        "BUILDER_IMAGE": CUDA_BUILDER_IMAGE, "LLAMA_CMAKE_ARGS": "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86"}
    args = build_args_for(ImageBuild(), "gpu", ["ml.p5.48xlarge", "ml.g4dn.xlarge", "ml.g6.xlarge"])
    assert args["LLAMA_CMAKE_ARGS"].endswith("-DCMAKE_CUDA_ARCHITECTURES=75;89;90")


def test_configured_build_args_add_to_the_gpu_defaults() -> None:
    empty = build_args_for(ImageBuild(build_args={}), "gpu", ["ml.g5.xlarge"])
    assert empty == build_args_for(ImageBuild(), "gpu", ["ml.g5.xlarge"]), "{} is no build args, not no defaults"
    build = ImageBuild(build_args={"LLAMA_CMAKE_ARGS": "-DGGML_CUDA_FA_ALL_QUANTS=ON", "EXTRA": "1"},
                       cuda_builder_image=MIRROR)
    assert build_args_for(build, "gpu", ["ml.g5.xlarge"]) == {
        "BUILDER_IMAGE": MIRROR, "EXTRA": "1",
        "LLAMA_CMAKE_ARGS": "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 -DGGML_CUDA_FA_ALL_QUANTS=ON"}
    assert build_args_for(build, "cpu", ["ml.m5.large"]) == {"EXTRA": "1",
                                                             "LLAMA_CMAKE_ARGS": "-DGGML_CUDA_FA_ALL_QUANTS=ON"}


def dockerfile_cmake_args(build_args: dict[str, str], tmp_path: Path) -> list[str]:
    """The CMake flags the Dockerfile's llama stage compiles llama.cpp with, for these build args.

    The stage's own ARG defaults and its `RUN cmake_args=...` line, run by bash with the build args applied
    and a stand-in cmake that records its arguments: the composition as docker would run it, minus the compile
    (tests/image/test_dockerfile_llama.py compares the flags with the tests' build).
    """
    text = (CONTAINER_DIR / "Dockerfile").read_text().replace("\\\n", " ")
    stage = re.split(r"^FROM [^\n]* AS llama$", text, maxsplit=1, flags=re.MULTILINE)[1].split("\nFROM ", 1)[0]
    defaults = dict(re.findall(r'^ARG (\w+)="([^"]*)"$', stage, re.MULTILINE))
    (run_line,) = [line[4:] for line in stage.splitlines() if line.startswith("RUN cmake_args=")]
    cmake = tmp_path / "build" / "venv" / "bin" / "cmake"
    cmake.parent.mkdir(parents=True)
    cmake.write_text('#!/bin/bash\n[ "$1" = -S ] && printf "%s\\n" "${@:7}" > "$RECORD"\nexit 0\n')
    cmake.chmod(0o755)
    (tmp_path / "build" / "llama-build-number").write_text("11434\n")
    record = tmp_path / "cmake-args"
    env = {**defaults, **build_args, "RECORD": str(record), "PATH": "/usr/bin:/bin"}
    subprocess.run(["bash", "-o", "pipefail", "-c", run_line.replace("/build/", f"{tmp_path}/build/")],
                   env=env, check=True, timeout=30)
    return record.read_text().split()


def test_the_cuda_build_keeps_the_portable_cpu_flags(tmp_path: Path) -> None:
    flags = dockerfile_cmake_args(build_args_for(ImageBuild(), "gpu", ["ml.g5.xlarge"]), tmp_path)
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX2=ON" in flags, "no -march=native CPU backend"
    assert "-DGGML_CUDA=ON" in flags and "-DCMAKE_CUDA_ARCHITECTURES=86" in flags
    assert "-DGGML_OPENMP=OFF" in flags, "the CPU backend's threads must be ggml's own pool"
    assert flags[-1] == "-DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags"


def test_the_cpu_build_has_the_portable_flags_only(tmp_path: Path) -> None:
    flags = dockerfile_cmake_args(build_args_for(ImageBuild(), "cpu", ["ml.m5.large"]), tmp_path)
    assert flags[0] == "-DGGML_NATIVE=OFF" and not any("CUDA" in flag for flag in flags)
    assert "-DGGML_OPENMP=OFF" in flags


def test_dockerfile_needs_no_frontend_from_docker_hub() -> None:
    assert "# syntax=" not in (CONTAINER_DIR / "Dockerfile").read_text()


def test_the_image_tag_covers_the_digest() -> None:
    source = source_fingerprint(CONTAINER_DIR)
    host = f"{RegionInfo.get('us-east-1').dlc_repository_account}.dkr.ecr.us-east-1.amazonaws.com/llama-cpp"
    assert image_tag(source, f"{host}@{DIGEST}", "cpu") != image_tag(source, f"{host}@sha256:{'1' * 64}", "cpu")


@pytest.fixture(scope="module")
def pinned(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """prod with a pinned DLC digest, an ECR mirror of the CUDA builder and an extra CMake flag."""
    return shared_synth("prod-pinned", tmp_path_factory, "prod", {
        "dlc_image": {"digest": DIGEST},
        "image_build": {"cuda_builder_image": MIRROR, "build_args": {"LLAMA_CMAKE_ARGS": "-DGGML_CUDA_F16=ON"}}})


def test_both_endpoints_and_the_build_use_the_pinned_digest(pinned: Synth) -> None:
    account = RegionInfo.get("us-east-1").dlc_repository_account
    base = f"{account}.dkr.ecr.us-east-1.amazonaws.com/llama-cpp@{DIGEST}"
    _, chat = pinned.one("AWS::SageMaker::Model", "/Chat/Model")
    assert chat["Properties"]["PrimaryContainer"]["Image"] == base
    _, image = pinned.one("Custom::DecisionImage", "/DecisionImage/Image")
    props = image["Properties"]
    assert props["BaseImage"] == base  # the decision image is built FROM the same digest
    build_args = json.loads(props["BuildArgs"])
    assert props["ImageTag"] == image_tag(source_fingerprint(CONTAINER_DIR), base, "gpu", build_args)
    assert build_args["LLAMA_CMAKE_ARGS"] == "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=86 -DGGML_CUDA_F16=ON"


def test_an_ecr_builder_mirror_is_logged_in_to_and_pulled_with_the_build_role(pinned: Synth) -> None:
    _, project = pinned.one("AWS::CodeBuild::Project", "/DecisionImage/Build")
    variables = {v["Name"]: v["Value"] for v in project["Properties"]["Environment"]["EnvironmentVariables"]}
    assert variables["BUILDER_REGISTRY"] == MIRROR.split("/", maxsplit=1)[0]
    statements: list[dict[str, Any]] = [
        statement for policy in pinned.resources("AWS::IAM::Policy").values()
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
        if statement.get("Sid") == "PullBuilderImage"]
    (statement,) = statements
    assert as_list(statement["Resource"]) == [f"arn:aws:ecr:us-east-1:123456789012:repository/{MIRROR_REPOSITORY}"]
    assert "ecr:BatchGetImage" in as_list(statement["Action"])
