"""Bounded polling with a progress line: waiting for a stack, an endpoint or a Batch Transform job to settle."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

WAIT_TIMEOUT_S = 900.0
POLL_INTERVAL_S = 15.0

Sleep = Callable[[float], None]
Progress = Callable[[str], None]


class StillWaiting(Exception):  # noqa: N818 (an outcome: the thing never settled)
    """The wait ran out; the message names what was waited for and its last state."""


@dataclass(frozen=True)
class Poller:
    """Bounded polling: a timeout, an interval, and injectable time for tests."""

    timeout_s: float = WAIT_TIMEOUT_S
    interval_s: float = POLL_INTERVAL_S
    sleep: Sleep = time.sleep
    clock: Callable[[], float] = time.monotonic
    progress: Progress = print

    def run(self, what: str, step: Callable[[], tuple[bool, str]]) -> None:
        """Call `step` until it reports done; it returns (done, state shown in the progress line)."""
        start = self.clock()
        while True:
            done, state = step()
            if done:
                return
            waited = self.clock() - start
            if waited >= self.timeout_s:
                raise StillWaiting(f"{what}: still {state} after {self.timeout_s:.0f} s")
            self.progress(f"waiting for {what}: {state} ({waited:.0f}/{self.timeout_s:.0f} s)")
            self.sleep(min(self.interval_s, self.timeout_s - waited))
