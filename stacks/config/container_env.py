"""The container environment each model gets: one SM_LLAMA_CPP_* map for both (plus each one's overrides), the
model's path pinned, and for the decision adapter its settings plus what only the stack knows (the endpoint's
name, the model's digest, the calibration, the serverless body limit)."""

from __future__ import annotations

from semif_adapter.settings import MAX_BODY_BYTES

from .container_keys import (
    CALIBRATION_KEY,
    ENDPOINT_NAME_KEY,
    MAX_BODY_KEY,
    MODEL_PATH_KEY,
    MODEL_SHA256_KEY,
)
from .environment import EnvironmentSettings
from .kinds import EndpointKind


def container_env(settings: EnvironmentSettings, kind: EndpointKind, *, endpoint_name: str, model_path: str,
                  model_sha256: str | None) -> dict[str, str]:
    """The environment of `kind`'s container on the endpoint `endpoint_name` (validated at synth: rules.py)."""
    variables = {**settings.llama_env_for(kind), MODEL_PATH_KEY: model_path}
    for key, value in settings.mode_of(kind).container_defaults(settings, kind).items():
        variables.setdefault(key, value)
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
    """The SEMIF_MAX_BODY_BYTES the stack sets: the mode's cap (serverless: 4 MB), unless the config sets one
    (None: the adapter's default)."""
    if MAX_BODY_KEY in settings.decision.adapter_env:
        return None
    return settings.mode_of("decision").body_limit


def container_body_limit(settings: EnvironmentSettings) -> int:
    """The decision container's SEMIF_MAX_BODY_BYTES: the configured value, the serverless cap, or its default."""
    configured = settings.decision.adapter_env.get(MAX_BODY_KEY, "")
    if configured.isdigit():
        return int(configured)
    return decision_body_limit(settings) or MAX_BODY_BYTES
