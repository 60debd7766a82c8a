"""The deployment configuration: one typed, validated object per environment, read from `cdk.json` context.

Validated in this one place, before any construct exists, so every mistake that SageMaker would report ten
minutes into a deployment (or never: a GPU idling under the CPU image) fails `cdk synth` with the key named,
e.g. `environments.prod.decision.instance_type: ...`. Only the selected environment is validated, so a
half-written `staging` entry does not block `-c env=dev`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Literal

from aws_cdk.region_info import RegionInfo
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from semif_adapter.artifact import CHAT_TEMPLATE_KEY
from semif_adapter.calibration import CalibrationError, parse_calibration
from semif_adapter.llama_flags import CONSUMED, CONTROL_CHARACTER, PREFIX, FlagError, check_setting
from semif_adapter.model_files import MAX_DEPTH, MODEL_SUFFIX, is_projector
from semif_adapter.quantize import ConversionError, require_type
from semif_adapter.settings import (
    ABORT_GRACE_SECONDS,
    SAGEMAKER_STOP_SECONDS,
    SEMIF_KEYS,
    SEMIF_PREFIX,
    SettingsError,
    load_settings,
)

from .chat_template import check_chat_template
from .cuda_architectures import CUDA_ARCHITECTURES
from .hosting import check_hosting, check_hosting_fit
from .instances import (
    Accelerator,
    describe_instance,
    inference_ami_versions,
    instance_capacity,
    instance_problem,
)
from .memory_fit import check_decision_memory
from .systemone_api_rules import check_systemone_api

CONTEXT_KEY = "semif"  # cdk.json: context.semif = {app_name, environments: {NAME: {...}}}
ENV_CONTEXT_KEY = "env"  # cdk synth -c env=NAME
EndpointKind = Literal["chat", "decision"]
ENDPOINT_KINDS: tuple[EndpointKind, ...] = ("chat", "decision")
# How a model is hosted (README "Hosting modes"): its own endpoint, a component of the one shared endpoint, or the
# decision model on a serverless endpoint. Checked across keys in stacks/hosting.py.
HostingMode = Literal["dedicated", "shared", "serverless"]

# The CUDA 13 runtime in the DLC's CUDA image needs a driver newer than the default host AMI's.
CUDA13_AMI_VERSIONS = frozenset({"al2-ami-sagemaker-inference-gpu-3-1", "al2023-ami-sagemaker-inference-gpu-4-1"})
GPU_LAYERS_ALL = "999"
# Set by the stack from the artifact; a second value in config would fight it. The llama ones are the keys the
# DLC's entry point consumes, which `check_setting` accepts whatever their value, so they are refused here.
STACK_OWNED_LLAMA = CONSUMED
MODEL_SHA256_KEY = SEMIF_PREFIX + "MODEL_SHA256"  # the adapter's check of the model it loads
CALIBRATION_KEY = SEMIF_PREFIX + "CALIBRATION"
ENDPOINT_NAME_KEY = SEMIF_PREFIX + "ENDPOINT_NAME"  # the EndpointName dimension of the adapter's metrics
MAX_BODY_KEY = SEMIF_PREFIX + "MAX_BODY_BYTES"
# Adapter settings the stack sets itself, with why a value in config would be wrong.
STACK_OWNED_SEMIF = {
    MODEL_SHA256_KEY: "set by the stack from the model artifact; remove it",
    ENDPOINT_NAME_KEY: "set by the stack to the endpoint's name, which the dashboard and the alarms look up; remove it",
}
# Environment variables are returned by DescribeModel to anyone allowed to call it: never a secret there.
# These two patterns are the one secret detector of the configuration (llama_env, decision.env, build args).
SECRET_WORDS = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|SECRET_KEY|ACCESS_KEY|PASSWORD|PASSWD|PRIVATE_KEY)(_|$)")
# Values that are credentials whatever their key.
SECRET_VALUES = re.compile(
    r"\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"  # AWS access key id
    r"|(?<![A-Za-z0-9/+])(?=[A-Za-z0-9/+]*[A-Z])(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[0-9])"
    r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"  # AWS secret access key: 40 base64 characters, mixed case and digits
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,}|hf_[A-Za-z0-9]{30,}|sk-[A-Za-z0-9_-]{20,})\b"
    r"|\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^/\s@]+@"  # a password in a URL: scheme://user:password@host
    r"|\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*"  # a JSON Web Token (header.payload.signature)
)


def looks_like_secret(name: str, value: str) -> bool:
    """A secret-looking variable name or a credential-looking value (the configuration's one detector)."""
    return bool(SECRET_WORDS.search(name.upper()) or SECRET_VALUES.search(value))


# Adapter settings are single-line values; SEMIF_CALIBRATION is JSON, so JSON's whitespace is allowed there.
JSON_SETTINGS = frozenset({SEMIF_PREFIX + "CALIBRATION"})
ALL_INTERFACES = frozenset({"0.0.0.0", "::"})
HOST_KEY = SEMIF_PREFIX + "HOST"
DRAIN_KEY = SEMIF_PREFIX + "DRAIN_SECONDS"
MAX_DRAIN_SECONDS = int(SAGEMAKER_STOP_SECONDS - ABORT_GRACE_SECONDS)  # SIGKILL comes 30 s after SIGTERM
CTX_SIZE_KEY = PREFIX + "CTX_SIZE"
GPU_LAYERS_KEY = PREFIX + "N_GPU_LAYERS"
# Context extension is intended when one of these is set: then a context beyond the trained one is not refused.
CONTEXT_EXTENSION_KEYS = frozenset(PREFIX + k for k in ("ROPE_SCALE", "ROPE_SCALING", "ROPE_FREQ_SCALE",
                                                        "YARN_ORIG_CTX"))
MAX_INSTANCES = 100  # the same cap as instance_count
MAX_COPIES = 100  # inference component copies: the same bound, far above what one model needs
# CloudWatch: an alarm evaluates at most one day of data (Period x EvaluationPeriods <= 86,400 s).
ALARM_WINDOW_MAX_SECONDS = 86_400
LATENCY_MAX_MS = 3_600_000  # an hour: no invocation runs that long, and CloudWatch gets a finite threshold
# CloudWatch Logs retention periods (days) and their aws_logs.RetentionDays member names.
LOG_RETENTION_DAYS = {
    1: "ONE_DAY", 3: "THREE_DAYS", 5: "FIVE_DAYS", 7: "ONE_WEEK", 14: "TWO_WEEKS", 30: "ONE_MONTH",
    60: "TWO_MONTHS", 90: "THREE_MONTHS", 120: "FOUR_MONTHS", 150: "FIVE_MONTHS", 180: "SIX_MONTHS",
    365: "ONE_YEAR", 400: "THIRTEEN_MONTHS", 545: "EIGHTEEN_MONTHS", 731: "TWO_YEARS", 1096: "THREE_YEARS",
    1827: "FIVE_YEARS", 2192: "SIX_YEARS", 2557: "SEVEN_YEARS", 2922: "EIGHT_YEARS", 3288: "NINE_YEARS",
    3653: "TEN_YEARS",
}
ENV_VALUE_MAX = 1024  # SageMaker's limit on one environment value


class ConfigError(ValueError):
    """Every problem found in one environment's configuration, each with its full key."""

    def __init__(self, problems: list[tuple[str, str]]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {key}: {message}" for key, message in problems)
        super().__init__(f"invalid cdk.json configuration ({len(problems)} problem(s)):\n{lines}")

    @property
    def keys(self) -> list[str]:
        return [key for key, _ in self.problems]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


EnvMap = dict[str, str]


class _Convertible(_Strict):
    """A local GGUF the stack packages; `convert` re-encodes it first with llama.cpp's quantizer (once, cached)."""

    convert: str | None = Field(None, description="e.g. Q8_0; see scripts/package_model.py --convert")

    @field_validator("convert")
    @classmethod
    def _convert(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return require_type(value)
        except ConversionError as error:
            raise ValueError(str(error)) from None


class EmbeddedModel(_Convertible):
    """The SmolLM2-135M GGUF shipped with the toolkit: deployable with no model of your own."""

    source: Literal["embedded"]


class GgufModel(_Convertible):
    """A local .gguf (first shard of a split model), packaged into model.tar.gz at synth."""

    source: Literal["gguf"]
    path: str = Field(min_length=1)


class TarballModel(_Strict):
    """A local model.tar.gz made by scripts/package_model.py (checked against the packaging rules)."""

    source: Literal["tarball"]
    path: str = Field(min_length=1)


_S3_URI = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s]+)$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_VERSION_ID = re.compile(r"^[\x21-\x7e]{1,1024}$")


class S3Model(_Strict):
    """An existing model.tar.gz in S3, pinned so that a new model is always a visible config change.

    Pinned by content (`sha256`, the model's digest as printed by the packaging script, which must appear in
    the object key: a content-addressed key cannot silently change) or by `version_id` (checked against the
    object's current version at deploy time, since SageMaker itself always reads the current version); a
    version pin may also give `sha256`. The digest, when given, is what every decision instance verifies
    before it loads the model. The bucket must belong to `bucket_owner` (default: the deploying account);
    the execution roles may read it only there, and the deployment checks it.
    """

    source: Literal["s3"]
    uri: str
    sha256: str | None = None
    version_id: str | None = None
    model_file: str = Field(description="path of the .gguf inside the tarball, e.g. model.gguf")
    model_bytes: int | None = Field(None, gt=0, description="size of the .gguf; sizes the start-up timeouts")
    context_length: int | None = Field(None, gt=0, description="the model's trained context (its GGUF header)")
    kms_key_arn: str | None = Field(None, pattern=r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}$")
    bucket_owner: str | None = Field(None, pattern=r"^\d{12}$",
                                     description="account that owns the bucket, when it is not the deploying one")

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str) -> str:
        match = _S3_URI.fullmatch(value)
        if match is None or match["key"].endswith("/"):
            raise ValueError(f"{value!r} is not an s3://bucket/key URI of one object")
        return value

    @field_validator("model_file")
    @classmethod
    def _model_file(cls, value: str) -> str:
        parts = value.split("/")
        if (not value.endswith(MODEL_SUFFIX) or value.startswith("/") or ".." in parts or len(parts) > MAX_DEPTH
                or is_projector(PurePosixPath(value))):
            raise ValueError(f"{value!r} must be a relative .gguf path at most {MAX_DEPTH} levels deep, "
                             "not a projector")
        return value

    @model_validator(mode="after")
    def _pinned(self) -> S3Model:
        if self.sha256 is None and self.version_id is None:
            raise ValueError("an existing S3 object must be pinned: give sha256 (content-addressed key) "
                             "or version_id (versioned bucket)")
        if self.sha256 is not None:
            if not _SHA256.fullmatch(self.sha256):
                raise ValueError(f"sha256 {self.sha256!r} is not 64 lower-case hex digits")
            if self.version_id is None and self.sha256 not in self.key:
                raise ValueError(f"sha256 pinning needs a content-addressed key: {self.key!r} does not contain "
                                 f"{self.sha256}; upload to e.g. models/{self.sha256}/model.tar.gz")
        if self.version_id is not None and (not _VERSION_ID.fullmatch(self.version_id) or self.version_id == "null"):
            raise ValueError(f"version_id {self.version_id!r} is not an S3 version id (the bucket must be "
                             "versioned; 'null' means it is not)")
        return self

    @property
    def bucket(self) -> str:
        return _S3_URI.fullmatch(self.uri)["bucket"]  # type: ignore[index]

    @property
    def key(self) -> str:
        return _S3_URI.fullmatch(self.uri)["key"]  # type: ignore[index]

    @property
    def kms_key_region(self) -> str | None:
        return self.kms_key_arn.split(":")[3] if self.kms_key_arn else None


