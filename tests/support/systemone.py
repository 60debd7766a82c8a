"""System One request bodies the adapter tests share: one state, questions of every type."""

from __future__ import annotations

from typing import Any

TICKET = ("Hi, I was charged twice for my March invoice (order #4471) and the refund I was promised last week "
          "still hasn't arrived. Please fix this today or I will dispute the charge with my bank.")
NOUL = {"type": "noul", "instructions": "Is the customer asking for money back?"}
CHOICE = {"type": "choice", "instructions": "Which team should handle this ticket?",
          "criteria": {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages, integrations",
                       "Sales": None}}
SCORE = {"type": "score", "instructions": "How frustrated is the customer?",
         "criteria": ["Calm", "Frustrated", "Very angry"]}
QUESTIONS = {"refund": NOUL, "team": CHOICE, "anger": SCORE}
EXTRA = {"urgent": {"type": "noul", "instructions": "Does the customer need an answer today?",
                    "criteria": {"true": "They set a deadline"}},
         "lang": {"type": "choice", "instructions": "What language is the ticket in?",
                  "criteria": {"English": None, "German": None, "Other": None}},
         "polite": {"type": "score", "instructions": "How polite is the message?",
                    "criteria": ["Rude", "Neutral", {"label": "Polite", "signals": ["please", "thanks"]}]}}


def body(questions: dict[str, Any], state: Any = TICKET, **extra: Any) -> dict[str, Any]:
    return {"model": "jev-latest", "state": state, "questions": questions, **extra}


def numbers(answer: dict[str, Any]) -> tuple[Any, ...]:
    """What an answer commits to, as exact values (no timing): what bit-identity compares."""
    return tuple((key, answer[key]) for key in ("noul", "choice", "score", "probabilities", "confidence",
                                               "x_option_logits", "x_prompt") if key in answer)


def many_options(count: int) -> dict[str, str | None]:
    return {"Billing": "Payments, invoices, refunds",
            **{f"Queue {i:03d}": f"Tickets routed to queue {i}" for i in range(1, count)}}
