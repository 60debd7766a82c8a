"""Send every System One case to the target once per scoring method, and check each response against its request.

A response is used only if it answers exactly the questions asked, each with its own type, with finite numbers and
probabilities over exactly the answers asked (SPEC 4.1-4.4); anything else stops the run (TargetError), since a
figure computed on a malformed answer would mislead. `x_option_logits` (our adapter's raw scores, what a
calibration is fitted on) are read when present; a plain System One server gives none.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from .collect import DEFAULT_METHOD
from .systemone_cases import LabelledQuestion, SystemOneCase
from .targets import Reply, Target, TargetError

SUM_TOLERANCE = 1e-6  # probabilities must sum to 1 within this (SPEC choice.distribution / score.distribution)


@dataclass(frozen=True)
class QuestionAnswer:
    """One question's answer in the order of `LabelledQuestion.answers`."""

    probabilities: tuple[float, ...]  # noul: (p(yes), 1 - p(yes))
    logits: tuple[float, ...] | None  # x_option_logits, None when the endpoint sends none
    expected_level: float | None  # score's `score` (sum of i * p_i); None for the other types
    warnings: tuple[str, ...]
    calibration: Mapping[str, Any] | None  # x_calibration: what the endpoint applied


@dataclass(frozen=True)
class Answered:
    """One case under one method: the endpoint's whole response, and each question's checked answer."""

    case: SystemOneCase
    reply: Reply
    answers: Mapping[str, QuestionAnswer]

    @property
    def scoring(self) -> str | None:
        value = self.reply.document.get("x_scoring")
        return value if isinstance(value, str) else None

    def asked(self) -> list[tuple[LabelledQuestion, QuestionAnswer]]:
        return [(question, self.answers[question.id]) for question in self.case.labelled]


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _distribution(table: Any, keys: Sequence[str], where: str) -> tuple[float, ...]:
    if not isinstance(table, Mapping) or set(table) != set(keys):
        found = sorted(table) if isinstance(table, Mapping) else table
        raise ValueError(f"{where}: expected the keys {list(keys)}, got {found!r}")
    values = tuple(_number(table[key], f"{where}[{key!r}]") for key in keys)
    if any(not 0 <= v <= 1 for v in values) or abs(math.fsum(values) - 1) > SUM_TOLERANCE:
        raise ValueError(f"{where}: not a probability distribution (sum {math.fsum(values)!r})")
    return values


def _logits(answer: Mapping[str, Any], keys: Sequence[str], where: str) -> tuple[float, ...] | None:
    table = answer.get("x_option_logits")
    if table is None:
        return None
    if not isinstance(table, Mapping) or set(table) != set(keys):
        raise ValueError(f"{where}.x_option_logits: expected the keys {list(keys)}")
    return tuple(_number(table[key], f"{where}.x_option_logits[{key!r}]") for key in keys)


def parse_answer(question: LabelledQuestion, answer: Any, where: str) -> QuestionAnswer:
    """One question's answer, or ValueError naming what in it is wrong."""
    if not isinstance(answer, Mapping) or answer.get("type") != question.type:
        found = answer.get("type") if isinstance(answer, Mapping) else answer
        raise ValueError(f"{where}: expected an answer of type {question.type!r}, got {found!r}")
    expected_level = None
    if question.type == "noul":
        p_yes = _number(answer.get("noul"), f"{where}.noul")
        if not 0 <= p_yes <= 1:
            raise ValueError(f"{where}.noul: not a probability: {p_yes!r}")
        probabilities: tuple[float, ...] = (p_yes, 1 - p_yes)
    else:
        probabilities = _distribution(answer.get("probabilities"), question.answers, f"{where}.probabilities")
    if question.type == "score":
        expected_level = _number(answer.get("score"), f"{where}.score")
    warnings = answer.get("x_warnings") or []
    calibration = answer.get("x_calibration")
    if not isinstance(warnings, list) or not all(isinstance(code, str) for code in warnings):
        raise ValueError(f"{where}.x_warnings: expected a list of codes, got {warnings!r}")
    if calibration is not None and not isinstance(calibration, Mapping):
        raise ValueError(f"{where}.x_calibration: expected an object, got {calibration!r}")
    return QuestionAnswer(probabilities, _logits(answer, question.answers, where), expected_level,
                          tuple(warnings), calibration)


def check_reply(case: SystemOneCase, reply: Reply, method: str | None) -> Answered:
    """The reply's answers, or ValueError: exactly one answer per question id, of its type, well formed."""
    document = reply.document
    if not isinstance(document, Mapping) or not isinstance(document.get("answers"), Mapping):
        raise ValueError("the response has no 'answers' object")
    answers = document["answers"]
    if set(answers) != set(case.questions):
        raise ValueError(f"answers for {sorted(answers)}, asked {sorted(case.questions)}")
    scoring = document.get("x_scoring")
    if method is not None and scoring is not None and scoring != method:
        raise ValueError(f"asked x_scoring {method!r}, the response says it used {scoring!r}")
    return Answered(case, reply, {q.id: parse_answer(q, answers[q.id], f"answers[{q.id!r}]") for q in case.labelled})


def audit_line(answered: Answered, method: str) -> str:
    """One line of `--responses`: which case, which method, and the endpoint's whole answer."""
    return json.dumps({"id": answered.case.id, "line": answered.case.line, "method": method,
                       "latency_ms": round(answered.reply.latency_ms, 3), "response": answered.reply.document},
                      ensure_ascii=False) + "\n"


def collect_systemone(cases: Sequence[SystemOneCase], target: Target, methods: Sequence[str | None], *,
                      model: str, temperature: float | None, on_request: Callable[[], Any] = lambda: None,
                      audit: IO[str] | None = None) -> dict[str, list[Answered]]:
    """Answered cases per method label: the requested method, or the one the endpoint says it used."""
    results: dict[str, list[Answered]] = {}
    for method in methods:
        label = method
        answered: list[Answered] = []
        for case in cases:
            reply = target.ask(case.body(model, method, temperature))
            on_request()
            try:
                one = check_reply(case, reply, method)
            except ValueError as error:
                raise TargetError(f"{target.description}: case {case.id!r} (line {case.line}): {error}") from None
            label = label or one.scoring or DEFAULT_METHOD
            if audit is not None:
                audit.write(audit_line(one, label))
            answered.append(one)
        results[label or DEFAULT_METHOD] = answered
    return results
