"""Slot logits -> per-option logits and probabilities, in request order.

Each branch scored the options in its own order; logits are mapped back to
the option they belong to and averaged over branches (one branch unless
`debias=permute`). Probabilities are always softmax(option_logits / T), so the
two arrays in a response never disagree. Arithmetic is float64 throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .kv_engine import BranchLogits
from .prompt import PromptPlan


@dataclass(frozen=True)
class Scores:
    option_logits: list[float]  # request order
    probabilities: list[float]  # request order, sums to 1
    allowed_token_mass: float  # share of next-token probability on the slot letters (mean over branches)


def softmax(values: np.ndarray) -> np.ndarray:
    """Exactly rounded normaliser (fsum): the same options in another order give the same bits."""
    shifted = np.exp(values - values.max())
    return shifted / math.fsum(shifted.tolist())


def score_options(plan: PromptPlan, branches: tuple[BranchLogits, ...], temperature: float) -> Scores:
    count = len(plan.branches[0].order)
    totals = np.zeros(count, dtype=np.float64)
    mass = 0.0
    for branch, logits in zip(plan.branches, branches, strict=True):
        values = logits.slot_logits.astype(np.float64)
        totals[list(branch.order)] += values
        mass += float(np.exp(np.logaddexp.reduce(values) - logits.log_normalizer))
    option_logits = totals / len(branches)
    return Scores(option_logits=option_logits.tolist(),
                  # shift before dividing: logits / a tiny temperature overflow to inf (and inf - inf is NaN)
                  probabilities=softmax((option_logits - option_logits.max()) / temperature).tolist(),
                  allowed_token_mass=min(1.0, mass / len(branches)))
