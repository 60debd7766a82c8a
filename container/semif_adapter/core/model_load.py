"""How both decision services start: the model is verified, loaded and warmed up on a thread of its own, and ends
with its identity (which weights produce the scores), which the doors ask for only once `/ping` says 200."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from ..errors import NotReadyError
from .identity import ModelIdentity


class ModelLoad:
    """The load's thread and the identity it found."""

    def __init__(self, thread_name: str) -> None:
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        self._identity: ModelIdentity | None = None

    def start(self, load: Callable[[], None]) -> Future[None]:
        """`load` on the loader's thread; the future fails if the model cannot serve."""
        return self._loader.submit(load)

    def found(self, identity: ModelIdentity) -> ModelIdentity:
        """The loaded model's identity, kept from now on (before the service says it is ready)."""
        self._identity = identity
        return identity

    @property
    def identity(self) -> ModelIdentity:
        if self._identity is None:
            raise NotReadyError
        return self._identity

    def close(self) -> None:
        """Stop a load that has not begun, and wait for one that has."""
        self._loader.shutdown(wait=True, cancel_futures=True)
