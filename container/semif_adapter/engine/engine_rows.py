"""What the engine reads at a position (`Row`), which positions a scoring method asks it to read (`Reads`), and
the runs of tokens it decodes them in (`Piece`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Row:
    """What was read at one position: the logits of the requested tokens and the log of the softmax's sum."""

    values: np.ndarray  # float32 logits of the requested token ids, in the requested order
    log_normalizer: float  # log-sum-exp over the whole vocabulary at that position

    def log_probs(self) -> np.ndarray:
        return self.values.astype(np.float64) - self.log_normalizer

    def select(self, among: Sequence[int], ids: Sequence[int]) -> Row:
        """The row as if only `ids` had been read, from one read of `among` (a trie node's union): the same bits."""
        if tuple(ids) == tuple(among):
            return self
        return Row(values=self.values[[among.index(token) for token in ids]], log_normalizer=self.log_normalizer)


@dataclass(frozen=True)
class Reads:
    """Which logits a method needs: at the common part's last token, and at token indexes of each branch."""

    common: tuple[int, ...] | None
    branches: tuple[Mapping[int, Sequence[int]], ...]  # per branch: token index -> token ids to read there


@dataclass(frozen=True)
class Piece:
    """A run of tokens decoded in order, all of them in the same sequence(s)."""

    seq: int | tuple[int, ...]  # the sequence(s) its tokens belong to: the common part belongs to every branch's
    start: int  # position of the first token
    tokens: Sequence[int]
    reads: Mapping[int, Sequence[int]]  # index in tokens -> ids
    tag: int  # which trie node (-1: the common part)
    release: int = 0  # the branches' first position: `done`'s cells from there on go once the last token is decoded
    done: tuple[int, ...] = ()  # the sequences whose last decoded token is this piece's last

    def sequences(self) -> tuple[int, ...]:
        return self.seq if isinstance(self.seq, tuple) else (self.seq,)
