"""The System One calibration fit on scores with a known answer, and what the adapter makes of its document (fast).

Synthetic raw scores, with gold answers drawn from exactly the model the adapter applies, must give back the
temperature and bias they were drawn with; the probabilities the evaluator predicts for a fit must be the ones the
adapter's own scoring computes from the written document.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

from scripts.evaluate.calibration_fit import FitError, Fitted, apply_question, calibration_document, fit_question
from scripts.evaluate.report import systemone_text_report
from scripts.evaluate.runner import write_systemone_calibration
from scripts.evaluate.systemone_cases import LabelledQuestion, SystemOneCase
from scripts.evaluate.systemone_collect import Answered, QuestionAnswer
from scripts.evaluate.systemone_fit import fit_question_results
from scripts.evaluate.systemone_metrics import systemone_method_figures
from scripts.evaluate.targets import Reply
from semif_adapter.core.calibration import parse_calibration
from semif_adapter.core.methods import MethodScores
from semif_adapter.core.question import Answer, Kind, Question, Scoring
from semif_adapter.core.scoring import score
from tools.evaluate.arithmetic import softmax


def direction(kind: str, n: int) -> list[float]:
    """The bias direction, restated from the design: noul's on "true"; score's tilt i / (n - 1) - 0.5."""
    if kind == "noul":
        return [1.0, 0.0]
    if kind == "score":
        return [i / (n - 1) - 0.5 for i in range(n)]
    return [0.0] * n


def drawn(kind: str, temperature: float, bias: float, count: int, seed: int = 5
          ) -> tuple[list[list[float]], list[int]]:
    rng = random.Random(seed)
    logits, gold = [], []
    for _ in range(count):
        n = 2 if kind == "noul" else rng.randint(2, 10)
        scores = [-20 + rng.gauss(0, 3) for _ in range(n)]  # raw log-likelihoods: large, negative
        truth = softmax([s / temperature + bias * d for s, d in zip(scores, direction(kind, n), strict=True)])
        logits.append(scores)
        gold.append(rng.choices(range(n), weights=truth)[0])
    return logits, gold


@pytest.mark.parametrize(("kind", "temperature", "bias"), [("noul", 2.0, -1.2), ("noul", 0.7, 0.8),
                                                           ("score", 1.5, 2.0), ("score", 3.0, -1.5)])
def test_recovers_a_known_temperature_and_bias(kind: str, temperature: float, bias: float) -> None:
    logits, gold = drawn(kind, temperature, bias, 4000)
    fitted = fit_question(kind, logits, gold)
    assert fitted.temperature == pytest.approx(temperature, rel=0.15)
    assert fitted.answer_bias == pytest.approx(bias, abs=0.25)
    assert not fitted.at_bound and fitted.slot_bias is None
    assert set(fitted.parameters) == {"temperature", "bias"}


def test_choice_gets_a_temperature_alone() -> None:
    logits, gold = drawn("choice", 2.5, 0.0, 3000)
    fitted = fit_question("choice", logits, gold)
    assert fitted.temperature == pytest.approx(2.5, rel=0.15)
    assert fitted.answer_bias is None and fitted.parameters == {"temperature": fitted.temperature}


def test_a_yes_bias_is_what_the_bias_term_removes() -> None:
    """A method that always scores yes 3 higher than the evidence warrants: a temperature cannot undo that, the
    bias can (the fitted b is about -3 at the true temperature)."""
    logits, gold = drawn("noul", 1.0, 0.0, 4000, seed=9)
    shifted = [[s_true + 3.0, s_false] for s_true, s_false in logits]
    fitted = fit_question("noul", shifted, gold)
    assert fitted.answer_bias == pytest.approx(-3.0, abs=0.3)
    assert fitted.temperature == pytest.approx(1.0, rel=0.15)


def test_the_fit_is_a_minimum_of_the_log_loss() -> None:
    logits, gold = drawn("score", 1.2, 0.6, 400, seed=13)
    fitted = fit_question("score", logits, gold)

    def loss(f: Fitted) -> float:
        return -sum(math.log(apply_question(f, "score", row)[g]) for row, g in zip(logits, gold, strict=True))

    best = loss(fitted)
    for nudged in (Fitted(fitted.temperature * 1.05, answer_bias=fitted.answer_bias),
                   Fitted(fitted.temperature / 1.05, answer_bias=fitted.answer_bias),
                   Fitted(fitted.temperature, answer_bias=(fitted.answer_bias or 0) + 0.1),
                   Fitted(fitted.temperature, answer_bias=(fitted.answer_bias or 0) - 0.1)):
        assert loss(nudged) > best


def test_scores_without_signal_hold_the_temperature_at_its_bound() -> None:
    rng = random.Random(4)
    logits = [[rng.gauss(0, 1), rng.gauss(0, 1)] for _ in range(300)]
    inverted = [0 if row[0] < row[1] else 1 for row in logits]  # the gold is always the LESS scored answer
    fitted = fit_question("noul", logits, inverted)
    assert fitted.at_bound and fitted.temperature == 1000.0


def adapters_probabilities(kind: Kind, logits: list[float], document: dict, request_temperature: float
                           ) -> list[float]:
    """What the adapter's own scoring (semif_adapter.core.scoring) serves for these raw scores under this document."""
    ids = ["true", "false"] if kind is Kind.NOUL else [str(i) for i in range(len(logits))]
    question = Question(state="s", criterion="c", answers=tuple(Answer(i, i) for i in ids), method=Scoring.PMI,
                        kind=kind, temperature=request_temperature)
    raw = MethodScores(np.asarray(logits, dtype=np.float64), (), None, None, None)  # prompt, effort: unused here
    return score(raw, question, parse_calibration(json.dumps(document))).probabilities


