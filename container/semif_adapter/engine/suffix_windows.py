"""Where a suffix of many sequences may be cut into llama.cpp calls so that every row is what it is alone.

With flash attention on the CPU, a row of fewer than 64 in its call is computed by a kernel that walks its own
sequence's cells one by one, in cell order, accumulating as it goes: the row is bit for bit the same whatever
else shares the call, provided each sequence's cells lie in the order of its positions. llama.cpp places a call's
tokens in the lowest free cells, in order, and a branch's cells are freed once it is decoded. So a cut is safe
where no cell freed at it lies below a cell still in use by a branch that goes on: a later token of that branch
would otherwise land in the hole, below the tokens it follows. One call per trie node never breaks this (a
node's subtree is decoded, then freed, before its next sibling); packing several nodes into one call breaks it
where a finished branch is followed, in the same call, by a node whose branch goes on into the next call.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .engine_rows import Piece
from .partial_reuse import TILE

SUFFIX_WINDOW = TILE - 1  # the most tokens of several sequences one call may hold: flash attention row by row


@dataclass(frozen=True)
class Span:
    """One piece of the suffix in the flat order of its tokens: where it starts and ends, and from which flat
    index on its cells are free (`math.inf`: never, within the suffix)."""

    first: int
    last: int
    freed_after: float


def spans(pieces: Sequence[Piece]) -> list[Span]:
    """Pieces in decoding order as spans: a trie node's cells go once every branch holding them is done (its
    `release` is the branches' first position); the common part's never do (release 0)."""
    lengths = [len(piece.tokens) for piece in pieces]
    starts = [0, *itertools.accumulate(lengths)][:-1]
    ends = [start + length - 1 for start, length in zip(starts, lengths, strict=True)]
    finished = {seq: end for piece, end in zip(pieces, ends, strict=True) for seq in piece.done}
    return [Span(start, end, max((finished.get(seq, math.inf) for seq in piece.sequences()), default=math.inf)
                 if piece.release > 0 else math.inf)
            for piece, start, end in zip(pieces, starts, ends, strict=True)]


def safe_windows(pieces: Sequence[Piece], ubatch: int) -> list[tuple[int, int]]:
    """Calls of at most SUFFIX_WINDOW tokens (and one ubatch): flat [start, end) ranges of the pieces' tokens,
    each as long as a safe cut allows (one token always is)."""
    return _windows(spans(pieces), min(SUFFIX_WINDOW, ubatch))


def _windows(pieces: Sequence[Span], width: int) -> list[tuple[int, int]]:
    total = pieces[-1].last + 1 if pieces else 0
    windows: list[tuple[int, int]] = []
    start = 0
    while start < total:
        reach = min(start + width, total)
        near = [piece for piece in pieces if piece.first < reach and piece.freed_after >= start]
        cuts = sorted({reach, *(piece.first for piece in near if start < piece.first < reach)}, reverse=True)
        end = next((cut for cut in cuts if _safe(near, cut)), start + 1)
        windows.append((start, end))
        start = end
    return windows


def _safe(near: Sequence[Span], cut: int) -> bool:
    """Whether every cell freed at `cut` lies above every cell still in use there."""
    freed = [piece.first for piece in near if piece.freed_after < cut]
    if not freed:
        return True
    in_use = [min(piece.last, cut - 1) for piece in near if piece.first < cut <= piece.freed_after]
    return not in_use or min(freed) > max(in_use)
