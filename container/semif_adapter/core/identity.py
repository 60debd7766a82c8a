"""Which weights answer: the model's identity in every answer, and its name and listing for System One.

Computed once at start-up. System One callers name a model in each request: this endpoint serves one, under its own
name (`SEMIF_MODEL_NAME`, by default the GGUF file's name without `.gguf`) and the ecosystem's alias `jev-latest`.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.integrity import ModelDigest
from ..engine.llama_runtime import ModelFacts

MODEL_ALIAS = "jev-latest"  # what the SDKs send by default; it means "this endpoint's model"


@dataclass(frozen=True)
class ModelIdentity:
    """What a caller needs to know which weights produced a score; computed once at start."""

    document: dict[str, object]
    name: str = ""  # what System One answers carry in `model`
    release_date: str = ""  # YYYY-MM-DD: the model file's date
    aliases: frozenset[str] = field(default_factory=frozenset)
    decision: dict[str, object] | None = None  # a decision model's type and what it means for callers

    @classmethod
    def of(cls, digest: ModelDigest, facts: ModelFacts, name: str | None = None,
           decision: dict[str, object] | None = None) -> ModelIdentity:
        identity: dict[str, object] = {"file": facts.file, "bytes": digest.bytes}
        if digest.sha256:
            identity["sha256"] = digest.sha256
        else:
            identity["fingerprint"] = digest.fingerprint
        identity.update(architecture=facts.architecture, quantization=facts.quantization,
                        context=facts.context, context_train=facts.context_train)
        first = digest.files[0]
        served = name or first.name.removesuffix(".gguf")
        return cls(identity, name=served, release_date=_file_date(first), aliases=frozenset({served, MODEL_ALIAS}),
                   decision=decision)

    def serves(self, model: str) -> bool:
        return model in self.aliases

    def listing(self) -> dict[str, object]:
        """`GET /v1/models`: the served model under its own name, and the alias every SDK sends by default."""
        described = (f"{self.document.get('file')}: {self.document.get('architecture')} "
                     f"{self.document.get('quantization')}, context {self.document.get('context')} "
                     f"(sha256 {self.document.get('sha256') or self.document.get('fingerprint')}); "
                     "decision scoring of fixed answers, no text generation")
        served: dict[str, object] = {"name": self.name, "description": described, "release_date": self.release_date}
        if self.decision is not None:
            served["x_decision"] = self.decision
        return {"models": [served,
                           {"name": MODEL_ALIAS, "description": f"alias of {self.name} on this endpoint",
                            "release_date": self.release_date}]}


def _file_date(path: Path) -> str:
    try:
        stamp = path.stat().st_mtime
    except OSError:
        stamp = 0.0
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).date().isoformat()