ModelSource = Annotated[EmbeddedModel | GgufModel | TarballModel | S3Model, Field(discriminator="source")]


_ECR_REPOSITORY = re.compile(r"(?:[a-z0-9]+(?:[._-][a-z0-9]+)*/)*[a-z0-9]+(?:[._-][a-z0-9]+)*")
_IMAGE_TAG = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
IMAGE_DIGEST = r"^sha256:[0-9a-f]{64}$"


class DlcImage(_Strict):
    """The stock llama.cpp DLC; the registry account comes from CDK's region facts, not from here.

    `digest` pins the image of the environment's accelerator (the `cpu_tag` or `cuda_tag` image): both endpoints
    then run exactly that build, and the decision image's tag changes with it. Without it, `-v1` is a moving
    tag (README, "The decision image").
    """

    repository: str = Field("llama-cpp", max_length=256)
    cpu_tag: str = Field("server-sagemaker-cpu-v1", pattern=_IMAGE_TAG)
    cuda_tag: str = Field("server-sagemaker-cuda-v1", pattern=_IMAGE_TAG)
    digest: str | None = Field(None, pattern=IMAGE_DIGEST)

    @field_validator("repository")
    @classmethod
    def _repository(cls, value: str) -> str:
        if not _ECR_REPOSITORY.fullmatch(value):
            raise ValueError(f"{value!r} is not an ECR repository name: lower-case letters and digits in "
                             "'/'-separated parts, each part joined by single '.', '_' or '-' (no '..', no "
                             "empty part)")
        return value


