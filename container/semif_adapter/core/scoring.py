"""Raw option scores -> probabilities (calibration and temperature applied) and the warnings a caller acts on.

Probabilities are softmax(calibrated / T): with no calibration for the method, calibrated = option_logits, so
the two arrays in a response never disagree; with one, calibrated = (option_logits - mean slot bias) / T_cal,
or for a System One noul or score option_logits / T_cal + its bias term (see calibration.py). Arithmetic is
float64 throughout, and every sum runs in a fixed order, so the same scores always give the same bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .calibration import Calibration, MethodCalibration
from .methods import MethodScores
from .question import Kind, Question

# Warning codes and their thresholds (README, "Decision quality"): stable names a caller may branch on.
LOW_OPTION_MASS = "low_option_mass"  # letters: the model's next token was mostly not an option letter
LOW_OPTION_MASS_BELOW = 0.5
NEAR_TIE = "near_tie"  # the two most probable options are within this many probability points
NEAR_TIE_MARGIN = 0.1
INPUT_TRUNCATED = "input_truncated"  # a decision model's head read the question or options cut to its length (laya)


@dataclass(frozen=True)
class Scores:
    option_logits: list[float]  # request order: the method's raw scores
    probabilities: list[float]  # request order, sums to 1
    warnings: list[str]
    calibration: dict[str, object] | None  # what was applied, for the response


def softmax(values: np.ndarray) -> np.ndarray:
    """Exactly rounded normaliser (fsum): the same options in another order give the same bits."""
    shifted = np.exp(values - values.max())
    normalised: np.ndarray = shifted / math.fsum(shifted.tolist())
    return normalised


def answer_bias(question: Question, bias: float) -> np.ndarray:
    """A System One type's bias term per answer: on noul's "true" (Platt's intercept), a tilt over score's levels."""
    ids = [answer.id for answer in question.answers]
    if question.kind is Kind.NOUL:
        return np.array([bias if answer_id == "true" else 0.0 for answer_id in ids], dtype=np.float64)
    if question.kind is Kind.SCORE and len(ids) > 1:
        return np.array([bias * (int(answer_id) / (len(ids) - 1) - 0.5) for answer_id in ids], dtype=np.float64)
    return np.zeros(len(ids), dtype=np.float64)


def calibrated_logits(raw: MethodScores, calibration: MethodCalibration | None,
                      question: Question | None = None) -> np.ndarray:
    if calibration is None:
        return raw.option_logits
    if calibration.answer_bias is not None and question is not None:
        tilt = answer_bias(question, calibration.answer_bias)
        tilted: np.ndarray = raw.option_logits / calibration.temperature + tilt
        return tilted
    bias = np.zeros_like(raw.option_logits)
    for order in raw.orders:
        for slot, index in enumerate(order):
            bias[index] += calibration.bias(slot)
    if raw.orders:
        bias /= len(raw.orders)
    calibrated: np.ndarray = (raw.option_logits - bias) / calibration.temperature
    return calibrated


def warnings_for(raw: MethodScores, probabilities: np.ndarray) -> list[str]:
    found = []
    if raw.allowed_token_mass is not None and raw.allowed_token_mass < LOW_OPTION_MASS_BELOW:
        found.append(LOW_OPTION_MASS)
    top_two = np.sort(probabilities)[-2:]
    if top_two[1] - top_two[0] < NEAR_TIE_MARGIN:
        found.append(NEAR_TIE)
    return found


def score(raw: MethodScores, question: Question, calibration: Calibration | None) -> Scores:
    method, kind = question.method.value, question.kind.value
    applied = calibration.lookup(kind, method) if calibration else None
    logits = calibrated_logits(raw, applied, question)
    # shift before dividing: logits / a tiny temperature overflow to inf (and inf - inf is NaN)
    probabilities = softmax((logits - logits.max()) / question.temperature)
    return Scores(option_logits=raw.option_logits.tolist(), probabilities=probabilities.tolist(),
                  warnings=warnings_for(raw, probabilities),
                  calibration=calibration.describe(method, kind) if applied and calibration else None)
