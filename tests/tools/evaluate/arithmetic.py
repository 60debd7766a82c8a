"""The figures recomputed by hand from raw answers, for the tests: deliberately not the evaluator's code.

Plain loops over the JSON the adapter returned, following the definitions in `semif evaluate --help`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def best_id(answer: dict) -> str:
    """The most probable option id; `list.index` finds the first of equal maxima, i.e. the one listed first."""
    probabilities = answer["probabilities"]
    return answer["option_ids"][probabilities.index(max(probabilities))]


def expected_calibration_error(confidences: Sequence[float], correct: Sequence[bool]) -> float:
    bins: dict[int, list[tuple[float, bool]]] = {}
    for confidence, ok in zip(confidences, correct, strict=True):
        bins.setdefault(min(math.floor(confidence * 10), 9), []).append((confidence, ok))
    total = 0.0
    for members in bins.values():
        accuracy = sum(1 for _, ok in members if ok) / len(members)
        confidence = sum(c for c, _ in members) / len(members)
        total += len(members) / len(confidences) * abs(accuracy - confidence)
    return total


def brier_term(answer: dict, gold: str) -> float:
    return sum((p - (1.0 if i == gold else 0.0)) ** 2
               for i, p in zip(answer["option_ids"], answer["probabilities"], strict=True))


def macro_f1(predicted: Sequence[str], gold: Sequence[str]) -> float:
    scores = []
    for label in set(predicted) | set(gold):
        tp = sum(1 for p, g in zip(predicted, gold, strict=True) if p == g == label)
        fp = sum(1 for p, g in zip(predicted, gold, strict=True) if p == label != g)
        fn = sum(1 for p, g in zip(predicted, gold, strict=True) if g == label != p)
        scores.append(2 * tp / (2 * tp + fp + fn))
    return sum(scores) / len(scores)


def softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    exps = [math.exp(v - top) for v in values]
    return [e / sum(exps) for e in exps]


def systemone_rows(question: dict, answer: dict) -> tuple[list[float], list[str]]:
    """A System One answer as (probabilities, answer keys): noul (p, 1 - p) over ("true", "false"); choice over the
    question's option names as listed; score over "0".."n-1"."""
    if question["type"] == "noul":
        return [answer["noul"], 1 - answer["noul"]], ["true", "false"]
    keys = list(question["criteria"]) if question["type"] == "choice" else \
        [str(i) for i in range(len(question["criteria"]))]
    return [answer["probabilities"][key] for key in keys], keys


def gold_key(question: dict, gold: object) -> str:
    if question["type"] == "noul":
        return "true" if gold else "false"
    return str(gold)
