"""Fit the adapter's calibration (semif_adapter.core.calibration) on labelled answers, and check it on held-out cases.

The model the adapter applies to a SemIf decision: calibrated score of option i = (raw score_i - slot_bias[slot of
i]) / T, then probabilities = softmax(calibrated / request temperature). Written with a = 1/T and c = slot_bias/T,
the score is a*s_i - c_slot, linear in (a, c), so the negative log-likelihood of the gold options is convex
(multinomial logistic regression with per-option features) and Newton's method with a backtracking line search
finds its minimum in a few steps. c of slot A is fixed at 0 (only differences between slots change a softmax) and a
small ridge keeps the slots that few cases reach near 0.

A System One question gets its type's model, per scoring method: calibrated_i = s_i / T + b * d_i, with d the
bias direction of the type (`bias_direction`): choice none (a temperature alone), noul d = (1, 0) over (yes, no),
so p(yes) = sigmoid((s_true - s_false) / T + b) (Platt scaling), score a tilt d_i = i / (n - 1) - 0.5 towards the
higher (b > 0) or lower levels. Linear in (a = 1/T, b) again, so the same convex fit applies.

The held-out split depends on the decision id alone (`held_out`), so a case stays on its side whatever else
the file holds and whatever order it is in.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from semif_adapter.core.calibration import (
    BIASED_TYPES,
    CALIBRATION_FORMAT,
    MAX_TEMPERATURE,
    SCORING_METHODS,
    Calibration,
    MethodCalibration,
    parse_calibration,
)

from . import metrics
from .collect import Scored

HOLDOUT_PERCENT = 30
SPLIT_RULE = (f"held out when int(sha256(decision id)[:8], 16) % 100 < {HOLDOUT_PERCENT} "
              "(the first 8 hex digits of the id's UTF-8 sha256, as an integer)")
RIDGE = 1e-3  # on the slot biases (in units of a/T), per case
MAX_NEWTON_STEPS = 100
GRADIENT_TOLERANCE = 1e-9
MIN_INVERSE_TEMPERATURE = 1 / MAX_TEMPERATURE


def held_out(decision_id: str, percent: int = HOLDOUT_PERCENT) -> bool:
    digest = hashlib.sha256(decision_id.encode("utf-8")).hexdigest()
    return int(digest[:8], 16) % 100 < percent


@dataclass(frozen=True)
class Fitted(MethodCalibration):
    """A method's fitted calibration, in the adapter's own type (its `parameters` are the document's entry)."""

    at_bound: bool = False  # the scores carried no usable signal (fitted 1/T <= 0): T held at its maximum


def apply(fitted: MethodCalibration, logits: Sequence[float], request_temperature: float = 1.0) -> list[float]:
    """The probabilities the adapter gives with this calibration, for raw scores in request (slot) order."""
    scores = np.asarray(logits, dtype=np.float64) - [fitted.bias(slot) for slot in range(len(logits))]
    z = scores / fitted.temperature / request_temperature
    z = np.exp(z - z.max())
    return (z / z.sum()).tolist()


def bias_direction(question_type: str, answers: int) -> np.ndarray:
    """Per answer, how much of a System One type's bias it gets (semif_adapter.core.scoring.answer_bias, in the order
    noul (true, false) and score levels 0..n-1)."""
    if question_type == "noul":
        return np.array([1.0, 0.0])
    if question_type == "score" and answers > 1:
        return np.arange(answers, dtype=np.float64) / (answers - 1) - 0.5
    return np.zeros(answers)


def apply_question(fitted: MethodCalibration, question_type: str, logits: Sequence[float],
                   request_temperature: float = 1.0) -> list[float]:
    """The probabilities the adapter gives a System One question with this calibration, from its raw scores."""
    scores = np.asarray(logits, dtype=np.float64)
    z = scores / fitted.temperature + (fitted.answer_bias or 0.0) * bias_direction(question_type, len(scores))
    z = (z - z.max()) / request_temperature
    z = np.exp(z)
    return (z / z.sum()).tolist()


def _question_features(question_type: str, logits: Sequence[float]) -> np.ndarray:
    """Per answer: (its score, its bias direction); z = features @ (a, b). Choice: the score alone."""
    scores = np.asarray(logits, dtype=np.float64)
    columns = [scores - scores.max()]
    if question_type in BIASED_TYPES:
        columns.append(bias_direction(question_type, len(scores)))
    return np.stack(columns, axis=1)


def _features(logits: Sequence[float], slots: int) -> np.ndarray:
    """Per option: (its score, minus a one-hot of its slot without slot A); z = features @ (a, c_B, c_C, ...)."""
    scores = np.asarray(logits, dtype=np.float64)
    features = np.zeros((len(scores), 1 + max(slots - 1, 0)))
    features[:, 0] = scores - scores.max()  # a softmax ignores a shift; this keeps exp() in range
    for slot in range(1, min(len(scores), slots)):
        features[slot, slot] = -1.0
    return features


Groups = list[tuple[np.ndarray, np.ndarray]]  # per option count: features (cases, options, d), gold (cases,)


def _objective(theta: np.ndarray, groups: Groups, count: int, ridge: np.ndarray
               ) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean NLL of the gold options (+ ridge), its gradient and Hessian."""
    value, gradient, hessian = 0.0, np.zeros_like(theta), np.zeros((len(theta), len(theta)))
    for features, gold in groups:
        z = features @ theta
        shift = z.max(axis=1, keepdims=True)
        p = np.exp(z - shift)
        total = p.sum(axis=1, keepdims=True)
        p /= total
        rows = np.arange(len(gold))
        value += float((shift[:, 0] + np.log(total[:, 0]) - z[rows, gold]).sum())
        mean = np.einsum("mn,mnd->md", p, features)
        gradient += (mean - features[rows, gold]).sum(axis=0)
        hessian += np.einsum("mn,mnd,mne->de", p, features, features) - mean.T @ mean
    value = value / count + 0.5 * float(ridge @ theta**2)
    return value, gradient / count + ridge * theta, hessian / count + np.diag(ridge)


def _newton(groups: Groups, count: int, dimensions: int, fixed_a: float | None = None) -> np.ndarray:
    ridge = np.full(dimensions, RIDGE)
    ridge[0] = 0.0
    theta = np.zeros(dimensions)
    theta[0] = fixed_a if fixed_a is not None else 1.0
    free = np.arange(1 if fixed_a is not None else 0, dimensions)
    if free.size == 0:
        return theta
    value, gradient, hessian = _objective(theta, groups, count, ridge)
    for _ in range(MAX_NEWTON_STEPS):
        g, h = gradient[free], hessian[np.ix_(free, free)]
        if np.abs(g).max() < GRADIENT_TOLERANCE:
            break
        step = np.linalg.lstsq(h + 1e-12 * np.eye(len(free)), -g, rcond=None)[0]
        size = 1.0
        while size > 1e-10:
            candidate = theta.copy()
            candidate[free] += size * step
            new = _objective(candidate, groups, count, ridge)
            if new[0] <= value + 1e-4 * size * float(g @ step):
                theta, (value, gradient, hessian) = candidate, new
                break
            size /= 2
        else:
            break  # no decrease along the Newton direction: at the minimum to machine precision
    return theta


def _fit(features: Sequence[np.ndarray], gold: Sequence[int]) -> tuple[np.ndarray, bool]:
    """theta minimising the mean log-loss of the gold answers (theta[0] = 1/T), and whether 1/T hit its bound."""
    by_count: dict[int, tuple[list[np.ndarray], list[int]]] = {}
    for row, g in zip(features, gold, strict=True):
        rows, golds = by_count.setdefault(len(row), ([], []))
        rows.append(row)
        golds.append(g)
    groups = [(np.stack(rows), np.asarray(golds)) for rows, golds in by_count.values()]
    dimensions = features[0].shape[1]
    theta = _newton(groups, len(features), dimensions)
    at_bound = bool(theta[0] < MIN_INVERSE_TEMPERATURE)
    if at_bound:  # the scores carry no (or an inverted) signal: as flat as the format allows
        theta = _newton(groups, len(features), dimensions, fixed_a=MIN_INVERSE_TEMPERATURE)
    return theta, at_bound


def fit(logits: Sequence[Sequence[float]], gold: Sequence[int], *, slot_bias: bool) -> Fitted:
    """The temperature (and, if asked, per-slot biases) that minimise the gold options' log-loss."""
    slots = max(len(row) for row in logits) if slot_bias else 1
    theta, at_bound = _fit([_features(row, slots) for row in logits], gold)
    a = float(theta[0])
    bias = (0.0, *(float(c) / a for c in theta[1:])) if slot_bias else None
    return Fitted(min(1 / a, MAX_TEMPERATURE), bias, at_bound=at_bound)


def fit_question(question_type: str, logits: Sequence[Sequence[float]], gold: Sequence[int]) -> Fitted:
    """A System One type's temperature (and bias, for noul and score) minimising the gold answers' log-loss."""
    theta, at_bound = _fit([_question_features(question_type, row) for row in logits], gold)
    bias = float(theta[1]) if question_type in BIASED_TYPES else None
    return Fitted(min(1 / float(theta[0]), MAX_TEMPERATURE), answer_bias=bias, at_bound=at_bound)


def calibration_document(fits: dict[str, Fitted], fitted: dict[str, Any],
                         questions: dict[str, dict[str, Fitted]] | None = None) -> tuple[dict[str, Any], Calibration]:
    """The SEMIF_CALIBRATION document (SemIf `methods`, System One `questions` per type and method), and the
    adapter's own reading of it (which refuses what it cannot use)."""
    document: dict[str, Any] = {"format": CALIBRATION_FORMAT,
                                "methods": {method: fits[method].parameters for method in sorted(fits)}}
    if questions:
        document["questions"] = {kind: {method: table[method].parameters for method in sorted(table)}
                                 for kind, table in sorted(questions.items())}
    document["fitted"] = fitted
    return document, parse_calibration(json.dumps(document))


class FitError(ValueError):
    """The answers cannot give a calibration (an empty split, scores that are not numbers)."""


def check_split(decision_ids: Sequence[str]) -> None:
    """FitError unless both sides of the split get a case (checked before any decision is sent)."""
    heldout = sum(held_out(i) for i in decision_ids)
    if not heldout or heldout == len(decision_ids):
        raise FitError(f"cannot fit a calibration: the split leaves {len(decision_ids) - heldout} case(s) to fit "
                       f"and {heldout} held out; both need at least one ({SPLIT_RULE})")


def split_figures(rows: list[list[float]], gold: list[int]) -> dict[str, float]:
    return {"n": len(rows), "accuracy": metrics.accuracy(rows, gold), "ece": metrics.ece(rows, gold),
            "brier": metrics.brier(rows, gold), "log_loss": metrics.log_loss(rows, gold)}


def fit_results(results: dict[str, list[Scored]], *, debias: str | None,
                request_temperature: float | None) -> tuple[dict[str, Fitted], dict[str, Any]]:
    """Per method: the fit on the fit split, and held-out figures before (as served) and after (as refitted).

    Letters answered without `debias: permute` get per-slot biases; with permute each option sat under every
    letter once, the adapter subtracts the mean bias from every option alike, so only the temperature is fitted.
    """
    fits: dict[str, Fitted] = {}
    summary: dict[str, Any] = {}
    for method, scored in results.items():
        if method not in SCORING_METHODS:
            raise FitError(f"cannot fit a calibration for {method!r}: the endpoint does not say which scoring "
                           "method it used; name it with --scoring")
        check_split([s.case.id for s in scored])
        fit_part = [s for s in scored if not held_out(s.case.id)]
        test_part = [s for s in scored if held_out(s.case.id)]
        if not all(np.isfinite(s.logits).all() for s in scored):
            raise FitError(f"{method}: some answers carry no numeric option_logits to fit on")
        slots = method == "letters" and debias != "permute"
        fitted = fit([s.logits for s in fit_part], [s.case.gold_index for s in fit_part], slot_bias=slots)
        fits[method] = fitted
        gold = [s.case.gold_index for s in test_part]
        after = [apply(fitted, s.logits, request_temperature or 1.0) for s in test_part]
        summary[method] = {"parameters": fitted.parameters, "temperature_at_bound": fitted.at_bound,
                           "fit_cases": len(fit_part),
                           "heldout_before": split_figures([s.probabilities for s in test_part], gold),
                           "heldout_after": split_figures(after, gold)}
    return fits, summary
