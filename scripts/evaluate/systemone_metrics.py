"""The figures of one scoring method on labelled System One cases, per question type (definitions in `--help`).

Every question is a row of probabilities over its answers (choice: the options as listed; noul: yes, no; score:
the levels, lowest first) with the index of the gold answer, so accuracy, ECE, Brier, log-loss and the reliability
table are the SemIf figures' own functions (`metrics`). On top of them: for noul, what shows a yes-bias (the
share of yes answers, and the mean p(yes) when the truth is yes and when it is no) and whether p(yes) separates yes
from no at all (AUC over all nouls, and within each question); for score, the mean absolute error of the expected
level (`score`) against the gold level.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from . import metrics
from .systemone_cases import QUESTION_TYPES, LabelledQuestion, SystemOneCase
from .systemone_collect import Answered, QuestionAnswer

Asked = tuple[SystemOneCase, LabelledQuestion, QuestionAnswer]


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _question_label(case: SystemOneCase, question: LabelledQuestion) -> str:
    """"kind/question id": the unit of the per-question figures."""
    return f"{case.kind}/{question.id}"


def _p_yes_by_gold(asked: Sequence[Asked]) -> tuple[list[float], list[float]]:
    """p(yes) of the nouls whose gold is yes, and of those whose gold is no."""
    on_yes: list[float] = []
    on_no: list[float] = []
    for _, question, answer in asked:
        (on_yes if question.gold == 0 else on_no).append(answer.probabilities[0])
    return on_yes, on_no


def _separation_within_questions(asked: Sequence[Asked]) -> float | None:
    """The AUC of each question (kind/id) that has both answers in the gold, averaged weighted by its count: what a
    per-question prior (a shift of p(yes) by question) cannot explain."""
    groups: dict[str, list[Asked]] = {}
    for one in asked:
        groups.setdefault(_question_label(one[0], one[1]), []).append(one)
    weighted = [(auc, len(group)) for group in groups.values()
                if (auc := metrics.separation(*_p_yes_by_gold(group))) is not None]
    return sum(auc * n for auc, n in weighted) / sum(n for _, n in weighted) if weighted else None


def noul_figures(asked: Sequence[Asked]) -> dict[str, float | None]:
    """Where a yes-bias shows (a method that says yes whatever the evidence has yes_rate near 1 and the same mean
    p(yes) on both sides), and whether there is anything to calibrate: an AUC near 0.5 means p(yes) does not
    separate yes from no, and no temperature or bias can make it."""
    p_yes = [answer.probabilities[0] for _, _, answer in asked]
    on_yes, on_no = _p_yes_by_gold(asked)
    return {"auc": metrics.separation(on_yes, on_no),
            "auc_within_question": _separation_within_questions(asked),
            "gold_yes_share": len(on_yes) / len(asked),
            "yes_rate": sum(p >= 0.5 for p in p_yes) / len(asked),
            "mean_p_yes": _mean(p_yes),
            "mean_p_yes_gold_yes": _mean(on_yes),
            "mean_p_yes_gold_no": _mean(on_no)}


def score_figures(asked: Sequence[Asked]) -> dict[str, float | None]:
    """How far the expected level is from the gold one, in levels (a near miss counts less than a far one)."""
    return {"mae": _mean([abs(answer.expected_level - question.gold) for _, question, answer in asked
                          if answer.expected_level is not None])}


def type_figures(asked: Sequence[Asked]) -> dict[str, Any]:
    """Every figure of one question type under one method."""
    rows = [answer.probabilities for _, _, answer in asked]
    gold = [question.gold for _, question, _ in asked]
    warned: Counter[str] = Counter(code for _, _, answer in asked for code in set(answer.warnings))
    calibrations = sorted({str(answer.calibration.get("sha256")) for _, _, answer in asked if answer.calibration})
    figures: dict[str, Any] = {
        "n": len(asked),
        "accuracy": metrics.accuracy(rows, gold),
        "chance_accuracy": sum(1 / len(row) for row in rows) / len(rows),
        "ece": metrics.ece(rows, gold),
        "brier": metrics.brier(rows, gold),
        "log_loss": metrics.log_loss(rows, gold),
        "mean_confidence": metrics.mean_confidence(rows),
        "per_kind": metrics.accuracy_by(rows, gold, [case.kind for case, _, _ in asked]),
        "per_question": metrics.accuracy_by(rows, gold,
                                            [_question_label(case, question) for case, question, _ in asked]),
        "warning_rates": {code: count / len(asked) for code, count in sorted(warned.items())},
        "calibration_sha256": calibrations,
        "reliability": metrics.reliability(rows, gold),
    }
    question_type = asked[0][1].type
    if question_type == "noul":
        figures.update(noul_figures(asked))
    elif question_type == "score":
        figures.update(score_figures(asked))
    return figures


def asked_by_type(answered: Sequence[Answered]) -> dict[str, list[Asked]]:
    """Every labelled question with its answer, per type (the types the cases hold, in QUESTION_TYPES order)."""
    found: dict[str, list[Asked]] = {kind: [] for kind in QUESTION_TYPES}
    for one in answered:
        for question, answer in one.asked():
            found[question.type].append((one.case, question, answer))
    return {kind: asked for kind, asked in found.items() if asked}


def systemone_method_figures(answered: Sequence[Answered]) -> dict[str, Any]:
    """Every figure of one method: per question type, and the requests' latency."""
    server_ms = [float(one.reply.document["x_timing"]["total_ms"]) for one in answered
                 if isinstance(one.reply.document.get("x_timing"), dict)
                 and isinstance(one.reply.document["x_timing"].get("total_ms"), int | float)]
    return {"n_cases": len(answered),
            "n_questions": sum(len(one.case.labelled) for one in answered),
            "p50_latency_ms": metrics.p50([one.reply.latency_ms for one in answered]),
            "p50_server_ms": metrics.p50(server_ms),
            "types": {kind: type_figures(asked) for kind, asked in asked_by_type(answered).items()}}
