"""Prompt plan -> tokens -> KV cache -> the raw logits at each branch's last position.

Sequence 0 of the KV cache keeps the chunks of the previous request (head,
state, and the question when it was decoded alone). A request reuses the
longest run of identical chunks and evaluates only the rest, always at the same
boundaries, so a chunk's KV entries are bit-identical whether reused or
computed (llama.cpp's CPU kernels round differently with the batch's packing).
A lone branch is decoded in one call with its question, the common case's
whole uncached suffix. Several branches (one per option ordering) share the
prefix cells through `llama_memory_seq_cp` and are decoded together, one
sequence id each. After every request the cache is left holding only cached
chunks, laid out in cells [0, n): the next request starts from the same state
whatever happened before, errors included.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import llama_cpp
import numpy as np

from .llama_runtime import LlamaRuntime, TooManyTokensError
from .prompt import ChatFrame, PromptPlan

DECODE_ABORTED = 2  # llama_decode's return value when the abort callback said stop
TOKEN_CACHE_BUDGET = 1 << 18  # tokens of user text kept for reuse, all entries together (~10 MB)


class PromptTooLongError(ValueError):
    """The prompt does not fit the context; never truncated silently. `field` names the culprit."""

    def __init__(self, needed: int, context: int, detail: str, field: str = "decision") -> None:
        super().__init__(f"prompt needs {needed} tokens of context ({detail}) but the context holds {context}")
        self.needed, self.context, self.field = needed, context, field

    @classmethod
    def for_total(cls, context: int, prefix: int, branch_tokens: int, branches: int) -> PromptTooLongError:
        needed = prefix + branches * branch_tokens
        return cls(needed, context, f"{prefix} prefix + {branches} x {branch_tokens} option tokens")


class DecodeAbortedError(RuntimeError):
    """llama_decode stopped on request (a drain deadline), not by a fault."""


@dataclass(frozen=True)
class BranchLogits:
    slot_logits: np.ndarray  # float32, one per slot used (the first n letters)
    log_normalizer: float  # log-sum-exp over the whole vocabulary at that position


@dataclass(frozen=True)
class EngineResult:
    branches: tuple[BranchLogits, ...]
    prompt_tokens: int  # prefix + the first branch: the prompt as the model reads it
    evaluated_tokens: int  # what this request actually computed
    cached_tokens: int  # prefix tokens reused from the previous request
    tokenize_ms: float
    forward_ms: float


@dataclass(frozen=True)
class PlanTokens:
    """A plan's tokens as the engine evaluates them; public so benchmarks time exactly these tokens."""

    chunks: list[tuple[str, list[int]]]  # head, state, question: the text is the cache key
    branches: list[list[int]]  # one per option ordering: lettered options + template tail

    @property
    def prefix(self) -> int:
        return sum(len(tokens) for _, tokens in self.chunks)


@dataclass(frozen=True)
class _Piece:
    seq: int
    start: int
    tokens: list[int]
    wants_logits: bool


class TokenCache:
    """Tokens of recently seen user texts, bounded by their total length, not by their count.

    A count bound let memory grow with the texts' size: every refused 6 MB state stayed resident
    (about 100 MB each). Texts longer than the context never get here: `tokenize` refuses them.
    """

    def __init__(self, tokenize: Callable[[str], tuple[int, ...]], budget: int = TOKEN_CACHE_BUDGET) -> None:
        self._tokenize, self._budget = tokenize, budget
        self._entries: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._size = 0

    def __call__(self, text: str) -> tuple[int, ...]:
        tokens = self._entries.get(text)
        if tokens is not None:
            self._entries.move_to_end(text)
            return tokens
        tokens = self._tokenize(text)
        self._entries[text] = tokens
        self._size += len(tokens)
        while self._size > self._budget:
            self._size -= len(self._entries.popitem(last=False)[1])
        return tokens


