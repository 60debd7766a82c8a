"""The two words every part of the app is organised by: which model (chat or decision) and how it is hosted."""

from __future__ import annotations

from typing import Literal

EndpointKind = Literal["chat", "decision"]
ENDPOINT_KINDS: tuple[EndpointKind, ...] = ("chat", "decision")
# How a model is hosted (README "Hosting modes"): its own endpoint, a component of the one shared endpoint, or the
# decision model on a serverless endpoint. Each mode: a module of stacks/config/hosting/ and of stacks/endpoints/modes/.
HostingMode = Literal["dedicated", "shared", "serverless"]
