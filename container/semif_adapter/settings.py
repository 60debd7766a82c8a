"""Adapter configuration: one pydantic-settings model, read once from the environment and validated in one place.

One environment map configures both endpoints: the `SM_LLAMA_CPP_*` variables that matter for scoring keep
llama-server's meaning (same names, same values), and settings only the adapter has use the `SEMIF_` prefix. A bad
value stops the process at start-up with the variable named, before `/ping` could say 200; the CDK app runs the same
model on the decision endpoint's environment (`check_environment`), so `cdk synth` refuses what the adapter would.
The reference of these variables (docs/configuration-adapter.md) is generated from this model
(`semif_adapter.deploy.reference`).

It sits above the layers it configures and imports only downward (the types it validates: a calibration, the frames,
llama.cpp's flash-attention values); the core and the engine are handed a `Settings` as what they read of it
(`core.service_settings.ServiceSettings`, `engine.llama_settings.LlamaSettings`) and never import this module.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, cast

from pydantic import (
    AliasChoices,
    BeforeValidator,
    Field,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.config import JsonDict
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict

from .core.calibration import SCORING_METHODS, Calibration, parse_calibration
from .core.question_frames import CHOICES, DEFAULT_FRAMES, Frames, parse_frames
from .engine.llama_settings import DEFAULT_MAX_CONTEXT, FlashAttention
from .engine.model_files import DEFAULT_MODEL_DIR

SEMIF_PREFIX = "SEMIF_"
LLAMA_PREFIX = "SM_LLAMA_CPP_"  # the llama.cpp DLC's prefix: `SM_LLAMA_CPP_FOO_BAR=v` is llama-server's `--foo-bar v`
DEFAULT_BODY_TIMEOUT_SECONDS = 30  # a sender slower than this loses its request, not the server's attention
MAX_BODY_BYTES = 6 * 1024 * 1024  # SageMaker's real-time payload limit
DEFAULT_SCORING = "pmi"  # measured best on the labelled set (README, "Decision quality")
ABORT_GRACE_SECONDS = 5.0  # after the drain deadline: time for an aborted decode to return (one ubatch)
SAGEMAKER_STOP_SECONDS = 30  # SageMaker sends SIGKILL this long after SIGTERM
DEFAULT_RESULT_CACHE_ENTRIES = 4096
DEFAULT_CPU_WORKERS = 2  # measured on 2 cores: README, "Benchmarks"
MAX_WORKERS = 16  # each worker's context holds a KV cache of its own
DEFAULT_BATCH_SIZE = 2048
SHA256_PATTERN = "^[0-9a-f]{64}$"
# JSON Schema extension: a default resolved at start-up, in words (docs/configuration-adapter.md)
SHOWN_DEFAULT = "x-default"


class SettingsError(ValueError):
    """A configuration value the adapter cannot start with."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


FLASH_ATTN_VALUES = {"auto": FlashAttention.AUTO, "on": FlashAttention.ENABLED, "true": FlashAttention.ENABLED,
                     "off": FlashAttention.DISABLED, "false": FlashAttention.DISABLED}


def cpu_quota() -> int:
    """CPUs this process may really use: the cgroup quota and affinity, not the host's count."""
    available = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
    except (OSError, ValueError):
        return available
    if quota == "max":
        return available
    return max(1, min(available, math.ceil(int(quota) / int(period))))


# -- value parsers: each raises ValueError with the message the variable's name is put before ---------------------
def _integer(raw: object) -> object:
    """Python's int() of a text (as the entry point always read them), so a value means what it meant before."""
    if not isinstance(raw, str):
        return raw
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"expected an integer, got {raw!r}") from None


def _gpu_layers(raw: object) -> object:
    """llama-server's words: `auto` (llama.cpp's default, None here) and `all` (-1), else a number of layers."""
    if not isinstance(raw, str):
        return raw
    word = raw.strip().lower()
    if word in ("", "auto"):
        return None
    return -1 if word == "all" else _integer(raw)