class DecisionEngine:
    """Evaluates prompt plans on one llama.cpp context; callers serialise access."""

    def __init__(self, runtime: LlamaRuntime, frame: ChatFrame, slot_tokens: list[int]) -> None:
        self.runtime = runtime
        self.slot_tokens = np.asarray(slot_tokens, dtype=np.int64)
        self._head_text = frame.head
        self._head_tokens = runtime.tokenize(frame.head, special=True, add_bos=runtime.add_bos)
        self._tail_tokens = runtime.tokenize(frame.tail, special=True)
        self._cached: list[tuple[str, int]] = []  # (chunk text, token count) held by sequence 0
        self._scratch = np.empty(runtime.vocab_size, dtype=np.float32)
        self._batch = llama_cpp.llama_batch_init(runtime.n_batch, 0, len(slot_tokens))
        self._user_tokens = TokenCache(self._tokenize_user_text)

    def _tokenize_user_text(self, text: str) -> tuple[int, ...]:
        return tuple(self.runtime.tokenize(text, special=False, limit=self.runtime.n_ctx))

    def _user_tokens_of(self, text: str, field: str) -> tuple[int, ...]:
        """A text that alone overflows the context is refused before its tokens are ever built."""
        try:
            return self._user_tokens(text)
        except TooManyTokensError as error:
            raise PromptTooLongError(error.count, self.runtime.n_ctx, f"{field} alone", field) from None

    @property
    def head_tokens(self) -> int:
        return len(self._head_tokens)

    def tokens(self, plan: PromptPlan) -> PlanTokens:
        """Chunk by chunk, never the whole text at once: a chunk's tokens must not depend on its neighbours."""
        if plan.head != self._head_text:
            raise ValueError("plan was built for another chat frame")
        chunks = [(plan.head, list(self._head_tokens)),
                  (plan.state, list(self._user_tokens_of(plan.state, "decision.state"))),
                  (plan.question, list(self._user_tokens_of(plan.question, "decision.question")))]
        branches = [[token for piece in branch.pieces for token in self._user_tokens_of(piece, "decision.options")]
                    + self._tail_tokens for branch in plan.branches]
        return PlanTokens(chunks=chunks, branches=branches)

    def score(self, plan: PromptPlan) -> EngineResult:
        started = time.perf_counter()
        planned = self.tokens(plan)
        chunks, branches, prefix = planned.chunks, planned.branches, planned.prefix
        needed = prefix + sum(len(tokens) for tokens in branches)
        if needed > self.runtime.n_ctx:
            raise PromptTooLongError.for_total(self.runtime.n_ctx, prefix, len(branches[0]), len(branches))
        # One branch: the question is decoded together with it (one llama_decode instead of two). Its KV
        # entries then depend on that packing, so such a question is never cached; several branches
        # need the question in every sequence first, so there it is decoded alone and may be reused.
        merged = len(branches) == 1
        cacheable = chunks[:-1] if merged else chunks
        tokenized = time.perf_counter()
        try:
            reused = self._reuse_prefix([text for text, _ in cacheable])
            cached = sum(count for _, count in self._cached)
            position = cached
            for text, tokens in cacheable[reused:]:
                self._run([_Piece(0, position, tokens, False)])
                position += len(tokens)
                self._cached.append((text, len(tokens)))
            slots = len(plan.branches[0].order)
            if merged:
                results = self._run_branches([chunks[-1][1] + branches[0]], position, slots)
            else:
                for seq in range(1, len(branches)):
                    llama_cpp.llama_memory_seq_cp(self.runtime.memory, 0, seq, -1, -1)
                results = self._run_branches(branches, prefix, slots)
        except BaseException:
            llama_cpp.llama_memory_clear(self.runtime.memory, False)
            self._cached = []
            raise
        finally:
            self._drop_branches(len(branches), sum(count for _, count in self._cached))
        finished = time.perf_counter()
        return EngineResult(
            branches=tuple(results), prompt_tokens=prefix + len(branches[0]),
            evaluated_tokens=needed - cached, cached_tokens=cached,
            tokenize_ms=(tokenized - started) * 1000, forward_ms=(finished - tokenized) * 1000)

    def _reuse_prefix(self, texts: list[str]) -> int:
        """Keep the longest run of identical chunks in sequence 0; drop everything after it."""
        reused = 0
        while reused < len(self._cached) and reused < len(texts) and self._cached[reused][0] == texts[reused]:
            reused += 1
        self._cached = self._cached[:reused]
        keep = sum(count for _, count in self._cached)
        if not llama_cpp.llama_memory_seq_rm(self.runtime.memory, 0, keep, -1):
            raise RuntimeError("llama.cpp could not trim the cached prefix")
        return reused

    def _drop_branches(self, count: int, prefix: int) -> None:
        for seq in range(1, count):
            llama_cpp.llama_memory_seq_rm(self.runtime.memory, seq, -1, -1)
        llama_cpp.llama_memory_seq_rm(self.runtime.memory, 0, prefix, -1)

    def _run_branches(self, branches: list[list[int]], prefix: int, slots: int) -> list[BranchLogits]:
        """Decode all branches in as few calls as the batch size allows, in a fixed packing."""
        limit = self.runtime.n_batch
        calls: list[list[_Piece]] = [[]]
        for seq, tokens in enumerate(branches):
            for offset in range(0, len(tokens), limit):
                piece = _Piece(seq, prefix + offset, tokens[offset:offset + limit],
                               wants_logits=offset + limit >= len(tokens))
                if sum(len(p.tokens) for p in calls[-1]) + len(piece.tokens) > limit:
                    calls.append([])
                calls[-1].append(piece)
        results: list[BranchLogits] = []
        for call in calls:
            results.extend(self._read(index, slots) for index in self._run(call))
        return results

    def _read(self, batch_index: int, slots: int) -> BranchLogits:
        row = self.runtime.logits_row(batch_index)
        peak = row.max()
        np.subtract(row, peak, out=self._scratch)
        np.exp(self._scratch, out=self._scratch)
        normalizer = float(peak) + float(np.log(self._scratch.sum(dtype=np.float64)))
        return BranchLogits(slot_logits=row[self.slot_tokens[:slots]], log_normalizer=normalizer)

    def _run(self, pieces: list[_Piece]) -> list[int]:
        """One llama_decode per batch-sized slice; returns the last slice's logit positions."""
        batch = self._batch
        limit = self.runtime.n_batch
        flat = [(p.seq, p.start + i, token, p.wants_logits and i == len(p.tokens) - 1)
                for p in pieces for i, token in enumerate(p.tokens)]
        outputs: list[int] = []
        for offset in range(0, len(flat), limit):
            window = flat[offset:offset + limit]
            outputs = [index for index, item in enumerate(window) if item[3]]
            for index, (seq, pos, token, logits) in enumerate(window):
                batch.token[index] = token
                batch.pos[index] = pos
                batch.n_seq_id[index] = 1
                batch.seq_id[index][0] = seq
                batch.logits[index] = logits
            batch.n_tokens = len(window)
            status = llama_cpp.llama_decode(self.runtime.context, batch)
            if status == DECODE_ABORTED:
                raise DecodeAbortedError("llama_decode was aborted")
            if status != 0:
                raise RuntimeError(f"llama_decode failed with status {status}")
        return outputs

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
