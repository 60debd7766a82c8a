"""Scores and timings -> the response document (parallel arrays in request order)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from .integrity import ModelDigest
from .llama_runtime import ModelFacts
from .methods import MethodScores
from .request_schema import DecisionRequest
from .scoring import Scores


@dataclass(frozen=True)
class ModelIdentity:
    """What a caller needs to know which weights produced a score; computed once at start."""

    document: dict[str, object]

    @classmethod
    def of(cls, digest: ModelDigest, facts: ModelFacts) -> ModelIdentity:
        identity: dict[str, object] = {"file": facts.file, "bytes": digest.bytes}
        if digest.sha256:
            identity["sha256"] = digest.sha256
        else:
            identity["fingerprint"] = digest.fingerprint
        identity.update(architecture=facts.architecture, quantization=facts.quantization,
                        context=facts.context, context_train=facts.context_train)
        return cls(identity)


@dataclass(frozen=True)
class Timing:
    queue_ms: float
    total_ms: float
    source: str | None = None  # "result": the whole answer came from the result cache


def render(request: DecisionRequest, method: str, *, raw: MethodScores, scores: Scores, model: ModelIdentity,
           timing: Timing) -> bytes:
    decision, effort = request.decision, raw.effort
    from_results = timing.source == "result"
    timing_document: dict[str, object] = {
        "queue_ms": round(timing.queue_ms, 3),
        "tokenize_ms": 0.0 if from_results else round(effort.tokenize_ms, 3),
        "restore_ms": 0.0 if from_results else round(effort.restore_ms, 3),
        "forward_ms": 0.0 if from_results else round(effort.forward_ms, 3),
        "total_ms": round(timing.total_ms, 3),
        "prompt_tokens": effort.prompt_tokens,
        "cached_tokens": effort.prompt_tokens if from_results else effort.cached_tokens,
        "evaluated_tokens": 0 if from_results else effort.evaluated_tokens,
        "cache_source": timing.source or effort.cache_source,
    }
    if raw.baseline_cached is not None:
        timing_document["baseline_cached"] = from_results or raw.baseline_cached
    document = {
        "decision_id": decision.id,
        "option_ids": [option.id for option in decision.options],
        "probabilities": scores.probabilities,
        "option_logits": scores.option_logits,
        "scoring": method,
        "warnings": scores.warnings,
        "calibration": scores.calibration,
        "allowed_token_mass": raw.allowed_token_mass,
        "temperature": request.temperature,
        "debias": request.debias.value,
        "timing": timing_document,
        "model": model.document,
        "prompt": {"version": raw.prompt.version, "sha256": raw.prompt.sha256},
    }
    return json.dumps(document, separators=(",", ":")).encode()
