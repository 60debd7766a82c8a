"""Labelled cases: JSON Lines `{"decision": {...}, "gold": "<option id>", "kind": "...", "note": "..."}`.

Every line is checked before anything is sent, so a typo on line 180 stops the run at once, with the line
number, instead of after 179 decisions. The decision itself is checked by the adapter's own request parser
(`semif_adapter.doors.request_schema`), so a case the evaluator accepts is one the endpoint accepts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from semif_adapter.doors.request_schema import RequestError, parse_request
from semif_decision_client import DecisionRequest

CASE_FIELDS = frozenset({"decision", "gold", "kind", "note"})
NO_KIND = "(none)"  # the kind of a case that names none
T = TypeVar("T")


class CasesError(ValueError):
    """The cases file cannot be evaluated; the message names the file and line."""


@dataclass(frozen=True)
class Case:
    line: int  # 1-based line number in the file
    request: DecisionRequest  # the decision as given (no scoring knobs)
    gold: str
    kind: str
    note: str | None = None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def gold_index(self) -> int:
        return self.request.option_ids.index(self.gold)


@dataclass(frozen=True)
class CaseFile:
    path: Path
    sha256: str  # of the file's bytes: which cases produced a report or a calibration
    cases: tuple[Case, ...]

    @property
    def kinds(self) -> tuple[str, ...]:
        return tuple(sorted({case.kind for case in self.cases}))


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def parse_case(text: str, line: int) -> Case:
    """One line as a Case, or ValueError saying what is wrong with it (without the line number)."""
    document = json_object(text, "'decision' and 'gold'")
    unknown = sorted(set(document) - CASE_FIELDS)
    if unknown:
        raise ValueError(f"unknown key(s) {unknown}; a case has {sorted(CASE_FIELDS)}")
    for key in ("decision", "gold"):
        if key not in document:
            raise ValueError(f"missing {key!r}")
    gold, kind, note = document["gold"], document.get("kind", NO_KIND), document.get("note")
    if not isinstance(gold, str) or not isinstance(kind, str) or not (note is None or isinstance(note, str)):
        raise ValueError("'gold', 'kind' and 'note' must be strings")
    try:
        parse_request(json.dumps({"decision": document["decision"]}).encode())
    except RequestError as error:
        raise ValueError(f"the endpoint would refuse this decision: {error.message}") from None
    request = DecisionRequest.from_payload({"decision": document["decision"]})
    if gold not in request.option_ids:
        raise ValueError(f"gold {gold!r} is not one of the options {list(request.option_ids)}")
    return Case(line, request, gold, kind, note)


def parse_lines(path: Path, parse: Callable[[str, int], T]) -> tuple[str, list[T]]:
    """The file's sha256 and `parse(line, number)` of every non-blank line; CasesError naming the file and line
    of the first that cannot be read or parsed (the parser's ValueError says what is wrong)."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except OSError as error:
        raise CasesError(f"{path}: cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError as error:
        raise CasesError(f"{path}: not UTF-8 text: {error}") from None
    parsed: list[T] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            parsed.append(parse(raw, number))
        except ValueError as error:
            raise CasesError(f"{path}:{number}: {error}") from None
    if not parsed:
        raise CasesError(f"{path}: no cases")
    return hashlib.sha256(data).hexdigest(), parsed


def json_object(text: str, expected: str) -> dict[str, Any]:
    """One line as a JSON object (a key given twice is refused), or ValueError saying what is wrong."""
    try:
        document = json.loads(text, object_pairs_hook=_no_duplicate_keys)
    except json.JSONDecodeError as error:
        raise ValueError(f"not valid JSON: {error.msg} (column {error.colno})") from None
    if not isinstance(document, Mapping):
        raise ValueError(f"expected a JSON object with {expected}")
    return document


def unique_ids(path: Path, cases: list[tuple[int, str]], what: str) -> None:
    """CasesError naming the line where a case id is used a second time (the calibration split is by id)."""
    seen: dict[str, int] = {}
    for number, case_id in cases:
        if case_id in seen:
            raise CasesError(f"{path}:{number}: {what} {case_id!r} already used on line {seen[case_id]}")
        seen[case_id] = number


def load_cases(path: Path) -> CaseFile:
    """Every case of the file; CasesError (file and line) on the first bad line or a repeated decision id."""
    sha256, cases = parse_lines(path, parse_case)
    unique_ids(path, [(case.line, case.id) for case in cases], "decision id")
    return CaseFile(path, sha256, tuple(cases))
