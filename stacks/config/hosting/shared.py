"""`shared`: both models on ONE endpoint as two inference components (one, the decision model's, in a
decision-only environment: `chat: false`); the endpoint (`shared_endpoint`) has the instances, each model's
`component` what one copy reserves of them (cores, memory, GPUs) and how many copies."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..container_keys import GPU_LAYERS_KEY, THREADS_KEY
from ..endpoint import Component
from ..instances import GIB, MIB, InstanceCapacity, describe_instance, instance_capacity, instance_problem
from ..kinds import EndpointKind, HostingMode
from ..problems import Problems
from .mode import HostingRules, OwnBlock, ServingCapacity

if TYPE_CHECKING:
    from ..environment import EnvironmentSettings


ZERO_KEY = "shared_endpoint.managed_scaling.min_instances"
SCALE_TO_ZERO = ("scale to zero: once idle, SageMaker removes every copy and then the last instance (no instance is "
                 "paid for); the first request after that fails with a NoCapacityInvocationFailures error, which the "
                 "scale-out policy on that metric answers by adding a copy: SageMaker starts an instance and loads "
                 "the model, minutes and not seconds, and requests fail until it is up (the client and `semif smoke` "
                 "retry them)")


def scales_to_zero(settings: EnvironmentSettings) -> bool:
    """The shared endpoint may release its last instance (managed_scaling.min_instances 0)."""
    shared = settings.shared_endpoint
    return shared is not None and shared.managed_scaling is not None and shared.managed_scaling.min_instances == 0


class Shared(HostingRules):
    """Inference components on the shared endpoint: placement of their copies, each copy's reservation."""

    name: ClassVar[HostingMode] = "shared"
    shares_endpoint: ClassVar[bool] = True
    block: ClassVar[OwnBlock | None] = OwnBlock(
        "component", required="required for shared hosting: cpu_cores and memory_mb one copy of the model "
                              "reserves on the shared instances",
        only="only shared hosting has inference components; remove it")
    refused: ClassVar[dict[str, str]] = {
        "instance_type": "in shared hosting the instances belong to shared_endpoint.instance_type",
        "instance_pools": "in shared hosting the instances belong to shared_endpoint (its instance_type or "
                          "instance_pools)",
        "instance_count": "in shared hosting the instances belong to shared_endpoint.instance_count",
        "autoscaling": "an endpoint with inference components does not scale its variant: each component scales "
                       "its copies (component.autoscaling) and the endpoint its instances "
                       "(shared_endpoint.managed_scaling)",
        "data_capture": "data capture is set on the endpoint config, which in shared hosting serves both models; "
                        "this app does not capture one component's traffic under the other's settings",
        "network_isolation": "the shared endpoint's config sets network isolation for every container on it: use "
                             "the environment's network_isolation",
    }

    def check(self, settings: EnvironmentSettings) -> Problems:
        problems = _check_shared(settings)
        return problems + _check_scale_to_zero(settings) if settings.shared_endpoint is not None else problems

    def notices(self, settings: EnvironmentSettings) -> Problems:
        return [(ZERO_KEY, SCALE_TO_ZERO)] if scales_to_zero(settings) else []

    def instance_types(self, settings: EnvironmentSettings, kind: EndpointKind) -> list[tuple[str, str]]:
        """The shared endpoint's instance type, or its pools in priority order."""
        shared = settings.shared_endpoint
        if shared is None:
            return []
        if shared.instance_pools is not None:
            return [(f"shared_endpoint.instance_pools.{i}", pool) for i, pool in enumerate(shared.instance_pools)]
        return [("shared_endpoint.instance_type", shared.instance_type)] if shared.instance_type else []

    def model_fit(self, settings: EnvironmentSettings, kind: EndpointKind, model_bytes: int) -> Problems:
        """One copy's reservation against the model, with the GPUs of each pool it may land on."""
        component = settings.endpoint(kind).component
        if component is None:
            return []
        for _, instance_type in self.instance_types(settings, kind):
            capacity = instance_capacity(instance_type)
            share = InstanceCapacity(vcpus=0, memory_gib=component.memory_mb / 1024, gpus=component.accelerators,
                                     gpu_memory_gib=capacity.gpu_memory_gib if capacity else 0)
            limit, what = share.model_limit(settings.llama_env_for(kind).get(GPU_LAYERS_KEY))
            if model_bytes > limit:
                return [(f"{kind}.component.memory_mb" if not component.accelerators
                         else f"{kind}.component.accelerators",
                         f"one copy reserves {what}; the model is {model_bytes / GIB:.1f} GiB ({model_bytes:,} "
                         "bytes) and cannot be loaded; reserve more")]
        return []

    def decision_capacities(self, settings: EnvironmentSettings) -> list[ServingCapacity]:
        """One copy of the decision component, on each pool's GPUs."""
        component = settings.decision.component
        if component is None:
            return []
        capacities = []
        for _, instance_type in self.instance_types(settings, "decision"):
            instance = instance_capacity(instance_type)
            if instance is not None:
                capacities.append(ServingCapacity(
                    "decision.component.memory_mb", "decision.component.accelerators",
                    "one copy of the decision component", component.memory_mb * MIB,
                    int(component.accelerators * instance.gpu_memory_gib * GIB), component.accelerators,
                    max(1, math.ceil(component.cpu_cores))))
        return capacities

    def container_defaults(self, settings: EnvironmentSettings, kind: EndpointKind) -> dict[str, str]:
        """Two llama.cpp processes share the instance: each uses the cores its copy reserves, not every core of the
        machine (its spinning threads would slow the other down)."""
        component = settings.endpoint(kind).component
        return {THREADS_KEY: str(max(1, math.ceil(component.cpu_cores)))} if component is not None else {}

    def endpoint_name(self, stack_name: str, kind: EndpointKind) -> str:
        return f"{stack_name}-models"

    def component_name(self, stack_name: str, kind: EndpointKind) -> str | None:
        return f"{stack_name}-{kind}"


