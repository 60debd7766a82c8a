"""In-process measurements through the adapter's own llama.cpp layer: floor, reference method, overheads.

The floor and the reference use `semif_adapter`'s runtime, prompt builder and
tokenization, so they evaluate exactly the tokens the adapter evaluates; only
the way they are evaluated differs. The floor times nothing but the native
`llama_decode` calls (filling the batch is Python's cost, not llama.cpp's).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from bench.common.workload import Spec
from semif_adapter.core.identity import ModelIdentity
from semif_adapter.core.methods import Letters, PromptRunner
from semif_adapter.core.prompt import LETTERS_SYSTEM_TEXT
from semif_adapter.core.scoring import score, softmax
from semif_adapter.core.service import answer_of
from semif_adapter.doors.request_schema import DecisionRequest, parse_request
from semif_adapter.doors.response import render
from semif_adapter.engine.integrity import digest
from semif_adapter.engine.kv_engine import KvEngine
from semif_adapter.engine.llama_runtime import MAX_BRANCHES, LlamaContext, LlamaRuntime
from semif_adapter.engine.partial_reuse import ReuseRule, common_prefix
from semif_adapter.engine.prefix_cache import PrefixCache
from semif_adapter.engine.prompt_plan import PromptPlan
from semif_adapter.engine.tokens import PlanTokens, PromptTokenizer
from semif_adapter.settings import Settings, load_settings

Piece = tuple[int, int, list[int], bool]  # sequence id, first position, tokens, logits for the last token


class Decoder:
    """Raw `llama_decode` on one context (a runtime's first, or another one), with a batch of its own."""

    def __init__(self, runtime: LlamaRuntime | LlamaContext) -> None:
        self.runtime = runtime  # only context, memory and n_batch are used: a runtime stands for its first context
        self._batch = llama_cpp.llama_batch_init(runtime.n_batch, 0, MAX_BRANCHES)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.runtime.memory, False)

    def copy_prefix(self, branches: int) -> None:
        for seq in range(1, branches):
            llama_cpp.llama_memory_seq_cp(self.runtime.memory, 0, seq, -1, -1)

    def decode(self, pieces: list[Piece]) -> float:
        """Seconds spent inside llama_decode for these pieces (split at the batch size, as llama.cpp needs)."""
        return self.decode_items([(token, start + i, (seq,), last and i == len(tokens) - 1)
                                  for seq, start, tokens, last in pieces for i, token in enumerate(tokens)])

    def decode_items(self, items: Sequence[tuple[int, int, tuple[int, ...], bool]], window: int | None = None) -> float:
        """(token, position, sequences, logits) items, in windows of the batch size (or `window`); seconds in
        llama_decode."""
        batch, limit, spent = self._batch, min(window or self.runtime.n_batch, self.runtime.n_batch), 0.0
        for offset in range(0, len(items), limit):
            window = items[offset:offset + limit]
            for index, (token, position, sequences, logits) in enumerate(window):
                batch.token[index], batch.pos[index], batch.n_seq_id[index] = token, position, len(sequences)
                for slot, sequence in enumerate(sequences):
                    batch.seq_id[index][slot] = sequence
                batch.logits[index] = logits
            batch.n_tokens = len(window)
            started = time.perf_counter()
            status = llama_cpp.llama_decode(self.runtime.context, batch)
            spent += time.perf_counter() - started
            if status != 0:
                raise RuntimeError(f"llama_decode failed with status {status}")
        return spent

    def close(self) -> None:
        llama_cpp.llama_batch_free(self._batch)


@dataclass
class Model:
    """One model and context, as the adapter opens them, plus a raw decoder on the same context."""

    runtime: LlamaRuntime
    letters: Letters
    tokenizer: PromptTokenizer
    engine: KvEngine
    decoder: Decoder
    settings: Settings
    path: Path

    @classmethod
    def open(cls, path: Path, env: Mapping[str, str]) -> Model:
        settings = load_settings(env)
        runtime = LlamaRuntime(path, settings)
        frame = runtime.chat_frame(settings.chat_template, LETTERS_SYSTEM_TEXT)
        letters = Letters(frame, runtime.slot_tokens(frame))
        engine = KvEngine(runtime, PrefixCache(0))
        return cls(runtime, letters, PromptTokenizer(runtime), engine, Decoder(runtime), settings, path)

    def plan(self, spec: Spec) -> PromptPlan:
        return self.letters.plan(DecisionRequest.model_validate(spec.body()).to_question(self.letters.name))

    def tokens(self, spec: Spec) -> PlanTokens:
        return self.tokenizer.tokens(self.plan(spec))

    def fresh_engine(self) -> KvEngine:
        """An engine whose idea of the cache matches the (cleared) cache: the floor runs trample it."""
        self.decoder.clear()
        self.engine.close()
        self.engine = KvEngine(self.runtime, PrefixCache(0))
        return self.engine

    def close(self) -> None:
        self.decoder.close()
        self.engine.close()
        self.runtime.close()


