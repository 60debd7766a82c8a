"""One environment of the app with the names derived from it, and how it is read from cdk.json's context.

Only the selected environment is read, so a half-written `staging` entry does not block `-c env=dev`; every
problem is reported with its full key (`environments.prod.decision.instance_type: ...`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .environment import EnvironmentSettings
from .kinds import EndpointKind
from .problems import ConfigError, raise_problems
from .rules import check_environment

CONTEXT_KEY = "semif"  # cdk.json: context.semif = {app_name, environments: {NAME: {...}}}
ENVIRONMENT_CONTEXT_KEY = "env"  # cdk synth -c env=NAME: the deployment environment's name
_APP_NAME = re.compile(r"[a-z][a-z0-9-]{0,23}")  # used with fullmatch: a trailing newline is not a name
_ENVIRONMENT_NAME = re.compile(r"[a-z][a-z0-9]{0,11}")
_MODEL_SOURCES = ("embedded", "gguf", "tarball", "s3")


@dataclass(frozen=True)
class Deployment:
    """One environment of the app, with the names derived from it."""

    app_name: str
    environment_name: str
    settings: EnvironmentSettings

    @property
    def stack_name(self) -> str:
        return f"{self.app_name}-{self.environment_name}"

    def endpoint_name(self, kind: EndpointKind) -> str:
        """The endpoint that serves `kind`. The name follows the hosting mode: SageMaker cannot update an
        instance-based endpoint into a serverless one or back, so a new mode is a new endpoint (README)."""
        return self.settings.mode_of(kind).endpoint_name(self.stack_name, kind)

    @property
    def shared_endpoint_name(self) -> str:
        """The endpoint both models share (meaningful where the environment's models share one: settings.shared)."""
        return self.endpoint_name("decision")

    def component_name(self, kind: EndpointKind) -> str | None:
        """The inference component that serves `kind` on the shared endpoint; None when it has its own endpoint."""
        return self.settings.mode_of(kind).component_name(self.stack_name, kind)


def environment_key(environment_name: str) -> str:
    """Where an environment's settings are in cdk.json's context: the prefix of every key its problems name."""
    return f"environments.{environment_name}"


def _key(prefix: str, loc: tuple[int | str, ...]) -> str:
    parts = [prefix]
    for index, item in enumerate(loc):
        if index > 0 and loc[index - 1] == "model" and item in _MODEL_SOURCES:
            continue  # pydantic's tag of the model-source union, not a key the user wrote
        parts.append(str(item))
    return ".".join(parts)


def parse_deployment(context: Mapping[str, Any] | None, environment_name: str | None) -> Deployment:
    """Read the selected environment's settings (each block's own bounds), or raise ConfigError listing every
    problem; the rules across keys are `check_environment`'s (load_deployment, stacks/prepare.py)."""
    if not isinstance(context, Mapping):
        raise ConfigError([(CONTEXT_KEY, "missing from cdk.json context (see README.md, 'Deploying to AWS')")])
    app_name = context.get("app_name")
    environments = context.get("environments")
    if not isinstance(app_name, str) or not _APP_NAME.fullmatch(app_name):
        raise ConfigError([("app_name", f"{app_name!r} must be lower-case letters, digits and '-', "
                                        "starting with a letter, at most 24 characters")])
    if not isinstance(environments, Mapping) or not environments:
        raise ConfigError([("environments", "must map environment names to their settings")])
    if not environment_name:
        raise ConfigError([(ENVIRONMENT_CONTEXT_KEY,
                            f"choose an environment with -c env=NAME, one of {sorted(environments)}")])
    if environment_name not in environments:
        raise ConfigError([(ENVIRONMENT_CONTEXT_KEY, f"unknown environment {environment_name!r}; cdk.json defines "
                                                     f"{sorted(environments)}")])
    prefix = environment_key(environment_name)
    if not _ENVIRONMENT_NAME.fullmatch(environment_name):
        raise ConfigError([(prefix, "environment names are lower-case letters and digits, starting with a letter, "
                                    "at most 12 characters")])
    try:
        settings = EnvironmentSettings.model_validate(environments[environment_name])
    except ValidationError as error:
        raise ConfigError([(_key(prefix, tuple(e["loc"])), e["msg"].removeprefix("Value error, "))
                           for e in error.errors()]) from None
    return Deployment(app_name=app_name, environment_name=environment_name, settings=settings)


def load_deployment(context: Mapping[str, Any] | None, environment_name: str | None) -> Deployment:
    """Parse and validate the selected environment (its rules across keys too), or raise ConfigError listing every
    problem: what `cdk synth` checks before it looks at the model."""
    deployment = parse_deployment(context, environment_name)
    raise_problems(check_environment(deployment.settings), environment_key(deployment.environment_name))
    return deployment
