"""`dedicated`: one endpoint per model, on instances of its own (the default mode)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..container_keys import GPU_LAYERS_KEY
from ..kinds import EndpointKind, HostingMode
from ..problems import Problems
from .mode import HostingRules, ServingCapacity, instance_fit, whole_instance

if TYPE_CHECKING:
    from ..environment import EnvironmentSettings


class Dedicated(HostingRules):
    """The model's own endpoint: its instance type and count, its variant's autoscaling."""

    name: ClassVar[HostingMode] = "dedicated"

    def check_keys(self, settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
        endpoint = settings.endpoint(kind)
        if endpoint.instance_type is not None and endpoint.instance_pools is not None:
            return [(f"{kind}.instance_pools", "give instance_type or instance_pools, not both: the first pool is the "
                                               "preferred instance type")]
        if endpoint.instance_type is None and endpoint.instance_pools is None:
            return [(f"{kind}.instance_type", "required for dedicated hosting (the endpoint's own instances)")]
        if endpoint.autoscaling is not None and endpoint.autoscaling.min_instances == 0:
            return [(f"{kind}.autoscaling.min_instances",
                     "0 instances (scale to zero) is SageMaker's only for an endpoint that hosts inference "
                     "components; an endpoint of its own keeps at least one instance: use 1 or more, or host the "
                     "models shared (hosting: shared) with shared_endpoint.managed_scaling.min_instances: 0 and "
                     "component.autoscaling.min_copies: 0")]
        return []

    def instance_types(self, settings: EnvironmentSettings, kind: EndpointKind) -> list[tuple[str, str]]:
        """Its instance type, or its pools in priority order (each keyed by its place in the list)."""
        endpoint = settings.endpoint(kind)
        if endpoint.instance_pools is not None:
            return [(f"{kind}.instance_pools.{index}", pool) for index, pool in enumerate(endpoint.instance_pools)]
        return [(f"{kind}.instance_type", endpoint.instance_type)] if endpoint.instance_type else []

    def model_fit(self, settings: EnvironmentSettings, kind: EndpointKind, model_bytes: int) -> Problems:
        gpu_layers = settings.llama_env_for(kind).get(GPU_LAYERS_KEY)
        return [problem for key, instance_type in self.instance_types(settings, kind)
                for problem in instance_fit(key, instance_type, model_bytes, gpu_layers)]

    def decision_capacities(self, settings: EnvironmentSettings) -> list[ServingCapacity]:
        found = (whole_instance(key, instance_type) for key, instance_type in self.instance_types(settings, "decision"))
        return [capacity for capacity in found if capacity is not None]
