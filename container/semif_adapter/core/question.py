"""The one internal question every contract parses into and the decision core scores.

A SemIf decision, each System One question and each OpenAI Decisions question become a `Question`: the evidence,
the criterion, the answers to score (a stable id the caller branches on, and the text the model reads) and how to
score them. Prompts, methods, caches and calibration see only this, so a contract is a door (parse, render,
errors; `doors/`), never a branch in the core.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Debias(StrEnum):
    NONE = "none"
    PERMUTE = "permute"


class Scoring(StrEnum):
    """How answers are scored (methods.py); a request that names none gets the endpoint's SEMIF_SCORING."""

    LETTERS = "letters"
    LIKELIHOOD = "likelihood"
    PMI = "pmi"


class Kind(StrEnum):
    """What the answers are, which selects the calibration that applies (calibration.py)."""

    DECISION = "decision"  # a SemIf decision: options under the SemIf calibration's `methods`
    CHOICE = "choice"  # one of the named options
    NOUL = "noul"  # yes/no (System One's noul, OpenAI's predicate): answers "true" and "false"
    SCORE = "score"  # ordered levels "0".."n-1"


@dataclass(frozen=True)
class Answer:
    id: str  # the caller's stable id for this answer
    text: str  # what the model reads (letters: under a slot letter; answer methods: the scored continuation)


@dataclass(frozen=True)
class Asked:
    """The question as its caller typed it, in System One's terms: what a decision-typed GGUF reads itself (its own
    template words the prompt), where the adapter's own engine reads the `Question`'s answers instead."""

    type: str  # "choice", "noul" or "score"
    name: str  # the question's id in its request (a decision model may see its neighbours by name)
    instructions: Any
    criteria: Any  # choice: {option id: description}; noul: {"true": ..., "false": ...} or None; score: [levels]


@dataclass(frozen=True)
class Question:
    state: Any  # str, or a JSON object/array (serialised by `canonical_state`)
    criterion: Any  # str, or a JSON object/array (System One's structured instructions)
    answers: tuple[Answer, ...]
    method: Scoring
    kind: Kind = Kind.DECISION
    debias: Debias = Debias.NONE
    temperature: float = 1.0  # applied after the raw scores: never part of a cache key
    partition: str = ""  # OpenAI's prompt_cache_key: what is computed under one is never served from cache to another
    asked: Asked | None = field(default=None, compare=False)  # for the native engine (core/native_service.py)

    def canonical_order(self) -> list[int]:
        """Answer indexes sorted by their stable id: any input order gives the same prompts and numbers."""
        return sorted(range(len(self.answers)), key=lambda i: self.answers[i].id)


def canonical_state(state: object) -> str:
    """A state (or criterion) as JSON, one way only: equal states prompt, cache and batch alike."""
    if isinstance(state, str):
        return json.dumps(state, ensure_ascii=False)
    return json.dumps(state, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
