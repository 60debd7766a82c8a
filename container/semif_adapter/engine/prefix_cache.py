"""Host-memory cache of evaluated prompt prefixes: the KV bytes of sequence 0, LRU, bounded in bytes.

Interleaved traffic (many tickets at once, several questions about each) evicts a single KV cache's prefix on
every request; keeping the KV state of many prefixes in host memory turns each re-visit of a state into a
restore of a few milliseconds instead of a re-evaluation of hundreds of tokens. A restored prefix holds the same
bytes the evaluation wrote, in the same cells, so the scores after a restore are bit-identical to the scores
after evaluating it. Heads (template + system text, one per scoring method) are pinned: never evicted.

A state never seen before often opens like one that was (`Ticket 10..`, `{"customer": "`). Each entry keeps its
state's tokens, and the entries of one head are kept sorted by them, so the entries sharing the longest token
opening with a new state are the neighbours of the new state's place in that order (found by bisection, as
llama-server's host cache finds its best match by a scan); `partial_reuse` says how much of it may be kept.
"""

from __future__ import annotations

import bisect
import ctypes
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MIN_RESERVE_BYTES = 512 * 1024 * 1024  # Python, the HTTP server, request bodies and their tokens
DEFAULT_SHARE = 0.5  # of what the model and the context leave of the memory limit
DEFAULT_MAX_BYTES = 16 * 1024 ** 3
KEY_OVERHEAD_BYTES = 256  # per entry, beyond its texts, state tokens and KV bytes
NEIGHBOURS = 4  # entries looked at on each side of a new state's place in the sorted order
TOKEN_ORDER = np.dtype(">u4")  # big-endian: the bytes of two token sequences sort as the sequences do


def token_bytes(tokens: Sequence[int]) -> bytes:
    """Tokens as bytes that compare (and share openings) exactly as the token sequences do."""
    return np.asarray(tokens, dtype=TOKEN_ORDER).tobytes()


def bytes_tokens(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=TOKEN_ORDER)


@dataclass(frozen=True)
class SavedPrefix:
    data: ctypes.Array[ctypes.c_uint8]  # llama_state_seq_get_data of sequence 0
    tokens: int
    state: bytes = b""  # the state chunk's tokens (`token_bytes`); empty for a head

    @property
    def size(self) -> int:
        return len(self.data)


def _charge(key: tuple[str, ...], saved: SavedPrefix) -> int:
    return saved.size + len(saved.state) + sum(len(text) for text in key) + KEY_OVERHEAD_BYTES


class PrefixCache:
    """LRU by bytes; `put` of an entry larger than the whole budget is refused (it would evict everything).

    Shared by the decision workers, so every method holds the lock; `evaluating` lets one worker at a time
    evaluate a given prefix while the others wait to restore it (two clients of one new state, at once)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget = budget_bytes
        self._lock = threading.Condition()
        self._in_flight: set[tuple[str, ...]] = set()
        self._entries: OrderedDict[tuple[str, ...], SavedPrefix] = OrderedDict()
        self._pinned: dict[tuple[str, ...], SavedPrefix] = {}
        self._order: list[tuple[str, bytes, tuple[str, ...]]] = []  # (head text, state tokens, key), sorted
        self.bytes = 0
        self.hits = self.misses = self.evictions = self.openings = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries) + len(self._pinned)

    def holds(self, key: tuple[str, ...]) -> bool:
        """Whether `key` is saved (a look that is not a use: no hit, no LRU move)."""
        with self._lock:
            return key in self._pinned or key in self._entries

    def get(self, key: tuple[str, ...]) -> SavedPrefix | None:
        with self._lock:
            saved = self._pinned.get(key) or self._entries.get(key)
            if saved is None:
                self.misses += 1
                return None
            if key in self._entries:
                self._entries.move_to_end(key)
            self.hits += 1
            return saved

    @contextmanager
    def evaluating(self, key: tuple[str, ...]) -> Iterator[None]:
        """While this worker evaluates the prefix `key`: another worker entering for the same key waits until this
        one leaves (by then it is saved, if it fits), instead of evaluating it a second time alongside."""
        with self._lock:
            while key in self._in_flight:
                self._lock.wait()
            self._in_flight.add(key)
        try:
            yield
        finally:
            with self._lock:
                self._in_flight.discard(key)
                self._lock.notify_all()

    def put(self, key: tuple[str, ...], saved: SavedPrefix, *, pinned: bool = False) -> bool:
        """Keep `saved` under `key`; False when it does not fit the budget (pinned entries always fit)."""
        with self._lock:
            return self._put(key, saved, pinned)

    def _put(self, key: tuple[str, ...], saved: SavedPrefix, pinned: bool) -> bool:
        if key in self._entries or key in self._pinned:
            return True
        charge = _charge(key, saved)
        if pinned:
            self._pinned[key] = saved
            self.bytes += charge
            return True
        if charge > self.budget:
            return False
        self._entries[key] = saved
        self.bytes += charge
        if saved.state:
            bisect.insort(self._order, (key[0], saved.state, key))
        while self.bytes > self.budget and self._entries:
            old_key, old = self._entries.popitem(last=False)
            self.bytes -= _charge(old_key, old)
            self.evictions += 1
            if old.state:
                del self._order[bisect.bisect_left(self._order, (old_key[0], old.state, old_key))]
        return key in self._entries

    def neighbours(self, head: str, state: Sequence[int]) -> list[tuple[tuple[str, ...], np.ndarray]]:
        """(key, state tokens) of the entries under `head` nearest to a new `state` in token order: among them
        are the ones sharing the longest opening with it."""
        probe = (head, token_bytes(state))
        with self._lock:
            place = bisect.bisect_left(self._order, probe)
            nearby = self._order[max(0, place - NEIGHBOURS):place + NEIGHBOURS]
        return [(key, bytes_tokens(tokens)) for entry_head, tokens, key in nearby if entry_head == head]

    def opening(self, key: tuple[str, ...]) -> SavedPrefix | None:
        """The entry whose opening a new state keeps: used (LRU), counted as an opening hit, not a hit; None when
        another worker's `put` evicted it since `neighbours` named it."""
        with self._lock:
            saved = self._entries.get(key)
            if saved is not None:
                self._entries.move_to_end(key)
                self.openings += 1
            return saved

    def wants(self, key: tuple[str, ...], size: int) -> bool:
        """Whether an entry of about `size` bytes would be kept: skip copying one that would not."""
        with self._lock:
            return key not in self._entries and size + KEY_OVERHEAD_BYTES <= self.budget

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries) + len(self._pinned), "bytes": self.bytes, "budget": self.budget,
                    "hits": self.hits, "misses": self.misses, "evictions": self.evictions,
                    "openings": self.openings}


def memory_limit() -> int | None:
    """The container's memory limit (cgroup v2, then v1), else the machine's memory; None when unknown."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(path).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < 1 << 60:  # v1 reports an absurd number when unlimited
            return int(raw)
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def default_budget(model_bytes: int, context_bytes: int, limit: int | None = None) -> int:
    """Half of what the memory limit leaves after the model, the context's KV cache and a reserve; at most 16 GiB."""
    limit = memory_limit() if limit is None else limit
    if limit is None:
        return 0
    spare = limit - model_bytes - context_bytes - MIN_RESERVE_BYTES
    return int(max(0, min(DEFAULT_MAX_BYTES, spare * DEFAULT_SHARE)))
