"""Validated decision -> the prompt, as the fixed chunks the KV cache is keyed on.

The user message is JSON holding the evidence, the criterion and the options
under slot letters A..P (option ids never reach the model, as in SemIf). The
prompt is cut into chunks that are always tokenized and evaluated separately:
head (template + system text, constant), state, question, then one branch per
option ordering (the lettered options + the template's tail). Identical chunks
give identical tokens and identical KV entries whether computed now or reused,
which is what makes cached and uncached scores the same numbers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from .request_schema import Debias, DecisionRequest

PROMPT_VERSION = "semif-options-v1"
SLOT_LETTERS = "ABCDEFGHIJKLMNOP"  # one single-token slot label per option, at most 16
SYSTEM_TEXT = (
    "You are a decision function. Apply the criterion to the evidence and choose exactly one of "
    "the listed options. Answer with the option's letter only, without any explanation."
)
USER_SENTINEL = "\u0001SEMIF-USER-MESSAGE\u0001"  # stands in for the user message while the frame is cut


@dataclass(frozen=True)
class ChatFrame:
    """The model's chat template around the user message, split at the message."""

    prefix: str  # system turn and the user turn's opening
    suffix: str  # the user turn's closing and the assistant turn's opening

    @classmethod
    def from_rendered(cls, rendered: str) -> ChatFrame:
        if rendered.count(USER_SENTINEL) != 1:
            raise ValueError("the chat template does not reproduce the user message exactly once")
        prefix, suffix = rendered.split(USER_SENTINEL)
        return cls(prefix=prefix, suffix=suffix)

    @property
    def head(self) -> str:
        """The constant chunk before the state; the engine tokenizes it once at start-up."""
        return self.prefix + '{"evidence": '

    @property
    def tail(self) -> str:
        """Closes the options and the turn; the slot letter comes right after it."""
        return "]}" + self.suffix


@dataclass(frozen=True)
class Branch:
    """One ordering of the options: which request option sits under each slot letter."""

    order: tuple[int, ...]  # order[slot] = index of the option in the request
    pieces: tuple[str, ...]  # the lettered option texts, slot by slot


@dataclass(frozen=True)
class PromptPlan:
    head: str  # template-controlled: special tokens are parsed
    state: str  # user text: special tokens are NOT parsed
    question: str  # user text
    branches: tuple[Branch, ...]
    tail: str  # template-controlled
    sha256: str  # of the first branch's full prompt text
    version: str = PROMPT_VERSION


def canonical_state(state: object) -> str:
    """A JSON object/array state is serialised one way only, so equal states cache alike."""
    if isinstance(state, str):
        return json.dumps(state, ensure_ascii=False)
    return json.dumps(state, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _orderings(request: DecisionRequest) -> list[tuple[int, ...]]:
    options = request.decision.options
    if request.debias is Debias.NONE:
        return [tuple(range(len(options)))]
    # Sort by the stable option id first, so ANY input order gives the same rotations (and
    # bit-identical scores); the rotations then put every option under every letter once.
    canonical = sorted(range(len(options)), key=lambda i: options[i].id)
    return [tuple(canonical[(start + slot) % len(canonical)] for slot in range(len(canonical)))
            for start in range(len(canonical))]


def build_plan(frame: ChatFrame, request: DecisionRequest) -> PromptPlan:
    decision = request.decision
    head, tail = frame.head, frame.tail
    state = canonical_state(decision.state)
    question = ', "criterion": ' + json.dumps(decision.question, ensure_ascii=False) + ', "options": ['
    branches = []
    for order in _orderings(request):
        pieces = tuple(
            (", " if slot else "")
            + f'{{"letter": "{SLOT_LETTERS[slot]}", "description": '
            + json.dumps(decision.options[index].description, ensure_ascii=False) + "}"
            for slot, index in enumerate(order)
        )
        branches.append(Branch(order=order, pieces=pieces))
    text = head + state + question + "".join(branches[0].pieces) + tail
    return PromptPlan(head=head, state=state, question=question, branches=tuple(branches), tail=tail,
                      sha256=hashlib.sha256(text.encode()).hexdigest())
