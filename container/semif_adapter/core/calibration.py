"""Calibration of answer scores: a temperature per scoring method (and a per-slot bias for `letters`), and for System
One questions a temperature per question type and method, with a bias term where a type needs one.

Fitted offline by `semif calibrate` on labelled cases and handed to the adapter as
`SEMIF_CALIBRATION` (the JSON document below). Parsed and validated here only, so the CDK app (at synth) and the
adapter (at start-up) refuse the same mistakes with the same message.

    {"format": "semif-calibration-v1",
     "methods": {"pmi": {"temperature": 1.8},
                 "letters": {"temperature": 2.4, "slot_bias": [0.9, 0.2, 0.0]}},
     "questions": {"noul": {"pmi": {"temperature": 1.3, "bias": -0.4}},
                   "score": {"pmi": {"temperature": 2.0, "bias": 0.5}},
                   "choice": {"pmi": {"temperature": 1.8}}},
     "fitted": {...provenance, free-form...}}

Applied as: calibrated logit of an option = mean over the prompt's orderings of (its score - slot_bias[slot it sat
under]), divided by the method's temperature; probabilities = softmax(calibrated / request temperature). A System One
question uses `questions.<type>.<method>` (its own type's, never the SemIf `methods`): calibrated_i = s_i / T + bias_i,
where noul's bias applies to the "true" answer only (p(yes) = sigmoid((s_true - s_false) / T + b): Platt scaling) and
score's is a tilt, b * (i / (n - 1) - 0.5) for level i of n. The raw logits are reported unchanged, so a caller can
always refit.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

CALIBRATION_FORMAT = "semif-calibration-v1"
SCORING_METHODS = ("letters", "likelihood", "pmi")
QUESTION_TYPES = ("choice", "noul", "score")
BIASED_TYPES = frozenset({"noul", "score"})  # a bias term (Platt scaling's intercept; a tilt for levels)
MAX_SLOTS = 16
MAX_TEMPERATURE = 1000.0
SHORT_HASH_CHARS = 12


class CalibrationError(ValueError):
    """A calibration document the adapter must not start with; the message names the offending part."""


@dataclass(frozen=True)
class MethodCalibration:
    temperature: float
    slot_bias: tuple[float, ...] | None = None  # letters only: subtracted from the logit of each slot
    answer_bias: float | None = None  # System One noul/score: Platt's intercept, or the levels' tilt

    def bias(self, slot: int) -> float:
        if self.slot_bias is None or slot >= len(self.slot_bias):
            return 0.0
        return self.slot_bias[slot]

    @property
    def kind(self) -> str:
        if self.slot_bias is not None:
            return "temperature+slot_bias"
        return "temperature+bias" if self.answer_bias is not None else "temperature"

    @property
    def parameters(self) -> dict[str, object]:
        parameters: dict[str, object] = {"temperature": self.temperature}
        if self.slot_bias is not None:
            parameters["slot_bias"] = list(self.slot_bias)
        if self.answer_bias is not None:
            parameters["bias"] = self.answer_bias
        return parameters


@dataclass(frozen=True)
class Calibration:
    methods: Mapping[str, MethodCalibration]
    sha256: str  # of the canonical document: names exactly which parameters produced a probability
    questions: Mapping[str, Mapping[str, MethodCalibration]] = field(default_factory=dict)  # type -> method -> fit

    def lookup(self, kind: str, method: str) -> MethodCalibration | None:
        """A SemIf decision's (`kind` "decision") from `methods`; a System One question's from its type's."""
        table = self.methods if kind == "decision" else self.questions.get(kind, {})
        return table.get(method)

    def for_method(self, method: str) -> MethodCalibration | None:
        return self.methods.get(method)

    def describe(self, method: str, kind: str = "decision") -> dict[str, object] | None:
        """The response's `calibration` object for one method (and question type), or None when uncalibrated."""
        found = self.lookup(kind, method)
        if found is None:
            return None
        return {"method": found.kind, "parameters": found.parameters, "sha256": self.sha256[:SHORT_HASH_CHARS]}

    def document(self) -> dict[str, object]:
        document: dict[str, object] = {
            "format": CALIBRATION_FORMAT,
            "methods": {name: entry.parameters for name, entry in sorted(self.methods.items())}}
        if self.questions:
            document["questions"] = {kind: {name: entry.parameters for name, entry in sorted(table.items())}
                                     for kind, table in sorted(self.questions.items())}
        return document


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _temperature(entry: Any, where: str, allowed: set[str], expected: str) -> float:
    if not isinstance(entry, Mapping):
        raise CalibrationError(f"{where}: expected an object with a temperature")
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise CalibrationError(f"{where}: unknown key(s) {unknown}; expected {expected}")
    if "temperature" not in entry:
        raise CalibrationError(f"{where}.temperature: missing")
    temperature = _finite(entry["temperature"], f"{where}.temperature")
    if not 0 < temperature <= MAX_TEMPERATURE:
        raise CalibrationError(f"{where}.temperature: must be in (0, {MAX_TEMPERATURE:g}], got {temperature:g}")
    return temperature


