"""Plan tokens -> KV cache -> the logits a scoring method asked for. Method-agnostic.

Sequence 0 of the KV cache holds a prefix (head, state) in cells [0, n): either still there from the previous
request, restored from the host-memory `PrefixCache`, or evaluated now (and saved there by `save_pending_prefix`,
which the service calls once the answer is handed back); a new state that opens like the held one, or like a saved
one, keeps that opening where `partial_reuse` shows it to be exact. The rest is evaluated fresh on every request,
always at the same boundaries, in the plan's fixed order: the common part (the criterion...) and the branches, one
sequence id each. The prefix's cells are given to every branch's sequence (`llama_memory_seq_cp`); the common part's
tokens belong to all of them, and an opening several branches share to each of those (a token may carry several
sequence ids: `branch_trie`), so each is computed once. Rows of several sequences in one llama_decode disturb each
other in this llama.cpp (docs/quality.md, "Answers side by side"), so pieces of several sequences share calls only
under flash attention's tile, cut where `suffix_windows` finds it safe, and only if the start-up probe
(`enable_mixed_windows`) finds that exact; otherwise each piece is a call of its own. Either way a branch's numbers
never depend on the branches beside it. llama.cpp's CPU kernels also round differently with the batch's packing, so
fixed boundaries and a fixed order are what make a decision's numbers independent of the cache and of what else was
asked before. After every request, errors included, the cache holds only sequence 0's prefix in cells [0, n)."""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import mmap
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import llama_cpp
import numpy as np

from ..errors import PromptTooLongError
from .batch_decoder import BatchDecoder
from .branch_trie import Node, branch_trie, member_rows
from .core_share import CoreShare
from .engine_rows import Piece, Reads, Row
from .llama_runtime import MAX_BRANCHES, LlamaContext, LlamaRuntime
from .partial_reuse import ReuseRule, TokenIds, verify_on
from .prefix_cache import PrefixCache, SavedPrefix, token_bytes
from .prompt_plan import partition_of
from .suffix_windows import safe_windows
from .tokens import PlanTokens

PROBE_PREFIX, PROBE_COMMON, PROBE_BRANCH, PROBE_SHARED = 40, 3, 20, 6  # enable_mixed_windows: 57 tokens, one call


@dataclass(frozen=True)
class EngineResult:
    common: Row | None
    branches: tuple[dict[int, Row], ...]
    prompt_tokens: int  # prefix + common + the first branch: the prompt as the model reads it
    prefix_tokens: int  # head + state: what every question about the state shares
    context_tokens: int  # prefix + common + every branch as decoded: what the question placed in the context
    evaluated_tokens: int  # what this request actually computed
    cached_tokens: int  # prefix tokens reused
    output_rows: int  # positions whose logits were computed (the vocabulary head) and read
    cache_source: str  # where they came from: "kv" (still in the KV cache), "host" (restored), "none"
    restore_ms: float
    forward_ms: float


def decoded_length(tokens: Sequence[int], reads: Mapping[int, Sequence[int]]) -> int:
    """Tokens of a branch that must be evaluated: up to its last read (a scored answer's last token is not)."""
    return max(reads) + 1 if reads else 0