def _flash_attn(raw: object) -> FlashAttention:
    if isinstance(raw, FlashAttention):
        return raw
    word = str(raw).strip().lower()
    if word not in FLASH_ATTN_VALUES:
        raise ValueError(f"expected on, off or auto, got {word!r}")
    return FLASH_ATTN_VALUES[word]


def _scoring(raw: object) -> object:
    if raw not in SCORING_METHODS:
        raise ValueError(f"expected one of {', '.join(SCORING_METHODS)}, got {raw!r}")
    return raw


def _sha256(raw: object) -> object:
    if isinstance(raw, str) and not re.fullmatch(SHA256_PATTERN, raw):
        raise ValueError("expected 64 lower-case hex digits")
    return raw


def _parsed(parse: Callable[[str], Any], kind: type) -> Callable[[object], Any]:
    """A text parsed by the module that owns its format (its ValueError names the mistake); a parsed value kept."""
    def validate(raw: object) -> Any:
        return raw if raw is None or isinstance(raw, kind) else parse(str(raw))
    return validate


Integer = Annotated[int, BeforeValidator(_integer)]
OptionalInteger = Annotated[int | None, BeforeValidator(_integer)]


def setting(*names: str, description: str, shown_default: str | None = None, **field: Any) -> Any:
    """A field read from the environment variable(s) `names` (the first one found wins); `shown_default` says in
    words what an unset one becomes where that is decided at start-up."""
    alias = names[0] if len(names) == 1 else AliasChoices(*names)
    extra: JsonDict | None = {SHOWN_DEFAULT: shown_default} if shown_default else None
    if "default_factory" not in field:
        field.setdefault("default", None)
    return Field(validation_alias=alias, description=description, json_schema_extra=extra, **field)


