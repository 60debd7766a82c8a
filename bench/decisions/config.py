"""What one benchmark run measures: the full grid (about 45 minutes on 2 cores) or the quick one."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.common.workload import Spec
from bench.traffic.workloads import Interleaved, Skewed

FRESH, SAME = "fresh", "same"


@dataclass(frozen=True)
class Scenario:
    """A decision shape: state size, option count, fresh state or same state with another question."""

    size: str
    options: int
    mode: str
    debias: str = "none"

    @property
    def name(self) -> str:
        return f"{self.size}/{self.options}/{self.mode}" + ("/permute" if self.debias == "permute" else "")

    @property
    def cached_chunks(self) -> int:
        """Chunks the adapter finds cached: the head always (after warm-up), the state too when it repeats."""
        return 1 if self.mode == FRESH else 2


@dataclass(frozen=True)
class Knob:
    label: str
    env: dict[str, str]
    long: bool  # also time the ~1500-token prompt (where ubatch and attention settings matter most)


@dataclass(frozen=True)
class Memory:
    """Distinct states sent to an adapter with a small host-memory cache, its RSS read along the way."""

    states: int
    batch: int  # decisions per JSON Lines request
    # SEMIF_CACHE_BYTES of that adapter: small against the states sent (each ~1.2 MiB: 10,000 fill 1 GiB ten times
    # over), large enough that the process's fixed part (Python, llama.cpp's buffers: ~90 MiB) fits the +10%
    cache_bytes: int
    checkpoints: int  # RSS readings, evenly spaced


@dataclass(frozen=True)
class Config:
    quick: bool
    repeats: int
    warmup: int
    scenarios: tuple[Scenario, ...]
    reference: tuple[str, ...]  # scenario names the fresh reference method also runs
    fresh_floor: tuple[str, ...]  # fresh scenarios whose whole-prompt floor is timed too
    chat: tuple[str, ...]  # scenario names the chat path also answers
    permute: tuple[Scenario, ...]
    concurrency: tuple[int, ...]
    concurrency_requests: int
    concurrency_scenario: Scenario
    queue_size: int
    overflow_extra: int
    fanout: int
    fanout_repeats: int
    fanout_size: str
    fanout_options: int
    knob_size: str
    interleaved: Interleaved
    skewed: Skewed
    method_scenarios: tuple[Scenario, ...]  # likelihood and pmi against letters, taking turns
    restore_sizes: tuple[str, ...]  # prefix sizes of the restore-vs-recompute probe
    identical_repeats: int
    memory: Memory
    knobs: tuple[Knob, ...] = field(default=())
    threads: int | None = None  # --threads: every model and server of the run on this many (None: their defaults)

    @property
    def settings(self) -> dict[str, str]:
        """The SM_LLAMA_CPP_* settings every model of the run opens with and every server starts with."""
        return {} if self.threads is None else {"SM_LLAMA_CPP_THREADS": str(self.threads)}

    def numbered(self) -> list[tuple[int, Scenario]]:
        """Scenarios with the ordinal that fixes their requests, the same in every phase."""
        return list(enumerate(self.scenarios + self.permute))

    def specs(self, scenario: Scenario, ordinal: int) -> tuple[list[Spec], list[Spec]]:
        """(warm-up, measured) requests; every scenario gets its own block of state indices.

        A same-state scenario's warm-up request puts its state in every system's cache; a fresh scenario
        needs none once the first scenario has warmed the systems up.
        """
        base = 1000 * (ordinal + 1)
        warmup = self.warmup if scenario.mode == SAME or ordinal == 0 else 0
        count = warmup + self.repeats
        if scenario.mode == FRESH:
            specs = [Spec(scenario.size, base + i, i, scenario.options, scenario.debias) for i in range(count)]
        else:  # each measured request asks another question about the warmed-up state
            specs = [Spec(scenario.size, base, i, scenario.options, scenario.debias) for i in range(count)]
        return specs[:warmup], specs[warmup:]


def full() -> Config:
    grid = [Scenario(size, 4, mode) for size in ("short", "medium", "long") for mode in (FRESH, SAME)]
    grid += [Scenario("medium", options, mode) for options in (2, 8, 16) for mode in (FRESH, SAME)]
    return Config(
        quick=False, repeats=5, warmup=1, scenarios=tuple(grid),
        reference=("short/4/fresh", "medium/4/fresh", "long/4/fresh", "medium/16/fresh", "medium/4/same"),
        fresh_floor=("short/4/fresh", "medium/4/fresh", "long/4/fresh", "medium/16/fresh", "medium/4/fresh/permute"),
        chat=("short/4/fresh", "medium/4/fresh", "medium/4/same"),
        permute=(Scenario("medium", 4, FRESH, "permute"), Scenario("medium", 4, SAME, "permute")),
        concurrency=(1, 4, 16), concurrency_requests=24, concurrency_scenario=Scenario("short", 4, FRESH),
        queue_size=32, overflow_extra=8, fanout=8, fanout_repeats=2, fanout_size="medium", fanout_options=4,
        knob_size="medium",
        interleaved=Interleaved(clients=8, questions=4, size="medium", options=4, rounds=2),
        skewed=Skewed(clients=8, requests=40, hot_states=2, hot_share=0.75, size="medium", options=4, rounds=2),
        method_scenarios=(Scenario("medium", 4, FRESH), Scenario("medium", 4, SAME)),
        restore_sizes=("medium", "long"), identical_repeats=20,
        memory=Memory(states=10_000, batch=100, cache_bytes=2**30, checkpoints=10),
        knobs=(Knob("default", {}, True), Knob("threads=1", {"SM_LLAMA_CPP_THREADS": "1"}, False),
               Knob("flash_attn=off", {"SM_LLAMA_CPP_FLASH_ATTN": "off"}, True),
               Knob("ubatch=128", {"SM_LLAMA_CPP_UBATCH_SIZE": "128"}, True)),
    )


def quick() -> Config:
    """Every phase in its smallest form: for the test that keeps the benchmark from rotting."""
    grid = (Scenario("short", 2, FRESH), Scenario("short", 2, SAME))
    return Config(
        quick=True, repeats=2, warmup=1, scenarios=grid, reference=("short/2/fresh", "short/2/same"),
        fresh_floor=("short/2/fresh",),
        chat=("short/2/fresh",), permute=(Scenario("short", 2, SAME, "permute"),),
        concurrency=(1, 2), concurrency_requests=4, concurrency_scenario=Scenario("short", 2, FRESH),
        queue_size=2, overflow_extra=2, fanout=2, fanout_repeats=1, fanout_size="short", fanout_options=2,
        knob_size="short",
        interleaved=Interleaved(clients=2, questions=2, size="short", options=2, rounds=1),
        skewed=Skewed(clients=2, requests=4, hot_states=1, hot_share=0.5, size="short", options=2, rounds=1),
        method_scenarios=(Scenario("short", 2, FRESH), Scenario("short", 2, SAME)),
        restore_sizes=("short",), identical_repeats=2,
        memory=Memory(states=8, batch=4, cache_bytes=4 * 2**20, checkpoints=2),
        knobs=(Knob("default", {}, False), Knob("threads=1", {"SM_LLAMA_CPP_THREADS": "1"}, False)),
    )