def _question_method(kind: str, name: str, entry: Any) -> MethodCalibration:
    where = f"questions.{kind}.{name}"
    if name not in SCORING_METHODS:
        raise CalibrationError(f"{where}: unknown scoring method; expected one of {list(SCORING_METHODS)}")
    biased = kind in BIASED_TYPES
    temperature = _temperature(entry, where, {"temperature", "bias"} if biased else {"temperature"},
                               "temperature and bias" if biased else "temperature (a choice has no bias term)")
    bias = _finite(entry["bias"], f"{where}.bias") if "bias" in entry else None
    return MethodCalibration(temperature, answer_bias=bias)


def _questions(section: Any) -> dict[str, dict[str, MethodCalibration]]:
    if not isinstance(section, Mapping):
        raise CalibrationError("questions: expected an object keyed by question type")
    parsed: dict[str, dict[str, MethodCalibration]] = {}
    for kind, methods in section.items():
        if kind not in QUESTION_TYPES:
            raise CalibrationError(f"questions.{kind}: unknown question type; expected one of {list(QUESTION_TYPES)}")
        if not isinstance(methods, Mapping) or not methods:
            raise CalibrationError(f"questions.{kind}: expected an object with at least one scoring method")
        parsed[kind] = {name: _question_method(kind, name, entry) for name, entry in methods.items()}
    return parsed


def _method(name: str, entry: Any) -> MethodCalibration:
    where = f"methods.{name}"
    temperature = _temperature(entry, where, {"temperature", "slot_bias"},
                               "temperature and, for letters, slot_bias")
    bias = entry.get("slot_bias")
    if bias is None:
        return MethodCalibration(temperature)
    if name != "letters":
        raise CalibrationError(f"{where}.slot_bias: only letters has slots; {name} scores options by their text")
    if not isinstance(bias, list) or not 1 <= len(bias) <= MAX_SLOTS:
        raise CalibrationError(f"{where}.slot_bias: expected a list of 1 to {MAX_SLOTS} numbers")
    return MethodCalibration(temperature, tuple(_finite(v, f"{where}.slot_bias[{i}]") for i, v in enumerate(bias)))


def parse_calibration(text: str) -> Calibration:
    """The calibration in `text` (JSON), or CalibrationError naming what is wrong."""
    try:
        document = json.loads(text, parse_constant=lambda name: _finite(name, "document"))
    except json.JSONDecodeError as error:
        raise CalibrationError(f"not valid JSON: {error}") from None
    if not isinstance(document, Mapping):
        raise CalibrationError("expected a JSON object")
    if document.get("format") != CALIBRATION_FORMAT:
        raise CalibrationError(f"format: expected {CALIBRATION_FORMAT!r}, got {document.get('format')!r}")
    unknown = sorted(set(document) - {"format", "methods", "questions", "fitted"})
    if unknown:
        raise CalibrationError(f"unknown key(s) {unknown}; expected format, methods, questions and fitted")
    methods = document.get("methods", {})
    if not isinstance(methods, Mapping) or not (methods or document.get("questions")):
        raise CalibrationError("methods: expected an object with at least one scoring method")
    for name in methods:
        if name not in SCORING_METHODS:
            raise CalibrationError(f"methods.{name}: unknown scoring method; expected one of {list(SCORING_METHODS)}")
    parsed = {name: _method(name, entry) for name, entry in methods.items()}
    questions = _questions(document["questions"]) if "questions" in document else {}
    unhashed = Calibration(methods=parsed, sha256="", questions=questions)
    canonical = json.dumps(unhashed.document(), sort_keys=True, separators=(",", ":"))
    return Calibration(methods=parsed, sha256=hashlib.sha256(canonical.encode()).hexdigest(), questions=questions)