class Settings(BaseSettings):
    """Every variable the adapter reads. Empty counts as unset; an unknown `SEMIF_*` key is refused by the CDK app
    (`check_environment`) and ignored by the adapter."""

    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, frozen=True, extra="ignore",
                                      validate_default=False, protected_namespaces=())

    # -- the model and the port (the DLC's and SageMaker's names) -------------------------------------------------
    model_path: str | None = setting(
        LLAMA_PREFIX + "MODEL", description="the model file; `serve --model` wins",
        shown_default="the single `.gguf` under the model directory")
    model_dir: str = setting(
        "SM_MODEL_DIR", LLAMA_PREFIX + "MODEL_DIR", default=DEFAULT_MODEL_DIR,
        description="the model directory (SageMaker's SM_MODEL_DIR, else the DLC's SM_LLAMA_CPP_MODEL_DIR); "
                    "`serve --model-dir` wins")
    host: str = setting(
        SEMIF_PREFIX + "HOST", default="0.0.0.0",
        description="bind address; `cdk synth` accepts only all interfaces (`0.0.0.0` or `::`): SageMaker reaches "
                    "the container from outside it. `serve --host` wins")
    port: Integer = setting("SAGEMAKER_BIND_TO_PORT", default=8080, ge=1, le=65535,
                            description="the port (SageMaker's); `serve --port` wins")
    # -- llama.cpp, with llama-server's meaning --------------------------------------------------------------------
    n_gpu_layers: Annotated[int | None, BeforeValidator(_gpu_layers, json_schema_input_type=int | Literal[
        "auto", "all"])] = setting(
        LLAMA_PREFIX + "N_GPU_LAYERS", ge=-1, shown_default="llama.cpp's (`auto`)",
        description="layers on the GPU: `all`, `auto` or a number")
    ctx_size: OptionalInteger = setting(
        LLAMA_PREFIX + "CTX_SIZE", ge=0, shown_default=f"the model's, capped at {DEFAULT_MAX_CONTEXT}",
        description="context tokens of each worker, shared by the branches of `permute`; 0 is the default")
    threads: Integer = setting(
        LLAMA_PREFIX + "THREADS", default_factory=cpu_quota, ge=1, description="CPU threads of a decode",
        shown_default="the cgroup CPU quota and affinity (not the host's core count)")
    threads_batch: Integer = setting(
        LLAMA_PREFIX + "THREADS_BATCH", ge=1, validate_default=True, shown_default="THREADS",
        description="CPU threads of a prompt's batch evaluation")
    batch_size: Integer = setting(LLAMA_PREFIX + "BATCH_SIZE", default=DEFAULT_BATCH_SIZE, ge=1,
                                  description="logical batch: tokens submitted to one decode")
    ubatch_size: OptionalInteger = setting(
        LLAMA_PREFIX + "UBATCH_SIZE", ge=1,
        shown_default="512 (llama-server's), halved while a ubatch's logits would pass 64 MiB, at least 64; at most "
                      "BATCH_SIZE",
        description="physical batch: tokens computed at once; at most BATCH_SIZE")
    flash_attn: Annotated[FlashAttention, PlainValidator(_flash_attn, json_schema_input_type=Literal[
        "on", "off", "auto", "true", "false"])] = setting(
        LLAMA_PREFIX + "FLASH_ATTN", default=FlashAttention.AUTO, description="flash attention: on, off or auto",
        shown_default="auto")
    # -- the adapter's own -------------------------------------------------------------------------------------------
    queue_size: Integer = setting(
        SEMIF_PREFIX + "QUEUE_SIZE", default=32, ge=1,
        description="decisions admitted (running + waiting) before 503 `queue_full` + Retry-After; a batch of N "
                    "takes N places")
    max_body_bytes: Integer = setting(
        SEMIF_PREFIX + "MAX_BODY_BYTES", default=MAX_BODY_BYTES, ge=1024,
        description="request body limit in bytes (after decompression too); the CDK app sets 4194304 (SageMaker "
                    "Serverless Inference's payload limit) on a serverless decision endpoint and refuses more there")
    chat_template: str | None = setting(
        SEMIF_PREFIX + "CHAT_TEMPLATE", shown_default="the GGUF's own",
        description="a llama.cpp built-in chat template name (`chatml`, `llama3`, ...) when the model's own is "
                    "missing or not usable; `plain` for a base model's frame")
    model_sha256: Annotated[str | None, BeforeValidator(_sha256)] = setting(
        SEMIF_PREFIX + "MODEL_SHA256", pattern=SHA256_PATTERN, shown_default="computed, not verified",
        description="the model's sha256 (the CDK app sets it from the artifact): the adapter hashes the file at "
                    "start-up and refuses a mismatch")
    drain_seconds: Integer = setting(
        SEMIF_PREFIX + "DRAIN_SECONDS", default=20, ge=1,
        description="after SIGTERM, how long admitted work may finish before the rest is handed back (503); "
                    f"`cdk synth` allows at most {int(SAGEMAKER_STOP_SECONDS - ABORT_GRACE_SECONDS)}, so the "
                    f"drain and {ABORT_GRACE_SECONDS:g} s for an aborted decode end before SageMaker's SIGKILL")
    body_timeout_seconds: Integer = setting(
        SEMIF_PREFIX + "BODY_TIMEOUT_SECONDS", default=DEFAULT_BODY_TIMEOUT_SECONDS, ge=1,
        description="a request whose body has not fully arrived in this time gets 408 `body_timeout`; raise it for "
                    "large JSON Lines bodies on a slow link")
    scoring: Annotated[Literal["letters", "likelihood", "pmi"], BeforeValidator(_scoring)] = setting(
        SEMIF_PREFIX + "SCORING", default=DEFAULT_SCORING,
        description="the scoring method of a request that names none")
    calibration: Annotated[Calibration | None, NoDecode, PlainValidator(
        _parsed(parse_calibration, Calibration), json_schema_input_type=str | None)] = setting(
        SEMIF_PREFIX + "CALIBRATION", shown_default="none (raw scores)",
        description="calibration JSON from `semif calibrate` (cdk.json: `decision.calibration` "
                    "names the file)")
    cache_bytes: OptionalInteger = setting(
        SEMIF_PREFIX + "CACHE_BYTES", ge=0,
        shown_default="half of what the memory limit (cgroup, else the machine) leaves after the model, every "
                      "worker's KV cache and 512 MiB, at most 16 GiB",
        description="host-memory cache of evaluated prefixes (KV states of head + state prefixes), in bytes; 0 keeps "
                    "only the heads; `cdk synth` refuses one that does not fit beside the model and the workers")
    result_cache_entries: Integer = setting(
        SEMIF_PREFIX + "RESULT_CACHE_ENTRIES", default=DEFAULT_RESULT_CACHE_ENTRIES, ge=0,
        description="identical requests answered from memory: how many raw scores are kept; 0 turns it off")
    endpoint_name: str | None = setting(
        SEMIF_PREFIX + "ENDPOINT_NAME", shown_default="`local`",
        description="the EndpointName dimension of the adapter's CloudWatch metrics (the CDK app sets it)")
    workers: OptionalInteger = setting(
        SEMIF_PREFIX + "WORKERS", ge=1, le=MAX_WORKERS,
        shown_default=f"{DEFAULT_CPU_WORKERS} on a CPU (at most THREADS_BATCH), 1 with layers on a GPU",
        description="decisions evaluated at once, each on a llama.cpp context of its own (its KV cache is memory "
                    "each worker adds)")
    model_name: str | None = setting(
        SEMIF_PREFIX + "MODEL_NAME", shown_default="the GGUF file's name without .gguf",
        description="the model's name in System One answers and GET /v1/models; requests may also say jev-latest")
    api_keys_file: str | None = setting(
        SEMIF_PREFIX + "API_KEYS_FILE", shown_default="none: no key needed",
        description="a file of hashed API keys (one `KEY_ID sha256:HEX` per line): when set, every route but /ping "
                    "and /execution-parameters needs `Authorization: Bearer KEY` (for a port exposed directly; "
                    "SageMaker authenticates callers itself); the file must exist at start-up")
    decision_engine: Literal["auto", "native", "ours"] = setting(
        SEMIF_PREFIX + "DECISION_ENGINE", default="auto",
        description="who scores: `auto` (a GGUF that declares `<arch>.decision.type` is scored by llama.cpp's own "
                    "decision engine, any other by ours), `native` (the model's own head; the file must declare a "
                    "decision type) or `ours` (our methods over our prompts, for any GGUF: to compare)")
    llama_server: str | None = setting(
        SEMIF_PREFIX + "LLAMA_SERVER", shown_default="`llama-server` on PATH (the pinned llama.cpp build)",
        description="the llama-server binary of the native decision engine (b11361 or later)")
    frames: Annotated[Frames, NoDecode, PlainValidator(
        _parsed(parse_frames, Frames), json_schema_input_type=str)] = setting(
        SEMIF_PREFIX + "SYSTEMONE_FRAMES", default=DEFAULT_FRAMES,
        shown_default=f"`{DEFAULT_FRAMES.describe()}` (measured best)",
        description="how System One questions are worded for the model: `type=wording` pairs, comma-separated ("
                    + "; ".join(f"{kind}: {' or '.join(wordings)}" for kind, wordings in CHOICES.items()) + ")")

    @field_validator("ctx_size")
    @classmethod
    def _model_context_when_zero(cls, value: int | None) -> int | None:
        return value or None

    @field_validator("threads_batch", mode="before")
    @classmethod
    def _threads_when_unset(cls, value: object, info: ValidationInfo) -> object:
        return info.data.get("threads") if value is None else value

    @field_validator("api_keys_file")
    @classmethod
    def _keys_file_exists(cls, path: str | None) -> str | None:
        """The keys file must exist at start-up: a typo in its path must not leave the port open without keys."""
        if path is not None and not Path(path).is_file():
            raise ValueError(f"{path} is not a readable file")
        return path

    @model_validator(mode="after")
    def _ubatch_within_batch(self) -> Settings:
        if self.ubatch_size is not None and self.ubatch_size > self.batch_size:
            raise SettingsError(LLAMA_PREFIX + "UBATCH_SIZE",
                                f"{self.ubatch_size} exceeds BATCH_SIZE {self.batch_size}")
        return self

    def worker_count(self, cpu_only: bool) -> int:
        """SEMIF_WORKERS, else DEFAULT_CPU_WORKERS on a CPU (at most the threads) and 1 with layers on a GPU."""
        return self.workers or (min(DEFAULT_CPU_WORKERS, self.threads_batch) if cpu_only else 1)


