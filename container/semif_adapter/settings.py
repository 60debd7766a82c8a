"""Adapter configuration, read once from the environment and validated in one place.

One environment map configures both endpoints: the `SM_LLAMA_CPP_*` variables
that matter for scoring keep llama-server's meaning (same names, same values),
and settings only the adapter has use the `SEMIF_` prefix. A bad value stops
the process at start-up with the variable named, before `/ping` could say 200.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from .calibration import SCORING_METHODS, Calibration, CalibrationError, parse_calibration
from .llama_flags import PREFIX
from .model_files import DEFAULT_MODEL_DIR
from .systemone_frames import DEFAULT_FRAMES, Frames, parse_frames

SEMIF_PREFIX = "SEMIF_"
DEFAULT_BODY_TIMEOUT_SECONDS = 30  # a sender slower than this loses its request, not the server's attention
DEFAULT_MAX_CONTEXT = 8192  # when CTX_SIZE is unset: the model's own, capped (KV memory grows with it)
MAX_BODY_BYTES = 6 * 1024 * 1024  # SageMaker's real-time payload limit
DEFAULT_SCORING = "pmi"  # measured best on the labelled set (README, "Decision quality")
ABORT_GRACE_SECONDS = 5.0  # after the drain deadline: time for an aborted decode to return (one ubatch)
SAGEMAKER_STOP_SECONDS = 30  # SageMaker sends SIGKILL this long after SIGTERM
DEFAULT_RESULT_CACHE_ENTRIES = 4096
DEFAULT_CPU_WORKERS = 2  # measured on 2 cores: README, "Benchmarks"
# Every SEMIF_* setting the adapter reads, with what it does: the CDK app refuses any other key (a typo such as
# SEMIF_QUEUE_SIZ would otherwise be ignored silently) and suggests the closest of these.
SEMIF_KEYS: dict[str, str] = {
    "SEMIF_HOST": "bind address (all interfaces in the image)",
    "SEMIF_QUEUE_SIZE": "decisions admitted (running + waiting) before 503 + Retry-After",
    "SEMIF_MAX_BODY_BYTES": "request body limit in bytes",
    "SEMIF_CHAT_TEMPLATE": "a llama.cpp built-in chat template name, when the model's own is not usable",
    "SEMIF_MODEL_SHA256": "the model's sha256; the adapter hashes the file at start-up and refuses a mismatch",
    "SEMIF_DRAIN_SECONDS": "SIGTERM: how long admitted work may finish before the rest is handed back",
    "SEMIF_BODY_TIMEOUT_SECONDS": "a request whose body has not arrived in this time gets 408 body_timeout",
    "SEMIF_SCORING": "default scoring method: letters, likelihood or pmi",
    "SEMIF_CALIBRATION": "calibration JSON (scripts/evaluate.py --fit-calibration)",
    "SEMIF_CACHE_BYTES": "host-memory cache of evaluated prefixes, in bytes (default: from the memory limit)",
    "SEMIF_RESULT_CACHE_ENTRIES": "identical requests answered from memory: how many answers are kept",
    "SEMIF_ENDPOINT_NAME": "the endpoint name, a dimension of the adapter's CloudWatch metrics",
    "SEMIF_MODEL_NAME": "the model's name in System One answers and GET /v1/models (default: the GGUF file's name "
                        "without .gguf); requests may also say jev-latest",
    "SEMIF_API_KEYS_FILE": "a file of hashed API keys (one `KEY_ID sha256:HEX` per line): when set, every route but "
                           "/ping and /execution-parameters needs `Authorization: Bearer KEY` (for a port exposed "
                           "directly; SageMaker authenticates callers itself)",
    "SEMIF_SYSTEMONE_FRAMES": "how System One questions are worded for the model, e.g. "
                              "`choice=description,noul=described,score=levels` (the measured default; "
                              "README, System One API)",
    "SEMIF_WORKERS": "decisions evaluated at once, each on a llama.cpp context of its own (default: 2 on a CPU, "
                     "1 with layers on a GPU)",
}
MAX_WORKERS = 16  # each worker's context holds a KV cache of its own


class SettingsError(ValueError):
    """A configuration value the adapter cannot start with."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