def _check_shared(settings: EnvironmentSettings) -> Problems:
    problems: Problems = []
    shared = settings.shared_endpoint
    if shared is None:
        return [("shared_endpoint", "required for shared hosting: instance_type (and instance_count) of the one "
                                    "endpoint both components run on")]
    if shared.instance_type is not None and shared.instance_pools is not None:
        return [("shared_endpoint.instance_pools", "give instance_type or instance_pools, not both: the first pool "
                                                   "is the preferred instance type")]
    if not shared.instance_types:
        return [("shared_endpoint.instance_type", "required for shared hosting (or instance_pools): the instances "
                                                  "both components run on")]
    typed = Shared().instance_types(settings, "decision")
    refused = [(key, problem) for key, instance_type in typed
               if (problem := instance_problem(instance_type, settings.accelerator))]
    if refused:
        return refused
    architectures = {describe_instance(instance_type).architecture for _, instance_type in typed}
    if len(architectures) > 1:
        return [("shared_endpoint.instance_pools",
                 f"the pools mix {' and '.join(sorted(architectures))} instances; both components' images (the "
                 "DLC's, and the decision image built FROM it) have one architecture: keep the pools on one")]
    for kind in settings.kinds:
        endpoint = settings.endpoint(kind)
        component = endpoint.component
        if component is None:
            continue
        at = f"{kind}.component"
        if settings.accelerator == "cpu" and component.accelerators:
            problems.append((f"{at}.accelerators", "accelerator is 'cpu' (the CPU image on CPU instances): a "
                                                   "component cannot reserve GPUs there; remove it"))
        if settings.accelerator == "gpu" and not component.accelerators:
            problems.append((f"{at}.accelerators", "accelerator is 'gpu' (the CUDA image): each copy needs at least "
                                                   "one GPU (NumberOfAcceleratorDevicesRequired >= 1)"))
        if endpoint.alarms.auto_rollback and component.copy_count < 2:
            problems.append((f"{kind}.alarms.auto_rollback",
                             "an inference component updates by rolling its copies, at most half of them at a time "
                             "(SageMaker: 5-50% of the copy count), with the alarms as rollback triggers; with "
                             f"copy_count {component.copy_count} nothing can roll: set component.copy_count >= 2 "
                             "or remove auto_rollback"))
    if any(key.endswith(".accelerators") for key, _ in problems):
        return problems  # the image and the instances disagree: placing copies would only repeat it
    for instance_type in shared.instance_types:  # any pool may be the one SageMaker finds capacity in
        placed = _check_placement(settings, instance_type)
        if placed:
            return problems + placed
    return problems
@dataclass(frozen=True)
class _Copy:
    cores: float
    memory_mb: int
    gpus: int


def _copies(component: Component, count: int) -> list[_Copy]:
    return [_Copy(component.cpu_cores, component.memory_mb, component.accelerators)] * count