class EnvironmentMap(EnvSettingsSource):
    """pydantic-settings' environment source over a given map: the process's, or the one the CDK app will set."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = env
        super().__init__(Settings)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        """The names as they are (the model is case-sensitive), empty values left out (they count as unset)."""
        return {key: value for key, value in self._env.items() if value != ""}


def env_names(name: str) -> tuple[str, ...]:
    """The variables a field is read from, first one first."""
    alias = Settings.model_fields[name].validation_alias
    return tuple(cast(list[str], alias.choices)) if isinstance(alias, AliasChoices) else (cast(str, alias),)


ENV_NAMES = {name: env_names(name) for name in Settings.model_fields}
# Every SEMIF_* setting the adapter reads, with what it does: the CDK app refuses any other key (a typo such as
# SEMIF_QUEUE_SIZ would otherwise be ignored silently) and suggests the closest of these.
SEMIF_KEYS: dict[str, str] = {ENV_NAMES[name][0]: field.description or "" for name, field in
                              Settings.model_fields.items() if ENV_NAMES[name][0].startswith(SEMIF_PREFIX)}


def _settings_error(error: ValidationError) -> SettingsError:
    """The first problem, as the variable's name and a message that says what was expected and what came."""
    first = error.errors()[0]
    context = first.get("ctx", {})
    cause = context.get("error")
    if isinstance(cause, SettingsError):
        return cause
    where = str(first["loc"][0]) if first["loc"] else "settings"
    key = ENV_NAMES[where][0] if where in ENV_NAMES else where
    if isinstance(cause, ValueError):
        return SettingsError(key, str(cause))
    if first["type"] == "greater_than_equal":
        return SettingsError(key, f"must be at least {context['ge']}, got {first['input']}")
    if first["type"] == "less_than_equal":
        return SettingsError(key, f"at most {context['le']}, got {first['input']}")
    return SettingsError(key, first["msg"])


def load_settings(env: Mapping[str, str] | None = None, *, model_path: str | None = None,
                  model_dir: str | None = None, port: int | None = None,
                  host: str | None = None) -> Settings:
    """Settings from an environment map (the process's by default); command-line values win over the environment."""
    values = EnvironmentMap(os.environ if env is None else env)()
    given = {"model_path": model_path, "model_dir": model_dir, "port": port, "host": host}
    values.update({ENV_NAMES[name][0]: value for name, value in given.items() if value})
    try:
        return Settings.model_validate(values)
    except ValidationError as error:
        raise _settings_error(error) from None


def check_environment(env: Mapping[str, str]) -> None:
    """Raise SettingsError for a `SEMIF_*` key the adapter does not read (naming the closest one it does) or for any
    value it would refuse at start-up: what the CDK app runs on the decision container's environment."""
    for key in sorted(env):
        if key.startswith(SEMIF_PREFIX) and key not in SEMIF_KEYS:
            close = difflib.get_close_matches(key, list(SEMIF_KEYS), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise SettingsError(key, f"not an adapter setting ({hint}the adapter would ignore it); known: "
                                     f"{', '.join(sorted(SEMIF_KEYS))}")
    load_settings(env)
