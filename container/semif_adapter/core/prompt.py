"""Validated decision -> the prompt, as the fixed pieces the KV cache and the tokenizer are keyed on.

The user message is JSON holding the evidence and the criterion (as in SemIf; option ids never reach the model).
Each scoring method words it its own way (`methods.py` says which builder it uses):

- letters: the options under slot letters A..P; the model's next token after the prompt is scored.
- answer texts (likelihood, pmi): the evidence and the criterion only, then each option's description as the
  assistant's answer. Measured on the labelled set, listing the options in the user message hurt (pmi 0.42 vs
  0.62 accuracy): the small model then copies whichever option it read first.

Every prompt is cut into the same four parts: head (template + system text, constant per method), state (the
evidence and the criterion's key, the text every question about it shares), common (the criterion's value, and
whatever all branches share) and one branch per scored continuation. The cuts sit where the tokenizer's pre-split
already breaks (before a space that precedes punctuation), so the pieces tokenized one by one give exactly the
tokens of the whole prompt, and a piece's tokens and KV entries do not depend on its neighbours: cached and
uncached scores are the same numbers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from ..engine.prompt_plan import SLOT_LETTERS, Branch, ChatFrame, PromptPlan, Text
from .question import Debias, Question, canonical_state

# v3 / answers-v2: the same text as v2 / v1, the criterion's key moved from the question's piece into the cached
# state's (a follow-up question evaluates 4 tokens fewer); v1: cut where BPE merges were lost (about 5 more tokens)
LETTERS_VERSION = "semif-options-v3"
ANSWERS_VERSION = "semif-answers-v2"
CRITERION_KEY = ' "criterion":'  # ends the state piece: the same for every question, so cached with the state
LETTERS_SYSTEM_TEXT = (
    "You are a decision function. Apply the criterion to the evidence and choose exactly one of "
    "the listed options. Answer with the option's letter only, without any explanation."
)
ANSWERS_SYSTEM_TEXT = (
    "You are a decision function. Apply the criterion to the evidence and answer in a few words, "
    "without any explanation."
)
CONTENT_FREE_EVIDENCE = "N/A"  # pmi's baseline evidence (Zhao et al. 2021; Holtzman et al. 2021)


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def state_piece(state: object) -> str:
    """` <evidence>, "criterion":`: begins with a space before punctuation, and ends before one (the criterion's
    value is ` "..."`), so both cuts are clean; the key rides in the cached piece because every question has it."""
    return " " + canonical_state(state) + "," + CRITERION_KEY


def criterion_value(criterion: object) -> str:
    """The criterion's value as the question's piece begins: ` "<question>"`, or a structured criterion as
    canonical JSON (` {...}`)."""
    return " " + canonical_state(criterion)


def _orderings(question: Question) -> list[tuple[int, ...]]:
    if question.debias is Debias.NONE:
        return [tuple(range(len(question.answers)))]
    canonical = question.canonical_order()
    # the rotations put every option under every letter exactly once
    return [tuple(canonical[(start + slot) % len(canonical)] for slot in range(len(canonical)))
            for start in range(len(canonical))]


def letters_plan(frame: ChatFrame, question: Question) -> PromptPlan:
    """SemIf's prompt: the lettered options; one branch per ordering (two or more only with debias=permute)."""
    common = (Text(criterion_value(question.criterion) + ","),)
    branches = []
    for order in _orderings(question):
        listed = ", ".join(f'{{"letter": "{SLOT_LETTERS[slot]}", "description": '
                           f"{_quoted(question.answers[index].text)}}}" for slot, index in enumerate(order))
        branches.append(Branch(order=order, texts=(Text(' "options": [' + listed + "]}"),
                                                   Text(frame.suffix, template=True))))
    plan = PromptPlan(head=frame.head, state=state_piece(question.state), common=common, branches=tuple(branches),
                      version=frame.version(LETTERS_VERSION), sha256="", partition=question.partition)
    return _with_sha(plan, plan.text(0))


def answers_plan(frame: ChatFrame, question: Question, *, content_free: bool = False) -> PromptPlan:
    """The evidence and the criterion; each answer's text is one branch (the answer), in canonical order.

    With `content_free`, the evidence is replaced by a content-free one: pmi's baseline, which then depends only
    on the criterion and the answers and is computed once for them.
    """
    order = question.canonical_order()
    common = (Text(criterion_value(question.criterion) + "}"), Text(frame.suffix, template=True))
    branches = tuple(Branch(order=(index,), texts=(Text(frame.answer_lead + question.answers[index].text),))
                     for index in order)
    state = state_piece(CONTENT_FREE_EVIDENCE if content_free else question.state)
    plan = PromptPlan(head=frame.head, state=state, common=common, branches=branches,
                      version=frame.version(ANSWERS_VERSION), sha256="", partition=question.partition)
    prompt = plan.head + plan.state + "".join(t.text for t in common)
    return _with_sha(plan, prompt + "".join("\x00" + frame.answer_lead + question.answers[index].text
                                              for index in order))


def _with_sha(plan: PromptPlan, text: str) -> PromptPlan:
    return replace(plan, sha256=hashlib.sha256(text.encode()).hexdigest())