def _joined(chunks: tuple[tuple[str, tuple[int, ...]], ...]) -> list[int]:
    return [token for _, tokens in chunks for token in tokens]


def shared_opening(held: PlanTokens, tokens: PlanTokens) -> int:
    """State tokens a state shares with an earlier request's, as llama-server would reuse them; 0 when the head
    differs or the state is the same (then it is all reused)."""
    if held.chunks[0] != tokens.chunks[0] or held.chunks[1] == tokens.chunks[1]:
        return 0
    return common_prefix(held.chunks[1][1], tokens.chunks[1][1])


def kept_opening(model: Model, held: PlanTokens, tokens: PlanTokens) -> int:
    """How much of that shared opening the adapter may keep from an earlier request's state, `held` in its KV
    cache or saved in its host cache (`partial_reuse`, as its start-up enables it on this machine)."""
    shared = shared_opening(held, tokens)
    rule = ReuseRule(model.runtime.n_ubatch, enabled=True)
    return rule.keep(len(held.chunks[1][1]), shared, len(tokens.chunks[1][1])) if shared else 0


def floor_ms(model: Model, tokens: PlanTokens, cached_chunks: int, kept: int = 0) -> float:
    """Decode time of the tokens a decision computes when its first `cached_chunks` chunks are cached (and the
    first `kept` tokens of the next one)."""
    decoder = model.decoder
    decoder.clear()
    cached = _joined(tokens.chunks[:cached_chunks]) + list(tokens.chunks[cached_chunks][1][:kept] if kept else ())
    if cached:
        decoder.decode([(0, 0, cached, False)])
    rest = _joined(tokens.chunks[cached_chunks:])[kept:] + list(tokens.common)
    if len(tokens.branches) == 1:
        return decoder.decode([(0, len(cached), rest + list(tokens.branches[0]), True)]) * 1000
    spent = decoder.decode([(0, len(cached), rest, False)]) if rest else 0.0
    decoder.copy_prefix(len(tokens.branches))
    start = tokens.prefix + len(tokens.common)
    spent += decoder.decode([(seq, start, list(branch), True) for seq, branch in enumerate(tokens.branches)])
    return spent * 1000


def _letter_probabilities(model: Model, plan: PromptPlan, context: LlamaRuntime | LlamaContext | None = None) \
        -> list[float]:
    """Softmax over the option letters at the last decoded token (SemIf's method)."""
    row = (context or model.runtime).logits_row(-1)
    letters = list(model.letters.slot_tokens[:len(plan.branches[0].order)])
    return softmax(row[letters].astype(np.float64)).tolist()


def reference_ms(model: Model, spec: Spec) -> tuple[float, list[float]]:
    """SemIf's fresh method: render, tokenize, re-evaluate the whole prompt, softmax over the letters."""
    started = time.perf_counter()
    plan = model.plan(spec)
    tokens = model.tokenizer.tokens(plan)
    model.decoder.clear()
    model.decoder.decode([(0, 0, tokens.joined(0), True)])
    probabilities = _letter_probabilities(model, plan)
    return (time.perf_counter() - started) * 1000, probabilities


@dataclass(frozen=True)
class SerialAnswer:
    ms: float
    probabilities: list[float]
    evaluated_tokens: int
    cached_tokens: int


