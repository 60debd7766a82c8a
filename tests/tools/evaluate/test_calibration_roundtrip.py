"""Calibration round trip: fit on the small file, deploy it via SEMIF_CALIBRATION, the answers show and apply it."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import httpx
import pytest

from bench.reliability.servers import start_decision
from semif_adapter.core.calibration import parse_calibration
from tools.evaluate.arithmetic import best_id, expected_calibration_error, softmax
from tools.evaluate.runs import ADAPTER_ENV, SMALL, EvaluatorRun, small_cases


def is_held_out(decision_id: str) -> bool:
    """The documented split rule (`--help`), restated: users rely on it to know which cases judged the fit."""
    return int(hashlib.sha256(decision_id.encode()).hexdigest()[:8], 16) % 100 < 30


def test_fitted_document_is_valid_and_says_where_it_came_from(small_run: EvaluatorRun) -> None:
    calibration = parse_calibration(small_run.calibration_text)  # what the adapter will read at start-up
    document = json.loads(small_run.calibration_text)
    assert set(calibration.methods) == {"letters"}
    letters = document["methods"]["letters"]
    fit_cases = [case for case in small_cases() if not is_held_out(case["decision"]["id"])]
    assert 0 < letters["temperature"] <= 1000
    assert len(letters["slot_bias"]) == max(len(case["decision"]["options"]) for case in fit_cases)
    assert letters["slot_bias"][0] == 0.0
    fitted = document["fitted"]
    assert fitted["cases_sha256"] == hashlib.sha256(SMALL.read_bytes()).hexdigest()
    assert (fitted["fit_cases"], fitted["heldout_cases"]) == (len(fit_cases), len(small_cases()) - len(fit_cases))
    assert fitted["model"]["sha256"] == small_run.responses[0]["response"]["model"]["sha256"]
    assert small_run.figures["calibration_fit"]["sha256"] == calibration.sha256


def test_calibrated_adapter_applies_the_fit_and_ece_is_not_worse(small_run: EvaluatorRun, tmp_path: Path) -> None:
    calibration = parse_calibration(small_run.calibration_text)
    letters = calibration.methods["letters"]
    held = [case for case in small_cases() if is_held_out(case["decision"]["id"])]
    uncalibrated = small_run.answers("given")
    server = start_decision(tmp_path, {**ADAPTER_ENV, "SEMIF_CALIBRATION": small_run.calibration_text})
    try:
        with httpx.Client(base_url=server.url, timeout=120) as client:
            answers = [client.post("/invocations", json={"decision": case["decision"], "scoring": "letters"}).json()
                       for case in held]
    finally:
        server.stop()
    before_conf, before_ok, after_conf, after_ok = [], [], [], []
    for case, answer in zip(held, answers, strict=True):
        raw = uncalibrated[case["decision"]["id"]]
        assert answer["calibration"] == {"method": "temperature+slot_bias", "parameters": letters.parameters,
                                         "sha256": calibration.sha256[:12]}
        assert answer["option_logits"] == raw["option_logits"]  # the raw scores are reported unchanged
        expected = softmax([(score - letters.bias(slot)) / letters.temperature
                            for slot, score in enumerate(raw["option_logits"])])
        assert answer["probabilities"] == pytest.approx(expected, rel=1e-9, abs=1e-12)
        before_conf.append(max(raw["probabilities"]))
        before_ok.append(best_id(raw) == case["gold"])
        after_conf.append(max(answer["probabilities"]))
        after_ok.append(best_id(answer) == case["gold"])
    before = expected_calibration_error(before_conf, before_ok)
    after = expected_calibration_error(after_conf, after_ok)
    assert after <= before
    printed = small_run.figures["calibration_fit"]["methods"]["letters"]
    assert (printed["heldout_before"]["ece"], printed["heldout_after"]["ece"]) == \
        (pytest.approx(before, abs=1e-9), pytest.approx(after, abs=1e-9))
