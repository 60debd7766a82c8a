"""The settings of one deployment environment (one entry of cdk.json's `environments`, or made in code).

Each block's own bounds are checked by its model; the rules that span blocks run in rules.py before anything is
built. `EnvironmentSettings` also answers the questions every part asks of it (a model's endpoint settings and
hosting mode, its llama.cpp map), so none of them re-derives a default.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from .container_keys import GPU_LAYERS_ALL, GPU_LAYERS_KEY
from .endpoint import Endpoint, SharedEndpoint
from .hosting import HostingRules, mode_for
from .https_api import HttpsApi
from .image import DlcImage, ImageBuild
from .instances import Accelerator, Architecture
from .kinds import ENDPOINT_KINDS, EndpointKind, HostingMode
from .model_source import ModelSource
from .network import Vpc
from .notifications import Notifications
from .strict import EnvMap, Strict

# CloudWatch Logs retention periods (days) and their aws_logs.RetentionDays member names.
LOG_RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}


class EnvironmentSettings(Strict):
    """One deployment environment: where it runs, which model, its endpoints (chat and decision, or the decision
    endpoint alone), and what surrounds them."""

    account: str | None = Field(None, pattern=r"^\d{12}$")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    accelerator: Accelerator
    inference_ami_version: str | None = None
    model: ModelSource
    dlc_image: DlcImage = DlcImage()
    llama_env: EnvMap = Field(default_factory=dict, description="SM_LLAMA_CPP_* for both endpoints")
    chat: Endpoint | None = Field(description="the chat endpoint's settings, or false: a decision-only environment, "
                                              "with no chat endpoint")
    decision: Endpoint
    image_build: ImageBuild = ImageBuild()
    vpc: Vpc | None = None
    network_isolation: bool = True
    log_retention_days: int = 30
    hosting: HostingMode = "dedicated"
    shared_endpoint: SharedEndpoint | None = None
    notifications: Notifications = Notifications()
    https_api: HttpsApi | None = None

    @model_validator(mode="before")
    @classmethod
    def _former_key_names_its_new_name(cls, value: Any) -> Any:
        if isinstance(value, dict) and "systemone_api" in value:
            raise ValueError("systemone_api is now https_api (the API serves System One and OpenAI's Decisions API): "
                             "rename the key, its settings are the same")
        return value

    @field_validator("chat", mode="before")
    @classmethod
    def _chat_false_leaves_it_out(cls, value: Any) -> Any:
        """`"chat": false` in cdk.json (None in code): no chat endpoint. `true` says nothing about one."""
        if value is False:
            return None
        if value is True:
            raise ValueError("give the chat endpoint's settings, or false to leave the chat endpoint out")
        return value

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value} is not a CloudWatch Logs retention; use one of {sorted(LOG_RETENTION_DAYS)}")
        return value

    @property
    def kinds(self) -> tuple[EndpointKind, ...]:
        """The models this environment serves: both, or the decision model alone (`chat: false`)."""
        return ENDPOINT_KINDS if self.chat is not None else ("decision",)

    def endpoint(self, kind: EndpointKind) -> Endpoint:
        if kind == "decision":
            return self.decision
        if self.chat is None:
            raise ValueError("this environment has no chat endpoint (chat: false): ask settings.kinds first")
        return self.chat

    def hosting_of(self, kind: EndpointKind) -> HostingMode:
        return self.endpoint(kind).hosting or self.hosting

    def mode_of(self, kind: EndpointKind) -> HostingRules:
        """The hosting mode of `kind`, to ask (hosting/): never compare its name."""
        return mode_for(self.hosting_of(kind))

    def network_isolation_for(self, kind: EndpointKind) -> bool:
        override = self.endpoint(kind).network_isolation
        return self.network_isolation if override is None else override

    @property
    def shared(self) -> bool:
        """The models on one endpoint (hosting_rules.py refuses one model shared and the other not)."""
        return any(self.mode_of(kind).shares_endpoint for kind in self.kinds)

    def decision_instance_types(self) -> list[str]:
        """The instance types the decision image runs on in real time (its CUDA build targets them): the endpoint's
        own, or the shared endpoint's; none when serverless (CPU only)."""
        return [instance_type for _, instance_type in self.mode_of("decision").instance_types(self, "decision")]

    def architecture_of(self, kind: EndpointKind) -> Architecture:
        """The image architecture `kind` runs (arm64 on Graviton instances; the decision image is built for it)."""
        return self.mode_of(kind).architecture(self, kind)

    def llama_env_for(self, kind: EndpointKind) -> dict[str, str]:
        """The SM_LLAMA_CPP_* map of one endpoint: shared map, then its overrides, then GPU offload."""
        merged = {**self.llama_env, **self.endpoint(kind).llama_env}
        if self.accelerator == "gpu":
            merged.setdefault(GPU_LAYERS_KEY, GPU_LAYERS_ALL)
        return merged
