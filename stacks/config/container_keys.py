"""The container environment variables the stack reads or writes, by name, and SageMaker's limit on their values.

Two families: llama.cpp's `SM_LLAMA_CPP_*` (the DLC's entry point turns each into a llama-server flag; both models
read them) and the decision adapter's `SEMIF_*`. The names come from the adapter's own modules (`PREFIX`,
`SEMIF_PREFIX`), so the stack and the container cannot spell one differently.
"""

from __future__ import annotations

from semif_adapter.deploy.llama_flags import CONSUMED, PREFIX
from semif_adapter.settings import ABORT_GRACE_SECONDS, SAGEMAKER_STOP_SECONDS, SEMIF_PREFIX

ENV_VALUE_MAX = 1024  # SageMaker's limit on one environment value

# ---- llama.cpp (SM_LLAMA_CPP_*) ----------------------------------------------------------------------------------
MODEL_PATH_KEY = PREFIX + "MODEL"
CTX_SIZE_KEY = PREFIX + "CTX_SIZE"
GPU_LAYERS_KEY = PREFIX + "N_GPU_LAYERS"
GPU_LAYERS_ALL = "999"
THREADS_KEY = PREFIX + "THREADS"
# The adapter's worker default reads the batch threads first.
THREAD_KEYS = (PREFIX + "THREADS_BATCH", THREADS_KEY)
# Context extension is intended when one of these is set: then a context beyond the trained one is not refused.
CONTEXT_EXTENSION_KEYS = frozenset(PREFIX + k for k in ("ROPE_SCALE", "ROPE_SCALING", "ROPE_FREQ_SCALE",
                                                        "YARN_ORIG_CTX"))
# Set by the stack from the artifact; a second value in config would fight it. These are the keys the DLC's entry
# point consumes, which `check_setting` accepts whatever their value, so they are refused in the configuration.
STACK_OWNED_LLAMA = CONSUMED

# ---- the decision adapter (SEMIF_*) ------------------------------------------------------------------------------
MODEL_SHA256_KEY = SEMIF_PREFIX + "MODEL_SHA256"  # the adapter's check of the model it loads
CALIBRATION_KEY = SEMIF_PREFIX + "CALIBRATION"
ENDPOINT_NAME_KEY = SEMIF_PREFIX + "ENDPOINT_NAME"  # the EndpointName dimension of the adapter's metrics
MAX_BODY_KEY = SEMIF_PREFIX + "MAX_BODY_BYTES"
HOST_KEY = SEMIF_PREFIX + "HOST"
DRAIN_KEY = SEMIF_PREFIX + "DRAIN_SECONDS"
CACHE_KEY = SEMIF_PREFIX + "CACHE_BYTES"
WORKERS_KEY = SEMIF_PREFIX + "WORKERS"
DECISION_ENGINE_KEY = SEMIF_PREFIX + "DECISION_ENGINE"  # auto | native | ours: who scores (decision_engine.py)
# Adapter settings the stack sets itself, with why a value in config would be wrong.
STACK_OWNED_SEMIF = {
    MODEL_SHA256_KEY: "set by the stack from the model artifact; remove it",
    ENDPOINT_NAME_KEY: "set by the stack to the endpoint's name, which the dashboard and the alarms look up; remove it",
}
# Adapter settings are single-line values; SEMIF_CALIBRATION is JSON, so JSON's whitespace is allowed there.
JSON_SETTINGS = frozenset({CALIBRATION_KEY})
ALL_INTERFACES = frozenset({"0.0.0.0", "::"})
MAX_DRAIN_SECONDS = int(SAGEMAKER_STOP_SECONDS - ABORT_GRACE_SECONDS)  # SIGKILL comes 30 s after SIGTERM