class FlashAttention(IntEnum):
    """llama.h `enum llama_flash_attn_type`."""

    AUTO = -1
    DISABLED = 0
    ENABLED = 1


@dataclass(frozen=True)
class Settings:
    model_path: str | None  # SM_LLAMA_CPP_MODEL or --model
    model_dir: str  # SM_MODEL_DIR / SM_LLAMA_CPP_MODEL_DIR / --model-dir, default /opt/ml/model
    host: str
    port: int
    n_gpu_layers: int | None  # None: llama.cpp's default
    ctx_size: int | None  # None: the model's own, capped at DEFAULT_MAX_CONTEXT
    threads: int
    threads_batch: int
    batch_size: int
    ubatch_size: int | None  # None: `default_ubatch` of the model's vocabulary (llama_runtime)
    flash_attn: FlashAttention
    queue_size: int  # requests admitted (running + waiting) before 503 + Retry-After
    max_body_bytes: int
    chat_template: str | None  # a llama.cpp built-in template name, when the GGUF's is not usable
    model_sha256: str | None  # given by the deployment (the packaging step computed it)
    drain_seconds: int  # SIGTERM: how long admitted requests get before the rest is handed back (503)
    body_timeout_seconds: int  # a body not received in this time is answered 408 body_timeout
    scoring: str = DEFAULT_SCORING  # the method used when a request names none
    calibration: Calibration | None = None
    cache_bytes: int | None = None  # None: sized from the memory limit at start-up
    result_cache_entries: int = DEFAULT_RESULT_CACHE_ENTRIES
    endpoint_name: str | None = None
    workers: int | None = None  # None: `worker_count` decides once the model is loaded
    model_name: str | None = None  # None: the GGUF file's name without .gguf
    api_keys_file: str | None = None  # None: no key needed (an Authorization header is accepted and ignored)
    frames: Frames = DEFAULT_FRAMES  # how System One questions are worded

    def worker_count(self, cpu_only: bool) -> int:
        """SEMIF_WORKERS, else DEFAULT_CPU_WORKERS on a CPU (at most the threads) and 1 with layers on a GPU."""
        return self.workers or (min(DEFAULT_CPU_WORKERS, self.threads_batch) if cpu_only else 1)


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