def _ordered(model: BaseModel, low: str, high: str) -> None:
    """Refuse a lower bound above its upper bound, naming both keys."""
    if getattr(model, low) > getattr(model, high):
        raise ValueError(f"{low} ({getattr(model, low)}) is greater than {high} ({getattr(model, high)})")


def _within(model: BaseModel, count_key: str, bounds_key: str, low: str, high: str) -> None:
    """Refuse a starting count outside the bounds that its scaling block keeps it in."""
    count, bounds = getattr(model, count_key), getattr(model, bounds_key)
    if bounds is not None and not getattr(bounds, low) <= count <= getattr(bounds, high):
        raise ValueError(f"{count_key} {count} is outside {bounds_key} bounds "
                         f"{getattr(bounds, low)}..{getattr(bounds, high)}")


class TargetTracking(_Strict):
    """What every target-tracking policy of this app has besides its bounds and target."""

    scale_in_cooldown_s: int = Field(300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(60, ge=0, le=3600)


class Autoscaling(TargetTracking):
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute).

    The metric counts whole invocations per minute: a target below one would scale out on any traffic.
    """

    min_instances: int = Field(ge=1, le=MAX_INSTANCES)
    max_instances: int = Field(ge=1, le=MAX_INSTANCES)
    target_invocations_per_instance: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        _ordered(self, "min_instances", "max_instances")
        return self


class AlarmWindow(_Strict):
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


class DataCapture(_Strict):
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

    min_copies: int = Field(ge=1, le=MAX_COPIES)
    max_copies: int = Field(ge=1, le=MAX_COPIES)
    target_invocations_per_copy: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)

    @model_validator(mode="after")
    def _bounds(self) -> CopyAutoscaling:
        _ordered(self, "min_copies", "max_copies")
        return self


class Component(_Strict):
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
        _within(self, "copy_count", "autoscaling", "min_copies", "max_copies")
        return self


class ManagedScaling(_Strict):
    """Managed instance scaling of the shared endpoint: SageMaker adds instances when copies need room."""

    min_instances: int = Field(ge=1, le=MAX_INSTANCES)
    max_instances: int = Field(ge=1, le=MAX_INSTANCES)

    @model_validator(mode="after")
    def _bounds(self) -> ManagedScaling:
        _ordered(self, "min_instances", "max_instances")
        return self


class SharedEndpoint(_Strict):
    """The one endpoint of `shared` hosting: the instances both inference components share."""

    instance_type: str
    instance_count: int = Field(1, ge=1, le=MAX_INSTANCES)
    managed_scaling: ManagedScaling | None = None

    @model_validator(mode="after")
    def _count(self) -> SharedEndpoint:
        _within(self, "instance_count", "managed_scaling", "min_instances", "max_instances")
        return self


class Serverless(_Strict):
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


class BatchTransform(_Strict):
    """S3 input/output locations (and the IAM) for SageMaker Batch Transform jobs on the decision model."""

    instance_type: str = Field(description="the type transform jobs should use; validated, and a stack output")
    expire_days: int = Field(30, ge=1, le=3650, description="input and output objects are deleted after this")


class Endpoint(_Strict):
    hosting: HostingMode | None = Field(None, description="overrides the environment's hosting for this model")
    instance_type: str | None = Field(None, description="dedicated hosting only")
    instance_count: int = Field(1, ge=1, le=100)
    llama_env: EnvMap = Field(default_factory=dict, description="SM_LLAMA_CPP_* overrides for this endpoint")
    env: EnvMap = Field(default_factory=dict, description="SEMIF_* settings (decision endpoint only)")
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
                                    description="decision only: a --fit-calibration file")

    def calibration_setting(self) -> str | None:
        """The calibration file as the value of SEMIF_CALIBRATION: its canonical document, provenance dropped (an
        environment value holds at most 1024 characters). Raises CalibrationError or OSError."""
        if self.calibration is None:
            return None
        parsed = parse_calibration(Path(self.calibration).read_text())
        return json.dumps(parsed.document(), separators=(",", ":"))


def _resource_ids(value: list[str], prefix: str, noun: str) -> list[str]:
    """Refuse the first item that is not an EC2 resource id `prefix-` + 8 to 17 hex digits (one check, three lists)."""
    for item in value:
        if not re.fullmatch(rf"{prefix}-[0-9a-f]{{8,17}}", item):
            raise ValueError(f"{item!r} is not a {noun} id ({prefix}-...)")
    return value


class VpcEndpoints(_Strict):
    """Interface endpoints (ECR API, ECR Docker, CloudWatch Logs) and an S3 gateway endpoint in the VPC."""

    vpc_id: str = Field(pattern=r"^vpc-[0-9a-f]{8,17}$")
    route_table_ids: list[str] = Field(min_length=1)

    @field_validator("route_table_ids")
    @classmethod
    def _route_tables(cls, value: list[str]) -> list[str]:
        return _resource_ids(value, "rtb", "route table")


class Vpc(_Strict):
    """Run both models inside these subnets (ids, never looked up: synth stays offline)."""

    subnet_ids: list[str] = Field(min_length=1, max_length=16)
    security_group_ids: list[str] = Field(min_length=1, max_length=5)
    vpc_endpoints: VpcEndpoints | None = None

    @field_validator("subnet_ids")
    @classmethod
    def _subnets(cls, value: list[str]) -> list[str]:
        return _resource_ids(value, "subnet", "subnet")

    @field_validator("security_group_ids")
    @classmethod
    def _groups(cls, value: list[str]) -> list[str]:
        return _resource_ids(value, "sg", "security group")


BUILD_ARG_SECRET = ("looks like a secret; build args are a plain-text environment variable of the CodeBuild "
                    "project (readable in the template and with codebuild:BatchGetProjects) and end up in the image "
                    "history")
_BUILD_ARG_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Build args the stack sets itself, and the key that configures each.
STACK_BUILD_ARGS = {"BASE_IMAGE": "dlc_image and accelerator", "BUILDER_IMAGE": "image_build.cuda_builder_image"}
# Docker Hub's CUDA devel image matching the CUDA DLC (13.0.2 on Amazon Linux 2023): nvcc for the bindings.
CUDA_BUILDER_IMAGE = "nvidia/cuda:13.0.2-devel-amzn2023"
_IMAGE_REFERENCE = re.compile(r"(?:[a-z0-9.-]+(?::\d+)?/)?[a-z0-9]+(?:[._/-][a-z0-9]+)*"
                              r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[0-9a-f]{64})?")


def control_characters(text: str) -> list[str]:
    """The control characters in `text` as U+XXXX, each once (a newline in a build arg becomes a new argument)."""
    return sorted({f"U+{ord(char):04X}" for char in CONTROL_CHARACTER.findall(text)})


class ImageBuild(_Strict):
    """The CodeBuild project that builds the decision image FROM the DLC."""

    compute_type: Literal["small", "medium", "large", "xlarge", "2xlarge"] = "large"
    # The custom resource waiting for the build has at most one hour in all (Provider framework limit).
    timeout_minutes: int = Field(40, ge=10, le=50)
    # The GPU variant's builder stage (nvcc); point it at a mirror to avoid Docker Hub's anonymous pull limits.
    cuda_builder_image: str = CUDA_BUILDER_IMAGE
    # `docker build --build-arg`s added to the accelerator's defaults (decision_image.build_args_for).
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
            if SECRET_WORDS.search(key.upper()) or SECRET_VALUES.search(arg):
                raise ValueError(f"{key}: {BUILD_ARG_SECRET}")
        return value


_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s.]+")  # fullmatch: one address, no spaces or newlines
_TOPIC_ARN = re.compile(r"arn:aws[a-z-]*:sns:(?P<region>[a-z0-9-]+):\d{12}:[A-Za-z0-9_-]{1,256}")


class Notifications(_Strict):
    """Who hears the alarms: email subscriptions of the stack's topic, and/or an existing topic (your paging)."""

    emails: list[str] = Field(default_factory=list, max_length=20)
    topic_arn: str | None = None

    @field_validator("emails")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        for address in value:
            if not _EMAIL.fullmatch(address):
                raise ValueError(f"{address!r} is not an email address")
        if len(set(value)) != len(value):
            raise ValueError("an address is listed twice")
        return value

    @field_validator("topic_arn")
    @classmethod
    def _topic(cls, value: str | None) -> str | None:
        if value is not None and not _TOPIC_ARN.fullmatch(value):
            raise ValueError(f"{value!r} is not an SNS topic ARN (arn:aws:sns:REGION:ACCOUNT:NAME)")
        return value

    @property
    def topic_region(self) -> str | None:
        match = _TOPIC_ARN.fullmatch(self.topic_arn) if self.topic_arn else None
        return match["region"] if match else None


