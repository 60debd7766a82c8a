"""One question's answer as either engine gives it: our methods (`service.py`) or llama.cpp's decision engine
(`native_service.py`), for the doors to render and for the access log and the metrics to report.

Each engine fills in what it really measured and leaves the rest absent (None), never a zero that means "not
measured": llama-server reports no queue, tokenization or restore time of its own and no shared opening, so a
native answer has none, and each door leaves those fields out (`doors/response.py` `timing_document`). A zero here
is a measured zero (an answer from the result cache computed nothing).
"""

from __future__ import annotations

from dataclasses import dataclass

from .methods import PromptId
from .question import Question
from .scoring import Scores

RESULT_SOURCE = "result"  # `Tokens.source` of an answer served whole from the result cache


@dataclass(frozen=True)
class Timing:
    """Where one answer's time went, in milliseconds; None where its engine does not measure that part."""

    total_ms: float  # from admission to the answer
    queue_ms: float | None = None  # admitted, waiting for a worker
    tokenize_ms: float | None = None
    restore_ms: float | None = None  # a prefix restored from the host cache
    forward_ms: float | None = None  # the model's decode (native: the call to llama-server)


@dataclass(frozen=True)
class Tokens:
    """The prompt tokens one answer cost, and where the reused ones came from; None where not counted."""

    prompt: int  # the prompt as the model read it (native: llama-server's count, shared over the request)
    evaluated: int  # computed for this answer
    cached: int  # reused from a cache (native: 0, every request finds the slots erased)
    read: int  # in the context: prefix, common part and every answer
    source: str  # "kv", "host", "none", "result" or "native"
    prefix: int | None = None  # the opening a request's questions share (head and state)
    output_rows: int | None = None  # positions whose logits were computed


@dataclass(frozen=True)
class Decided:
    """One question's answer (scores, what produced them, what it cost) for a door to render, and the facts the
    access log and the metrics report about it (`metrics.DecisionFacts`)."""

    question: Question
    scores: Scores
    method: str  # who scored: the question's method ("pmi"), or the native engine ("native:openjev")
    prompt: PromptId
    timing: Timing
    tokens: Tokens
    allowed_token_mass: float | None = None  # letters: share of next-token probability on the option letters
    baseline_cached: bool | None = None  # pmi: whether the content-free baseline was already known

    @property
    def from_results(self) -> bool:
        return self.tokens.source == RESULT_SOURCE

    @property
    def prompt_tokens(self) -> int:
        return self.tokens.prompt

    @property
    def evaluated_tokens(self) -> int:
        return self.tokens.evaluated

    @property
    def cached_tokens(self) -> int:
        return self.tokens.cached

    @property
    def cache_source(self) -> str:
        return self.tokens.source

    @property
    def queue_ms(self) -> float | None:
        return self.timing.queue_ms

    @property
    def forward_ms(self) -> float | None:
        return self.timing.forward_ms

    @property
    def total_ms(self) -> float:
        return self.timing.total_ms

    @property
    def top_probability(self) -> float:
        return max(self.scores.probabilities)

    @property
    def warnings(self) -> tuple[str, ...]:
        return tuple(self.scores.warnings)
