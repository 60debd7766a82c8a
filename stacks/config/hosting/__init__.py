"""The hosting modes, one module each (dedicated.py, shared.py, serverless.py), and the one place that maps a
mode's name (kinds.py `HostingMode`, the config schema) to it."""

from __future__ import annotations

from ..kinds import HostingMode
from .dedicated import Dedicated
from .mode import HostingRules, ServingCapacity
from .serverless import Serverless
from .shared import Shared

MODES: dict[HostingMode, HostingRules] = {mode.name: mode for mode in (Dedicated(), Shared(), Serverless())}


def mode_for(name: HostingMode) -> HostingRules:
    return MODES[name]


__all__ = ["MODES", "HostingRules", "ServingCapacity", "mode_for"]