# ---- the System One API in front of the decision endpoint (stacks/systemone_api.py; rules across keys in
# stacks/systemone_api_rules.py) ----------------------------------------------------------------------------------

# API Gateway's default account-level throttle in a region (10,000 requests per second, bursts of 5,000): a key's
# own limits above these could never be reached.
ACCOUNT_RATE_PER_S = 10_000
ACCOUNT_BURST = 5_000


class ApiThrottle(_Strict):
    """Per key (the usage plan): steady requests per second and the burst allowed above them (a token bucket)."""

    rate_per_s: float = Field(gt=0, le=ACCOUNT_RATE_PER_S, allow_inf_nan=False)
    burst: int = Field(ge=1, le=ACCOUNT_BURST)

    @model_validator(mode="after")
    def _bucket(self) -> ApiThrottle:
        if self.burst < self.rate_per_s:
            raise ValueError(f"burst ({self.burst}) is below rate_per_s ({self.rate_per_s:g}): the bucket could "
                             "never hold one second's requests at that rate")
        return self


class ApiQuota(_Strict):
    """Per key (the usage plan): at most `requests` per `period`, counted from the period's start (UTC)."""

    requests: int = Field(ge=1, le=2_147_483_647)
    period: Literal["DAY", "WEEK", "MONTH"]


class ApiAlarms(AlarmWindow):
    """The API's alarms (API Gateway's own metrics for the stage), notifying the environment's topic."""

    client_error_rate: float = Field(0.25, gt=0, le=1, allow_inf_nan=False,
                                     description="share of requests answered 4xx (refused keys, throttling, "
                                                 "bad requests) above this")
    server_error_rate: float = Field(0.01, gt=0, le=1, allow_inf_nan=False,
                                     description="share of requests answered 5xx above this")
    latency_p90_ms: float | None = Field(None, gt=0, allow_inf_nan=False,
                                         description="Latency p90 above this; default 80% of the integration "
                                                     "timeout")
    min_requests: int = Field(10, ge=1, le=1_000_000,
                              description="the error rates count only in periods with at least this many requests "
                                          "(one refused key at night is not an incident)")


