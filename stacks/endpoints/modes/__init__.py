"""What serves a model in each hosting mode, one module each (dedicated.py, shared.py, serverless.py: the twins of
stacks/config/hosting/), and the one place that maps a mode's name to it."""

from __future__ import annotations

from ...config.kinds import HostingMode
from .dedicated import Dedicated
from .serverless import Serverless
from .serving import Served, Serving
from .shared import Shared

SERVING: dict[HostingMode, Serving] = {mode.name: mode for mode in (Dedicated(), Shared(), Serverless())}


def serving_for(name: HostingMode) -> Serving:
    return SERVING[name]


__all__ = ["SERVING", "Served", "Serving", "serving_for"]
