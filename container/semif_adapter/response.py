"""Scores and timings -> the response document (parallel arrays in request order)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .kv_engine import EngineResult
from .llama_runtime import ModelFacts
from .prompt import PromptPlan
from .request_schema import DecisionRequest
from .scoring import Scores

HASH_MODEL_BELOW_BYTES = 1 << 30  # above this, start-up would spend seconds hashing: fingerprint instead


@dataclass(frozen=True)
class ModelIdentity:
    """What a caller needs to know which weights produced a score; computed once at start."""

    document: dict[str, object]

    @classmethod
    def of(cls, path: Path, facts: ModelFacts, sha256: str | None) -> ModelIdentity:
        stat = path.stat()
        if sha256 is None and stat.st_size < HASH_MODEL_BELOW_BYTES:
            with path.open("rb") as stream:
                sha256 = hashlib.file_digest(stream, "sha256").hexdigest()
        identity: dict[str, object] = {"file": facts.file, "bytes": stat.st_size}
        if sha256:
            identity["sha256"] = sha256
        else:
            identity["fingerprint"] = f"size={stat.st_size};mtime_ns={stat.st_mtime_ns}"
        identity.update(architecture=facts.architecture, quantization=facts.quantization,
                        context=facts.context, context_train=facts.context_train)
        return cls(identity)


@dataclass(frozen=True)
class Timing:
    queue_ms: float
    total_ms: float


def render(request: DecisionRequest, *, plan: PromptPlan, result: EngineResult, scores: Scores,
           model: ModelIdentity, timing: Timing) -> bytes:
    decision = request.decision
    document = {
        "decision_id": decision.id,
        "option_ids": [option.id for option in decision.options],
        "probabilities": scores.probabilities,
        "option_logits": scores.option_logits,
        "allowed_token_mass": scores.allowed_token_mass,
        "temperature": request.temperature,
        "debias": request.debias.value,
        "timing": {
            "queue_ms": round(timing.queue_ms, 3),
            "tokenize_ms": round(result.tokenize_ms, 3),
            "forward_ms": round(result.forward_ms, 3),
            "total_ms": round(timing.total_ms, 3),
            "prompt_tokens": result.prompt_tokens,
            "cached_tokens": result.cached_tokens,
            "evaluated_tokens": result.evaluated_tokens,
        },
        "model": model.document,
        "prompt": {"version": plan.version, "sha256": plan.sha256},
    }
    return json.dumps(document, separators=(",", ":")).encode()
