"""OpenAI Decisions requests the local tests share: one input, every question type, named and unnamed, with typed
choice values (the string "true" and the boolean true are two values), and what a right answer to them holds."""

from __future__ import annotations

from typing import Any

import pytest

INPUT = ("Hi, I was charged twice for my March invoice (order #4471) and the refund I was promised last week still "
         "hasn't arrived. Please fix this today or I will dispute the charge with my bank.")
QUESTIONS: list[dict[str, Any]] = [
    {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
    {"type": "choice", "name": "team", "instructions": "Which team should handle this ticket?",
     "choices": [{"value": "Billing", "description": "Payments, invoices, refunds"},
                 {"value": "Technical", "description": "Bugs, outages, integrations"}, {"value": "Sales"}]},
    {"type": "choice", "instructions": "Does the customer set a deadline?",
     "choices": [{"value": True, "description": "Yes, a date or a time"}, {"value": False},
                 {"value": "true", "description": "The word 'true' appears"}]},
    {"type": "score", "name": "anger", "instructions": "How frustrated is the customer?",
     "levels": [{"label": "Calm"}, {"label": "Frustrated"},
                {"label": "Very angry", "description": "threatens to leave"}]},
]
MODEL = "jev-latest"


def body(questions: list[dict[str, Any]] = QUESTIONS, input: Any = INPUT, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": input, "questions": questions, **extra}


def check_decision(decision: Any, questions: list[dict[str, Any]] = QUESTIONS) -> None:
    """An answer per question, in question order, of its type and name, with the numbers the SDK's types hold
    (`openai.types.decision.Decision`; a plain document is read the same way through `as_dict`)."""
    document = decision if isinstance(decision, dict) else decision.model_dump()
    answers = document["answers"]
    assert [(a["type"], a["name"]) for a in answers] == [(q["type"], q.get("name")) for q in questions]
    for asked, answer in zip(questions, answers, strict=True):
        if asked["type"] == "predicate":
            assert 0.0 <= answer["probability"] <= 1.0
            continue
        probabilities = answer["probabilities"]
        assert sum(p["probability"] for p in probabilities) == pytest.approx(1.0)
        assert 0.0 <= answer["confidence"] <= 1.0
        if asked["type"] == "choice":
            values = [c["value"] for c in asked["choices"]]
            assert [(type(p["value"]), p["value"]) for p in probabilities] == [(type(v), v) for v in values]
            top = max(probabilities, key=lambda p: p["probability"])
            assert (type(answer["choice"]), answer["choice"]) == (type(top["value"]), top["value"])
        else:
            assert [(p["value"], p["label"]) for p in probabilities] == list(enumerate(
                level["label"] for level in asked["levels"]))
            assert answer["score"] == pytest.approx(sum(p["value"] * p["probability"] for p in probabilities))
    usage = document["usage"]
    assert usage["input_tokens"] > 0 and usage["output_tokens"] == 0
    assert usage["total_tokens"] == usage["input_tokens"]
