"""How every configuration rule reports: (key, message) pairs, raised together as one ConfigError naming each key.

Rules return the keys relative to the environment (`decision.instance_type`); whoever knows where the environment
came from prefixes them (`environments.prod.decision.instance_type` for cdk.json, nothing for settings made in code).
"""

from __future__ import annotations

Problems = list[tuple[str, str]]


class ConfigError(ValueError):
    """Every problem found in one environment's configuration, each with its full key."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        lines = "\n".join(f"  {key}: {message}" for key, message in problems)
        super().__init__(f"invalid cdk.json configuration ({len(problems)} problem(s)):\n{lines}")

    @property
    def keys(self) -> list[str]:
        return [key for key, _ in self.problems]


def raise_problems(problems: Problems, prefix: str = "") -> None:
    """Raise ConfigError with every key under `prefix` (e.g. `environments.dev`), if there is any problem."""
    if problems:
        raise ConfigError([(f"{prefix}.{key}" if prefix else key, message) for key, message in problems])
