"""Identical requests answered from memory: the raw scores of recent decisions, keyed by what determines them.

A question's raw scores depend only on the model (fixed per process), the method, `debias` and the question's
text (state, criterion, answers in order); the cache partition (`prompt_cache_key`) is part of the key, so an
answer computed under one key is never served to another; temperature and calibration are applied afterwards, so
they are not part of the key. Keeping the raw scores, not the rendered answer, makes a repeat bit-identical by
construction.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict

from .methods import MethodScores
from .question import Question, canonical_state


def result_key(question: Question) -> bytes:
    """A digest of every text that determines the scores, each JSON-quoted so no two questions share one."""
    hasher = hashlib.sha256(json.dumps([question.method.value, question.debias.value, question.partition]).encode())
    hasher.update(canonical_state(question.state).encode())  # JSON already: the one copy of a large state
    for text in (canonical_state(question.criterion), *(part for a in question.answers for part in (a.id, a.text))):
        hasher.update(b"\x00" + json.dumps(text, ensure_ascii=False).encode())
    return hasher.digest()


class ResultCache:
    """LRU by count; entries are small (no texts: a digest key and a few numbers per option)."""

    def __init__(self, entries: int) -> None:
        self._entries: OrderedDict[bytes, MethodScores] = OrderedDict()
        self._limit = entries
        self._lock = threading.Lock()  # shared by the decision workers
        self.hits = self.misses = 0

    def get(self, key: bytes) -> MethodScores | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return found

    def put(self, key: bytes, scores: MethodScores) -> None:
        if self._limit <= 0:
            return
        with self._lock:
            self._entries[key] = scores
            while len(self._entries) > self._limit:
                self._entries.popitem(last=False)
