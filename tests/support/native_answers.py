"""How a door's answer on the native path is held against llama-server's own for the same request."""

from __future__ import annotations

import math
from typing import Any

TOLERANCE = 1e-12  # what a door derives (confidence, a score's expectation) in another order of sums


def same_answer(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """Ours carries every field llama-server gives, with the same values (and x_ fields of its own): the
    probabilities to the bit (relayed, never recomputed), what is derived from them within TOLERANCE."""
    assert ours["type"] == theirs["type"]
    for key, value in theirs.items():
        if key == "probabilities":
            assert ours[key] == value
        elif isinstance(value, float):
            assert math.isclose(ours[key], value, rel_tol=TOLERANCE, abs_tol=TOLERANCE), (key, ours[key], value)
        else:
            assert ours[key] == value, key
