"""What one System One benchmark run measures: the full grid or the quick one (the test that keeps it working)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Throughput:
    """Closed-loop clients, each sending its own fresh tickets (three questions each) one after another."""

    clients: int
    requests: int  # per client and round
    rounds: int  # the systems take turns round by round, in a rotating order
    size: str


@dataclass(frozen=True)
class Config:
    quick: bool
    size: str  # state size of the question and option phases (workload.STATE_CHARS)
    question_counts: tuple[int, ...]  # questions per request over one state
    option_counts: tuple[int, ...]  # options of one choice question
    semif_option_counts: tuple[int, ...]  # options of one fresh SemIf-contract decision (the adapter's other door)
    repeats: int  # requests per row, each about a state nobody has seen
    target_repeats: int  # the same for the fresh rows held to 1.10x the floor (one question, a choice of 2, the
    # SemIf door): a request's ratio to its floor spans 0.73x-1.52x on a 2-core VM, so their p50 needs many requests
    warm_repeats: int  # requests per row about a state each system has just been asked about
    warmup: int  # rounds before the first row, each asking every question and option list once, not counted
    throughput: Throughput


def full() -> Config:
    return Config(quick=False, size="medium", question_counts=(1, 2, 4, 8), option_counts=(2, 16, 64, 255),
                  semif_option_counts=(2, 4), repeats=5, target_repeats=25, warm_repeats=15, warmup=1,
                  throughput=Throughput(clients=4, requests=4, rounds=2, size="medium"))


def quick() -> Config:
    return Config(quick=True, size="short", question_counts=(1, 2), option_counts=(2, 16),
                  semif_option_counts=(2,), repeats=1, target_repeats=1, warm_repeats=1, warmup=1,
                  throughput=Throughput(clients=2, requests=2, rounds=1, size="short"))