class SerialPrefix:
    """SemIf's serial-prefix mode, on a context of its own: prefill a state once, then each question after it.

    One prefix at a time (head + state, evaluated together whenever the state changes), each question's
    suffix evaluated after it and removed again, one decision after the other: the best case of a single
    process that keeps its last state, with no cache of other states and no server around it.

    With `head_kept` it decodes as the adapter does instead: the head once, then each new state on its own
    after it, then the question and options (the same calls, so the same numbers): a lane of `TrafficFloor`.
    """

    def __init__(self, model: Model, context: LlamaContext | None = None, *, head_kept: bool = False) -> None:
        self.model, self.head_kept = model, head_kept
        self._context: LlamaRuntime | LlamaContext = context or model.runtime
        self._decoder = Decoder(context) if context else model.decoder
        self._held: tuple[str, ...] | None = None

    def hold_head(self) -> None:
        """Evaluate the letters head now (`head_kept` only), as the adapter has before its first decision."""
        head = self.model.letters.frame.head
        self._decoder.clear()
        self._decoder.decode([(0, 0, list(self.model.tokenizer.head(head)), False)])
        self._held = (head,)

    def decide(self, spec: Spec) -> SerialAnswer:
        started = time.perf_counter()
        model, decoder = self.model, self._decoder
        plan = model.plan(spec)
        tokens = model.tokenizer.tokens(plan)
        prefix, cached = _joined(tokens.chunks), 0
        if tokens.key == self._held:
            cached = len(prefix)
        elif not self.head_kept:
            decoder.clear()
            decoder.decode([(0, 0, prefix, False)])
        else:
            head, state = (list(chunk[1]) for chunk in tokens.chunks)
            if self._held is not None and self._held[:1] == tokens.key[:1]:
                llama_cpp.llama_memory_seq_rm(self._context.memory, 0, len(head), -1)
                cached = len(head)
            else:
                decoder.clear()
                decoder.decode([(0, 0, head, False)])
            decoder.decode([(0, len(head), state, False)])
        self._held = tokens.key
        suffix = [*tokens.common, *tokens.branches[0]]
        decoder.decode([(0, len(prefix), suffix, True)])
        probabilities = _letter_probabilities(model, plan, self._context)
        llama_cpp.llama_memory_seq_rm(self._context.memory, 0, len(prefix), -1)
        return SerialAnswer((time.perf_counter() - started) * 1000, probabilities,
                            len(prefix) + len(suffix) - cached, cached)

    def close(self) -> None:
        if self._decoder is not self.model.decoder:
            self._decoder.close()


@contextlib.contextmanager
def decode_clock() -> Iterator[list[float]]:
    """Time every llama_decode call made by the adapter's code (it calls it through the module)."""
    spent = [0.0]
    real = llama_cpp.llama_decode

    def timed(context: object, batch: object) -> int:
        started = time.perf_counter()
        try:
            return real(context, batch)
        finally:
            spent[0] += time.perf_counter() - started

    llama_cpp.llama_decode = timed
    try:
        yield spent
    finally:
        llama_cpp.llama_decode = real


def pipeline_overhead_ms(model: Model, specs: list[Spec]) -> list[float]:
    """Per decision: the adapter's in-process pipeline (parse -> plan -> score -> render) minus llama_decode."""
    work = PromptRunner(model.tokenizer, model.fresh_engine())
    identity = ModelIdentity.of(digest(model.path, None), model.runtime.facts)
    overheads = []
    with decode_clock() as spent:
        for spec in specs:
            body = json.dumps(spec.body()).encode()
            spent[0] = 0.0
            started = time.perf_counter()
            request = parse_request(body)
            question = request.to_question(model.letters.name)
            raw = model.letters.score(question, work)
            decided = answer_of(question, raw, score(raw, question, None), queue_ms=0.0, total_ms=0.0)
            render(request, decided, identity)
            overheads.append((time.perf_counter() - started - spent[0]) * 1000)
    model.fresh_engine()
    return overheads


def _last_logits(model: Model, output: int) -> np.ndarray:
    return model.runtime.logits_row(output).copy()


