"""Prompt plan -> tokens, piece by piece, and the start-up proof that the pieces add up to the whole prompt.

Pieces are tokenized one by one (never the whole text at once), so a piece's tokens depend on nothing but its
text: the KV cache can be keyed on texts. `prompt.py` cuts where the tokenizer's pre-split breaks anyway, which
makes the concatenation equal to the whole prompt's own tokenization (what llama-server would read);
`check_exact` verifies that on probe prompts at start-up and says so in the `ready` log line.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ..errors import PromptTooLongError, RequestError
from .llama_runtime import LlamaRuntime, TooManyTokensError
from .prompt_plan import PromptPlan, Text

TOKEN_CACHE_BUDGET = 1 << 18  # tokens of user text kept for reuse, all entries together (~10 MB)


@dataclass(frozen=True)
class PlanTokens:
    """A plan's tokens as the engine evaluates them; public so benchmarks time exactly these tokens."""

    chunks: tuple[tuple[str, tuple[int, ...]], ...]  # head, state: the texts are the cache key
    common: tuple[int, ...]
    branches: tuple[tuple[int, ...], ...]

    @property
    def prefix(self) -> int:
        return sum(len(tokens) for _, tokens in self.chunks)

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(text for text, _ in self.chunks)

    def joined(self, branch: int = 0) -> list[int]:
        """The whole prompt's tokens up to the end of one branch."""
        return [t for _, tokens in self.chunks for t in tokens] + [*self.common, *self.branches[branch]]


class TokenCache:
    """Tokens of recently seen texts, bounded by their total length, not by their count.

    A count bound let memory grow with the texts' size: every refused 6 MB state stayed resident
    (about 100 MB each). Texts longer than the context never get here: `tokenize` refuses them.
    """

    def __init__(self, tokenize: Callable[[str], tuple[int, ...]], budget: int = TOKEN_CACHE_BUDGET) -> None:
        self._tokenize, self._budget = tokenize, budget
        self._entries: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # the decision workers share it; tokenizing happens outside the lock

    def __call__(self, text: str) -> tuple[int, ...]:
        with self._lock:
            tokens = self._entries.get(text)
            if tokens is not None:
                self._entries.move_to_end(text)
                return tokens
        tokens = self._tokenize(text)
        with self._lock:
            if text not in self._entries:
                self._entries[text] = tokens
                self._size += len(tokens)
            while self._size > self._budget:
                self._size -= len(self._entries.popitem(last=False)[1])
        return tokens


class PromptTokenizer:
    """Tokens of plans on one model: user text never has special tokens parsed, template text always does."""

    def __init__(self, runtime: LlamaRuntime) -> None:
        self.runtime = runtime
        self._user = TokenCache(self._user_tokens)
        self._template = TokenCache(self._template_tokens)
        self._heads: dict[str, tuple[int, ...]] = {}

    def _user_tokens(self, text: str) -> tuple[int, ...]:
        return tuple(self.runtime.tokenize(text, special=False, limit=self.runtime.n_ctx))

    def _template_tokens(self, text: str) -> tuple[int, ...]:
        return tuple(self.runtime.tokenize(text, special=True))

    def head(self, text: str) -> tuple[int, ...]:
        """The template's head, with the model's BOS token when it wants one; a handful per process."""
        if text not in self._heads:
            self._heads[text] = tuple(self.runtime.tokenize(text, special=True, add_bos=self.runtime.add_bos))
        return self._heads[text]

    def _texts(self, texts: Iterable[Text], field: str) -> list[int]:
        tokens: list[int] = []
        for piece in texts:
            if piece.template:
                tokens += self._template(piece.text)
                continue
            try:
                tokens += self._user(piece.text)
            except TooManyTokensError as error:  # refused before its tokens are ever built
                raise PromptTooLongError(error.count, self.runtime.n_ctx, f"{field} alone", field,
                                         exact=error.exact) from None
        return tokens

    def tokens(self, plan: PromptPlan) -> PlanTokens:
        state = tuple(self._texts([Text(plan.state)], "decision.state"))
        common = tuple(self._texts(plan.common, "decision.question"))
        branches = []
        for branch in plan.branches:
            tokens = tuple(self._texts(branch.texts, "decision.options"))
            if not tokens:  # only an answer branch holds nothing but user text; one of no tokens has no score
                field = f"decision.options[{branch.order[0]}].description"
                raise RequestError("option_without_tokens", f"{field} has no tokens in this model's vocabulary "
                                   f"(control characters only?), so it has no likelihood to score", field)
            branches.append(tokens)
        return PlanTokens(chunks=((plan.head, self.head(plan.head)), (plan.state_key, state)), common=common,
                          branches=tuple(branches))

    def whole(self, plan: PromptPlan, branch: int = 0) -> list[int]:
        """The prompt tokenized in one piece, special tokens parsed (as llama-server reads a rendered prompt)."""
        return self.runtime.tokenize(plan.text(branch), special=True, add_bos=self.runtime.add_bos)


def check_exact(tokenizer: PromptTokenizer, plans: Iterable[PromptPlan]) -> list[str]:
    """Plans whose pieces do not add up to the whole prompt's tokens (empty: the cuts are exact for this model)."""
    problems = []
    for plan in plans:
        planned = tokenizer.tokens(plan)
        for index in range(len(plan.branches)):
            whole, pieces = tokenizer.whole(plan, index), planned.joined(index)
            if whole != pieces:
                first = next((i for i, (a, b) in enumerate(zip(whole, pieces, strict=False)) if a != b),
                             min(len(whole), len(pieces)))
                problems.append(f"{plan.version} branch {index}: {len(pieces)} tokens in pieces vs {len(whole)} "
                                f"whole, first difference at token {first}")
    return problems
