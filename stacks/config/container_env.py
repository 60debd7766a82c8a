"""The container environment each model gets: one SM_LLAMA_CPP_* map for both (plus each one's overrides), the
model's path pinned, and for the decision adapter its settings plus what only the stack knows (the endpoint's
name, the model's digest, the calibration, the serverless body limit)."""

from __future__ import annotations

import math

from semif_adapter.settings import MAX_BODY_BYTES

from .container_keys import (
    CALIBRATION_KEY,
    ENDPOINT_NAME_KEY,
    MAX_BODY_KEY,
    MODEL_PATH_KEY,
    MODEL_SHA256_KEY,
    THREADS_KEY,
)
from .environment import EnvironmentSettings
from .hosting_rules import SERVERLESS_MAX_BODY_BYTES
from .kinds import EndpointKind


def container_env(settings: EnvironmentSettings, kind: EndpointKind, *, endpoint_name: str, model_path: str,
                  model_sha256: str | None) -> dict[str, str]:
    """The environment of `kind`'s container on the endpoint `endpoint_name` (validated at synth: rules.py)."""
    variables = {**settings.llama_env_for(kind), MODEL_PATH_KEY: model_path}
    component = settings.endpoint(kind).component
    if settings.hosting_of(kind) == "shared" and component is not None:
        # Two llama.cpp processes share the instance: each uses the cores its copy reserves, not every core
        # of the machine (its spinning threads would slow the other down).
        variables.setdefault(THREADS_KEY, str(max(1, math.ceil(component.cpu_cores))))
    if kind == "decision":
        variables.update(settings.decision.adapter_env)
        variables[ENDPOINT_NAME_KEY] = endpoint_name
        calibration = settings.decision.calibration_setting()  # validated at synth (container_env_rules.py)
        if calibration is not None:
            variables[CALIBRATION_KEY] = calibration
        if model_sha256:
            variables[MODEL_SHA256_KEY] = model_sha256
        body_limit = decision_body_limit(settings)
        if body_limit is not None:
            variables[MAX_BODY_KEY] = str(body_limit)
    return variables


def decision_body_limit(settings: EnvironmentSettings) -> int | None:
    """The SEMIF_MAX_BODY_BYTES the stack sets: serverless caps requests at 4 MB (None: the adapter's default)."""
    if settings.hosting_of("decision") != "serverless" or MAX_BODY_KEY in settings.decision.adapter_env:
        return None
    return SERVERLESS_MAX_BODY_BYTES


def container_body_limit(settings: EnvironmentSettings) -> int:
    """The decision container's SEMIF_MAX_BODY_BYTES: the configured value, the serverless cap, or its default."""
    configured = settings.decision.adapter_env.get(MAX_BODY_KEY, "")
    if configured.isdigit():
        return int(configured)
    return decision_body_limit(settings) or MAX_BODY_BYTES
