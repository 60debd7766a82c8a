"""Calibration of option scores: a temperature per scoring method (and a per-slot bias for `letters`).

Fitted offline by `scripts/evaluate.py --fit-calibration` on labelled cases and handed to the adapter as
`SEMIF_CALIBRATION` (the JSON document below). Parsed and validated here only, so the CDK app (at synth) and the
adapter (at start-up) refuse the same mistakes with the same message.

    {"format": "semif-calibration-v1",
     "methods": {"pmi": {"temperature": 1.8},
                 "letters": {"temperature": 2.4, "slot_bias": [0.9, 0.2, 0.0]}},
     "fitted": {...provenance, free-form...}}

Applied as: calibrated logit of an option = mean over the prompt's orderings of (its score - slot_bias[slot it sat
under]), divided by the method's temperature; probabilities = softmax(calibrated / request temperature). The raw
`option_logits` are reported unchanged, so a caller can always refit.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CALIBRATION_FORMAT = "semif-calibration-v1"
SCORING_METHODS = ("letters", "likelihood", "pmi")
MAX_SLOTS = 16
MAX_TEMPERATURE = 1000.0
SHORT_HASH_CHARS = 12


class CalibrationError(ValueError):
    """A calibration document the adapter must not start with; the message names the offending part."""


@dataclass(frozen=True)
class MethodCalibration:
    temperature: float
    slot_bias: tuple[float, ...] | None = None  # letters only: subtracted from the logit of each slot

    def bias(self, slot: int) -> float:
        if self.slot_bias is None or slot >= len(self.slot_bias):
            return 0.0
        return self.slot_bias[slot]

    @property
    def parameters(self) -> dict[str, object]:
        parameters: dict[str, object] = {"temperature": self.temperature}
        if self.slot_bias is not None:
            parameters["slot_bias"] = list(self.slot_bias)
        return parameters


@dataclass(frozen=True)
class Calibration:
    methods: Mapping[str, MethodCalibration]
    sha256: str  # of the canonical document: names exactly which parameters produced a probability

    def for_method(self, method: str) -> MethodCalibration | None:
        return self.methods.get(method)

    def describe(self, method: str) -> dict[str, object] | None:
        """The response's `calibration` object for one method, or None when it is not calibrated."""
        found = self.methods.get(method)
        if found is None:
            return None
        kind = "temperature+slot_bias" if found.slot_bias is not None else "temperature"
        return {"method": kind, "parameters": found.parameters, "sha256": self.sha256[:SHORT_HASH_CHARS]}

    def document(self) -> dict[str, object]:
        return {"format": CALIBRATION_FORMAT,
                "methods": {name: entry.parameters for name, entry in sorted(self.methods.items())}}


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise CalibrationError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def _method(name: str, entry: Any) -> MethodCalibration:
    where = f"methods.{name}"
    if not isinstance(entry, Mapping):
        raise CalibrationError(f"{where}: expected an object with a temperature")
    unknown = sorted(set(entry) - {"temperature", "slot_bias"})
    if unknown:
        raise CalibrationError(f"{where}: unknown key(s) {unknown}; expected temperature and, for letters, slot_bias")
    if "temperature" not in entry:
        raise CalibrationError(f"{where}.temperature: missing")
    temperature = _finite(entry["temperature"], f"{where}.temperature")
    if not 0 < temperature <= MAX_TEMPERATURE:
        raise CalibrationError(f"{where}.temperature: must be in (0, {MAX_TEMPERATURE:g}], got {temperature:g}")
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
    unknown = sorted(set(document) - {"format", "methods", "fitted"})
    if unknown:
        raise CalibrationError(f"unknown key(s) {unknown}; expected format, methods and fitted")
    methods = document.get("methods")
    if not isinstance(methods, Mapping) or not methods:
        raise CalibrationError("methods: expected an object with at least one scoring method")
    for name in methods:
        if name not in SCORING_METHODS:
            raise CalibrationError(f"methods.{name}: unknown scoring method; expected one of {list(SCORING_METHODS)}")
    parsed = {name: _method(name, entry) for name, entry in methods.items()}
    canonical = json.dumps({"format": CALIBRATION_FORMAT,
                            "methods": {name: parsed[name].parameters for name in sorted(parsed)}},
                           sort_keys=True, separators=(",", ":"))
    return Calibration(methods=parsed, sha256=hashlib.sha256(canonical.encode()).hexdigest())
