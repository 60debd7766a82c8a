"""The images: the stock llama.cpp DLC both models start from, and the CodeBuild project that builds the decision
image FROM it (stacks/image/)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field, field_validator

from .secrets import BUILD_ARG_SECRET, control_characters, looks_like_secret
from .strict import Strict

_ECR_REPOSITORY = re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*")
_IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
IMAGE_DIGEST = r"^sha256:[0-9a-f]{64}$"


class DlcImage(Strict):
    """The stock llama.cpp DLC; the registry account comes from CDK's region facts, not from here.

    `digest` pins the image of the environment's accelerator (the `cpu_tag` or `cuda_tag` image; on Graviton the
    arm64 one): both endpoints then run exactly that build, and the decision image's tag changes with it. Without
    it, `-v1` is a moving tag (README, "The decision image").
    """

    repository: str = Field("llama-cpp", max_length=256)
    # The arm64 CPU image (Graviton3 and newer, tuned for Neoverse-V1): same tags, its own repository.
    arm64_repository: str = Field("llama-cpp-arm64", max_length=256)
    cpu_tag: str = Field("server-sagemaker-cpu-v1", pattern=_IMAGE_TAG)
    cuda_tag: str = Field("server-sagemaker-cuda-v1", pattern=_IMAGE_TAG)
    digest: str | None = Field(None, pattern=IMAGE_DIGEST)

    @field_validator("repository", "arm64_repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        if not _ECR_REPOSITORY.fullmatch(value):
            raise ValueError(f"{value!r} is not an ECR repository name: lower-case letters and digits in "
                             "'/'-separated parts, each part joined by single '.', '_' or '-' (no '..', no "
                             "empty part)")
        return value


_BUILD_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Build args the stack sets itself, and the key that configures each.
STACK_BUILD_ARGS = {"BASE_IMAGE": "dlc_image and accelerator", "BUILDER_IMAGE": "image_build.cuda_builder_image"}
# Docker Hub's CUDA devel image matching the CUDA DLC (13.0.2 on Amazon Linux 2023): nvcc for the bindings.
CUDA_BUILDER_IMAGE = "nvidia/cuda:13.0.2-devel-amzn2023"
_IMAGE_REFERENCE = re.compile(r"(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*"
                              r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


class ImageBuild(Strict):
    """The CodeBuild project that builds the decision image FROM the DLC."""

    compute_type: Literal["small", "medium", "large", "xlarge", "2xlarge"] = "large"
    # The custom resource waiting for the build has at most one hour in all (Provider framework limit).
    timeout_minutes: int = Field(40, ge=10, le=50)
    # The GPU variant's builder stage (nvcc); point it at a mirror to avoid Docker Hub's anonymous pull limits.
    cuda_builder_image: str = CUDA_BUILDER_IMAGE
    # `docker build --build-arg`s added to the accelerator's defaults (stacks/image/decision_image.py build_args_for).
    build_args: dict[str, str] = Field(default_factory=dict)

    @field_validator("cuda_builder_image")
    @classmethod
    def _builder_image(cls, value: str) -> str:
        if not _IMAGE_REFERENCE.fullmatch(value):
            raise ValueError(f"{value!r} is not an image reference (registry/repository:tag or @sha256:...)")
        return value

    @field_validator("build_args")
    @classmethod
    def _build_args(cls, value: dict[str, str]) -> dict[str, str]:
        for key, arg in value.items():
            if not _BUILD_ARG_NAME.fullmatch(key):
                raise ValueError(f"{key!r} is not a Docker build-arg name (letters, digits and '_')")
            if key in STACK_BUILD_ARGS:
                raise ValueError(f"{key} is set by the stack from {STACK_BUILD_ARGS[key]}")
            if found := control_characters(arg):
                raise ValueError(f"{key}: the value holds control characters ({', '.join(found)}); each build "
                                 "arg must stay one `docker build` argument")
            if looks_like_secret(key, arg):
                raise ValueError(f"{key}: {BUILD_ARG_SECRET}")
        return value
