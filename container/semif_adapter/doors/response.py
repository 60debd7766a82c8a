"""A decided question -> SemIf's response document (parallel arrays in request order), and the timing object
every contract reports."""

from __future__ import annotations

import json

from ..core.decided import Decided
from ..core.identity import ModelIdentity
from .request_schema import DecisionRequest


def timing_document(decided: Decided) -> dict[str, object]:
    """Where the time went and what was reused: what the engine that answered measured, nothing it did not (a
    native answer has no queue, tokenization, restore or output rows of its own: those keys are left out)."""
    timing, tokens = decided.timing, decided.tokens
    document: dict[str, object] = {
        "queue_ms": _ms(timing.queue_ms), "tokenize_ms": _ms(timing.tokenize_ms),
        "restore_ms": _ms(timing.restore_ms), "forward_ms": _ms(timing.forward_ms), "total_ms": _ms(timing.total_ms),
        "prompt_tokens": tokens.prompt, "cached_tokens": tokens.cached, "evaluated_tokens": tokens.evaluated,
        "output_rows": tokens.output_rows, "cache_source": tokens.source, "baseline_cached": decided.baseline_cached,
    }
    return {key: value for key, value in document.items() if value is not None}


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def render(request: DecisionRequest, decided: Decided, model: ModelIdentity) -> bytes:
    decision, scores = request.decision, decided.scores
    document = {
        "decision_id": decision.id,
        "option_ids": [option.id for option in decision.options],
        "probabilities": scores.probabilities,
        "option_logits": scores.option_logits,
        "scoring": decided.method,
        "warnings": scores.warnings,
        "calibration": scores.calibration,
        "allowed_token_mass": decided.allowed_token_mass,
        "temperature": request.temperature,
        "debias": request.debias.value,
        "timing": timing_document(decided),
        "model": model.document,
        "prompt": {"version": decided.prompt.version, "sha256": decided.prompt.sha256},
    }
    return json.dumps(document, separators=(",", ":")).encode()
