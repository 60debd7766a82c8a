"""The CodeBuild script, run by bash with stand-in `aws` and `docker` commands that record their calls.

CodeBuild itself is not available offline; what can go wrong in the script (order of logins, quoting of
build args, skipping an image that is already in ECR) is exercised here for real.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from aws_cdk import App, Stack

from stacks.image.decision_image import build_spec

FAKE_AWS = """#!/bin/bash
printf 'aws %s\\n' "$*" >> "$CALLS"
case "$1 $2" in
  "ecr describe-images") [ -n "$IMAGE_EXISTS" ] && exit 0; echo "ImageNotFoundException" >&2; exit 254 ;;
  "s3 cp") cp "$CONTEXT_ZIP" "$5" ;;
  "ecr get-login-password") echo "password" ;;
esac
"""
GPU_BUILD_ARGS = {"BUILDER_IMAGE": "nvidia/cuda:13.0.2-devel-amzn2023",
                  "LLAMA_CMAKE_ARGS": "-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=75;86"}
FAKE_DOCKER = """#!/bin/bash
[ "$1" = login ] && cat > /dev/null
{ printf 'docker'; for arg in "$@"; do printf ' <%s>' "$arg"; done; printf '\\n'; } >> "$CALLS"
[ "$1" = build ] && ls >> "$CALLS"
exit 0
"""


@pytest.fixture(scope="module")
def script() -> str:
    stack = Stack(App(), "BuildSpec")
    spec = json.loads(stack.resolve(build_spec().to_build_spec()))
    assert spec["env"]["shell"] == "bash"
    (command,) = spec["phases"]["build"]["commands"]
    return str(command)


def run(script: str, tmp_path: Path, *, build_args: dict[str, str] | str, image_exists: bool = False,
        extra_env: dict[str, str] | None = None, expect_success: bool = True) -> list[str]:
    """Run the build script; `build_args` is the DOCKER_BUILD_ARGS_JSON value (a dict is JSON-encoded)."""
    if shutil.which("bash") is None or shutil.which("unzip") is None:
        pytest.fail("bash and unzip are needed (the CodeBuild standard image has both)")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("aws", FAKE_AWS), ("docker", FAKE_DOCKER)):
        (bin_dir / name).write_text(body)
        (bin_dir / name).chmod(0o755)
    context_zip = tmp_path / "context.zip"
    with zipfile.ZipFile(context_zip, "w") as archive:
        archive.writestr("Dockerfile", "ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    calls = tmp_path / "calls.log"
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls), "CONTEXT_ZIP": str(context_zip),
        "IMAGE_EXISTS": "1" if image_exists else "", "AWS_DEFAULT_REGION": "us-east-1",
        "REPOSITORY_NAME": "semif-dev-decision",
        "REPOSITORY_URI": "123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-dev-decision",
        "IMAGE_TAG": "cuda-0123", "DLC_REGISTRY": "763104351884.dkr.ecr.us-east-1.amazonaws.com",
        "BASE_IMAGE": "763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:server-sagemaker-cuda-v1",
        "SOURCE_BUCKET": "assets", "SOURCE_KEY": "context.zip",
        "DOCKER_BUILD_ARGS_JSON": build_args if isinstance(build_args, str) else json.dumps(build_args),
        **(extra_env or {}),
    }
    result = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60,
                            cwd=tmp_path, check=False)
    assert (result.returncode == 0) == expect_success, result.stderr
    return calls.read_text().splitlines() if calls.exists() else [result.stderr]


def test_logs_in_to_both_registries_builds_with_the_args_and_pushes(script: str, tmp_path: Path) -> None:
    calls = run(script, tmp_path, build_args=GPU_BUILD_ARGS)
    docker = [c for c in calls if c.startswith("docker")]
    assert docker[0] == "docker <login> <--username> <AWS> <--password-stdin> " \
                        "<763104351884.dkr.ecr.us-east-1.amazonaws.com>"
    assert docker[1].endswith("<123456789012.dkr.ecr.us-east-1.amazonaws.com>")
    build = docker[2]
    assert "<--build-arg> <BASE_IMAGE=763104351884.dkr.ecr.us-east-1.amazonaws.com/llama-cpp:" \
           "server-sagemaker-cuda-v1>" in build
    # Spaces and semicolons stay inside one argument.
    assert "<--build-arg=LLAMA_CMAKE_ARGS=-DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=75;86>" in build
    assert "<--build-arg=BUILDER_IMAGE=nvidia/cuda:13.0.2-devel-amzn2023>" in build
    assert build.endswith("<-t> <123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-dev-decision:cuda-0123> <.>")
    assert calls[calls.index(build) + 1] == "Dockerfile", "docker build runs in the unpacked context"
    assert docker[3] == "docker <push> <123456789012.dkr.ecr.us-east-1.amazonaws.com/semif-dev-decision:cuda-0123>"


def test_no_extra_build_args_for_the_cpu_variant(script: str, tmp_path: Path) -> None:
    calls = run(script, tmp_path, build_args={})
    (build,) = [c for c in calls if c.startswith("docker <build>")]
    assert build.count("--build-arg") == 1 and "<>" not in build, "no empty argument for an empty map"


def test_an_ecr_builder_image_registry_is_logged_in_to_in_its_region(script: str, tmp_path: Path) -> None:
    mirror = "210987654321.dkr.ecr.eu-west-1.amazonaws.com"
    calls = run(script, tmp_path, build_args={"BUILDER_IMAGE": f"{mirror}/docker-hub/nvidia/cuda:13.0.2"},
                extra_env={"BUILDER_REGISTRY": mirror})
    assert "aws ecr get-login-password --region eu-west-1" in calls
    logins = [c for c in calls if c.startswith("docker <login>")]
    assert len(logins) == 3 and logins[2].endswith(f"<{mirror}>")


@pytest.mark.parametrize("build_args", ["{not json", json.dumps({"LLAMA_CMAKE_ARGS": "-DX=1\n--network=host"})])
def test_a_failure_to_parse_the_build_args_fails_the_build_before_docker(script: str, tmp_path: Path,
                                                                          build_args: str) -> None:
    calls = run(script, tmp_path, build_args=build_args, expect_success=False)
    assert not [c for c in calls if c.startswith("docker")], "docker never ran"
    assert not any("s3 cp" in c for c in calls), "the script stopped at the parser"


def test_an_image_already_in_ecr_ends_the_build_without_pushing(script: str, tmp_path: Path) -> None:
    calls = run(script, tmp_path, build_args={}, image_exists=True)
    assert calls == ["aws ecr describe-images --repository-name semif-dev-decision --image-ids imageTag=cuda-0123"]