class ApiWaf(_Strict):
    """An AWS WAF web ACL on the stage: AWS's IP reputation list and known-bad-inputs rules, and a rate limit per
    client IP. Off unless `enabled`."""

    enabled: bool = False
    rate_limit_per_5min: int | None = Field(None, ge=10, le=2_000_000_000,
                                            description="requests per client IP per 5 minutes, then blocked")
    managed_rules: bool | None = Field(None, description="AWS's IP reputation and known-bad-inputs rule groups "
                                                         "(default on)")

    @model_validator(mode="after")
    def _enabled(self) -> ApiWaf:
        given = sorted(self.model_fields_set - {"enabled"})
        if not self.enabled and given:
            raise ValueError(f"WAF settings without enabling it ({', '.join(given)}): set enabled: true, or remove "
                             "them")
        return self


_HOSTNAME = re.compile(r"(?=.{4,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}")
_CERTIFICATE_ARN = re.compile(r"arn:aws[a-z-]*:acm:(?P<region>[a-z0-9-]+):\d{12}:certificate/[0-9a-f-]{36}")


class ApiDomain(_Strict):
    """A custom domain for the API (regional: its certificate is an ACM certificate of the stack's region), and
    optionally its alias record in a Route 53 hosted zone (by id and name: synth looks nothing up)."""

    name: str
    certificate_arn: str | None = None
    hosted_zone_id: str | None = Field(None, pattern=r"^Z[A-Z0-9]{1,31}$")
    hosted_zone_name: str | None = None

    @field_validator("name", "hosted_zone_name")
    @classmethod
    def _hostname(cls, value: str | None) -> str | None:
        if value is not None and not _HOSTNAME.fullmatch(value):
            raise ValueError(f"{value!r} is not a lower-case DNS name (e.g. decisions.example.com)")
        return value

    @field_validator("certificate_arn")
    @classmethod
    def _certificate(cls, value: str | None) -> str | None:
        if value is not None and not _CERTIFICATE_ARN.fullmatch(value):
            raise ValueError(f"{value!r} is not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)")
        return value

    @model_validator(mode="after")
    def _complete(self) -> ApiDomain:
        if self.certificate_arn is None:
            raise ValueError(f"a custom domain needs certificate_arn: an ACM certificate for {self.name} in the "
                             "stack's region (API Gateway serves the domain with it)")
        if (self.hosted_zone_id is None) != (self.hosted_zone_name is None):
            raise ValueError("hosted_zone_id and hosted_zone_name go together (the alias record needs both; synth "
                             "looks nothing up), or neither (you point your DNS at the domain yourself)")
        zone = self.hosted_zone_name
        if zone is not None and not (self.name == zone or self.name.endswith(f".{zone}")):
            raise ValueError(f"{self.name} is not in the hosted zone {zone}")
        return self

    @property
    def certificate_region(self) -> str:
        return _CERTIFICATE_ARN.fullmatch(self.certificate_arn or "")["region"]  # type: ignore[index]


class SystemOneApi(_Strict):
    """An HTTPS System One API (`POST /v1/systemone`, `GET /v1/models`) with Bearer keys in front of the decision
    endpoint: API Gateway, a Lambda authorizer and a forwarding Lambda (README: Your own System One API on AWS)."""

    throttle: ApiThrottle = ApiThrottle(rate_per_s=10, burst=20)
    quota: ApiQuota | None = None
    integration_timeout_s: int = Field(29, ge=1, description="how long a call may take; above 29 needs API "
                                                             "Gateway's integration-timeout quota raised")
    max_body_bytes: int | None = Field(None, ge=1024, description="decoded request bodies; default: the decision "
                                                                  "container's SEMIF_MAX_BODY_BYTES")
    authorizer_cache_s: int = Field(60, ge=0, le=3600, description="API Gateway keeps a key's verdict this long")
    account_logging_role: bool = Field(True, description="set the region's API Gateway CloudWatch Logs role "
                                                         "(false: the account already has one)")
    alarms: ApiAlarms = ApiAlarms()
    waf: ApiWaf | None = None
    domain: ApiDomain | None = None


class Environment(_Strict):
    account: str | None = Field(None, pattern=r"^\d{12}$")
    region: str = Field(pattern=r"^[a-z]{2}(-[a-z]+)+-\d$")
    accelerator: Accelerator
    inference_ami_version: str | None = None
    model: ModelSource
    dlc_image: DlcImage = DlcImage()
    llama_env: EnvMap = Field(default_factory=dict, description="SM_LLAMA_CPP_* for both endpoints")
    chat: Endpoint
    decision: Endpoint
    image_build: ImageBuild = ImageBuild()
    vpc: Vpc | None = None
    network_isolation: bool = True
    log_retention_days: int = 30
    hosting: HostingMode = "dedicated"
    shared_endpoint: SharedEndpoint | None = None
    notifications: Notifications = Notifications()
    systemone_api: SystemOneApi | None = None

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value} is not a CloudWatch Logs retention; use one of {sorted(LOG_RETENTION_DAYS)}")
        return value

    def endpoint(self, kind: EndpointKind) -> Endpoint:
        return self.chat if kind == "chat" else self.decision

    def hosting_of(self, kind: EndpointKind) -> HostingMode:
        return self.endpoint(kind).hosting or self.hosting

    def network_isolation_for(self, kind: EndpointKind) -> bool:
        override = self.endpoint(kind).network_isolation
        return self.network_isolation if override is None else override

    @property
    def shared(self) -> bool:
        """Both models on one endpoint (stacks/hosting.py refuses a shared endpoint with one model)."""
        return any(self.hosting_of(kind) == "shared" for kind in ENDPOINT_KINDS)

    def decision_instance_types(self) -> list[str]:
        """The instance types the decision image runs on in real time (its CUDA build targets them): the endpoint's
        own, or the shared endpoint's; none when serverless (CPU only)."""
        mode = self.hosting_of("decision")
        if mode == "dedicated" and self.decision.instance_type:
            return [self.decision.instance_type]
        if mode == "shared" and self.shared_endpoint is not None:
            return [self.shared_endpoint.instance_type]
        return []

    def llama_env_for(self, kind: EndpointKind) -> dict[str, str]:
        """The SM_LLAMA_CPP_* map of one endpoint: shared map, then its overrides, then GPU offload."""
        merged = {**self.llama_env, **self.endpoint(kind).llama_env}
        if self.accelerator == "gpu":
            merged.setdefault(PREFIX + "N_GPU_LAYERS", GPU_LAYERS_ALL)
        return merged


