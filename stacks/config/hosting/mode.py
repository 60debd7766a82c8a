"""What every hosting mode answers, so that the rest of stacks/ asks the mode instead of comparing its name.

A mode is one class (dedicated.py, shared.py, serverless.py) with the keys it needs and refuses, its own rules,
what the model runs on (instance types and the decision endpoint's serving capacities), the names it serves under and
what it adds to the container's environment. Its resources and dashboard widgets are its twin in stacks/endpoints/modes/
(config holds no constructs). A new mode is a module here, one there, and its name in the schema (kinds.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from ..instances import GIB, MIB, Architecture, InstanceTypeError, describe_instance, instance_capacity
from ..kinds import EndpointKind, HostingMode
from ..problems import Problems

if TYPE_CHECKING:
    from ..environment import EnvironmentSettings


@dataclass(frozen=True)
class ServingCapacity:
    """What one decision instance (or component copy, or serverless endpoint) has, and the key that sizes it."""

    key: str
    gpu_key: str  # where a GPU shortfall is named
    name: str
    host_bytes: int
    gpu_bytes: int = 0
    gpus: int = 0
    vcpus: int | None = None  # None: not known (serverless)

    def describe(self, side: str) -> str:
        gpu = f"{self.gpus} x {self.gpu_bytes / max(1, self.gpus) / GIB:g} GiB of GPU memory"
        host = f"{_size(self.host_bytes)} of memory"
        return {"gpu": gpu, "host": host}.get(side, f"{host} and {gpu}")


def _size(count: int) -> str:
    return f"{count / GIB:,.1f} GiB" if count >= GIB else f"{count / MIB:,.0f} MiB"


def whole_instance(key: str, instance_type: str) -> ServingCapacity | None:
    """A whole instance as what the decision model runs on (None: a type the instance table does not list)."""
    capacity = instance_capacity(instance_type)
    if capacity is None:
        return None
    return ServingCapacity(key, key, instance_type, int(capacity.memory_gib * GIB),
                           int(capacity.gpus * capacity.gpu_memory_gib * GIB), capacity.gpus, capacity.vcpus)


def instance_fit(key: str, instance_type: str, model_bytes: int, gpu_layers: str | None) -> Problems:
    """The model against a whole instance, where its layers go (nothing to say for a type the table lacks)."""
    capacity = instance_capacity(instance_type)
    if capacity is None:
        return []
    limit, what = capacity.model_limit(gpu_layers)
    if model_bytes <= limit:
        return []
    return [(key, f"{instance_type} has {what}; the model is {model_bytes / 2**30:.1f} GiB "
                  f"({model_bytes:,} bytes) and cannot be loaded; pick a larger instance type")]


@dataclass(frozen=True)
class OwnBlock:
    """The block of an endpoint's settings that only one mode has (`component`, `serverless`), and what is said
    when it is missing in that mode or given in another."""

    key: str
    required: str
    only: str


class HostingRules:
    """One hosting mode, as the config sees it. The defaults are those of a model on an endpoint of its own."""

    name: ClassVar[HostingMode]
    shares_endpoint: ClassVar[bool] = False  # both models on one endpoint: every model must use it, or none
    block: ClassVar[OwnBlock | None] = None
    refused: ClassVar[Mapping[str, str]] = {}  # endpoint keys the stack writes itself in this mode, with why
    chat_refusal: ClassVar[str | None] = None  # why the chat model cannot use this mode (None: it can)
    batch_refusal: ClassVar[str | None] = None  # why Batch Transform is not offered beside it (None: it is)
    body_limit: ClassVar[int | None] = None  # the request body limit the stack sets when the config does not

    def check_keys(self, settings: EnvironmentSettings, kind: EndpointKind) -> Problems:
        """Keys of `kind`'s endpoint this mode needs (beyond its block) and refuses; the blocks are checked by
        hosting_rules.py, which knows every mode's."""
        endpoint = settings.endpoint(kind)
        return [(f"{kind}.{key}", reason) for key, reason in self.refused.items()
                if key in endpoint.model_fields_set and getattr(endpoint, key) is not None]

    def check(self, settings: EnvironmentSettings) -> Problems:
        """This mode's rules across the environment, once, where any model uses it."""
        return []

    def notices(self, settings: EnvironmentSettings) -> Problems:
        """What a valid choice implies, printed by `cdk synth` with its key (scale to zero's cold start)."""
        return []

    def instance_types(self, settings: EnvironmentSettings, kind: EndpointKind) -> list[tuple[str, str]]:
        """The instance types `kind` runs on in real time, each with the key that sets it (none: serverless)."""
        return []

    def architecture(self, settings: EnvironmentSettings, kind: EndpointKind) -> Architecture:
        """The architecture of the image `kind`'s model runs: its first (preferred) instance type's; x86-64 where it
        has none (serverless) or it is not an instance this app runs (refused under its own key)."""
        for _, instance_type in self.instance_types(settings, kind)[:1]:
            try:
                return describe_instance(instance_type).architecture
            except InstanceTypeError:
                break
        return "x86_64"

    def model_fit(self, settings: EnvironmentSettings, kind: EndpointKind, model_bytes: int) -> Problems:
        """What this mode sizes besides whole instances (a component's reservation, serverless memory) against
        the model; whole instances are model_fit.py's."""
        return []

    def decision_capacities(self, settings: EnvironmentSettings) -> list[ServingCapacity]:
        """What the decision model has in this mode besides whole instances (those are decision_memory.py's)."""
        return []

    def container_defaults(self, settings: EnvironmentSettings, kind: EndpointKind) -> dict[str, str]:
        """Container variables this mode sets unless the config does."""
        return {}

    def endpoint_name(self, stack_name: str, kind: EndpointKind) -> str:
        return f"{stack_name}-{kind}"

    def component_name(self, stack_name: str, kind: EndpointKind) -> str | None:
        """The inference component that serves `kind`; None when the model has the endpoint to itself."""
        return None
