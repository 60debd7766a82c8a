"""The raw-decode floor of a System One answer: its own evaluated tokens, laid out as the server computed them,
decoded by llama.cpp with nothing around it.

A server says what each question computed. Our adapter, per answer in `x_timing`: the prompt tokens, how many of
them it found in its caches, and how many it evaluated, the answers' own tokens included; the answer's
`x_option_logits` say how many answers were scored. A question is then one piece: after `cached` tokens already in
the KV cache, `shared` new tokens that every answer sees (the rest of its prompt: the state for the first question,
then the question itself), and one branch per answer holding the rest of its evaluated tokens, split evenly (pmi's
and likelihood's layout: each answer's text scored after the shared prompt), with logits computed at as many
positions as the server says it read (`output_rows`: every answer token's for pmi and likelihood, whose vocabulary-
wide head is a fifth of a 135M model's work per token; one per branch where it does not say), in the branches and,
for rows they cannot hold, at the last shared tokens (a prompt holds its first answer's tokens). `semif-serve` reports
per answer the prompt it read (`semif.input_tokens`) and, in its shared mode, the state prefix it prefilled once
(`semif.timing.prefix_tokens`): one piece, the prefix shared, one branch per question. A server that says neither
gets one piece of `usage.input_tokens` in one sequence (what it read, an upper bound on what it computed).

The floor decodes each piece as cheaply as llama.cpp decodes it exactly: the shared tokens in calls of the batch size
(a shared token belongs to every branch's sequence: llama.cpp computes it once), then the branches in calls of at
most 63 tokens (`SUFFIX_WINDOW`: rows of several sequences in one call of 64 or more are computed by flash
attention's tiled kernel, which makes them disturb each other in this llama.cpp, docs/quality.md "Answers side by
side"; the same tokens in calls of 512 are 10-17% faster, measured by `exact_calls`, removed; see git history), in
groups of about one ubatch, every group's sequences dropped before the next (attention reads every cell in use, so 255
answers' branches kept side by side would cost more than the answers themselves). On a context of the adapter's
geometry (its runtime and settings, in this process), the cached prefix decoded before the clock, the clock on the
native calls.
Decoding time follows how many tokens there are and where they sit, not which ones: the tokens are the request's
own words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp

from bench.common.inprocess import Decoder
from semif_adapter.engine.llama_runtime import MAX_BRANCHES, LlamaRuntime
from semif_adapter.engine.suffix_windows import SUFFIX_WINDOW
from semif_adapter.settings import load_settings

WARMUP_TEXT = "A first decode allocates what every later one reuses."


@dataclass(frozen=True)
class Piece:
    """One question's computation: `shared` new tokens after `cached` ones, then one branch per answer."""

    cached: int
    shared: int
    branches: tuple[int, ...] = ()
    outputs: int | None = None  # logits rows the server computed; None: one at the end of each branch

    @property
    def evaluated(self) -> int:
        return self.shared + sum(self.branches)

    def rows(self) -> tuple[int, ...]:
        """Logits rows per branch, each at its last tokens: the server's count spread evenly (an answer method
        reads every answer token's row: a vocabulary-wide head per token, which a floor of one row per branch
        would leave out), or one per branch."""
        if self.outputs is None:
            return tuple(1 for _ in self.branches)
        shares = list(_split(self.outputs, len(self.branches))) + [0] * len(self.branches)
        return tuple(min(length, share) for length, share in zip(self.branches, shares, strict=False))

    def shared_rows(self) -> int:
        """The server's rows that the branches cannot hold, at the last shared tokens: what a server reports as its
        prompt holds its first answer's tokens (`prompt_tokens`), so that answer's rows sit in `shared` here."""
        if self.outputs is None:
            return 0
        return max(0, min(self.shared, self.outputs - sum(self.rows())))


@dataclass(frozen=True)
class Layout:
    pieces: tuple[Piece, ...]
    source: str  # "x_timing" (what the server computed), "semif" (its prompts and prefix), "usage" (what it read)

    @property
    def evaluated(self) -> int:
        return sum(piece.evaluated for piece in self.pieces)

    @property
    def cached(self) -> int:
        return min((piece.cached for piece in self.pieces), default=0)


def _split(total: int, parts: int) -> tuple[int, ...]:
    """`total` tokens over `parts` branches, as evenly as whole tokens go (empty branches dropped)."""
    if total <= 0 or parts <= 0:
        return ()
    size, extra = divmod(total, parts)
    return tuple(size + (index < extra) for index in range(parts) if size + (index < extra))


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _ours(answers: Mapping[str, Any]) -> Layout | None:
    pieces = []
    for answer in answers.values():
        timing = answer.get("x_timing") if isinstance(answer, Mapping) else None
        if not isinstance(timing, Mapping):
            return None
        prompt, cached, evaluated, outputs = (_int(timing.get(key)) for key in (
            "prompt_tokens", "cached_tokens", "evaluated_tokens", "output_rows"))
        if prompt is None or cached is None or evaluated is None:
            return None
        shared = min(max(prompt - cached, 0), evaluated)
        scored = len(answer.get("x_option_logits") or answer.get("probabilities") or {"true": 0, "false": 0})
        pieces.append(Piece(cached, shared, _split(evaluated - shared, scored), outputs))
    return Layout(tuple(pieces), "x_timing") if pieces else None