def _placeable(copies: Iterable[_Copy], capacity: InstanceCapacity, instances: int) -> bool:
    """First-fit decreasing of the copies onto `instances` instances: the placement SageMaker has to find."""
    free = [[float(capacity.vcpus), capacity.memory_mb, capacity.gpus] for _ in range(instances)]
    for copy in sorted(copies, key=lambda c: (c.gpus, c.memory_mb, c.cores), reverse=True):
        for slot in free:
            if copy.cores <= slot[0] and copy.memory_mb <= slot[1] and copy.gpus <= slot[2]:
                slot[0] -= copy.cores
                slot[1] -= copy.memory_mb
                slot[2] -= copy.gpus
                break
        else:
            return False
    return True


def _check_placement(settings: EnvironmentSettings, instance_type: str) -> Problems:
    """Every copy fits one instance, the initial copies fit the initial instances, the most copies the most
    instances (from the instance table: vCPUs, memory, GPUs), on `instance_type` (the shared endpoint's, or a
    pool's)."""
    shared = settings.shared_endpoint
    assert shared is not None
    capacity = instance_capacity(instance_type)
    components = {kind: settings.endpoint(kind).component for kind in settings.kinds}
    if capacity is None or None in components.values():
        return []  # a type the table does not list (or a missing component, refused above): nothing to check
    problems: Problems = []
    for kind, component in components.items():
        assert component is not None
        one = _copies(component, 1)[0]
        at = f"{kind}.component"
        for key, needed, available, unit in (("cpu_cores", one.cores, capacity.vcpus, "vCPUs"),
                                             ("memory_mb", one.memory_mb, capacity.memory_mb, "MB of memory"),
                                             ("accelerators", one.gpus, capacity.gpus, "GPUs")):
            if needed > available:
                problems.append((f"{at}.{key}", f"one copy needs {needed:g} {unit}, but {instance_type} has "
                                                f"{available:g}; it can never be placed"))
        if component.max_memory_mb is not None and component.max_memory_mb > capacity.memory_mb:
            problems.append((f"{at}.max_memory_mb", f"{component.max_memory_mb} MB is more than "
                                                    f"{instance_type}'s {capacity.memory_mb} MB"))
    if problems:
        return problems
    initial = [c for kind, comp in components.items() if comp for c in _copies(comp, comp.copy_count)]
    if not _placeable(initial, capacity, shared.instance_count):
        problems.append(("shared_endpoint.instance_count",
                         f"{shared.instance_count} x {instance_type} ({capacity.describe()} each) cannot hold "
                         f"the initial copies ({_summary(components, initial=True)}); add instances or reserve less"))
    most = [c for comp in components.values() if comp
            for c in _copies(comp, comp.autoscaling.max_copies if comp.autoscaling else comp.copy_count)]
    instances = shared.managed_scaling.max_instances if shared.managed_scaling else shared.instance_count
    if not problems and not _placeable(most, capacity, instances):
        where = "shared_endpoint.managed_scaling.max_instances" if shared.managed_scaling else \
            "shared_endpoint.managed_scaling"
        problems.append((where, f"at their autoscaling maximum the copies ({_summary(components, initial=False)}) do "
                                f"not fit {instances} x {instance_type}; allow more instances or fewer copies"))
    return problems


def _summary(components: dict[EndpointKind, Component | None], *, initial: bool) -> str:
    parts = []
    for kind, comp in components.items():
        if comp is None:
            continue
        count = comp.copy_count if initial or comp.autoscaling is None else comp.autoscaling.max_copies
        parts.append(f"{count} x {kind}: {comp.cpu_cores:g} vCPU, {comp.memory_mb} MB"
                     + (f", {comp.accelerators} GPU" if comp.accelerators else ""))
    return "; ".join(parts)


def _check_scale_to_zero(settings: EnvironmentSettings) -> Problems:
    """Scale to zero is the endpoint's and every component's together: the last instance goes only once no copy is
    left, and copies at zero on instances that stay would pay for idle instances."""
    zero_instances = scales_to_zero(settings)
    problems: Problems = []
    for kind in settings.kinds:
        component = settings.endpoint(kind).component
        if component is None:
            continue
        copies = component.autoscaling
        zero_copies = copies is not None and copies.min_copies == 0
        if zero_instances and not zero_copies:
            problems.append((f"{kind}.component.autoscaling" + (".min_copies" if copies else ""),
                             f"{ZERO_KEY} is 0 (scale to zero), and SageMaker releases the last instance only once "
                             "no copy is left: let this component's copies scale to 0 too (component.autoscaling "
                             "with min_copies: 0)"))
        if zero_copies and not zero_instances:
            problems.append((f"{kind}.component.autoscaling.min_copies",
                             f"0 copies is scale to zero, which needs {ZERO_KEY}: 0 too (managed instance scaling "
                             "releases the instances once no copy is left); with instances kept, they would be paid "
                             "for with nothing on them"))
    return problems
