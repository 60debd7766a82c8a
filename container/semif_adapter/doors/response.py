"""A decided question -> SemIf's response document (parallel arrays in request order), and the timing object
every contract reports."""

from __future__ import annotations

import json

from ..core.identity import ModelIdentity
from ..core.service import Decided
from .request_schema import DecisionRequest


def timing_document(decided: Decided) -> dict[str, object]:
    """Where the time went and what was reused; an answer from the result cache computed nothing."""
    effort, from_results = decided.raw.effort, decided.from_results
    document: dict[str, object] = {
        "queue_ms": round(decided.queue_ms, 3),
        "tokenize_ms": 0.0 if from_results else round(effort.tokenize_ms, 3),
        "restore_ms": 0.0 if from_results else round(effort.restore_ms, 3),
        "forward_ms": 0.0 if from_results else round(effort.forward_ms, 3),
        "total_ms": round(decided.total_ms, 3),
        "prompt_tokens": decided.prompt_tokens,
        "cached_tokens": decided.cached_tokens,
        "evaluated_tokens": decided.evaluated_tokens,
        "output_rows": 0 if from_results else effort.output_rows,
        "cache_source": decided.cache_source,
    }
    if decided.raw.baseline_cached is not None:
        document["baseline_cached"] = from_results or decided.raw.baseline_cached
    return document


def render(request: DecisionRequest, decided: Decided, model: ModelIdentity) -> bytes:
    decision, raw, scores = request.decision, decided.raw, decided.scores
    document = {
        "decision_id": decision.id,
        "option_ids": [option.id for option in decision.options],
        "probabilities": scores.probabilities,
        "option_logits": scores.option_logits,
        "scoring": decided.method,
        "warnings": scores.warnings,
        "calibration": scores.calibration,
        "allowed_token_mass": raw.allowed_token_mass,
        "temperature": request.temperature,
        "debias": request.debias.value,
        "timing": timing_document(decided),
        "model": model.document,
        "prompt": {"version": raw.prompt.version, "sha256": raw.prompt.sha256},
    }
    return json.dumps(document, separators=(",", ":")).encode()
