"""The calibration fit on scores with a known answer (fast: no model)."""

from __future__ import annotations

import json
import math
import random

import pytest

from scripts.evaluate.calibration_fit import (
    HOLDOUT_PERCENT,
    FitError,
    Fitted,
    apply,
    calibration_document,
    check_split,
    fit,
    held_out,
)
from semif_adapter.core.calibration import parse_calibration
from tools.evaluate.arithmetic import softmax


def sampled_cases(temperature: float, slot_bias: list[float], count: int, seed: int = 7
                  ) -> tuple[list[list[float]], list[int]]:
    """Raw scores, and gold options drawn from exactly the model the adapter applies (so the fit can recover it)."""
    rng = random.Random(seed)
    logits, gold = [], []
    for _ in range(count):
        options = rng.randint(2, len(slot_bias))
        scores = [30 + rng.gauss(0, 2.5) for _ in range(options)]
        truth = softmax([(s - slot_bias[i]) / temperature for i, s in enumerate(scores)])
        logits.append(scores)
        gold.append(rng.choices(range(options), weights=truth)[0])
    return logits, gold


def mean_log_loss(fitted: Fitted, logits: list[list[float]], gold: list[int]) -> float:
    return -sum(math.log(apply(fitted, row)[g]) for row, g in zip(logits, gold, strict=True)) / len(logits)


def test_recovers_a_known_temperature_and_slot_bias() -> None:
    logits, gold = sampled_cases(2.0, [0.0, 1.0, -0.5], 2000)
    fitted = fit(logits, gold, slot_bias=True)
    assert fitted.temperature == pytest.approx(2.0, rel=0.12)
    assert fitted.slot_bias is not None and fitted.slot_bias[0] == 0.0
    assert fitted.slot_bias[1:] == pytest.approx([1.0, -0.5], abs=0.25)
    assert not fitted.at_bound


def test_the_fit_is_a_minimum_of_the_log_loss() -> None:
    logits, gold = sampled_cases(1.5, [0.0, 0.4, 0.2, -0.3], 300, seed=11)
    fitted = fit(logits, gold, slot_bias=True)
    best = mean_log_loss(fitted, logits, gold)
    assert fitted.slot_bias is not None
    for nudged in (Fitted(fitted.temperature * 1.05, fitted.slot_bias), Fitted(fitted.temperature / 1.05,
                                                                             fitted.slot_bias),
                   Fitted(fitted.temperature, (0.0, fitted.slot_bias[1] + 0.1, *fitted.slot_bias[2:]))):
        assert mean_log_loss(nudged, logits, gold) > best
    assert best < mean_log_loss(Fitted(1.0, None), logits, gold)  # better than the raw scores


def test_temperature_only_for_methods_without_slots() -> None:
    logits, gold = sampled_cases(3.0, [0.0, 0.0, 0.0], 600)
    fitted = fit(logits, gold, slot_bias=False)
    assert fitted.slot_bias is None and fitted.temperature == pytest.approx(3.0, rel=0.2)


def test_scores_without_signal_hold_the_temperature_at_its_bound() -> None:
    rng = random.Random(3)
    logits = [[rng.gauss(0, 1) for _ in range(3)] for _ in range(200)]
    inverted = [row.index(min(row)) for row in logits]  # the gold is always the LEAST scored option
    fitted = fit(logits, inverted, slot_bias=False)
    assert fitted.at_bound and fitted.temperature == 1000.0


def test_apply_matches_the_adapters_formula() -> None:
    fitted = Fitted(2.0, (0.0, 1.0))
    scores = [3.0, 2.0, 1.0]  # the third slot has no bias: 0
    expected = softmax([(3.0 - 0.0) / 2.0 / 0.5, (2.0 - 1.0) / 2.0 / 0.5, 1.0 / 2.0 / 0.5])
    assert apply(fitted, scores, request_temperature=0.5) == pytest.approx(expected, rel=1e-12)


def test_the_split_depends_on_the_id_alone() -> None:
    ids = [f"case-{i}" for i in range(2000)]
    share = sum(map(held_out, ids)) / len(ids)
    assert share == pytest.approx(HOLDOUT_PERCENT / 100, abs=0.03)
    assert [held_out(i) for i in reversed(ids)] == [held_out(i) for i in ids][::-1]
    with pytest.raises(FitError, match="0 held out"):
        check_split([i for i in ids if not held_out(i)][:5])


def test_the_document_is_what_the_adapter_reads() -> None:
    fits = {"letters": Fitted(2.5, (0.0, 0.75, -0.25)), "pmi": Fitted(1.25, None)}
    document, calibration = calibration_document(fits, {"cases": "x.jsonl", "created": "now"})
    assert parse_calibration(json.dumps(document)).sha256 == calibration.sha256
    assert calibration.methods["letters"].slot_bias == (0.0, 0.75, -0.25)
    other, again = calibration_document(fits, {"cases": "y.jsonl"})  # provenance does not change the hash
    assert again.sha256 == calibration.sha256 and other["fitted"] == {"cases": "y.jsonl"}
