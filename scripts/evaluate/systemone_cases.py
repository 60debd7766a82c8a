"""Labelled System One cases: JSON Lines, one state per line, its questions, and the correct answer to each.

    {"id": "support-004", "state": "...", "questions": {"refund": {"type": "noul", "instructions": "..."},
     "urgency": {"type": "score", "criteria": ["low", "high"]}}, "gold": {"refund": true, "urgency": 1},
     "kind": "support", "note": "..."}

`gold` per question type: choice, the option's name; noul, true or false; score, the level's index (0 is the first
level listed, the lowest). `id` (optional) names the case for the calibration split; without one it is the first
16 hex digits of the sha256 of the case's canonical state and questions, so a case keeps its side of the split
whatever else the file holds. The request itself is checked by the adapter's own System One validation
(`semif_adapter.doors.systemone_schema`), so a case the evaluator accepts is one the endpoint accepts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from semif_adapter.doors.systemone_schema import SystemOneValidationError, validate

from .cases import NO_KIND, CasesError, json_object, parse_lines, unique_ids

CASE_FIELDS = frozenset({"id", "state", "questions", "gold", "kind", "note"})
QUESTION_TYPES = ("choice", "noul", "score")
NOUL_ANSWERS = ("true", "false")  # the answer keys of a noul, in the order its figures use (yes first)
DEFAULT_MODEL = "jev-latest"  # the alias every System One server accepts (SPEC request.model-alias)
SEMIF, SYSTEMONE = "semif", "systemone"


@dataclass(frozen=True)
class LabelledQuestion:
    """One question of a case, as the figures see it: its answers in a fixed order and which one is right."""

    id: str
    type: str  # choice | noul | score
    answers: tuple[str, ...]  # choice: option names as listed; noul: "true", "false"; score: "0".."n-1"
    gold: int  # index into answers

    @property
    def gold_answer(self) -> str:
        return self.answers[self.gold]


@dataclass(frozen=True)
class SystemOneCase:
    line: int  # 1-based line number in the file
    id: str
    state: Any
    questions: Mapping[str, Any]  # as written: sent exactly so
    labelled: tuple[LabelledQuestion, ...]  # in the order the questions are written
    kind: str
    note: str | None = None

    def body(self, model: str = DEFAULT_MODEL, scoring: str | None = None,
             temperature: float | None = None) -> dict[str, Any]:
        """The System One request; scoring and temperature are our `x_` knobs, sent only when chosen."""
        body: dict[str, Any] = {"model": model, "state": self.state, "questions": dict(self.questions)}
        if scoring is not None:
            body["x_scoring"] = scoring
        if temperature is not None:
            body["x_temperature"] = temperature
        return body


@dataclass(frozen=True)
class SystemOneCaseFile:
    path: Path
    sha256: str  # of the file's bytes
    cases: tuple[SystemOneCase, ...]

    def questions(self, question_type: str | None = None) -> list[tuple[SystemOneCase, LabelledQuestion]]:
        return [(case, question) for case in self.cases for question in case.labelled
                if question_type is None or question.type == question_type]


def detect_format(path: Path) -> str:
    """SYSTEMONE when the first case has `questions`, else SEMIF (whose loader reports any problem, as before)."""
    try:
        with path.open(encoding="utf-8") as lines:
            first = next((line for line in lines if line.strip()), "")
        document = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return SEMIF
    return SYSTEMONE if isinstance(document, Mapping) and "questions" in document else SEMIF


def default_id(state: Any, questions: Any) -> str:
    canonical = json.dumps({"state": state, "questions": questions}, sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


def _labelled(question_id: str, question: Mapping[str, Any], gold: Any) -> LabelledQuestion:
    kind = question["type"]
    where = f"gold[{question_id!r}] ({kind})"
    if kind == "noul":
        if not isinstance(gold, bool):
            raise ValueError(f"{where}: expected true or false, got {gold!r}")
        return LabelledQuestion(question_id, kind, NOUL_ANSWERS, 0 if gold else 1)
    if kind == "choice":
        names = tuple(question["criteria"])
        if not isinstance(gold, str) or gold not in names:
            raise ValueError(f"{where}: expected one of the option names {list(names)}, got {gold!r}")
        return LabelledQuestion(question_id, kind, names, names.index(gold))
    levels = len(question["criteria"])
    if isinstance(gold, bool) or not isinstance(gold, int) or not 0 <= gold < levels:
        raise ValueError(f"{where}: expected a level index 0..{levels - 1} (0 is the first level listed), "
                         f"got {gold!r}")
    return LabelledQuestion(question_id, kind, tuple(str(i) for i in range(levels)), gold)


def _refusal(error: SystemOneValidationError) -> str:
    return "; ".join(f"{'.'.join(str(part) for part in d['loc'][1:]) or 'body'}: {d['msg']}" for d in error.details)


def parse_systemone_case(text: str, line: int) -> SystemOneCase:
    """One line as a SystemOneCase, or ValueError saying what is wrong with it (without the line number)."""
    document = json_object(text, "'state', 'questions' and 'gold'")
    unknown = sorted(set(document) - CASE_FIELDS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a System One case has {sorted(CASE_FIELDS)}")
    for key in ("state", "questions", "gold"):
        if key not in document:
            raise ValueError(f"missing {key!r}")
    kind, note = document.get("kind", NO_KIND), document.get("note")
    if not isinstance(kind, str) or not (note is None or isinstance(note, str)):
        raise ValueError("'kind' and 'note' must be strings")
    try:
        validate({"model": DEFAULT_MODEL, "state": document["state"], "questions": document["questions"]})
    except SystemOneValidationError as error:
        raise ValueError(f"the endpoint would refuse this request: {_refusal(error)}") from None
    questions, gold = document["questions"], document["gold"]
    if not isinstance(gold, Mapping) or set(gold) != set(questions):
        given = sorted(gold) if isinstance(gold, Mapping) else gold
        raise ValueError(f"'gold' must give one answer per question id {sorted(questions)}, got {given!r}")
    case_id = document.get("id", default_id(document["state"], questions))
    if not isinstance(case_id, str) or not case_id:
        raise ValueError(f"'id' must be a non-empty string, got {case_id!r}")
    labelled = tuple(_labelled(qid, questions[qid], gold[qid]) for qid in questions)
    return SystemOneCase(line, case_id, document["state"], questions, labelled, kind, note)


def load_systemone_cases(path: Path) -> SystemOneCaseFile:
    """Every case of the file; CasesError (file and line) on the first bad line or a repeated case id."""
    sha256, cases = parse_lines(path, parse_systemone_case)
    unique_ids(path, [(case.line, case.id) for case in cases], "case id")
    return SystemOneCaseFile(path, sha256, tuple(cases))


def check_methods(case_file: SystemOneCaseFile, methods: Sequence[str | None]) -> None:
    """CasesError before anything is sent when a case is one the endpoint would refuse under a method (letters
    scores at most 16 options)."""
    for method in methods:
        if method is None:
            continue
        for case in case_file.cases:
            try:
                validate(case.body(scoring=method))
            except SystemOneValidationError as error:
                raise CasesError(f"{case_file.path}:{case.line}: the endpoint would refuse this request with "
                                 f"x_scoring {method}: {_refusal(error)}") from None
