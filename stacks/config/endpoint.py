"""The settings of one endpoint (`chat`, `decision`): hosting, scaling, alarms, capture, and the shared endpoint's.

Bounds within one block are checked here, by the models; rules across blocks and keys (a mode's required and
refused keys, placement on the shared instances) are in hosting/ (one module per mode) and rules.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import Field, field_validator, model_validator

from semif_adapter.core.calibration import parse_calibration

from .kinds import HostingMode
from .strict import MAX_COPIES, MAX_INSTANCES, EnvMap, Strict, ordered, within

# CloudWatch: an alarm evaluates at most one day of data (Period x EvaluationPeriods <= 86,400 s).
ALARM_WINDOW_MAX_SECONDS = 86_400
LATENCY_MAX_MS = 3_600_000  # an hour: no invocation runs that long, and CloudWatch gets a finite threshold


class TargetTracking(Strict):
    """What every target-tracking policy of this app has besides its bounds and target."""

    scale_in_cooldown_s: int = Field(300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(60, ge=0, le=3600)


class Autoscaling(TargetTracking):
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute).

    The metric counts whole invocations per minute: a target below one would scale out on any traffic.
    """

    min_instances: int = Field(ge=0, le=MAX_INSTANCES, description="0 is refused with its reason: an endpoint of "
                                                                   "its own keeps an instance (hosting_rules.py)")
    max_instances: int = Field(ge=1, le=MAX_INSTANCES)
    target_invocations_per_instance: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        ordered(self, "min_instances", "max_instances")
        return self


class AlarmWindow(Strict):
    """How long a condition must last before an alarm fires: `evaluation_periods` periods of `period_s`."""

    period_s: int = Field(60, ge=60, le=3600, multiple_of=60)
    evaluation_periods: int = Field(3, ge=1, le=60)

    @model_validator(mode="after")
    def _window(self) -> AlarmWindow:
        window = self.period_s * self.evaluation_periods
        if window > ALARM_WINDOW_MAX_SECONDS:
            raise ValueError(f"period_s x evaluation_periods is {self.period_s} x {self.evaluation_periods} = "
                             f"{window} s; CloudWatch evaluates at most one day ({ALARM_WINDOW_MAX_SECONDS} s)")
        return self


class Alarms(AlarmWindow):
    """CloudWatch alarms of one endpoint; with auto_rollback the error alarms also guard its deployments."""

    latency_p90_ms: float = Field(gt=0, le=LATENCY_MAX_MS, allow_inf_nan=False,
                                  description="ModelLatency p90 above this for evaluation_periods")
    errors_5xx: int = Field(1, ge=1, le=1_000_000, description="Invocation5XXErrors per period at or above this")
    model_errors: int = Field(1, ge=1, le=1_000_000, description="InvocationModelErrors per period at or above this")
    auto_rollback: bool = False
    warning_rate: float | None = Field(
        None, gt=0, le=1, allow_inf_nan=False,
        description="decision only: WarnedDecisions / Decisions above this (default 0.25)")


class DataCapture(Strict):
    """Request/response capture to an encrypted bucket of this stack. Off unless this block is present."""

    sampling_percentage: int = Field(ge=1, le=100)
    capture_input: bool = True
    capture_output: bool = True

    @model_validator(mode="after")
    def _something(self) -> DataCapture:
        if not (self.capture_input or self.capture_output):
            raise ValueError("capture_input and capture_output are both false: remove data_capture instead")
        return self


class CopyAutoscaling(TargetTracking):
    """Target tracking on an inference component's copies (SageMakerInferenceComponentInvocationsPerCopy, per
    minute); the shared endpoint's instances follow through its managed instance scaling."""

    min_copies: int = Field(ge=0, le=MAX_COPIES, description="0: scale to zero (with the shared endpoint's "
                                                             "managed_scaling.min_instances 0)")
    max_copies: int = Field(ge=1, le=MAX_COPIES)
    target_invocations_per_copy: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self) -> CopyAutoscaling:
        ordered(self, "min_copies", "max_copies")
        return self


class Component(Strict):
    """One model's share of the shared endpoint (an inference component): what one copy reserves, and how many."""

    cpu_cores: float = Field(ge=0.25, le=1024, allow_inf_nan=False, description="NumberOfCpuCoresRequired (vCPUs)")
    memory_mb: int = Field(ge=128, le=4_194_304, description="MinMemoryRequiredInMb: reserved for one copy")
    max_memory_mb: int | None = Field(None, ge=128, le=4_194_304, description="MaxMemoryRequiredInMb")
    accelerators: int = Field(0, ge=0, le=64, description="NumberOfAcceleratorDevicesRequired (GPUs); 0: none")
    copy_count: int = Field(1, ge=1, le=MAX_COPIES)
    autoscaling: CopyAutoscaling | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Component:
        if self.max_memory_mb is not None and self.max_memory_mb < self.memory_mb:
            raise ValueError(f"max_memory_mb ({self.max_memory_mb}) is below memory_mb ({self.memory_mb})")
        within(self, "copy_count", "autoscaling", "min_copies", "max_copies")
        return self


MAX_INSTANCE_POOLS = 5  # SageMaker: a production variant lists at most five InstancePools (Priority 1-5)