def _semif(document: Mapping[str, Any], answers: Mapping[str, Any]) -> Layout | None:
    inputs = [_int((a.get("semif") or {}).get("input_tokens")) if isinstance(a, Mapping) else None
              for a in answers.values()]
    if not inputs or None in inputs:
        return None
    block = document.get("semif") or {}
    prefix = _int((block.get("timing") or {}).get("prefix_tokens"))
    if block.get("mode") == "direct" or prefix is None:
        return Layout(tuple(Piece(0, tokens) for tokens in inputs), "semif")
    return Layout((Piece(0, prefix, tuple(tokens - prefix for tokens in inputs)),), "semif")


def reported_layout(document: Mapping[str, Any] | None) -> Layout | None:
    """What a 200 answer says it computed, in the most detail the server gives."""
    if not document:
        return None
    if isinstance(document.get("timing"), Mapping) and isinstance(document.get("option_logits"), list):
        # our SemIf door: one decision, its timing and its options' logits
        return _ours({"decision": {"x_timing": document["timing"], "x_option_logits": document["option_logits"]}})
    answers = document.get("answers") if isinstance(document.get("answers"), Mapping) else {}
    found = _ours(answers) or _semif(document, answers)
    if found:
        return found
    usage = _int((document.get("usage") or {}).get("input_tokens"))
    return Layout((Piece(0, usage),), "usage") if usage else None


class RawFloor:
    """One llama.cpp context as the adapter opens it (its settings from `env`), a batch of its own, and a clock on
    `llama_decode`."""

    def __init__(self, model: Path, env: Mapping[str, str] | None = None) -> None:
        self.runtime = LlamaRuntime(model, load_settings(env or {}))
        self._decoder = Decoder(self.runtime)
        self.ms(Layout((Piece(0, 32, (16, 16)),), "warm-up"), WARMUP_TEXT)  # a context's first decode allocates

    def _groups(self, piece: Piece) -> list[tuple[int, ...]]:
        """Branches in groups of about one ubatch of tokens (the first group shares its call with the shared
        tokens), at most every sequence but the trunk each: llama.cpp's attention reads every cell in use, so a
        group's branches are dropped before the next group's are decoded, as a server that scores many answers
        does."""
        groups: list[list[int]] = [[]]
        room = self.runtime.n_ubatch - piece.shared
        for length in piece.branches:
            if groups[-1] and (room < length or len(groups[-1]) == MAX_BRANCHES - 1):
                groups.append([])
                room = self.runtime.n_ubatch
            groups[-1].append(length)
            room -= length
        return [tuple(group) for group in groups]

    def _piece_ms(self, piece: Piece, words: list[int]) -> float:
        """The cached prefix in sequence 0 (before the clock); then the shared tokens, in sequence 0 and in every
        sequence of the first group, and that group's branches after them; each group's sequences start as a copy
        of sequence 0 (a metadata operation) and are removed once decoded."""
        memory = self.runtime.memory
        llama_cpp.llama_memory_clear(memory, False)
        ids = iter(words * ((piece.cached + piece.evaluated) // len(words) + 1))
        if piece.cached:
            self._decoder.decode_items([(next(ids), position, (0,), False) for position in range(piece.cached)])
        end, spent = piece.cached + piece.shared, 0.0
        rows = iter(piece.rows())
        for index, group in enumerate(self._groups(piece)):
            sequences = tuple(range(1, len(group) + 1))
            for sequence in sequences:  # the tokens sequence 0 holds so far, the cached prefix or all before
                llama_cpp.llama_memory_seq_cp(memory, 0, sequence, -1, -1)
            first_row = end - piece.shared_rows() if group else end - max(1, piece.shared_rows())
            shared = [(next(ids), position, (0, *sequences), position >= first_row)
                      for position in range(piece.cached, end)] if index == 0 else []
            answers = []
            for sequence, length in zip(sequences, group, strict=True):
                read = next(rows)
                answers += [(next(ids), end + offset, (sequence,), offset >= length - read) for offset in range(length)]
            spent += self._decoder.decode_items(shared) if shared else 0.0
            spent += self._decoder.decode_items(answers, SUFFIX_WINDOW) if answers else 0.0
            for sequence in sequences:
                llama_cpp.llama_memory_seq_rm(memory, sequence, -1, -1)
        return spent * 1000

    def ms(self, layout: Layout, text: str) -> float | None:
        """Milliseconds in `llama_decode` for the layout's pieces (None: a piece does not fit the context)."""
        if any(piece.cached + piece.shared + max(map(sum, self._groups(piece))) > self.runtime.n_ctx
               for piece in layout.pieces):
            return None
        words = self.runtime.tokenize(text, special=False) or self.runtime.tokenize(WARMUP_TEXT, special=False)
        return sum(self._piece_ms(piece, words) for piece in layout.pieces)

    def close(self) -> None:
        self._decoder.close()
        self.runtime.close()