_APP_NAME = re.compile(r"[a-z][a-z0-9-]{0,23}")  # used with fullmatch: a trailing newline is not a name
_ENV_NAME = re.compile(r"[a-z][a-z0-9]{0,11}")


@dataclass(frozen=True)
class Deployment:
    """One environment of the app, with the names derived from it."""

    app_name: str
    env_name: str
    env: Environment

    @property
    def stack_name(self) -> str:
        return f"{self.app_name}-{self.env_name}"

    def endpoint_name(self, kind: EndpointKind) -> str:
        """The endpoint that serves `kind`. The name follows the hosting mode: SageMaker cannot update an
        instance-based endpoint into a serverless one or back, so a new mode is a new endpoint (README)."""
        mode = self.env.hosting_of(kind)
        if mode == "shared":
            return self.shared_endpoint_name
        return f"{self.stack_name}-{kind}" + ("-serverless" if mode == "serverless" else "")

    @property
    def shared_endpoint_name(self) -> str:
        return f"{self.stack_name}-models"

    def component_name(self, kind: EndpointKind) -> str | None:
        """The inference component that serves `kind` on the shared endpoint; None when it has its own endpoint."""
        return f"{self.stack_name}-{kind}" if self.env.hosting_of(kind) == "shared" else None


def _key(prefix: str, loc: tuple[int | str, ...]) -> str:
    parts = [prefix]
    for index, item in enumerate(loc):
        if index > 0 and loc[index - 1] == "model" and item in ("embedded", "gguf", "tarball", "s3"):
            continue  # pydantic's tag of the model-source union, not a key the user wrote
        parts.append(str(item))
    return ".".join(parts)


def load_deployment(context: Mapping[str, Any] | None, env_name: str | None) -> Deployment:
    """Parse and validate the selected environment, or raise ConfigError listing every problem."""
    if not isinstance(context, Mapping):
        raise ConfigError([(CONTEXT_KEY, "missing from cdk.json context (see README.md, 'Deploying to AWS')")])
    app_name = context.get("app_name")
    environments = context.get("environments")
    if not isinstance(app_name, str) or not _APP_NAME.fullmatch(app_name):
        raise ConfigError([("app_name", f"{app_name!r} must be lower-case letters, digits and '-', "
                                        "starting with a letter, at most 24 characters")])
    if not isinstance(environments, Mapping) or not environments:
        raise ConfigError([("environments", "must map environment names to their settings")])
    if not env_name:
        raise ConfigError([(ENV_CONTEXT_KEY, f"choose an environment with -c env=NAME, one of {sorted(environments)}")])
    if env_name not in environments:
        raise ConfigError([(ENV_CONTEXT_KEY, f"unknown environment {env_name!r}; cdk.json defines "
                                             f"{sorted(environments)}")])
    if not _ENV_NAME.fullmatch(env_name):
        raise ConfigError([(f"environments.{env_name}", "environment names are lower-case letters and digits, "
                                                        "starting with a letter, at most 12 characters")])
    prefix = f"environments.{env_name}"
    try:
        env = Environment.model_validate(environments[env_name])
    except ValidationError as error:
        raise ConfigError([(_key(prefix, tuple(e["loc"])), e["msg"].removeprefix("Value error, "))
                           for e in error.errors()]) from None
    problems = check_environment(env)
    if problems:
        raise ConfigError([(f"{prefix}.{key}", message) for key, message in problems])
    return Deployment(app_name=app_name, env_name=env_name, env=env)


def check_environment(env: Environment) -> list[tuple[str, str]]:
    """Rules that span several keys; returns (relative key, message) pairs."""
    problems: list[tuple[str, str]] = []
    if RegionInfo.get(env.region).dlc_repository_account is None:
        problems.append(("region", f"CDK knows no Deep Learning Containers registry in {env.region}"))
    problems += _check_accelerator(env)
    problems += _check_model_source(env)
    problems += _check_image_build(env)
    for kind in ENDPOINT_KINDS:
        problems += _check_endpoint(env, kind)
    problems += _check_llama_env("llama_env", env.llama_env)
    if not any(key.endswith(CHAT_TEMPLATE_KEY) for key, _ in problems):  # a value llama-server accepts as a flag
        problems += check_chat_template(env)
    problems += check_hosting(env)
    problems += _check_notifications(env)
    problems += check_systemone_api(env)
    return problems


def _check_notifications(env: Environment) -> list[tuple[str, str]]:
    region = env.notifications.topic_region
    if region is not None and region != env.region:
        return [("notifications.topic_arn", f"the topic is in {region}, the stack in {env.region}: CloudWatch alarms "
                                            "notify SNS topics of their own region")]
    return []


def _check_model_source(env: Environment) -> list[tuple[str, str]]:
    model = env.model
    if isinstance(model, S3Model) and model.kms_key_region not in (None, env.region):
        return [("model.kms_key_arn", f"the key is in {model.kms_key_region}, the stack in {env.region}: S3 "
                                      "encrypts an object with a key of the bucket's region, and SageMaker reads "
                                      "model data in its own region; use a key of this region")]
    return []


