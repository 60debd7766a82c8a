"""The container environment maps at synth: every `llama_env` flag and `decision.env` setting is checked by the
container's own parsers (llama-server's flag table, the adapter's settings), so a value the container would refuse
at start-up, ten minutes into a deployment, fails `cdk synth` naming its key."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from semif_adapter.core.calibration import CalibrationError
from semif_adapter.deploy.llama_flags import CONTROL_CHARACTER, PREFIX, FlagError, check_setting
from semif_adapter.settings import (
    ABORT_GRACE_SECONDS,
    SAGEMAKER_STOP_SECONDS,
    SEMIF_KEYS,
    SEMIF_PREFIX,
    SettingsError,
    load_settings,
)

from .container_keys import (
    ALL_INTERFACES,
    CALIBRATION_KEY,
    DRAIN_KEY,
    ENV_VALUE_MAX,
    HOST_KEY,
    JSON_SETTINGS,
    MAX_DRAIN_SECONDS,
    STACK_OWNED_LLAMA,
    STACK_OWNED_SEMIF,
)
from .environment import EnvironmentSettings
from .problems import Problems
from .secrets import CONTAINER_SECRET, looks_like_secret


def adapter_setting_problem(key: str, value: str) -> str | None:
    """Why one `decision.env` entry is refused, or None."""
    if not key.startswith(SEMIF_PREFIX):
        return f"adapter settings start with {SEMIF_PREFIX} (llama.cpp flags go in llama_env)"
    if looks_like_secret(key, value):
        return CONTAINER_SECRET
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


def check_llama_env(where: str, llama_env: Mapping[str, str]) -> Problems:
    """Each SM_LLAMA_CPP_* entry of one map (`where` is its key) against llama-server's flag table."""
    problems: Problems = []
    for key, value in sorted(llama_env.items()):
        at = f"{where}.{key}"
        if not key.startswith(PREFIX):
            problems.append((at, f"llama_env holds {PREFIX}* flags only (adapter settings go in decision.env)"))
            continue
        name = key[len(PREFIX):]
        if looks_like_secret(name, value):
            problems.append((at, CONTAINER_SECRET))
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


def _check_calibration(settings: EnvironmentSettings) -> tuple[Problems, dict[str, str]]:
    """The `decision.calibration` file: readable, valid for the adapter, short enough; its SEMIF_CALIBRATION value."""
    endpoint = settings.decision
    if endpoint.calibration is None:
        return [], {}
    if CALIBRATION_KEY in endpoint.adapter_env:
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


def check_adapter_settings(settings: EnvironmentSettings) -> Problems:
    """Run the decision adapter's own settings parser on the environment it will get."""
    calibration_problems, calibration = _check_calibration(settings)
    if calibration_problems:
        return calibration_problems
    merged = {**settings.llama_env_for("decision"), **settings.decision.adapter_env, **calibration}
    try:
        adapter = load_settings(merged)
    except SettingsError as error:
        if error.key.startswith(SEMIF_PREFIX):
            section = "decision.env"
        elif error.key in settings.decision.llama_env:
            section = "decision.llama_env"
        else:
            section = "llama_env"
        return [(f"{section}.{error.key}", str(error).removeprefix(f"{error.key}: "))]
    if adapter.drain_seconds > MAX_DRAIN_SECONDS:
        return [(f"decision.env.{DRAIN_KEY}",
                 f"{adapter.drain_seconds} s of drain plus {ABORT_GRACE_SECONDS:g} s for an aborted decode to "
                 f"return do not fit in the {SAGEMAKER_STOP_SECONDS} s SageMaker waits between SIGTERM and SIGKILL; "
                 f"at most {MAX_DRAIN_SECONDS}")]
    return []
