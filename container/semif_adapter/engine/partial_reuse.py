"""How much of an earlier state (held in sequence 0, or saved in the host cache) a new state may keep without
moving one bit of its scores.

Two states often open alike (`Ticket 10..`, `{"customer": "`): llama-server keeps the longest common token prefix
of its slot and evaluates only the rest. Doing the same is bit-identical only when every token's numbers are
computed the way the uncached evaluation computes them, and llama.cpp's CPU kernels choose their way by the size
of the ubatch a token is decoded in: flash attention runs a tiled kernel for ubatches of `TILE` (64,
`GGML_FA_TILE_Q`) tokens or more and a row-by-row one below that, and a one-token ubatch takes other paths.
Measured on the embedded model (every two-part split of a 177-token prompt; the measuring program is removed, see git
history and docs/decision-api.md): every split into two tiled parts gave the whole decode's logits bytes; every split
with a shorter part moved logits, by up to 0.86.

The uncached evaluation decodes a state in one call, so its ubatches lie on a grid of `ubatch` tokens from the
state's first token. A kept opening is safe when each of its ubatches was computed (in the request that left it,
under the same rule) with the geometry the grid gives it now, or both times tiled, and the rest is decoded in
calls that end on the grid, its first ubatch either the grid's own or shortened but still tiled. Only the tiled
class is relied on, so a llama.cpp whose tile threshold moved down changes nothing; `verify_on` checks the class
at start-up on the loaded model (a split at an odd offset, which a threshold moved up would break), and partial
reuse stays off if a bit moves, on a GPU (other kernels, other rules) and when the batch is not a whole number of
ubatches.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

TILE = 64  # GGML_FA_TILE_Q in the pinned llama.cpp (ggml-cpu/common.h)
SINGLE, ROW, TILED = 1, 2, 3

PROBE_LENGTH = 131  # two tiled parts at an odd offset (67 + 64) within one ubatch; about 1 s on 2 cores

Decode = Callable[[Sequence[int], Sequence[int]], np.ndarray]  # (tokens, split points) -> last token's logits
TokenIds = Sequence[int] | np.ndarray  # a state's tokens: a list as tokenized, an array as the host cache keeps them


def kernel_class(size: int) -> int:
    """The way llama.cpp's CPU kernels compute the tokens of a ubatch of `size` tokens."""
    return SINGLE if size == 1 else TILED if size >= TILE else ROW


def common_prefix(held: TokenIds, new: TokenIds) -> int:
    """Length of the longest common token prefix."""
    length = min(len(held), len(new))
    differ = np.flatnonzero(np.asarray(held[:length], dtype=np.int64) != np.asarray(new[:length], dtype=np.int64))
    return int(differ[0]) if differ.size else length


@dataclass(frozen=True)
class ReuseRule:
    """Partial reuse of an earlier state on one context: `enabled` only where the start-up probe said it is exact."""

    ubatch: int
    enabled: bool

    def _ubatch_size(self, count: int, index: int) -> int:
        return min(self.ubatch, count - index * self.ubatch)

    def _opening_safe(self, held: int, total: int, keep: int) -> bool:
        """Every kept ubatch was computed as the uncached grid computes it: the same size, or tiled both times."""
        for index in range(-(-keep // self.ubatch)):
            then, now = self._ubatch_size(held, index), self._ubatch_size(total, index)
            if then != now and not kernel_class(then) == kernel_class(now) == TILED:
                return False
        return True

    def _rest_safe(self, total: int, keep: int) -> bool:
        """The rest's first ubatch is the grid's own, or shortened but tiled like the grid's."""
        if keep == total or keep % self.ubatch == 0:
            return True
        index = keep // self.ubatch
        end = min((index + 1) * self.ubatch, total)
        return kernel_class(end - keep) == kernel_class(end - index * self.ubatch) == TILED

    def keep(self, held: int, shared: int, total: int) -> int:
        """Tokens of a `held`-token state to keep for a `total`-token state that shares its first `shared`."""
        if not self.enabled or shared <= 0:
            return 0
        shared = min(shared, held, total)
        index = shared // self.ubatch
        end = min((index + 1) * self.ubatch, total)
        for keep in sorted({shared, end - TILE, index * self.ubatch}, reverse=True):
            if 0 < keep <= shared and self._opening_safe(held, total, keep) and self._rest_safe(total, keep):
                return keep
        return 0

    def keep_of(self, held: TokenIds, new: TokenIds) -> int:
        """Tokens of the `held` state's tokens to keep for the `new` state's (their shared opening, where safe)."""
        return self.keep(len(held), common_prefix(held, new), len(new))

    def cuts(self, keep: int, total: int) -> tuple[int, ...]:
        """Where the rest's decode calls start: at `keep`, then at the next grid point (if one lies before the end)."""
        grid = -(-keep // self.ubatch) * self.ubatch
        return (keep, grid) if keep < grid < total else (keep,)


def probe_splits(ubatch: int) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """(prompt length, split points) that the whole decode computes in one tiled ubatch and the split in two tiled
    parts: 131 at 67 (an odd offset) for ubatches of 131 tokens or more, one ubatch at its middle below that."""
    length = min(PROBE_LENGTH, ubatch)
    return ((length, (length - TILE,)),) if length >= 2 * TILE else ()


def verify_on(decode: Decode, tokens: Sequence[int], ubatch: int) -> list[str]:
    """Split decodes that do not reproduce the whole decode's logits bit for bit (empty: the premise holds)."""
    splits_to_check = probe_splits(ubatch)
    if not splits_to_check:
        return [f"a ubatch of {ubatch} tokens holds no two tiled parts ({TILE} tokens each)"]
    problems = []
    for length, splits in splits_to_check:
        probe = list(tokens[:length])
        if len(probe) < length:
            return [f"{len(tokens)} probe tokens, {length} needed"]
        whole, split = decode(probe, ()), decode(probe, splits)
        if not np.array_equal(whole, split):
            problems.append(f"{length} tokens split at {list(splits)}: max |logit difference| "
                            f"{float(np.abs(whole - split).max()):.3g}")
    return problems