def _check_accelerator(env: Environment) -> list[tuple[str, str]]:
    if env.accelerator == "cpu":
        if env.inference_ami_version is not None:
            return [("inference_ami_version", "only GPU endpoints take an InferenceAmiVersion; remove it for cpu")]
        return []
    if env.inference_ami_version is None:
        return [("inference_ami_version", "required for accelerator gpu: the DLC's CUDA 13 image needs a recent "
                                          f"driver, one of {sorted(CUDA13_AMI_VERSIONS)}")]
    if env.inference_ami_version not in inference_ami_versions():
        return [("inference_ami_version", f"{env.inference_ami_version!r} is not an InferenceAmiVersion "
                                          f"SageMaker knows ({sorted(inference_ami_versions())})")]
    if env.inference_ami_version not in CUDA13_AMI_VERSIONS:
        return [("inference_ami_version", f"{env.inference_ami_version} has a driver too old for the DLC's "
                                          f"CUDA 13 image; use one of {sorted(CUDA13_AMI_VERSIONS)}")]
    return []


# The CUDA variant of the image compiles ggml's CUDA kernels with nvcc on top of the CPU build (which alone takes
# minutes on 2 cores: README, "The image test") and pulls two multi-GB CUDA images first. A floor, not a measurement
# of the CUDA build (no GPU build ran here).
GPU_BUILD_MIN_MINUTES = 30
GPU_BUILD_TOO_SMALL = {"small": "2 vCPUs and 4 GiB of memory"}


def _check_image_build(env: Environment) -> list[tuple[str, str]]:
    """A CUDA image build that cannot finish in its CodeBuild project is refused before anything is deployed."""
    if env.accelerator != "gpu":
        return []
    build = env.image_build
    problems: list[tuple[str, str]] = []
    if build.compute_type in GPU_BUILD_TOO_SMALL:
        problems.append(("image_build.compute_type",
                         f"{build.compute_type} ({GPU_BUILD_TOO_SMALL[build.compute_type]}) cannot build the CUDA "
                         "image: nvcc compiles ggml's CUDA kernels on top of the CPU build, which alone takes "
                         "minutes on 2 cores, and parallel nvcc jobs need more memory than that; use large (the "
                         "default) or bigger"))
    if build.timeout_minutes < GPU_BUILD_MIN_MINUTES:
        problems.append(("image_build.timeout_minutes",
                         f"{build.timeout_minutes} minutes is too short for the CUDA image: the build pulls the CUDA "
                         "builder and the CUDA DLC (several GB each) and compiles the CUDA kernels; CodeBuild stops it "
                         f"at the timeout and the deployment fails; use at least {GPU_BUILD_MIN_MINUTES}"))
    for instance_type in env.decision_instance_types():
        if instance_problem(instance_type, env.accelerator):
            continue  # reported under the instance type's own key
        family = describe_instance(instance_type).family
        if family not in CUDA_ARCHITECTURES:
            key = "decision.instance_type" if env.hosting_of("decision") == "dedicated" else \
                "shared_endpoint.instance_type"
            problems.append((key, f"no CUDA architecture is known for instance family {family!r} "
                                  "(stacks/cuda_architectures.py), so the image cannot be built for it"))
    return problems


def _check_endpoint(env: Environment, kind: EndpointKind) -> list[tuple[str, str]]:
    endpoint = env.endpoint(kind)
    problems: list[tuple[str, str]] = []
    if endpoint.instance_type is not None:
        problem = instance_problem(endpoint.instance_type, env.accelerator)
        if problem:
            problems.append((f"{kind}.instance_type", problem))
        elif describe_instance(endpoint.instance_type).burstable and endpoint.autoscaling is not None:
            problems.append((f"{kind}.autoscaling", f"{endpoint.instance_type} is burstable (ml.t*): Application "
                                                    "Auto Scaling does not support it; remove autoscaling or "
                                                    "pick another instance type"))
    scaling = endpoint.autoscaling
    if scaling and not scaling.min_instances <= endpoint.instance_count <= scaling.max_instances:
        problems.append((f"{kind}.instance_count", f"{endpoint.instance_count} is outside autoscaling bounds "
                                                   f"{scaling.min_instances}..{scaling.max_instances}"))
    problems += _check_llama_env(f"{kind}.llama_env", endpoint.llama_env)
    if kind == "chat" and endpoint.calibration is not None:
        problems.append(("chat.calibration", "only the decision endpoint scores options; remove it"))
    if kind == "chat" and endpoint.env:
        problems.append(("chat.env", "the chat container (stock DLC) reads only SM_LLAMA_CPP_*; put those in "
                                     "llama_env"))
    for key, value in sorted(endpoint.env.items()):
        problem = _adapter_setting_problem(key, value)
        if problem:
            problems.append((f"{kind}.env.{key}", problem))
    if kind == "decision" and not problems:
        problems += _check_adapter_settings(env)
    return problems


