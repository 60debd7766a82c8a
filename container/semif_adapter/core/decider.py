"""What the doors and the process need of whoever scores: our engine (`service.DecisionService`) or llama.cpp's own
decision engine (`native_service.NativeDecisionService`), chosen at start from the GGUF's header."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from typing import Protocol

from .decided import Decided
from .identity import ModelIdentity
from .question import Question
from .service_settings import ServiceSettings


class Decider(Protocol):
    settings: ServiceSettings

    @property
    def ready(self) -> bool: ...

    @property
    def saves_prefixes(self) -> bool: ...

    @property
    def identity(self) -> ModelIdentity: ...

    def load(self) -> Future[None]: ...

    async def decide_all(self, questions: Sequence[Question]) -> list[Decided | BaseException]: ...

    def stop_admitting(self) -> None: ...

    def drain(self) -> None: ...

    def close(self) -> None: ...