def batching_probe(model: Model, first: PlanTokens, second: PlanTokens, repeats: int) -> dict[str, object]:
    """Two same-state suffixes in one decode vs one after the other: speed, and are the numbers the same?

    This is what batching concurrent requests would do; the adapter could ship it only if both requests'
    numbers were bit-identical to their numbers alone, because a decision must not depend on what else
    was in flight.
    """
    decoder = model.decoder
    state = _joined(first.chunks[:2])
    suffixes = [[*t.common, *t.branches[0]] for t in (first, second)]
    apart, together = [], []
    alone: list[np.ndarray] = []
    batched: list[np.ndarray] = []
    for _ in range(repeats):
        decoder.clear()
        decoder.decode([(0, 0, state, False)])
        spent, alone = 0.0, []
        for suffix in suffixes:
            spent += decoder.decode([(0, len(state), suffix, True)])
            alone.append(_last_logits(model, -1))
            llama_cpp.llama_memory_seq_rm(model.runtime.memory, 0, len(state), -1)
        apart.append(spent * 1000)
        decoder.copy_prefix(2)
        together.append(decoder.decode([(0, len(state), suffixes[0], True), (1, len(state), suffixes[1], True)])
                        * 1000)
        # logits_row takes a batch position, not an output number
        ends = [len(suffixes[0]) - 1, len(suffixes[0]) + len(suffixes[1]) - 1]
        batched = [_last_logits(model, end) for end in ends]
    return {"apart_ms": float(np.median(apart)), "together_ms": float(np.median(together)),
            "speedup": round(float(np.median(apart) / np.median(together)), 3),
            "bit_identical": [bool(np.array_equal(a, b)) for a, b in zip(alone, batched, strict=True)],
            "max_abs_logit_diff": max(float(np.abs(a - b).max()) for a, b in zip(alone, batched, strict=True))}


def chunking_probe(model: Model, tokens: PlanTokens, repeats: int) -> dict[str, object]:
    """What the engine's fixed boundaries cost against one decode of the same tokens (head cached):
    now state, then question + branch; before, state, question and branch as three decodes."""
    decoder, head = model.decoder, list(tokens.chunks[0][1])
    state, question, branch = list(tokens.chunks[1][1]), list(tokens.common), list(tokens.branches[0])
    layouts = {"one_decode": [state + question + branch], "state_then_suffix": [state, question + branch],
               "three_decodes": [state, question, branch]}
    times: dict[str, list[float]] = {name: [] for name in layouts}
    logits: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for name, parts in layouts.items():
            decoder.clear()
            decoder.decode([(0, 0, head, False)])
            spent, position = 0.0, len(head)
            for index, part in enumerate(parts):
                spent += decoder.decode([(0, position, part, index == len(parts) - 1)])
                position += len(part)
            times[name].append(spent * 1000)
            logits[name] = _last_logits(model, -1)
    medians = {f"{name}_ms": float(np.median(values)) for name, values in times.items()}
    return {**medians, "state_then_suffix_ratio": round(medians["state_then_suffix_ms"] / medians["one_decode_ms"], 3),
            "three_decodes_ratio": round(medians["three_decodes_ms"] / medians["one_decode_ms"], 3),
            "bit_identical": {name: bool(np.array_equal(logits["one_decode"], value)) for name, value in logits.items()
                              if name != "one_decode"}}


def restore_probe(model: Model, tokens: PlanTokens, repeats: int) -> dict[str, object]:
    """The host-memory cache's cost against recomputing: a prefix (head + state) decoded, saved and restored with
    the calls the engine makes (`llama_state_seq_get_data` / `_set_data` of sequence 0), and the next decode's
    logits after the restore compared with those after the recomputation."""
    decoder, context = model.decoder, model.runtime.context
    prefix, suffix = _joined(tokens.chunks), [*tokens.common, *tokens.branches[0]]
    recompute, save, restore = [], [], []
    identical, size = True, 0
    for _ in range(repeats):
        decoder.clear()
        recompute.append(decoder.decode([(0, 0, prefix, False)]) * 1000)
        started = time.perf_counter()
        size = llama_cpp.llama_state_seq_get_size(context, 0)
        data = (ctypes.c_uint8 * size)()
        if llama_cpp.llama_state_seq_get_data(context, data, size, 0) != size:
            raise RuntimeError("llama.cpp saved a partial sequence state")
        save.append((time.perf_counter() - started) * 1000)
        decoder.decode([(0, len(prefix), suffix, True)])
        computed = _last_logits(model, -1)
        decoder.clear()
        started = time.perf_counter()
        if llama_cpp.llama_state_seq_set_data(context, data, size, 0) != size:
            raise RuntimeError("llama.cpp restored a partial sequence state")
        restore.append((time.perf_counter() - started) * 1000)
        decoder.decode([(0, len(prefix), suffix, True)])
        identical = identical and bool(np.array_equal(computed, _last_logits(model, -1)))
    medians = {"recompute_ms": float(np.median(recompute)), "save_ms": float(np.median(save)),
               "restore_ms": float(np.median(restore))}
    return {"tokens": len(prefix), "bytes": size, **{k: round(v, 3) for k, v in medians.items()},
            "restore_over_recompute": round(medians["restore_ms"] / medians["recompute_ms"], 5),
            "bit_identical": identical}
