"""Scale to zero on loopback (`semif local --shared --scale-to-zero SECONDS`): each inference component's container
stops after SECONDS without a request, as SageMaker removes the last copy of an idle component; a request to a
component at zero gets SageMaker's own answer (400 `ValidationError`, no capacity) and, as the scale-out policy on
`NoCapacityInvocationFailures` does on AWS, starts the container again on its port; requests are served once its
`/ping` is 200. Clients retry the error meanwhile (semif_decision_client.runtime_client, `semif smoke`).
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .endpoints import Container
from .processes import ChildError, wait_for_ping

# SageMaker's answer to a request for an inference component with no copy (as AWS's scale-to-zero guide and users
# report it: botocore's ValidationError, HTTP 400).
NO_CAPACITY = ("Inference Component has no capacity to process this request. ApplicationAutoScaling may be "
               "in-progress (if configured) or try to increase the capacity by invoking "
               "UpdateInferenceComponentRuntimeConfig API.")
REAP_INTERVAL_S = 0.5


@dataclass
class _Copy:
    container: Container
    up: bool
    last_used: float
    starting: bool = False


class ZeroScaler:
    """The copies of the components it is given: up, scaled to zero after `idle_s`, or starting again."""

    def __init__(self, containers: Iterable[Container], restart: Callable[[Container], Container], *,
                 idle_s: float, startup_timeout_s: float) -> None:
        now = time.monotonic()
        self._copies = {c.endpoint: _Copy(c, up=True, last_used=now) for c in containers}
        self._restart, self.idle_s, self.startup_timeout_s = restart, idle_s, startup_timeout_s
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.cold_starts: list[float] = []  # seconds from the first refused request to the copy's /ping 200
        # One long-lived thread starts the copies: a child started from a thread that then ends would get its
        # parent-death signal (processes.start_child) and stop at once.
        self._starts: queue.Queue[tuple[str, _Copy]] = queue.Queue()
        threading.Thread(target=self._starter, name="scale-out-from-zero", daemon=True).start()
        threading.Thread(target=self._reap, name="scale-to-zero", daemon=True).start()

    def has_capacity(self, component: str) -> bool:
        """Whether a copy of `component` serves now; if none, one is started (the scale-out from zero)."""
        with self._lock:
            copy = self._copies.get(component)
            if copy is None:
                return True  # a component this scaler does not manage
            copy.last_used = time.monotonic()
            if copy.up and copy.container.child.alive():
                return True
            copy.up = False
            if not copy.starting:
                copy.starting = True
                self._starts.put((component, copy))
            return False

    def touch(self, component: str) -> None:
        """A request just ended: the idle period starts now."""
        with self._lock:
            if component in self._copies:
                self._copies[component].last_used = time.monotonic()

    def _starter(self) -> None:
        while not self._closed.is_set():
            try:
                component, copy = self._starts.get(timeout=REAP_INTERVAL_S)
            except queue.Empty:
                continue
            self._start(component, copy)

    def _start(self, component: str, copy: _Copy) -> None:
        started = time.monotonic()
        _say(f"{component}: a request found no copy; starting one")
        try:
            container = self._restart(copy.container)
            wait_for_ping(container.child, f"{container.url}/ping", self.startup_timeout_s)
        except ChildError as error:
            _say(f"{component}: the copy did not start ({error}); the next request tries again")
            with self._lock:
                copy.starting = False
            return
        with self._lock:
            copy.container, copy.up, copy.starting, copy.last_used = container, True, False, time.monotonic()
            self.cold_starts.append(time.monotonic() - started)
        _say(f"{component}: a copy serves again after {time.monotonic() - started:.1f} s")

    def _reap(self) -> None:
        while not self._closed.wait(REAP_INTERVAL_S):
            with self._lock:
                idle = [(name, copy) for name, copy in self._copies.items() if copy.up and not copy.starting
                        and time.monotonic() - copy.last_used > self.idle_s]
                for _, copy in idle:
                    copy.up = False
            for name, copy in idle:
                copy.container.child.stop()
                _say(f"{name}: idle for {self.idle_s:g} s; scaled to zero")

    def close(self) -> None:
        """Stop the reaper and every copy it started (the first ones are their starter's to stop)."""
        self._closed.set()
        with self._lock:
            copies = list(self._copies.values())
        for copy in copies:
            copy.container.child.stop()


def _say(message: str) -> None:
    print(f"local endpoints: scale to zero: {message}", file=sys.stderr, flush=True)
