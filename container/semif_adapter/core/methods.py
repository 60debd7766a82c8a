"""Scoring methods: how a decision becomes prompts, which logits they need, and the raw score of each option.

- `letters` (SemIf's method): the options under slot letters; an option's score is its letter's logit at the
  prompt's last position (averaged over the rotations with debias=permute).
- `likelihood` (the "cloze" form of multiple choice): each option's text scored as the assistant's answer to the
  evidence and the criterion: the mean log-probability of its tokens (the per-token normalised form measured best
  of sum, per token and per byte on the labelled set). Order-invariant by construction: scored in a canonical order.
- `pmi` (domain-conditional PMI, Holtzman et al. 2021): the answer's summed log-probability minus the same sum
  under a content-free evidence, the log of how much the evidence raised the answer's probability (its length
  cancels). The baseline depends only on the criterion and the options, so it is computed once for them and kept
  (`BaselineCache`); it removes what makes an answer likely whatever the evidence says.

Every method goes through the same tokenizer and engine, hence the same prefix cache and the same guarantees.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from ..engine.engine_rows import Reads
from ..engine.kv_engine import EngineResult, KvEngine
from ..engine.prompt_plan import ChatFrame, PromptPlan
from ..engine.tokens import PlanTokens, PromptTokenizer
from .prompt import answers_plan, letters_plan
from .question import Question, canonical_state

BASELINE_CACHE_ENTRIES = 4096


@dataclass(frozen=True)
class PromptRunner:
    """Tokenizer + engine: the one path every method runs its prompts through. With `save_prefix_later`, a newly
    decoded prefix is saved to the host cache when the caller calls the engine's `save_pending_prefix` (the service:
    once the answer is handed back), not before the result returns."""

    tokenizer: PromptTokenizer
    engine: KvEngine
    save_prefix_later: bool = False

    def run(self, plan: PromptPlan, reads_for: ReadsBuilder) -> tuple[PlanTokens, EngineResult, float]:
        started = time.perf_counter()
        planned = self.tokenizer.tokens(plan)
        tokenize_ms = (time.perf_counter() - started) * 1000
        result = self.engine.evaluate(planned, reads_for(planned))
        if not self.save_prefix_later:
            self.engine.save_pending_prefix()
        return planned, result, tokenize_ms


class ReadsBuilder(Protocol):
    def __call__(self, planned: PlanTokens) -> Reads: ...


@dataclass(frozen=True)
class Effort:
    """What one decision cost, summed over the prompts it needed."""

    prompt_tokens: int
    evaluated_tokens: int
    cached_tokens: int
    cache_source: str
    tokenize_ms: float
    restore_ms: float
    forward_ms: float
    prefix_tokens: int = 0  # head + state of the main prompt
    read_tokens: int = 0  # the main prompt's tokens in the context: prefix, common part and every answer
    output_rows: int = 0  # positions whose logits were computed: one per answer token (answers), one per order

    @classmethod
    def of(cls, result: EngineResult, tokenize_ms: float) -> Effort:
        return cls(result.prompt_tokens, result.evaluated_tokens, result.cached_tokens, result.cache_source,
                   tokenize_ms, result.restore_ms, result.forward_ms, result.prefix_tokens, result.context_tokens,
                   result.output_rows)

    def plus(self, other: Effort) -> Effort:
        """The main prompt's facts, with the other prompt's work added (pmi's baseline)."""
        return replace(self, evaluated_tokens=self.evaluated_tokens + other.evaluated_tokens,
                       tokenize_ms=self.tokenize_ms + other.tokenize_ms, restore_ms=self.restore_ms + other.restore_ms,
                       forward_ms=self.forward_ms + other.forward_ms, output_rows=self.output_rows + other.output_rows)


@dataclass(frozen=True)
class PromptId:
    """Which prompt produced a score: small enough to keep with cached results (the plan holds the state)."""

    version: str
    sha256: str | None  # None: the prompt's text is not ours to hash

    @classmethod
    def of(cls, plan: PromptPlan) -> PromptId:
        return cls(plan.version, plan.sha256)


@dataclass(frozen=True)
class MethodScores:
    """Raw per-option scores in request order, and what calibration and warnings need to know."""

    option_logits: np.ndarray  # float64, request order
    orders: tuple[tuple[int, ...], ...]  # letters: each branch's order (slot -> option index); else empty
    allowed_token_mass: float | None  # letters: share of next-token probability on the option letters
    prompt: PromptId
    effort: Effort
    baseline_cached: bool | None = None  # pmi: whether the content-free baseline was already known


class Method(Protocol):
    name: str

    def score(self, question: Question, runner: PromptRunner) -> MethodScores: ...


class Letters:
    name = "letters"

    def __init__(self, frame: ChatFrame, slot_tokens: list[int]) -> None:
        self.frame, self.slot_tokens = frame, tuple(slot_tokens)

    def plan(self, question: Question) -> PromptPlan:
        return letters_plan(self.frame, question)

    def score(self, question: Question, runner: PromptRunner) -> MethodScores:
        plan = self.plan(question)
        count = len(question.answers)
        letters = self.slot_tokens[:count]
        planned, result, tokenize_ms = runner.run(
            plan, lambda p: Reads(common=None, branches=tuple({len(b) - 1: letters} for b in p.branches)))
        totals = np.zeros(count, dtype=np.float64)
        mass = 0.0
        for branch, rows, tokens in zip(plan.branches, result.branches, planned.branches, strict=True):
            row = rows[len(tokens) - 1]
            values = row.values.astype(np.float64)
            totals[list(branch.order)] += values
            mass += float(np.exp(np.logaddexp.reduce(values) - row.log_normalizer))
        return MethodScores(option_logits=totals / len(plan.branches),
                            orders=tuple(branch.order for branch in plan.branches),
                            allowed_token_mass=min(1.0, mass / len(plan.branches)), prompt=PromptId.of(plan),
                            effort=Effort.of(result, tokenize_ms))


def answer_reads(planned: PlanTokens) -> Reads:
    """Each answer token's log-probability: the first from the common part's end, the others inside the branch."""
    return Reads(common=tuple(tokens[0] for tokens in planned.branches),
                 branches=tuple({j: (tokens[j + 1],) for j in range(len(tokens) - 1)} for tokens in planned.branches))


def answer_log_probs(question: Question, plan: PromptPlan, planned: PlanTokens,
                     result: EngineResult) -> tuple[np.ndarray, np.ndarray]:
    """Each answer: its tokens' summed log-probability and its token count, in request order."""
    assert result.common is not None
    first = result.common.log_probs()
    sums = np.zeros(len(question.answers), dtype=np.float64)
    counts = np.zeros(len(question.answers), dtype=np.float64)
    for position, (branch, rows, tokens) in enumerate(zip(plan.branches, result.branches, planned.branches,
                                                          strict=True)):
        total = float(first[position])
        for j in range(len(tokens) - 1):
            total += float(rows[j].log_probs()[0])
        sums[branch.order[0]], counts[branch.order[0]] = total, len(tokens)
    return sums, counts


class Likelihood:
    name = "likelihood"

    def __init__(self, frame: ChatFrame) -> None:
        self.frame = frame

    def plan(self, question: Question, content_free: bool = False) -> PromptPlan:
        return answers_plan(self.frame, question, content_free=content_free)

    def answers(self, question: Question, runner: PromptRunner,
                content_free: bool = False) -> tuple[np.ndarray, np.ndarray, PromptPlan, Effort]:
        """Summed log-probabilities and token counts of the answers, the prompt, and what it cost."""
        plan = self.plan(question, content_free)
        planned, result, tokenize_ms = runner.run(plan, answer_reads)
        sums, counts = answer_log_probs(question, plan, planned, result)
        return sums, counts, plan, Effort.of(result, tokenize_ms)

    def score(self, question: Question, runner: PromptRunner) -> MethodScores:
        sums, counts, plan, effort = self.answers(question, runner)
        return MethodScores(option_logits=sums / counts, orders=(), allowed_token_mass=None,
                            prompt=PromptId.of(plan), effort=effort)


BaselineKey = tuple[str, str, tuple[tuple[str, str], ...]]


class BaselineCache:
    """pmi's content-free summed log-probabilities by answer id, keyed by the cache partition, the criterion and
    the answers (by id)."""

    def __init__(self, entries: int = BASELINE_CACHE_ENTRIES) -> None:
        self._entries: OrderedDict[BaselineKey, dict[str, float]] = OrderedDict()
        self._limit = entries
        self._lock = threading.Lock()  # shared by the decision workers

    @staticmethod
    def key(question: Question) -> BaselineKey:
        """Any order of the same answers has the same key: the baseline prompt lists them in canonical order."""
        return (question.partition, canonical_state(question.criterion),
                tuple(sorted((a.id, a.text) for a in question.answers)))

    def get(self, key: BaselineKey) -> dict[str, float] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
            return found

    def put(self, key: BaselineKey, scores: dict[str, float]) -> None:
        with self._lock:
            self._entries[key] = scores
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)


class Pmi:
    name = "pmi"

    def __init__(self, likelihood: Likelihood, baselines: BaselineCache | None = None) -> None:
        self.likelihood = likelihood
        self.baselines = baselines or BaselineCache()

    def score(self, question: Question, runner: PromptRunner) -> MethodScores:
        answers = question.answers
        key = self.baselines.key(question)
        baseline = self.baselines.get(key)
        extra: Effort | None = None
        cached = baseline is not None
        if baseline is None:  # before the main prompt, so the KV cache ends up holding the caller's state
            values, _, _, extra = self.likelihood.answers(question, runner, content_free=True)
            baseline = {answer.id: float(value) for answer, value in zip(answers, values, strict=True)}
            self.baselines.put(key, baseline)
        scores, _, plan, effort = self.likelihood.answers(question, runner)
        offsets = np.array([baseline[answer.id] for answer in answers], dtype=np.float64)
        return MethodScores(option_logits=scores - offsets, orders=(), allowed_token_mass=None,
                            prompt=PromptId.of(plan), effort=effort.plus(extra) if extra else effort,
                            baseline_cached=cached)
