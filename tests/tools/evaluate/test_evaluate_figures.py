"""The evaluator's figures on the small fixed file equal the arithmetic a test does on the raw answers."""

from __future__ import annotations

import statistics
from collections import defaultdict

import httpx
import pytest

from tools.evaluate.arithmetic import best_id, brier_term, expected_calibration_error, macro_f1
from tools.evaluate.runs import SMALL, EvaluatorRun, small_cases

EXACT = {"rel": 1e-12, "abs": 1e-12}


def test_raw_answers_are_the_adapters_own(small_run: EvaluatorRun, http: httpx.Client) -> None:
    """The --responses file holds what the endpoint says: asked again, it answers bit for bit the same."""
    given = small_run.answers("given")
    for case in small_cases()[:3]:
        again = http.post("/invocations", json={"decision": case["decision"], "scoring": "letters"}).json()
        recorded = given[case["decision"]["id"]]
        assert (again["option_logits"], again["probabilities"]) == \
            (recorded["option_logits"], recorded["probabilities"])
        assert recorded["scoring"] == "letters"


def test_figures_equal_the_arithmetic_on_the_raw_answers(small_run: EvaluatorRun) -> None:
    cases = small_cases()
    given, reversed_ = small_run.answers("given"), small_run.answers("reversed")
    assert set(given) == set(reversed_) == {case["decision"]["id"] for case in cases}
    predicted, golds, confidences, correct, brier_terms, flips = [], [], [], [], [], 0
    per_kind: defaultdict[str, list[bool]] = defaultdict(list)
    for case in cases:
        decision_id, gold = case["decision"]["id"], case["gold"]
        answer, flipped = given[decision_id], reversed_[decision_id]
        assert answer["option_ids"] == [option["id"] for option in case["decision"]["options"]]
        assert flipped["option_ids"] == answer["option_ids"][::-1]
        best = best_id(answer)
        predicted.append(best)
        golds.append(gold)
        confidences.append(max(answer["probabilities"]))
        correct.append(best == gold)
        per_kind[case["kind"]].append(best == gold)
        brier_terms.append(brier_term(answer, gold))
        flips += best != best_id(flipped)
    n = len(cases)
    figures = small_run.figures["methods"]["letters"]
    assert figures["n"] == n == small_run.figures["cases"]["n"]
    assert figures["accuracy"] == pytest.approx(sum(correct) / n, **EXACT)
    assert figures["macro_f1"] == pytest.approx(macro_f1(predicted, golds), **EXACT)
    assert figures["order_flip_rate"] == pytest.approx(flips / n, **EXACT)
    assert figures["ece"] == pytest.approx(expected_calibration_error(confidences, correct), **EXACT)
    assert figures["brier"] == pytest.approx(sum(brier_terms) / n, **EXACT)
    assert figures["mean_confidence"] == pytest.approx(sum(confidences) / n, **EXACT)
    assert figures["chance_accuracy"] == pytest.approx(
        sum(1 / len(case["decision"]["options"]) for case in cases) / n, **EXACT)
    assert figures["per_kind"] == {kind: {"n": len(hits), "accuracy": pytest.approx(sum(hits) / len(hits), **EXACT)}
                                   for kind, hits in per_kind.items()}
    latencies = [r["latency_ms"] for r in small_run.responses]
    assert len(latencies) == 2 * n
    assert figures["p50_latency_ms"] == pytest.approx(statistics.median(latencies), abs=0.01)
    assert figures["p50_server_ms"] == pytest.approx(
        statistics.median(r["response"]["timing"]["total_ms"] for r in small_run.responses), abs=0.01)


def test_printed_report_and_plot(small_run: EvaluatorRun) -> None:
    out = small_run.process.stdout
    figures = small_run.figures["methods"]["letters"]
    assert f"24 cases from {SMALL} (8 kinds)" in out
    row = next(line for line in out.splitlines() if line.startswith("letters "))
    assert f"{figures['accuracy']:.3f}" in row and f"{figures['ece']:.3f}" in row
    assert "accuracy per kind:" in out
    assert small_run.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
