"""Real traffic as request plans: tickets interleaved (each client its own state and a few questions about it,
all clients at once) and skewed (a few hot states asked about again and again, many cold ones asked once).

Plans are lists of `Spec`s, fixed by a seed, so every system answers exactly the same requests in one round;
each round gets states of its own, so no system finds a previous round's states in its caches.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from bench.common.workload import Spec


@dataclass(frozen=True)
class Interleaved:
    clients: int
    questions: int  # per client, one after another
    size: str
    options: int
    rounds: int

    @property
    def name(self) -> str:
        return f"interleaved {self.clients}x{self.questions} ({self.size}/{self.options})"

    def streams(self, round_: int) -> list[list[Spec]]:
        """One list per client: its own state, a new question each time."""
        base = 200_000 + 1000 * round_
        return [[Spec(self.size, base + client, question, self.options) for question in range(self.questions)]
                for client in range(self.clients)]


@dataclass(frozen=True)
class Skewed:
    clients: int
    requests: int
    hot_states: int
    hot_share: float  # of the requests, about a hot state
    size: str
    options: int
    rounds: int

    @property
    def name(self) -> str:
        return f"skewed {self.hot_states} hot/{self.hot_share:.0%} ({self.size}/{self.options})"

    def plan(self, round_: int) -> list[Spec]:
        """The requests in arrival order: a hot state with probability hot_share, else a state never seen."""
        rng = random.Random(f"skewed-{round_}")
        base = 300_000 + 10_000 * round_
        cold = base + self.hot_states
        specs = []
        for index in range(self.requests):
            if rng.random() < self.hot_share:
                state = base + rng.randrange(self.hot_states)
            else:
                state, cold = cold, cold + 1
            specs.append(Spec(self.size, state, index, self.options))
        return specs


def grouped_by_state(specs: Iterable[Spec]) -> list[Spec]:
    """The order a serial-prefix process takes a batch in: each state's requests together, states by first
    appearance (its best case: every state prefilled once)."""
    groups: dict[int, list[Spec]] = {}
    for spec in specs:
        groups.setdefault(spec.state_index, []).append(spec)
    return [spec for group in groups.values() for spec in group]
