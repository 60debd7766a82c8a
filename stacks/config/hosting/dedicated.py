"""`dedicated`: one endpoint per model, on instances of its own (the default mode)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from ..container_keys import GPU_LAYERS_KEY
from ..kinds import EndpointKind, HostingMode
from ..problems import Problems
from .mode import HostingRules, Room, instance_fit, instance_room

if TYPE_CHECKING:
    from ..environment import EnvironmentSettings


class Dedicated(HostingRules):
    """The model's own endpoint: its instance type and count, its variant's autoscaling."""

    name: ClassVar[HostingMode] = "dedicated"

    def check_keys(self, settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
        if settings.endpoint(kind).instance_type is None:
            return [(f"{kind}.instance_type", "required for dedicated hosting (the endpoint's own instances)")]
        return []

    def instance_types(self, settings: EnvironmentSettings, kind: EndpointKind) -> list[tuple[str, str]]:
        instance_type = settings.endpoint(kind).instance_type
        return [(f"{kind}.instance_type", instance_type)] if instance_type else []

    def model_fit(self, settings: EnvironmentSettings, kind: EndpointKind, model_bytes: int) -> Problems:
        gpu_layers = settings.llama_env_for(kind).get(GPU_LAYERS_KEY)
        return [problem for key, instance_type in self.instance_types(settings, kind)
                for problem in instance_fit(key, instance_type, model_bytes, gpu_layers)]

    def decision_rooms(self, settings: EnvironmentSettings) -> list[Room]:
        rooms = (instance_room(key, instance_type) for key, instance_type in self.instance_types(settings, "decision"))
        return [room for room in rooms if room is not None]
