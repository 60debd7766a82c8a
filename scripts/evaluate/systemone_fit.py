"""The calibration of System One questions, fitted per question type and scoring method on the raw
`x_option_logits` of the fit split's answers, and checked on the held-out cases (the model: `calibration_fit`).

The split is the SemIf one, by case id (`held_out`): every question of a case sits on the same side, so questions
about one state never judge a fit made on their neighbours.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from semif_adapter.core.calibration import SCORING_METHODS

from .calibration_fit import SPLIT_RULE, FitError, Fitted, apply_question, fit_question, held_out, split_figures
from .systemone_cases import SystemOneCaseFile
from .systemone_collect import Answered
from .systemone_metrics import Asked, asked_by_type


def check_question_split(case_file: SystemOneCaseFile) -> None:
    """FitError unless every question type of the file has a question on both sides (checked before sending)."""
    for kind in sorted({question.type for case in case_file.cases for question in case.labelled}):
        sides = [held_out(case.id) for case, _ in case_file.questions(kind)]
        if all(sides) or not any(sides):
            raise FitError(f"cannot fit a calibration for {kind} questions: the split leaves "
                           f"{sides.count(False)} to fit and {sides.count(True)} held out; both need at least one "
                           f"({SPLIT_RULE})")


def _fit_one(method: str, kind: str, asked: Sequence[Asked], request_temperature: float) -> tuple[Fitted, dict]:
    if any(answer.logits is None for _, _, answer in asked):
        raise FitError(f"{method} {kind}: some answers carry no x_option_logits to fit on (the endpoint does not "
                       "report its raw scores; this project's adapter does)")
    fit_part = [(question.gold, answer) for case, question, answer in asked if not held_out(case.id)]
    test_part = [(question.gold, answer) for case, question, answer in asked if held_out(case.id)]
    if not fit_part or not test_part:
        raise FitError(f"{method} {kind}: the split leaves {len(fit_part)} question(s) to fit and {len(test_part)} "
                       f"held out; both need at least one ({SPLIT_RULE})")
    fitted = fit_question(kind, [answer.logits or () for _, answer in fit_part], [gold for gold, _ in fit_part])
    gold = [g for g, _ in test_part]
    after = [apply_question(fitted, kind, answer.logits or (), request_temperature) for _, answer in test_part]
    return fitted, {"parameters": fitted.parameters, "temperature_at_bound": fitted.at_bound,
                    "fit_questions": len(fit_part),
                    "heldout_before": split_figures([answer.probabilities for _, answer in test_part], gold),
                    "heldout_after": split_figures(after, gold)}


def fit_question_results(results: dict[str, list[Answered]], *, request_temperature: float | None
                         ) -> tuple[dict[str, dict[str, Fitted]], dict[str, dict[str, Any]]]:
    """Per question type and method: the fit, and held-out figures before (as served) and after (as refitted)."""
    fits: dict[str, dict[str, Fitted]] = {}
    summary: dict[str, dict[str, Any]] = {}
    for method, answered in results.items():
        if method not in SCORING_METHODS:
            raise FitError(f"cannot fit a calibration for {method!r}: the endpoint does not say which scoring "
                           "method it used; name it with --scoring")
        for kind, asked in asked_by_type(answered).items():
            fitted, figures = _fit_one(method, kind, asked, request_temperature or 1.0)
            fits.setdefault(kind, {})[method] = fitted
            summary.setdefault(kind, {})[method] = figures
    return fits, summary
