"""The CPU cores shared by the decision workers: a lone decision gets all of them, concurrent ones split them.

On a CPU one llama_decode spread over every core is not that many times faster than on one: its threads meet at
a barrier after every graph node and share the memory bandwidth. Two contexts of one thread each, decoding at
once, serve more decisions per second than one context on both cores (2 cores, the embedded model: interleaved
traffic 1.08x llama-server's throughput against 1.01x with one worker; README, "Benchmarks"). A lone decision
on one thread would take twice as long, though, so threads are granted per llama_decode call: all free cores to
a worker that is alone, an equal share when several have a decision in progress. A call never starts with more
threads than there are free cores (spinning barriers of an oversubscribed call stall on preempted threads), so a
worker that arrives while another one's call holds every core waits for that call to end. No decode's numbers
depend on its thread count (`tests/adapter/test_decisions.py::test_same_numbers_whatever_the_thread_count`), so
only speed depends on this. A worker whose call is the last of its decision stops counting towards the split as
that call ends: a call waiting for its cores then gets all of them rather than half with the other half idle
(a request's second question, waiting on its first, would otherwise run on one core).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Decisions(threading.local):
    """Per worker thread: its decisions in progress, innermost last, and whether each still counts."""

    def __init__(self) -> None:
        self.counted: list[bool] = []


class CoreShare:
    def __init__(self, cores: int) -> None:
        if cores < 1:
            raise ValueError(f"{cores} cores")
        self.cores = cores
        self._free = cores
        self._working = 0  # workers with a decision in progress
        self._changed = threading.Condition()
        self._local = _Decisions()

    @contextmanager
    def working(self) -> Iterator[None]:
        """Around one decision's evaluation: the worker counts towards the split while it has one (until the end
        of a call it said was its last)."""
        with self._changed:
            self._working += 1
        counted = self._local.counted
        counted.append(True)
        try:
            yield
        finally:
            with self._changed:
                if counted.pop():
                    self._working -= 1
                self._changed.notify_all()

    @contextmanager
    def threads(self, *, last: bool = False) -> Iterator[int]:
        """Cores for one llama_decode call: waits until one is free, then takes up to this worker's share. With
        `last`, the worker stops counting towards the split when the call ends, in the same step that frees its
        cores, so a waiting call sees how many are still working."""
        with self._changed:
            while not self._free:
                self._changed.wait()
            granted = min(self._free, -(-self.cores // max(1, self._working)))  # a share, rounded up
            self._free -= granted
        try:
            yield granted
        finally:
            with self._changed:
                self._free += granted
                counted = self._local.counted
                if last and counted and counted[-1]:
                    counted[-1] = False
                    self._working -= 1
                self._changed.notify_all()

    def snapshot(self) -> tuple[int, int]:
        """(free cores, workers with a decision in progress): what the tests check."""
        with self._changed:
            return self._free, self._working
