"""How far a converted model's decisions are from the original's, measured on a fixed set of decisions.

A conversion is a trade of accuracy for speed, and only the numbers it changes can say whether the trade is
good: for every scoring method, how many decisions keep the same top option and how far any probability moved
(max |dp|). Both models are scored through the adapter's own engine (prompts, tokens, KV cache, methods), the
path a deployed endpoint takes, one decision at a time and taking turns, so the relative decision time printed
with the figures compares the two under the same load.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..core.methods import Letters, Likelihood, Method, Pmi, PromptRunner
from ..core.prompt import ANSWERS_SYSTEM_TEXT, LETTERS_SYSTEM_TEXT
from ..core.question import Scoring
from ..core.scoring import score
from ..doors.request_schema import Decision, DecisionRequest
from ..engine.kv_engine import KvEngine
from ..engine.llama_runtime import LlamaRuntime
from ..engine.prefix_cache import PrefixCache
from ..engine.tokens import PromptTokenizer
from ..settings import load_settings
from .agreement_cases import DECISIONS

CONTEXT = "2048"  # the fixed decisions are short; a small context keeps a large model's KV memory small
METHODS = tuple(scoring.value for scoring in Scoring)


class Scorer:
    """One model behind the adapter's methods and engine (no prefix cache: nothing carries over)."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        env = {"SM_LLAMA_CPP_CTX_SIZE": CONTEXT, **({"SM_LLAMA_CPP_THREADS": str(threads)} if threads else {})}
        settings = load_settings(env)
        self.runtime = LlamaRuntime(path, settings)
        letters = self.runtime.chat_frame(settings.chat_template, LETTERS_SYSTEM_TEXT)
        likelihood = Likelihood(self.runtime.chat_frame(settings.chat_template, ANSWERS_SYSTEM_TEXT))
        self.methods: dict[str, Method] = {"letters": Letters(letters, self.runtime.slot_tokens(letters)),
                                           "likelihood": likelihood, "pmi": Pmi(likelihood)}
        self.engine = KvEngine(self.runtime, PrefixCache(0))
        self.work = PromptRunner(PromptTokenizer(self.runtime), self.engine)

    def probabilities(self, decision: Decision, method: str) -> tuple[np.ndarray, float]:
        """The response's probabilities (no calibration, temperature 1) and the engine's time in ms."""
        question = DecisionRequest(decision=decision, scoring=Scoring(method)).to_question(method)
        raw = self.methods[method].score(question, self.work)
        return np.array(score(raw, question, None).probabilities), raw.effort.forward_ms

    def close(self) -> None:
        self.engine.close()
        self.runtime.close()


@dataclass(frozen=True)
class MethodAgreement:
    method: str
    decisions: int
    same_top: int
    max_abs_dp: float
    mean_abs_dp: float
    time_ratio: float  # converted / original engine time, summed over the decisions

    def line(self) -> str:
        return (f"{self.method:<10} same top option {self.same_top}/{self.decisions}, max |dp| {self.max_abs_dp:.3f},"
                f" mean |dp| {self.mean_abs_dp:.3f}, decision time {self.time_ratio:.2f}x the original")


@dataclass(frozen=True)
class Agreement:
    original: str
    converted: str
    methods: tuple[MethodAgreement, ...]

    def lines(self) -> list[str]:
        count = self.methods[0].decisions if self.methods else 0
        return [f"agreement:     {self.converted} vs {self.original}, {count} fixed decisions "
                "(semif_adapter.deploy.agreement), models taking turns",
                *(f"  {method.line()}" for method in self.methods)]


def measure(original: Path, converted: Path, *, threads: int | None = None,
            decisions: tuple[Decision, ...] = DECISIONS, rounds: int = 1) -> Agreement:
    """Both models open at once (memory for both), each decision scored by one then the other, order alternating.

    `rounds` > 1 repeats the timing (the numbers do not change: the engine is deterministic).
    """
    scorers = [Scorer(original, threads), Scorer(converted, threads)]
    try:
        results = []
        for method in METHODS:
            probabilities: list[list[np.ndarray]] = [[], []]
            spent = [0.0, 0.0]
            for round_ in range(rounds):
                for index, decision in enumerate(decisions):
                    for side in (0, 1) if (index + round_) % 2 == 0 else (1, 0):
                        found, ms = scorers[side].probabilities(decision, method)
                        spent[side] += ms
                        if round_ == 0:
                            probabilities[side].append(found)
            diffs = [np.abs(a - b) for a, b in zip(*probabilities, strict=True)]
            results.append(MethodAgreement(
                method=method, decisions=len(decisions),
                same_top=sum(int(np.argmax(a) == np.argmax(b)) for a, b in zip(*probabilities, strict=True)),
                max_abs_dp=float(max(d.max() for d in diffs)), mean_abs_dp=float(np.mean(np.concatenate(diffs))),
                time_ratio=spent[1] / spent[0] if spent[0] else float("nan")))
        return Agreement(original=original.name, converted=converted.name, methods=tuple(results))
    finally:
        for scorer in scorers:
            scorer.close()