def _optional_int(env: Mapping[str, str], key: str, minimum: int) -> int | None:
    """The variable as an integer of at least `minimum`; None when unset or empty."""
    raw = env.get(key)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(key, f"expected an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(key, f"must be at least {minimum}, got {value}")
    return value


def _int(env: Mapping[str, str], key: str, default: int, minimum: int) -> int:
    value = _optional_int(env, key, minimum)
    return default if value is None else value


def _gpu_layers(env: Mapping[str, str]) -> int | None:
    key = PREFIX + "N_GPU_LAYERS"
    raw = env.get(key, "").strip().lower()
    if raw in ("", "auto"):
        return None
    if raw == "all":
        return -1
    return _optional_int(env, key, -1)


def _flash_attn(env: Mapping[str, str]) -> FlashAttention:
    key = PREFIX + "FLASH_ATTN"
    raw = env.get(key, "auto").strip().lower()
    names = {"auto": FlashAttention.AUTO, "on": FlashAttention.ENABLED, "true": FlashAttention.ENABLED,
             "off": FlashAttention.DISABLED, "false": FlashAttention.DISABLED}
    if raw not in names:
        raise SettingsError(key, f"expected on, off or auto, got {raw!r}")
    return names[raw]


def _scoring(env: Mapping[str, str]) -> str:
    key = SEMIF_PREFIX + "SCORING"
    raw = env.get(key) or DEFAULT_SCORING
    if raw not in SCORING_METHODS:
        raise SettingsError(key, f"expected one of {', '.join(SCORING_METHODS)}, got {raw!r}")
    return raw


def _calibration(env: Mapping[str, str]) -> Calibration | None:
    key = SEMIF_PREFIX + "CALIBRATION"
    raw = env.get(key)
    if not raw:
        return None
    try:
        return parse_calibration(raw)
    except CalibrationError as error:
        raise SettingsError(key, str(error)) from None


def load_settings(env: Mapping[str, str] | None = None, *, model_path: str | None = None,
                  model_dir: str | None = None, port: int | None = None,
                  host: str | None = None) -> Settings:
    """Settings from an environment map; command-line values win over the environment."""
    env = os.environ if env is None else env
    threads = _optional_int(env, PREFIX + "THREADS", 1) or cpu_quota()
    batch_size = _int(env, PREFIX + "BATCH_SIZE", 2048, 1)
    ubatch_size = _optional_int(env, PREFIX + "UBATCH_SIZE", 1)
    if ubatch_size is not None and ubatch_size > batch_size:
        raise SettingsError(PREFIX + "UBATCH_SIZE", f"{ubatch_size} exceeds BATCH_SIZE {batch_size}")
    sha = env.get(SEMIF_PREFIX + "MODEL_SHA256") or None
    if sha is not None and (len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha)):
        raise SettingsError(SEMIF_PREFIX + "MODEL_SHA256", "expected 64 lower-case hex digits")
    return Settings(
        model_path=model_path or env.get(PREFIX + "MODEL") or None,
        model_dir=model_dir or env.get("SM_MODEL_DIR") or env.get(PREFIX + "MODEL_DIR") or DEFAULT_MODEL_DIR,
        host=host or env.get(SEMIF_PREFIX + "HOST") or "0.0.0.0",
        port=port or _int(env, "SAGEMAKER_BIND_TO_PORT", 8080, 1),
        n_gpu_layers=_gpu_layers(env),
        ctx_size=_optional_int(env, PREFIX + "CTX_SIZE", 0) or None,
        threads=threads,
        threads_batch=_optional_int(env, PREFIX + "THREADS_BATCH", 1) or threads,
        batch_size=batch_size,
        ubatch_size=ubatch_size,
        flash_attn=_flash_attn(env),
        queue_size=_int(env, SEMIF_PREFIX + "QUEUE_SIZE", 32, 1),
        max_body_bytes=_int(env, SEMIF_PREFIX + "MAX_BODY_BYTES", MAX_BODY_BYTES, 1024),
        chat_template=env.get(SEMIF_PREFIX + "CHAT_TEMPLATE") or None,
        model_sha256=sha,
        drain_seconds=_int(env, SEMIF_PREFIX + "DRAIN_SECONDS", 20, 1),
        body_timeout_seconds=_int(env, SEMIF_PREFIX + "BODY_TIMEOUT_SECONDS", DEFAULT_BODY_TIMEOUT_SECONDS, 1),
        scoring=_scoring(env),
        calibration=_calibration(env),
        cache_bytes=_optional_int(env, SEMIF_PREFIX + "CACHE_BYTES", 0),
        result_cache_entries=_int(env, SEMIF_PREFIX + "RESULT_CACHE_ENTRIES", DEFAULT_RESULT_CACHE_ENTRIES, 0),
        endpoint_name=env.get(SEMIF_PREFIX + "ENDPOINT_NAME") or None,
        workers=_workers(env),
        model_name=env.get(SEMIF_PREFIX + "MODEL_NAME") or None,
        api_keys_file=_api_keys_file(env),
        frames=_frames(env),
    )


def _frames(env: Mapping[str, str]) -> Frames:
    key = SEMIF_PREFIX + "SYSTEMONE_FRAMES"
    try:
        return parse_frames(env.get(key) or "")
    except ValueError as error:
        raise SettingsError(key, str(error)) from None


def _api_keys_file(env: Mapping[str, str]) -> str | None:
    """The keys file must exist at start-up: a typo in its path must not leave the port open without keys."""
    key = SEMIF_PREFIX + "API_KEYS_FILE"
    path = env.get(key) or None
    if path is not None and not Path(path).is_file():
        raise SettingsError(key, f"{path} is not a readable file")
    return path


def _workers(env: Mapping[str, str]) -> int | None:
    key = SEMIF_PREFIX + "WORKERS"
    workers = _optional_int(env, key, 1)
    if workers is not None and workers > MAX_WORKERS:
        raise SettingsError(key, f"at most {MAX_WORKERS}, got {workers}")
    return workers
