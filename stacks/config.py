"""The deployment configuration: one typed, validated object per environment, read from `cdk.json` context.

Validated in this one place, before any construct exists, so every mistake that SageMaker would report ten
minutes into a deployment (or never: a GPU idling under the CPU image) fails `cdk synth` with the key named,
e.g. `environments.prod.decision.instance_type: ...`. Only the selected environment is validated, so a
half-written `staging` entry does not block `-c env=dev`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Annotated, Any, Literal

from aws_cdk.region_info import RegionInfo
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

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

from .instances import Accelerator, InstanceTypeError, describe_instance, inference_ami_versions, instance_memory

CONTEXT_KEY = "semif"  # cdk.json: context.semif = {app_name, environments: {NAME: {...}}}
ENV_CONTEXT_KEY = "env"  # cdk synth -c env=NAME
EndpointKind = Literal["chat", "decision"]
ENDPOINT_KINDS: tuple[EndpointKind, ...] = ("chat", "decision")

# The CUDA 13 runtime in the DLC's CUDA image needs a driver newer than the default host AMI's.
CUDA13_AMI_VERSIONS = frozenset({"al2-ami-sagemaker-inference-gpu-3-1", "al2023-ami-sagemaker-inference-gpu-4-1"})
GPU_LAYERS_ALL = "999"
# Set by the stack from the artifact; a second value in config would fight it. The llama ones are the keys the
# DLC's entry point consumes, which `check_setting` accepts whatever their value, so they are refused here.
STACK_OWNED_LLAMA = CONSUMED
MODEL_SHA256_KEY = SEMIF_PREFIX + "MODEL_SHA256"  # the adapter's check of the model it loads
STACK_OWNED_SEMIF = frozenset({MODEL_SHA256_KEY})
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


class DlcImage(_Strict):
    """The stock llama.cpp DLC; the registry account comes from CDK's region facts, not from here."""

    repository: str = Field("llama-cpp", pattern=r"^[a-z0-9][a-z0-9._/-]*$")
    cpu_tag: str = Field("server-sagemaker-cpu-v1", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    cuda_tag: str = Field("server-sagemaker-cuda-v1", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


class Autoscaling(_Strict):
    """Target tracking on SageMakerVariantInvocationsPerInstance (invocations per instance per minute).

    The metric counts whole invocations per minute: a target below one would scale out on any traffic.
    """

    min_instances: int = Field(ge=1, le=MAX_INSTANCES)
    max_instances: int = Field(ge=1, le=MAX_INSTANCES)
    target_invocations_per_instance: float = Field(ge=1, le=1_000_000, allow_inf_nan=False)
    scale_in_cooldown_s: int = Field(300, ge=0, le=3600)
    scale_out_cooldown_s: int = Field(60, ge=0, le=3600)

    @model_validator(mode="after")
    def _bounds(self) -> Autoscaling:
        if self.min_instances > self.max_instances:
            raise ValueError(f"min_instances ({self.min_instances}) is greater than max_instances "
                             f"({self.max_instances})")
        return self


class Alarms(_Strict):
    """CloudWatch alarms of one endpoint; with auto_rollback the error alarms also guard its deployments."""

    latency_p90_ms: float = Field(gt=0, le=LATENCY_MAX_MS, allow_inf_nan=False,
                                  description="ModelLatency p90 above this for evaluation_periods")
    errors_5xx: int = Field(1, ge=1, le=1_000_000, description="Invocation5XXErrors per period at or above this")
    model_errors: int = Field(1, ge=1, le=1_000_000, description="InvocationModelErrors per period at or above this")
    period_s: int = Field(60, ge=60, le=3600, multiple_of=60)
    evaluation_periods: int = Field(3, ge=1, le=60)
    auto_rollback: bool = False

    @model_validator(mode="after")
    def _window(self) -> Alarms:
        window = self.period_s * self.evaluation_periods
        if window > ALARM_WINDOW_MAX_SECONDS:
            raise ValueError(f"period_s x evaluation_periods is {self.period_s} x {self.evaluation_periods} = "
                             f"{window} s; CloudWatch evaluates at most one day ({ALARM_WINDOW_MAX_SECONDS} s)")
        return self


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


class Endpoint(_Strict):
    instance_type: str
    instance_count: int = Field(1, ge=1, le=100)
    llama_env: EnvMap = Field(default_factory=dict, description="SM_LLAMA_CPP_* overrides for this endpoint")
    env: EnvMap = Field(default_factory=dict, description="SEMIF_* settings (decision endpoint only)")
    autoscaling: Autoscaling | None = None
    alarms: Alarms
    data_capture: DataCapture | None = None
    model_download_timeout_s: int | None = Field(None, ge=60, le=3600)
    startup_health_check_timeout_s: int | None = Field(None, ge=60, le=3600)


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


class ImageBuild(_Strict):
    """The CodeBuild project that builds the decision image FROM the DLC."""

    compute_type: Literal["small", "medium", "large", "xlarge", "2xlarge"] = "large"
    # The custom resource waiting for the build has at most one hour in all (Provider framework limit).
    timeout_minutes: int = Field(40, ge=10, le=50)
    # Extra `docker build --build-arg`s; None: the defaults for the accelerator (decision_image.py).
    build_args: dict[str, str] | None = None

    @field_validator("build_args")
    @classmethod
    def _build_args(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for key, arg in (value or {}).items():
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key):
                raise ValueError(f"{key!r} is not a Docker build-arg name")
            if key == "BASE_IMAGE":
                raise ValueError("BASE_IMAGE is set by the stack from dlc_image and accelerator")
            if SECRET_WORDS.search(key.upper()) or SECRET_VALUES.search(arg):
                raise ValueError(f"{key}: {BUILD_ARG_SECRET}")
        return value


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

    @field_validator("log_retention_days")
    @classmethod
    def _retention(cls, value: int) -> int:
        if value not in LOG_RETENTION_DAYS:
            raise ValueError(f"{value} is not a CloudWatch Logs retention; use one of {sorted(LOG_RETENTION_DAYS)}")
        return value

    def endpoint(self, kind: EndpointKind) -> Endpoint:
        return self.chat if kind == "chat" else self.decision

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
        return f"{self.stack_name}-{kind}"


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
    for kind in ENDPOINT_KINDS:
        problems += _check_endpoint(env, kind)
    problems += _check_llama_env("llama_env", env.llama_env)
    return problems


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


def _check_endpoint(env: Environment, kind: EndpointKind) -> list[tuple[str, str]]:
    endpoint = env.endpoint(kind)
    problems: list[tuple[str, str]] = []
    try:
        facts = describe_instance(endpoint.instance_type)
    except InstanceTypeError as error:
        problems.append((f"{kind}.instance_type", str(error)))
    else:
        if facts.accelerator != env.accelerator:
            image = "CUDA" if env.accelerator == "gpu" else "CPU"
            problems.append((f"{kind}.instance_type",
                             f"{endpoint.instance_type} is a {facts.accelerator.upper()} instance but accelerator "
                             f"is {env.accelerator!r} (the {image} image); change one of them"))
        if facts.burstable and endpoint.autoscaling is not None:
            problems.append((f"{kind}.autoscaling", f"{endpoint.instance_type} is burstable (ml.t*): Application "
                                                    "Auto Scaling does not support it; remove autoscaling or "
                                                    "pick another instance type"))
    scaling = endpoint.autoscaling
    if scaling and not scaling.min_instances <= endpoint.instance_count <= scaling.max_instances:
        problems.append((f"{kind}.instance_count", f"{endpoint.instance_count} is outside autoscaling bounds "
                                                   f"{scaling.min_instances}..{scaling.max_instances}"))
    problems += _check_llama_env(f"{kind}.llama_env", endpoint.llama_env)
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
        return "set by the stack from the model artifact; remove it"
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


def _check_adapter_settings(env: Environment) -> list[tuple[str, str]]:
    """Run the decision adapter's own settings parser on the environment it will get."""
    merged = {**env.llama_env_for("decision"), **env.decision.env}
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


def check_model_fit(env: Environment, *, model_bytes: int | None,
                    context_length: int | None) -> list[tuple[str, str]]:
    """Rules that need the model's facts (size, trained context): run once the artifact is known.

    The facts are measured for a local model and declared (`model.model_bytes`, `model.context_length`) for an
    existing S3 object; an unknown fact skips its rule.
    """
    problems: list[tuple[str, str]] = []
    for kind in ENDPOINT_KINDS:
        endpoint = env.endpoint(kind)
        llama_env = env.llama_env_for(kind)
        memory = instance_memory(endpoint.instance_type)
        if model_bytes is not None and memory is not None:
            limit, what = memory.model_limit(llama_env.get(GPU_LAYERS_KEY))
            if model_bytes > limit:
                problems.append((f"{kind}.instance_type",
                                 f"{endpoint.instance_type} has {what}; the model is {model_bytes / 2**30:.1f} GiB "
                                 f"({model_bytes:,} bytes) and cannot be loaded; pick a larger instance type"))
        ctx = llama_env.get(CTX_SIZE_KEY)
        if (context_length is not None and ctx and ctx.isdigit() and int(ctx) > context_length
                and not CONTEXT_EXTENSION_KEYS & set(llama_env)):
            section = f"{kind}.llama_env" if CTX_SIZE_KEY in endpoint.llama_env else "llama_env"
            problems.append((f"{section}.{CTX_SIZE_KEY}",
                             f"{ctx} tokens is more than the model was trained for ({context_length}, from its "
                             "GGUF header); quality collapses past it unless you set up RoPE scaling "
                             "(SM_LLAMA_CPP_ROPE_SCALING, ..._ROPE_SCALE)"))
    return sorted(set(problems))