def _adapter_setting_problem(key: str, value: str) -> str | None:
    """Why one `decision.env` entry is refused, or None."""
    if not key.startswith(SEMIF_PREFIX):
        return f"adapter settings start with {SEMIF_PREFIX} (llama.cpp flags go in llama_env)"
    if looks_like_secret(key, value):
        return _SECRET_MESSAGE
    if key not in SEMIF_KEYS:
        close = difflib.get_close_matches(key, list(SEMIF_KEYS), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"not an adapter setting ({hint}the adapter would ignore it); known: {', '.join(sorted(SEMIF_KEYS))}"
    if key in STACK_OWNED_SEMIF:
        return STACK_OWNED_SEMIF[key]
    if len(value) > ENV_VALUE_MAX:
        return f"longer than SageMaker's {ENV_VALUE_MAX} characters"
    allowed = "\t\n\r" if key in JSON_SETTINGS else ""
    if any(CONTROL_CHARACTER.match(c) and c not in allowed for c in value):
        return "contains a control character (newline, NUL, ...); adapter settings are single-line values"
    if key == HOST_KEY and value not in ALL_INTERFACES:
        return (f"{value!r} would bind the adapter to one address only; SageMaker sends requests to the "
                f"container's port from outside it, so bind all interfaces ({' or '.join(sorted(ALL_INTERFACES))}) "
                "or leave it unset")
    return None


_SECRET_MESSAGE = ("looks like a secret; container environment variables are shown by DescribeModel to anyone "
                   "allowed to call it, and SageMaker already authenticates every invocation with IAM")


def _check_llama_env(where: str, env: Mapping[str, str]) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    for key, value in sorted(env.items()):
        at = f"{where}.{key}"
        if not key.startswith(PREFIX):
            problems.append((at, f"llama_env holds {PREFIX}* flags only (adapter settings go in decision.env)"))
            continue
        name = key[len(PREFIX):]
        if looks_like_secret(name, value):
            problems.append((at, _SECRET_MESSAGE))
        elif name in STACK_OWNED_LLAMA:
            problems.append((at, "set by the stack from the model artifact (the model path and port are fixed)"))
        elif len(value) > ENV_VALUE_MAX:
            problems.append((at, f"longer than SageMaker's {ENV_VALUE_MAX} characters"))
        else:
            try:
                check_setting(key, value)
            except FlagError as error:
                problems.append((at, str(error).removeprefix(f"{key}: ")))
    return problems


def _check_calibration(env: Environment) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """The `decision.calibration` file: readable, valid for the adapter, short enough; its SEMIF_CALIBRATION value."""
    endpoint = env.decision
    if endpoint.calibration is None:
        return [], {}
    if CALIBRATION_KEY in endpoint.env:
        return [("decision.calibration", f"given twice: remove decision.env.{CALIBRATION_KEY} or this key")], {}
    try:
        value = endpoint.calibration_setting()
    except OSError as error:
        return [("decision.calibration", f"{endpoint.calibration}: cannot be read ({error.strerror or error})")], {}
    except CalibrationError as error:
        return [("decision.calibration", f"{endpoint.calibration}: {error}")], {}
    assert value is not None
    if len(value) > ENV_VALUE_MAX:
        return [("decision.calibration", f"{endpoint.calibration}: {len(value)} characters as {CALIBRATION_KEY}, "
                                         f"longer than SageMaker's {ENV_VALUE_MAX} per environment value")], {}
    return [], {CALIBRATION_KEY: value}


def _check_adapter_settings(env: Environment) -> list[tuple[str, str]]:
    """Run the decision adapter's own settings parser on the environment it will get."""
    calibration_problems, calibration = _check_calibration(env)
    if calibration_problems:
        return calibration_problems
    merged = {**env.llama_env_for("decision"), **env.decision.env, **calibration}
    try:
        settings = load_settings(merged)
    except SettingsError as error:
        if error.key.startswith(SEMIF_PREFIX):
            section = "decision.env"
        elif error.key in env.decision.llama_env:
            section = "decision.llama_env"
        else:
            section = "llama_env"
        return [(f"{section}.{error.key}", str(error).removeprefix(f"{error.key}: "))]
    if settings.drain_seconds > MAX_DRAIN_SECONDS:
        return [(f"decision.env.{DRAIN_KEY}",
                 f"{settings.drain_seconds} s of drain plus {ABORT_GRACE_SECONDS:g} s for an aborted decode to "
                 f"return do not fit in the {SAGEMAKER_STOP_SECONDS} s SageMaker waits between SIGTERM and SIGKILL; "
                 f"at most {MAX_DRAIN_SECONDS}")]
    return []


def check_model_fit(env: Environment, *, model_bytes: int | None, context_length: int | None,
                    kv_bytes_per_token: int | None = None) -> list[tuple[str, str]]:
    """Rules that need the model's facts (size, trained context, KV cache per token): run once the artifact is known.

    The facts are measured for a local model and declared (`model.model_bytes`, `model.context_length`) for an
    existing S3 object; an unknown fact skips its rule. The decision endpoint's memory (the model with every
    worker's KV cache, a hand-set prefix cache and the adapter's reserve: stacks/memory_fit.py) is checked where
    the model alone fits.
    """
    problems: list[tuple[str, str]] = []
    for kind in ENDPOINT_KINDS:
        endpoint = env.endpoint(kind)
        llama_env = env.llama_env_for(kind)
        sized = [(f"{kind}.instance_type", endpoint.instance_type)]
        if kind == "decision" and endpoint.batch_transform is not None:
            sized.append(("decision.batch_transform.instance_type", endpoint.batch_transform.instance_type))
        for where, instance_type in sized:
            capacity = instance_capacity(instance_type) if instance_type else None
            if model_bytes is None or capacity is None:
                continue
            limit, what = capacity.model_limit(llama_env.get(GPU_LAYERS_KEY))
            if model_bytes > limit:
                problems.append((where, f"{instance_type} has {what}; the model is {model_bytes / 2**30:.1f} GiB "
                                        f"({model_bytes:,} bytes) and cannot be loaded; pick a larger instance type"))
        ctx = llama_env.get(CTX_SIZE_KEY)
        if (context_length is not None and ctx and ctx.isdigit() and int(ctx) > context_length
                and not CONTEXT_EXTENSION_KEYS & set(llama_env)):
            section = f"{kind}.llama_env" if CTX_SIZE_KEY in endpoint.llama_env else "llama_env"
            problems.append((f"{section}.{CTX_SIZE_KEY}",
                             f"{ctx} tokens is more than the model was trained for ({context_length}, from its "
                             "GGUF header); quality collapses past it unless you set up RoPE scaling "
                             "(SM_LLAMA_CPP_ROPE_SCALING, ..._ROPE_SCALE)"))
    if model_bytes is not None:
        problems += check_hosting_fit(env, model_bytes)
    named = {key for key, _ in problems}
    memory = check_decision_memory(env, model_bytes=model_bytes, context_length=context_length,
                                   kv_bytes_per_token=kv_bytes_per_token)
    problems += [(key, message) for key, message in memory if key not in named]
    return sorted(set(problems))