def check_pools(value: list[str] | None) -> list[str] | None:
    """An ordered list of one to five distinct instance types (the first is tried first)."""
    if value is None:
        return value
    if not 1 <= len(value) <= MAX_INSTANCE_POOLS:
        raise ValueError(f"{len(value)} instance pools; SageMaker takes 1 to {MAX_INSTANCE_POOLS} per production "
                         "variant (InstancePools, Priority 1-5): keep the five you prefer, in order")
    repeated = sorted({t for t in value if value.count(t) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} listed twice: each pool is one instance type, tried in order")
    return value


class ManagedScaling(Strict):
    """Managed instance scaling of the shared endpoint: SageMaker adds instances when copies need room, and with
    `min_instances` 0 releases the last one when no copy is left (scale to zero)."""

    min_instances: int = Field(ge=0, le=MAX_INSTANCES)
    max_instances: int = Field(ge=1, le=MAX_INSTANCES)

    @model_validator(mode="after")
    def _bounds(self) -> ManagedScaling:
        ordered(self, "min_instances", "max_instances")
        return self


class SharedEndpoint(Strict):
    """The one endpoint of `shared` hosting: the instances both inference components share."""

    instance_type: str | None = Field(None, description="required unless instance_pools is given")
    instance_pools: list[str] | None = Field(None, description="1-5 instance types in order of preference")
    instance_count: int = Field(1, ge=1, le=MAX_INSTANCES)
    managed_scaling: ManagedScaling | None = None

    @model_validator(mode="after")
    def _count(self) -> SharedEndpoint:
        within(self, "instance_count", "managed_scaling", "min_instances", "max_instances")
        return self

    @field_validator("instance_pools")
    @classmethod
    def _pools(cls, value: list[str] | None) -> list[str] | None:
        return check_pools(value)

    @property
    def instance_types(self) -> list[str]:
        """Its instance type, or its pools in priority order."""
        return self.instance_pools or ([self.instance_type] if self.instance_type else [])


class Serverless(Strict):
    """ServerlessConfig of the decision endpoint. SageMaker offers memory in whole GB from 1 to 6."""

    memory_mb: int = Field(ge=1024, le=6144, multiple_of=1024)
    max_concurrency: int = Field(ge=1, le=200)
    provisioned_concurrency: int | None = Field(None, ge=1, le=200)

    @model_validator(mode="after")
    def _provisioned(self) -> Serverless:
        if self.provisioned_concurrency is not None and self.provisioned_concurrency > self.max_concurrency:
            raise ValueError(f"provisioned_concurrency ({self.provisioned_concurrency}) is above max_concurrency "
                             f"({self.max_concurrency}); SageMaker requires it to be at most that")
        return self


class BatchTransform(Strict):
    """S3 input/output locations (and the IAM) for SageMaker Batch Transform jobs on the decision model."""

    instance_type: str = Field(description="the type transform jobs should use; validated, and a stack output")
    expire_days: int = Field(30, ge=1, le=3650, description="input and output objects are deleted after this")


class Endpoint(Strict):
    """One model's endpoint: its hosting, instances or component, container settings, alarms and extras."""

    hosting: HostingMode | None = Field(None, description="overrides the environment's hosting for this model")
    instance_type: str | None = Field(None, description="dedicated hosting only")
    instance_pools: list[str] | None = Field(
        None, description="dedicated hosting: 1-5 instance types in order of preference, instead of instance_type")
    model_per_image: bool = Field(False, description="instance pools on different images (x86-64 and arm64) each "
                                                     "get a model of their own (ModelNameOverride)")
    instance_count: int = Field(1, ge=1, le=100)
    llama_env: EnvMap = Field(default_factory=dict, description="SM_LLAMA_CPP_* overrides for this endpoint")
    # The adapter's SEMIF_* settings (decision endpoint only), written `env` in cdk.json and in code.
    adapter_env: EnvMap = Field(default_factory=dict, alias="env",
                                description="SEMIF_* settings (decision endpoint only)")
    autoscaling: Autoscaling | None = None
    alarms: Alarms
    data_capture: DataCapture | None = None
    model_download_timeout_s: int | None = Field(None, ge=60, le=3600)
    startup_health_check_timeout_s: int | None = Field(None, ge=60, le=3600)
    network_isolation: bool | None = Field(None, description="overrides the environment's network_isolation")
    component: Component | None = Field(None, description="shared hosting: this model's inference component")
    serverless: Serverless | None = Field(None, description="serverless hosting (decision only)")
    batch_transform: BatchTransform | None = Field(None, description="decision only: Batch Transform locations")
    calibration: str | None = Field(None, min_length=1,
                                    description="decision only: a `semif calibrate` file")

    @field_validator("instance_pools")
    @classmethod
    def _pools(cls, value: list[str] | None) -> list[str] | None:
        return check_pools(value)

    def calibration_setting(self) -> str | None:
        """The calibration file as the value of SEMIF_CALIBRATION: its canonical document, provenance dropped (an
        environment value holds at most 1024 characters). Raises CalibrationError or OSError."""
        if self.calibration is None:
            return None
        parsed = parse_calibration(Path(self.calibration).read_text())
        return json.dumps(parsed.document(), separators=(",", ":"))