class KvEngine(BatchDecoder):
    """Evaluates plans on one llama.cpp context; callers serialise access to it. Engines on other contexts of
    the same runtime may share the `PrefixCache` and the `CoreShare` with it."""

    def __init__(self, runtime: LlamaRuntime, cache: PrefixCache, context: LlamaContext | None = None,
                 cores: CoreShare | None = None) -> None:
        super().__init__(runtime, context or runtime.primary, cores)
        self.cache = cache
        self._live: tuple[tuple[str, Sequence[int]], ...] = ()  # (text, tokens) of the chunks sequence 0 holds
        # (key, tokens, state) of the prefix decoded last and not yet saved: see save_pending_prefix
        self._unsaved: tuple[tuple[str, ...], int, Sequence[int]] | None = None
        self._claim = contextlib.ExitStack()  # other workers wait on the unsaved prefix until it is saved
        self.reuse = ReuseRule(runtime.n_ubatch, enabled=False)
        self.mixed = False  # whether pieces of several sequences may share calls (`enable_mixed_windows`)

    # -- public ------------------------------------------------------------------------------------
    def evaluate(self, planned: PlanTokens, reads: Reads) -> EngineResult:
        if len(planned.branches) > MAX_BRANCHES:
            raise ValueError(f"{len(planned.branches)} branches; the context has {MAX_BRANCHES} sequences")
        lengths = [decoded_length(b, r) for b, r in zip(planned.branches, reads.branches, strict=True)]
        suffix = len(planned.common) + sum(lengths)
        needed = planned.prefix + suffix
        if needed > self.runtime.n_ctx:
            raise PromptTooLongError(needed, self.runtime.n_ctx, f"{planned.prefix} prefix + {len(planned.common)} "
                                     f"common + {sum(lengths)} option tokens")
        nodes = branch_trie([b[:length] for b, length in zip(planned.branches, lengths, strict=True)], reads.branches)
        self.save_pending_prefix()  # the previous evaluation's prefix, before this one may replace it
        started = time.perf_counter()
        try:
            with contextlib.ExitStack() as claim:
                if self._held() != planned.key and not self.cache.holds(planned.key):
                    claim.enter_context(self.cache.evaluating(planned.key))  # waits outside the core share
                with self._working():
                    cached, source, restore_ms = self._hold_prefix(planned)
                    self._claim = claim.pop_all()  # released by save_pending_prefix(), once the prefix is saved
                    if self._unsaved is None:
                        self._claim.close()  # nothing to save: other workers may go on
                    common, rows = self._evaluate_suffix(planned, reads, lengths, nodes)
        except BaseException:
            self._forget()
            raise
        finally:
            self._drop_suffix(len(planned.branches))
        return EngineResult(common=common, branches=rows,
                            prompt_tokens=planned.prefix + len(planned.common) + len(planned.branches[0]),
                            prefix_tokens=planned.prefix, context_tokens=needed,
                            evaluated_tokens=planned.prefix - cached + len(planned.common)
                            + sum(len(node.tokens) for node in nodes), cached_tokens=cached,
                            output_rows=int(reads.common is not None) + sum(len(node.reads) for node in nodes),
                            cache_source=source,
                            restore_ms=restore_ms, forward_ms=(time.perf_counter() - started) * 1000 - restore_ms)

    def save_pending_prefix(self) -> None:
        """Save the prefix the last evaluation decoded to the host cache, then let workers waiting for it go on.

        Sequence 0 holds exactly that prefix between evaluations, so the copy (a fresh allocation of a few MB and
        its page faults: 4-28 ms for a 370-token state here) can wait until the answer is handed back; the next
        evaluation saves it first. Callers that do not hand anything back in between save at once (`PromptRunner`)."""
        unsaved, self._unsaved = self._unsaved, None
        try:
            if unsaved is not None:
                key, tokens, state = unsaved
                self._save(key, tokens, state=state)
        finally:
            self._claim.close()

    def enable_partial_reuse(self, probe_tokens: Sequence[int]) -> list[str]:
        """Start-up: turn partial reuse on if this model's kernels reproduce split decodes bit for bit.

        Returns why it stays off (empty: on). Clears the KV cache.
        """
        if not self.runtime.cpu_only:
            return ["layers run on a GPU, whose kernels follow other rules"]
        if self.runtime.n_batch % self.runtime.n_ubatch:
            return [f"the batch ({self.runtime.n_batch}) is not a whole number of ubatches ({self.runtime.n_ubatch})"]
        problems = verify_on(self.split_decode, probe_tokens, self.runtime.n_ubatch)
        self.reuse = ReuseRule(self.runtime.n_ubatch, enabled=not problems)
        return problems

    def enable_mixed_windows(self, probe_tokens: Sequence[int]) -> list[str]:
        """Start-up: let pieces of several sequences share calls under the tile if each branch's rows in one such
        call are, bit for bit, the ones it gets decoded alone (a common part and three branches, two of them sharing
        an opening). Returns why not (empty: on). Clears the KV cache.

        The prefix is decoded once and held in sequence 0, as a request finds it, and each run's suffix dropped after
        it, as a request's is: the probe checks the state a decision is scored in, at a quarter of the prefix's cost."""
        needed = PROBE_PREFIX + PROBE_COMMON + 3 * PROBE_BRANCH
        if len(probe_tokens) < needed:
            return [f"{len(probe_tokens)} probe tokens, {needed} needed"]
        prefix, common = probe_tokens[:PROBE_PREFIX], probe_tokens[PROBE_PREFIX:PROBE_PREFIX + PROBE_COMMON]
        start = PROBE_PREFIX + PROBE_COMMON
        own = [probe_tokens[start + k * PROBE_BRANCH:start + (k + 1) * PROBE_BRANCH] for k in range(3)]
        branches = [own[0], [*own[0][:PROBE_SHARED], *own[1][PROBE_SHARED:]], own[2]]
        ids = tuple(range(min(64, self.runtime.vocab_size)))
        reads = [{i: ids for i in range(PROBE_BRANCH)} for _ in branches]
        nodes = branch_trie(branches, reads)
        pieces = self._branch_pieces(PROBE_PREFIX, common, {}, len(branches), nodes)
        self._forget()
        try:
            with self._working():
                self._decode([Piece(0, 0, prefix, {}, -1)])
                together = member_rows(nodes, self._after_prefix(len(branches), pieces), reads, start)
                alone = [self._after_prefix(1, [Piece(0, PROBE_PREFIX, [*common, *branch],
                                                      {PROBE_COMMON + i: ids for i in range(PROBE_BRANCH)}, 0)])[0]
                         for branch in branches]
        finally:
            self._forget()
        problems = []
        for k, rows in enumerate(alone):
            moved = [abs(together[k][pos - start].log_normalizer - row.log_normalizer)
                     for pos, row in rows.items()
                     if not (np.array_equal(together[k][pos - start].values, row.values)
                             and together[k][pos - start].log_normalizer == row.log_normalizer)]
            if moved:
                problems.append(f"branch {k}: {len(moved)} of {PROBE_BRANCH} rows moved beside others (log-sum-exp "
                                f"by up to {max(moved):.3g})")
        self.mixed = not problems
        return problems

    def _after_prefix(self, sequences: int, pieces: list[Piece]) -> dict[int, dict[int, Row]]:
        """`pieces` in one call after the prefix sequence 0 holds (`PROBE_PREFIX` tokens), given to `sequences`
        sequences; the cache holds only that prefix again after it."""
        for seq in range(1, sequences):
            llama_cpp.llama_memory_seq_cp(self.context.memory, 0, seq, -1, -1)
        try:
            return self._decode(pieces)
        finally:
            self._drop_after(sequences, PROBE_PREFIX)

    def split_decode(self, tokens: Sequence[int], splits: Sequence[int]) -> np.ndarray:
        """The last token's logits after decoding `tokens` from an empty cache in calls starting at `splits`."""
        self._forget()
        bounds, everything = (0, *splits, len(tokens)), tuple(range(self.runtime.vocab_size))
        try:
            with self._working():
                for start, end in itertools.pairwise(bounds):
                    last = {end - start - 1: everything} if end == len(tokens) else {}
                    found = self._decode([Piece(0, start, tokens[start:end], last, -1)])
            return found[-1][len(tokens) - 1].values
        finally:
            self._forget()

    # -- the prefix (sequence 0, cells [0, n)) -----------------------------------------------------------
    def _held(self) -> tuple[str, ...]:
        return tuple(text for text, _ in self._live)

    def _hold_prefix(self, planned: PlanTokens) -> tuple[int, str, float]:
        """Make sequence 0 hold exactly the plan's prefix; returns (reused tokens, their source, restore ms).

        In order: the whole prefix held or saved; else the longest exact opening of a state, the held one's or
        a saved one's (held wins a tie: it costs no restore); else the head, held, saved, or evaluated."""
        key = planned.key
        if self._held() == key:
            return planned.prefix, "kv", 0.0
        started = time.perf_counter()
        saved = self.cache.get(key)
        if saved is not None:
            self._restore(saved, planned.chunks)
            return planned.prefix, "host", (time.perf_counter() - started) * 1000
        head_key, (head_text, head_tokens) = key[:1], planned.chunks[0]
        held_head = self._held()[:1] == head_key
        saved_key, kept = self._best_opening(planned, held_head)
        opening = self.cache.opening(saved_key) if saved_key is not None else None
        if saved_key is not None and opening is None:  # evicted by another worker since: keep none of it
            kept = 0
        if opening is not None:
            self._restore(opening, planned.chunks[:1])
            source, restore_ms = "host", (time.perf_counter() - started) * 1000
        elif held_head:
            source, restore_ms = "kv", 0.0
        elif (saved_head := self.cache.get(head_key)) is not None:
            self._restore(saved_head, planned.chunks[:1])
            source, restore_ms = "host", (time.perf_counter() - started) * 1000
        else:  # a head never seen: once per scoring method and process (warm-up)
            self._forget()
            self._decode([Piece(0, 0, head_tokens, {}, -1)])
            self._live = ((head_text, head_tokens),)
            self._save(head_key, len(head_tokens), pinned=True)
            self._decode_state(planned, 0)
            return 0, "none", 0.0
        self._trim(1, kept)
        self._decode_state(planned, kept)
        return len(head_tokens) + kept, source, restore_ms

    def _best_opening(self, planned: PlanTokens, held_head: bool) -> tuple[tuple[str, ...] | None, int]:
        """The state under the plan's head whose opening the plan's state may keep the most of, and how much:
        the held one (key None; first, so it wins a tie: it costs no restore) or a saved one (its key)."""
        best: tuple[tuple[str, ...] | None, int] = (None, 0)
        if not self.reuse.enabled:
            return best
        state, partition = planned.chunks[1][1], partition_of(planned.chunks[1][0])
        held: list[tuple[tuple[str, ...] | None, TokenIds]] = \
            [(None, self._live[1][1])] if held_head and len(self._live) == 2 else []
        for key, tokens in [*held, *self.cache.neighbours(planned.chunks[0][0], state)]:
            theirs = self._live[1][0] if key is None else key[1]
            if partition_of(theirs) != partition:  # a tenant's state never opens another's
                continue
            if (kept := self.reuse.keep_of(tokens, state)) > best[1]:
                best = (key, kept)
        return best

    def _decode_state(self, planned: PlanTokens, kept: int) -> None:
        """Evaluate the state after the head and its first `kept` tokens, in calls that end on the ubatch grid."""
        (_, head_tokens), (state_text, state_tokens) = planned.chunks
        cuts = self.reuse.cuts(kept, len(state_tokens)) if kept else (0,)
        for start, end in itertools.pairwise((*cuts, len(state_tokens))):
            self._decode([Piece(0, len(head_tokens) + start, state_tokens[start:end], {}, -1)])
        self._live = (self._live[0], (state_text, state_tokens))
        self._unsaved = (planned.key, planned.prefix, state_tokens)

    def _trim(self, chunks: int, extra: int = 0) -> None:
        """Keep the first `chunks` chunks and `extra` tokens of the next one."""
        self._live = self._live[:chunks]
        if not llama_cpp.llama_memory_seq_rm(self.context.memory, 0, self._live_tokens() + extra, -1):
            raise RuntimeError("llama.cpp could not trim the cached prefix")

    def _live_tokens(self) -> int:
        return sum(len(tokens) for _, tokens in self._live)

    def _forget(self) -> None:
        llama_cpp.llama_memory_clear(self.context.memory, False)
        self._live, self._unsaved = (), None
        self._claim.close()

    def _save(self, key: tuple[str, ...], tokens: int, *, pinned: bool = False, state: Sequence[int] = ()) -> None:
        context = self.context.context
        size = llama_cpp.llama_state_seq_get_size(context, 0)
        if not pinned and not self.cache.wants(key, size):
            return
        # Fresh anonymous pages, faulted in by llama.cpp as it writes (about 30 ms for 8.5 MB on this VM) with the
        # GIL released: a ctypes buffer of its own is zeroed under the GIL, which stalled the event loop sending
        # the answer this save follows.
        data = (ctypes.c_uint8 * size).from_buffer(mmap.mmap(-1, size))
        written = llama_cpp.llama_state_seq_get_data(context, data, size, 0)
        if written != size:
            raise RuntimeError(f"llama.cpp saved {written} of {size} bytes of the prefix")
        self.cache.put(key, SavedPrefix(data=data, tokens=tokens, state=token_bytes(state)), pinned=pinned)

    def _restore(self, saved: SavedPrefix, chunks: Sequence[tuple[str, Sequence[int]]]) -> None:
        self._forget()  # an empty cache: the restored cells land in [0, n), where evaluation puts them
        read = llama_cpp.llama_state_seq_set_data(self.context.context, saved.data, saved.size, 0)
        if read != saved.size:
            self._forget()
            raise RuntimeError(f"llama.cpp restored {read} of {saved.size} bytes of a cached prefix")
        self._live = tuple(chunks)

    # -- the suffix (common part and branches, evaluated on every request) ---------------------------------
    def _evaluate_suffix(self, planned: PlanTokens, reads: Reads, lengths: list[int],
                         nodes: list[Node]) -> tuple[Row | None, tuple[dict[int, Row], ...]]:
        """Rows by absolute position while decoding; returned as the common row and per-branch token indexes."""
        common_start, common = planned.prefix, planned.common
        branch_start = common_start + len(common)
        last_common = branch_start - 1
        common_reads = {len(common) - 1: reads.common} if reads.common is not None else {}
        if len(planned.branches) == 1:  # one decode: the common part and the branch together
            merged = {**common_reads, **{len(common) + i: ids for i, ids in reads.branches[0].items()}}
            tokens = [*common, *planned.branches[0][:lengths[0]]]
            rows = self._decode([Piece(0, common_start, tokens, merged, 0)], last=True).get(0, {})
            branch = {pos - branch_start: row for pos, row in rows.items() if pos >= branch_start}
            return rows.get(last_common), (branch,)
        for seq in range(1, len(planned.branches)):  # the prefix's cells belong to every branch
            llama_cpp.llama_memory_seq_cp(self.context.memory, 0, seq, -1, -1)
        found = self._decode_packed(self._branch_pieces(common_start, common, common_reads,
                                                        len(planned.branches), nodes))
        return found.get(-1, {}).get(last_common), member_rows(nodes, found, reads.branches, branch_start)

    @staticmethod
    def _branch_pieces(start: int, common: Sequence[int], common_reads: Mapping[int, Sequence[int]], branches: int,
                       nodes: Sequence[Node]) -> list[Piece]:
        """The common part (its tokens belong to every branch: decoded once) and the trie's nodes, in order."""
        branch_start = start + len(common)
        pieces = [Piece(tuple(range(branches)), start, common, common_reads, -1)] if common else []
        return pieces + [Piece(node.members if len(node.members) > 1 else node.members[0], branch_start + node.depth,
                                node.tokens, node.reads, tag, release=branch_start, done=node.done)
                         for tag, node in enumerate(nodes)]

    def _drop_suffix(self, branches: int) -> None:
        self._drop_after(branches, self._live_tokens())

    def _drop_after(self, sequences: int, prefix: int) -> None:
        """Leave only sequence 0's cells [0, prefix): sequences 1.. and whatever sequence 0 holds after them go."""
        for seq in range(1, sequences):
            llama_cpp.llama_memory_seq_rm(self.context.memory, seq, -1, -1)
        llama_cpp.llama_memory_seq_rm(self.context.memory, 0, prefix, -1)

    # -- decoding --------------------------------------------------------------------------------------
    def _decode_packed(self, pieces: list[Piece]) -> dict[int, dict[int, Row]]:
        """Pieces in their fixed order: where `mixed` allows it, several pieces to a call of under flash attention's
        tile, cut where no branch's later tokens can land below its earlier ones (`suffix_windows`); else each
        piece in calls of its own (`_decode` splits a long one at the ubatch)."""
        if self.mixed:
            return self._decode(pieces, last=True, windows=safe_windows(pieces, self.runtime.n_ubatch))
        found_rows: dict[int, dict[int, Row]] = {}
        for index, piece in enumerate(pieces):
            for tag, rows in self._decode([piece], last=index == len(pieces) - 1).items():
                found_rows.setdefault(tag, {}).update(rows)
        return found_rows



def worker_engines(runtime: LlamaRuntime, cache: PrefixCache, workers: int, cores: int) -> list[KvEngine]:
    """One engine per decision worker, each on a context of its own (the runtime's first, then new ones), sharing
    the prefix cache and, when there are several, a `CoreShare` of `cores`."""
    share = CoreShare(cores) if workers > 1 else None
    contexts = [runtime.primary, *(runtime.new_context() for _ in range(workers - 1))]
    return [KvEngine(runtime, cache, context, share) for context in contexts]
