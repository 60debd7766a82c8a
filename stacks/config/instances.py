"""What an `ml.*` instance type is, for the two llama.cpp DLC variants this app deploys.

Which types exist for real-time endpoints is SageMaker's own fact: the `ProductionVariantInstanceType` enum of
the pinned botocore service model (the same list CloudFormation validates against). What each family can run
is ours: the DLC images are x86-64 (CPU or CUDA 13) and arm64 (CPU, tuned for Neoverse-V1: Graviton3 and newer),
so Graviton2, Inferentia/Trainium and GPUs that CUDA 13 no longer supports are refused here, at synth, instead of
after a 10-minute failed endpoint creation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Literal

import botocore.session
from botocore.model import ServiceModel

Accelerator = Literal["cpu", "gpu"]
Architecture = Literal["x86_64", "arm64"]

CPU_FAMILIES = frozenset({
    "t2", "m4", "m5", "m5d", "c4", "c5", "c5d", "r5", "r5d",
    "c6i", "c6in", "m6i", "r6i", "c7i", "m7i", "r7i",
})
# Graviton3 and newer (Neoverse-V1, V2): the arm64 CPU DLC, `llama-cpp-arm64:server-sagemaker-cpu-v1`.
ARM_FAMILIES = frozenset({"c7g", "c7gd", "c7gn", "m7g", "m7gd", "r7g", "r7gd", "c8g", "m8g", "r8g"})
GPU_FAMILIES = frozenset({
    "g4dn", "g5", "g6", "g6e", "g7", "g7e",
    "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300",
})
# Families with local NVMe instance storage, encrypted by the instance's hardware module: an endpoint-config
# KMS key does not encrypt it (older SageMaker API references: CreateEndpointConfig fails with one), so none is set.
LOCAL_STORAGE_FAMILIES = frozenset({"m5d", "c5d", "r5d", "c7gd", "m7gd", "r7gd"}) | GPU_FAMILIES
# Families SageMaker offers but the llama.cpp DLC cannot use, with the reason shown to the user.
REFUSED_FAMILIES = {
    "p2": "its K80 GPUs are not supported by the CUDA 13 runtime of the DLC's CUDA image",
    "p3": "its V100 GPUs are not supported by the CUDA 13 runtime of the DLC's CUDA image",
    "p6e-gb200": "it is an arm64 (Grace) GPU instance; the DLC's CUDA image is x86-64 and its arm64 image CPU only",
    "dl1": "it has Gaudi accelerators, which llama.cpp does not use",
}
MEMORY_FILE = "instance_memory.json"  # data: vCPUs, GiB of host memory (and GPUs) per instance type
GIB = 2**30
MIB = 2**20
_FAMILY = re.compile(r"^ml\.(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9]+)$")
_GRAVITON = re.compile(r"^[a-z]+\d+g[a-z]*$")  # c6g, c6gd, c6gn, m7g, r8g ...
GRAVITON2_FAMILIES = frozenset({"c6g", "c6gd", "c6gn", "m6g", "m6gd", "r6g", "r6gd", "t4g", "x2gd"})
GRAVITON2 = ("it is a Graviton2 (Neoverse-N1) instance; the arm64 llama.cpp DLC is built for Neoverse-V1 "
             "(Graviton3 and newer: SVE, bf16 and i8mm instructions Graviton2 lacks), so llama-server would stop on "
             "an illegal instruction; use a Graviton3 or newer family (c7g, c8g, m8g, r7gd, r8g)")
_NEURON = re.compile(r"^(inf|trn)\d")


class InstanceTypeError(ValueError):
    """An instance type that does not exist or cannot run the llama.cpp DLC."""


@dataclass(frozen=True)
class InstanceFacts:
    instance_type: str
    family: str
    accelerator: Accelerator
    architecture: Architecture = "x86_64"

    @property
    def local_storage(self) -> bool:
        return self.family in LOCAL_STORAGE_FAMILIES

    @property
    def burstable(self) -> bool:
        """`ml.t*` instances: CPU credits, and Application Auto Scaling refuses them for endpoints."""
        return self.family.startswith("t")


@dataclass(frozen=True)
class InstanceCapacity:
    """What an instance type has: vCPUs, host memory, and GPUs with their memory."""

    vcpus: int
    memory_gib: float
    gpus: int = 0
    gpu_memory_gib: float = 0  # per GPU

    @property
    def memory_mb(self) -> int:
        return int(self.memory_gib * 1024)

    def describe(self) -> str:
        gpus = f", {self.gpus} GPU" if self.gpus else ""
        return f"{self.vcpus} vCPU, {self.memory_mb} MB{gpus}"

    def model_limit(self, gpu_layers: str | None) -> tuple[int, str]:
        """The most model bytes that can load, and what that is, for an `SM_LLAMA_CPP_N_GPU_LAYERS` value.

        Every layer on the GPUs (`all`, -1, 999: the GPU default): the GPUs' memory; none (0, or a CPU type):
        host memory; some, or `auto` (llama.cpp fits what it can): both together.
        """
        host = (int(self.memory_gib * GIB), f"{self.memory_gib:g} GiB of memory")
        gpu_bytes = int(self.gpus * self.gpu_memory_gib * GIB)
        gpu_text = f"{self.gpus} x {self.gpu_memory_gib:g} GiB of GPU memory"
        where = placement(self.gpus, gpu_layers)
        if where == "host":
            return host
        if where == "gpu":
            return gpu_bytes, gpu_text
        return host[0] + gpu_bytes, f"{host[1]} and {gpu_text}"


Placement = Literal["host", "gpu", "both"]


def placement(gpus: int, gpu_layers: str | None) -> Placement:
    """Where llama.cpp puts the layers (and their KV cache) for an `SM_LLAMA_CPP_N_GPU_LAYERS` value: every layer on
    the GPUs (`all`, -1, 999: the GPU default), none (0, or no GPU), or some (a count, or `auto`: what fits)."""
    layers = (gpu_layers or "all").strip().lower()
    if not gpus or layers == "0":
        return "host"
    if layers in ("all", "-1") or (layers.isdigit() and int(layers) >= 999):
        return "gpu"
    return "both"


@cache
def _memory_table() -> dict[str, InstanceCapacity]:
    data = json.loads(resources.files(__package__).joinpath(MEMORY_FILE).read_text())
    return {name: InstanceCapacity(**facts) for name, facts in data["types"].items()}


def instance_capacity(instance_type: str) -> InstanceCapacity | None:
    """The vCPUs and memory of an instance type, or None when the table does not list it (its checks are skipped)."""
    return _memory_table().get(instance_type)


@cache
def _sagemaker_model() -> ServiceModel:
    """The pinned botocore SageMaker model, parsed once for both enums below (another session would parse it again)."""
    return botocore.session.get_session().get_service_model("sagemaker")


@cache
def realtime_instance_types() -> frozenset[str]:
    """Every instance type SageMaker accepts for a production variant, from the pinned botocore model."""
    return frozenset(_sagemaker_model().shape_for("ProductionVariantInstanceType").enum)


@cache
def transform_instance_types() -> frozenset[str]:
    """Every instance type SageMaker accepts for a Batch Transform job (a different list from real-time's)."""
    return frozenset(_sagemaker_model().shape_for("TransformInstanceType").enum)


@cache
def inference_ami_versions() -> frozenset[str]:
    """Every `InferenceAmiVersion` SageMaker knows, from the pinned botocore model."""
    return frozenset(_sagemaker_model().shape_for("ProductionVariantInferenceAmiVersion").enum)


def describe_instance(instance_type: str, *, transform: bool = False) -> InstanceFacts:
    """Facts about an instance type, or InstanceTypeError saying why it cannot serve this app (as a real-time
    endpoint's instance, or with `transform` as a Batch Transform job's)."""
    match = _FAMILY.match(instance_type)
    offered = transform_instance_types() if transform else realtime_instance_types()
    if match is None or instance_type not in offered:
        what = "Batch Transform jobs" if transform else "real-time endpoints"
        raise InstanceTypeError(
            f"{instance_type!r} is not an instance type SageMaker {what} offer "
            "(expected e.g. ml.m5.large, ml.c7i.xlarge, ml.c7g.xlarge or ml.g5.xlarge)"
        )
    family = match["family"]
    if family in CPU_FAMILIES:
        return InstanceFacts(instance_type, family, "cpu")
    if family in ARM_FAMILIES:
        return InstanceFacts(instance_type, family, "cpu", "arm64")
    if family in GPU_FAMILIES:
        return InstanceFacts(instance_type, family, "gpu")
    if family in REFUSED_FAMILIES:
        reason = REFUSED_FAMILIES[family]
    elif family in GRAVITON2_FAMILIES:
        reason = GRAVITON2
    elif _GRAVITON.match(family):
        reason = "it is an arm64 (Graviton) family this app does not know yet (stacks/config/instances.py)"
    elif _NEURON.match(family):
        reason = "it has Inferentia/Trainium accelerators, which llama.cpp does not use"
    else:
        reason = "this app does not know which DLC variant it would need"
    raise InstanceTypeError(f"instance family {family!r} of {instance_type} is not supported: {reason}")


def instance_problem(instance_type: str, accelerator: Accelerator, *, transform: bool = False) -> str | None:
    """Why `instance_type` cannot run the image of `accelerator` (CPU or CUDA), or None."""
    try:
        facts = describe_instance(instance_type, transform=transform)
    except InstanceTypeError as error:
        return str(error)
    if facts.accelerator != accelerator:
        image = "CUDA" if accelerator == "gpu" else "CPU"
        return (f"{instance_type} is a {facts.accelerator.upper()} instance but accelerator is {accelerator!r} (the "
                f"{image} image); change one of them")
    return None
