"""The machine's floor for a round of traffic: the round's tokens decoded by raw llama_decode and nothing else.

As many contexts as the adapter has decision workers, the cores split among them as the adapter's core share
splits them under load, each context taking whole states: a state is evaluated once, then every question about
it, in the adapter's own calls (the head once, the state, the question and options), so its answers are the
adapter's numbers bit for bit. States go to the context with the least work so far, in tokens, largest first.
No HTTP, no queue, no cache lookups, the head evaluated and the tokens computed before the clock starts: what the
adapter would reach if everything but llama.cpp cost nothing (except that a lane finishing early does not lend
its core to the others, as the adapter's core share would). A system that beats it on the same requests computes
fewer tokens or computes them faster.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

from bench.common.inprocess import Model, SerialAnswer, SerialPrefix
from bench.common.workload import Spec


class TrafficFloor:
    def __init__(self, model: Model, lanes: int, cores: int) -> None:
        self.model = model
        contexts = [model.runtime.new_context() for _ in range(lanes)]
        for context in contexts:
            context.use_threads(max(1, cores // lanes))
        self.lanes = [SerialPrefix(model, context, head_kept=True) for context in contexts]
        for lane in self.lanes:
            lane.hold_head()

    def _assigned(self, specs: list[Spec]) -> list[list[Spec]]:
        """Whole states per lane: the costliest state first, each to the lane with the fewest tokens so far."""
        groups: dict[int, list[Spec]] = {}
        for spec in specs:  # states in order of first appearance, each with its questions in order
            groups.setdefault(spec.state_index, []).append(spec)
        costed = []
        for group in groups.values():
            tokens = [self.model.tokens(spec) for spec in group]  # before the clock: the lanes find them cached
            costed.append((tokens[0].prefix + sum(len(t.common) + len(t.branches[0]) for t in tokens), group))
        work: list[list[Spec]] = [[] for _ in self.lanes]
        load = [0] * len(self.lanes)
        for cost, group in sorted(costed, key=lambda entry: entry[0], reverse=True):
            lane = load.index(min(load))
            work[lane] += group
            load[lane] += cost
        return work

    def round(self, specs: list[Spec]) -> tuple[float, list[SerialAnswer], list[Spec]]:
        """(wall seconds, answers, the specs in the answers' order)."""
        work = self._assigned(specs)
        with ThreadPoolExecutor(len(self.lanes)) as pool:
            started = time.perf_counter()
            runs = [pool.submit(lambda lane, mine: [lane.decide(spec) for spec in mine], lane, mine)
                    for lane, mine in zip(self.lanes, work, strict=True)]
            answers = [answer for run in runs for answer in run.result()]
            wall = time.perf_counter() - started
        return wall, answers, [spec for mine in work for spec in mine]

    def close(self) -> None:
        for lane in self.lanes:
            lane.close()
