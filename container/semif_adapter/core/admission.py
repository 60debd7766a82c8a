"""The bounded queue both decision services hold: who is let in, and what happens at the drain deadline.

Admission counts decisions, not requests: a batch of N takes N places of `SEMIF_QUEUE_SIZE` (a batch larger than
the whole queue is admitted only when nothing else is), and beyond that work is refused at once with 503 +
Retry-After instead of timing out. After SIGTERM nothing new is admitted; at the drain deadline every request
still waiting is told to stop waiting (503 `shutting_down`), and the service's own `at_deadline` stops its work.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import QueueFullError, ServiceError, ShuttingDownError


class AdmissionQueue:
    """Places in the queue, the drain flag and the requests waiting on answers, safe across threads."""

    def __init__(self, queue_size: int, drain_seconds: float, unready: Callable[[], ServiceError | None]) -> None:
        """`unready` says why the service cannot take work now (None: it can)."""
        self.queue_size, self.drain_seconds, self._unready = queue_size, drain_seconds, unready
        self._lock = threading.Lock()
        self._admitted = 0
        self.draining = False
        self._waiting: set[asyncio.Future[Any]] = set()  # what requests await; cancelled at the deadline

    def admit(self, count: int) -> None:
        """Take `count` places, or raise the 503 that says why not."""
        if self.draining:
            raise ShuttingDownError
        if (why := self._unready()) is not None:
            raise why
        with self._lock:
            if self._admitted and self._admitted + count > self.queue_size:
                raise QueueFullError(f"{self.queue_size} decisions are already admitted; retry")
            self._admitted += count

    def release(self, count: int = 1) -> None:
        """Free places: when their work ends, not when a client leaves."""
        with self._lock:
            self._admitted -= count

    @contextmanager
    def waiting_on(self, futures: Iterable[asyncio.Future[Any]]) -> Iterator[None]:
        """Requests awaiting these futures stop waiting at the drain deadline."""
        held = list(futures)
        self._waiting.update(held)
        try:
            yield
        finally:
            self._waiting.difference_update(held)

    def stop_admitting(self) -> None:
        """Refuse new decisions from now on; safe to call from a signal handler (it only sets a flag)."""
        self.draining = True

    def drain(self, at_deadline: Callable[[], None]) -> None:
        """Refuse new work now; at the deadline, stop every wait and call `at_deadline` (on the event loop)."""
        self.stop_admitting()
        asyncio.get_running_loop().call_later(self.drain_seconds, self._deadline, at_deadline)

    def _deadline(self, at_deadline: Callable[[], None]) -> None:
        at_deadline()
        for waiter in list(self._waiting):
            waiter.cancel()  # the request stops waiting, whatever the engine is doing
