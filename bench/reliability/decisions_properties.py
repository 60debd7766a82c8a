"""Property-based checks of the OpenAI Decisions door over HTTP (hypothesis), on the real adapter.

Generators: small valid requests (every question type, typed choice values, names, a string, user messages or a
conversation of every input item: system, developer, user and assistant messages, function and custom tool calls
with their outputs),
mutations of them (a node replaced, deleted, or joined by an unknown key) and hostile bytes. Properties: nothing gets
a 5xx; every error is OpenAI's envelope (`error.message`, `type`, `param`, `code`); every 200 is strict JSON with
one answer per question, in order, of the asked type (or a refusal), carrying the question's name and probability
distributions. Runs are derandomized and bounded in count; no shrinking, so a failure costs one example.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import strategies as st

from .properties import DAMAGE, UTF8_TEXT, damaged, mutate, over_http

ANSWER_TYPES = {"predicate": "predicate", "choice": "choice", "score": "score"}
VALUES = st.text(UTF8_TEXT, min_size=1, max_size=12) | st.booleans()


@st.composite
def valid_requests(draw: st.DrawFn, model: str = "jev-latest", max_text: int = 24) -> dict[str, Any]:
    text = st.text(UTF8_TEXT, min_size=1, max_size=max_text)
    questions = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["predicate", "choice", "score"]))
        question: dict[str, Any] = {"type": kind, "instructions": draw(text)}
        if kind == "choice":
            values = draw(st.lists(VALUES, min_size=2, max_size=4, unique_by=lambda v: (type(v), v)))
            question["choices"] = [{"value": v, **({"description": draw(text)} if draw(st.booleans()) else {})}
                                   for v in values]
        elif kind == "score":
            question["levels"] = [{"label": draw(text)} for _ in range(draw(st.integers(2, 4)))]
        if draw(st.booleans()):
            question["name"] = draw(text)
        questions.append(question)
    state = draw(text)
    content = draw(st.sampled_from(["text", "user", "conversation"]))
    if content == "text":
        return {"model": model, "input": state, "questions": questions}
    if content == "user":
        return {"model": model, "input": [{"role": "user", "content": [{"type": "input_text", "text": state}]}],
                "questions": questions}
    return {"model": model, "input": draw(conversations(text)), "questions": questions}


@st.composite
def conversations(draw: st.DrawFn, text: st.SearchStrategy[str]) -> list[dict[str, Any]]:
    """Every kind of input item the current SDK has, in an order the API accepts: each output after its call."""
    items: list[dict[str, Any]] = []
    for number in range(draw(st.integers(1, 5))):
        kind = draw(st.sampled_from(["system", "developer", "user", "assistant", "function", "custom"]))
        if kind in ("system", "developer"):
            items.append({"role": kind, "content": draw(text) if draw(st.booleans())
                          else [{"type": "input_text", "text": draw(text)}]})
        elif kind == "user":
            items.append({"role": "user", "type": "message", "content": [
                {"type": "input_text", "text": draw(text)}, {"type": "input_json", "data": {"n": number}}]})
        elif kind == "assistant":
            items.append({"role": "assistant", "content": [{"type": "output_text", "text": draw(text)},
                                                           {"type": "refusal", "refusal": draw(text)}]})
        else:
            call = f"call_{number}"
            items.append({"type": "function_call", "call_id": call, "name": draw(text), "arguments": draw(text)}
                         if kind == "function" else
                         {"type": "custom_tool_call", "call_id": call, "name": draw(text), "input": draw(text)})
            output = draw(text) if draw(st.booleans()) else [{"type": "input_text", "text": draw(text)}]
            items.append({"type": f"{items[-1]['type']}_output", "call_id": call, "output": output})
    return items


@st.composite
def mutated_requests(draw: st.DrawFn) -> Any:
    return mutate(draw, draw(valid_requests()))


@st.composite
def hostile_bytes(draw: st.DrawFn) -> bytes:
    raw = json.dumps(draw(valid_requests())).encode()
    edit = draw(st.sampled_from([*DAMAGE, "constant"]))
    if edit in DAMAGE:
        return damaged(draw, raw, edit)
    literal = draw(st.sampled_from([b"NaN", b"Infinity", b"1e999", b"-0"]))
    return raw.replace(b'{"model"', b'{"x_temperature": ' + literal + b', "model"', 1)


def _distribution(probabilities: list[float]) -> bool:
    return all(math.isfinite(p) and 0 <= p <= 1 for p in probabilities) and abs(math.fsum(probabilities) - 1) < 1e-6


def answer_problem(sent: Any, response: httpx.Response, document: Any) -> str | None:
    """Why an answer (its strict JSON `document`) to a generated body breaks OpenAI's contract, or None."""
    status = response.status_code
    if status >= 500:
        return f"a server error for a client's body: {status} {response.text[:300]}"
    if status != 200:
        error = document.get("error") if isinstance(document, dict) else None
        if not isinstance(error, dict) or set(error) != {"message", "type", "param", "code"} or not error["message"]:
            return f"{status} without OpenAI's error envelope: {response.text[:300]}"
        return None
    answers = document.get("answers")
    if not isinstance(sent, dict) or not isinstance(answers, list) or len(answers) != len(sent["questions"]):
        return "200 without one answer per question"
    for asked, answer in zip(sent["questions"], answers, strict=True):
        if answer["type"] not in (ANSWER_TYPES[asked["type"]], "refusal") or answer["name"] != asked.get("name"):
            return f"an answer of another type or name: {answer}"
        if answer["type"] == "choice" and (not _distribution([p["probability"] for p in answer["probabilities"]])
                                           or [p["value"] for p in answer["probabilities"]]
                                           != [c["value"] for c in asked["choices"]]):
            return f"a choice whose probabilities are not a distribution over the values sent: {answer}"
        if answer["type"] == "score" and not _distribution([p["probability"] for p in answer["probabilities"]]):
            return f"a score whose probabilities are not a distribution: {answer}"
        if answer["type"] == "predicate" and not 0 <= answer["probability"] <= 1:
            return f"a predicate probability out of range: {answer}"
    return None


def check_decisions_http(max_examples: int, post: Callable[[bytes], httpx.Response]) -> Counter[str]:
    """POST generated bodies to `/v1/decisions`; raises on the first broken answer."""
    return over_http(max_examples, post, {"valid": valid_requests(), "mutated": mutated_requests(),
                                          "bytes": hostile_bytes()}, answer_problem)