@pytest.mark.parametrize(("kind", "logits"), [(Kind.NOUL, [-3.5, -1.25]), (Kind.SCORE, [-9.0, -7.5, -8.25, -12.0]),
                                              (Kind.CHOICE, [-4.0, -2.0, -2.5])])
def test_the_document_is_applied_by_the_adapter_as_the_fit_predicts(kind: Kind, logits: list[float]) -> None:
    fits = {"noul": {"pmi": Fitted(1.7, answer_bias=-0.9)}, "score": {"pmi": Fitted(2.2, answer_bias=1.3)},
            "choice": {"pmi": Fitted(1.4)}}
    document, calibration = calibration_document({}, {"cases": "x.jsonl"}, questions=fits)
    assert document["methods"] == {} and document["questions"] == {
        "choice": {"pmi": {"temperature": 1.4}}, "noul": {"pmi": {"temperature": 1.7, "bias": -0.9}},
        "score": {"pmi": {"temperature": 2.2, "bias": 1.3}}}
    assert calibration.lookup(kind.value, "pmi").parameters == fits[kind.value]["pmi"].parameters
    predicted = apply_question(fits[kind.value]["pmi"], kind.value, logits, request_temperature=0.8)
    assert adapters_probabilities(kind, logits, document, 0.8) == pytest.approx(predicted, rel=1e-12, abs=1e-15)
    _, again = calibration_document({}, {"cases": "y.jsonl"}, questions=fits)
    assert again.sha256 == calibration.sha256  # provenance does not change the hash


def answered(case_id: str, kind: str, logits: list[float] | None, gold: int, served: list[float]) -> Answered:
    answers = ("true", "false") if kind == "noul" else tuple(str(i) for i in range(len(served)))
    question = LabelledQuestion("q", kind, answers, gold)
    case = SystemOneCase(1, case_id, "state", {"q": {"type": kind}}, (question,), "synthetic")
    answer = QuestionAnswer(tuple(served), None if logits is None else tuple(logits), None, (), None)
    return Answered(case, Reply({"answers": {}}, 1.0), {"q": answer})


def noul_results(count: int, with_logits: bool = True) -> list[Answered]:
    logits, gold = drawn("noul", 1.0, 0.0, count, seed=21)
    return [answered(f"case-{i}", "noul", [row[0] + 2.0, row[1]] if with_logits else None, g,
                     softmax([row[0] + 2.0, row[1]]))  # served as is: yes-biased by 2
            for i, (row, g) in enumerate(zip(logits, gold, strict=True))]


def test_results_are_fitted_on_the_fit_split_and_judged_on_the_held_out_cases() -> None:
    fits, summary = fit_question_results({"pmi": noul_results(1500)}, request_temperature=None)
    entry = summary["noul"]["pmi"]
    assert set(fits) == {"noul"} and fits["noul"]["pmi"].answer_bias == pytest.approx(-2.0, abs=0.35)
    assert entry["fit_questions"] + entry["heldout_before"]["n"] == 1500
    assert entry["heldout_before"]["n"] == pytest.approx(450, abs=60)  # about 30% held out
    assert entry["heldout_after"]["log_loss"] < entry["heldout_before"]["log_loss"]
    assert entry["parameters"] == fits["noul"]["pmi"].parameters


def test_answers_without_raw_scores_cannot_be_fitted() -> None:
    with pytest.raises(FitError, match="pmi noul: some answers carry no x_option_logits"):
        fit_question_results({"pmi": noul_results(50, with_logits=False)}, request_temperature=None)
    with pytest.raises(FitError, match="does not say which scoring method"):
        fit_question_results({"default": noul_results(50)}, request_temperature=None)


def test_the_cli_writes_the_questions_section_and_prints_the_fit(tmp_path: Path) -> None:
    """evaluate's own writer and report on answers with raw scores (a yes-biased noul, as the adapter reports)."""
    results = {"pmi": noul_results(600)}
    document = {"format": "systemone", "cases": {"path": "x.jsonl", "sha256": "0" * 64, "n": 600,
                                                 "questions": {"noul": 600}, "kinds": {"synthetic": 600}},
                "target": "http://127.0.0.1:1", "request": {"model": "jev-latest", "temperature": None},
                "model": {"sha256": "1" * 64}, "prompt": {},
                "methods": {"pmi": systemone_method_figures(results["pmi"])}}
    out = tmp_path / "calibration.json"
    write_systemone_calibration(argparse.Namespace(fit_calibration=out, temperature=None), document, results)
    written = json.loads(out.read_text())
    calibration = parse_calibration(out.read_text())
    assert written["methods"] == {} and set(written["questions"]) == {"noul"}
    assert calibration.sha256 == document["calibration_fit"]["sha256"]
    assert written["fitted"]["heldout"] == document["calibration_fit"]["types"]
    assert written["fitted"]["model"] == {"sha256": "1" * 64} and written["fitted"]["cases_sha256"] == "0" * 64
    noul = written["questions"]["noul"]["pmi"]
    report = systemone_text_report(document)
    row = next(line for line in report.splitlines() if line.startswith("noul pmi"))
    assert f"{noul['temperature']:.3f}" in row and f"{noul['bias']:+.3f}" in row
    before, after = (document["calibration_fit"]["types"]["noul"]["pmi"][k]["ece"]
                     for k in ("heldout_before", "heldout_after"))
    assert f"{before:.3f} -> {after:.3f}" in row
