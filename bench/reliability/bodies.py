"""Decision request bodies: ordinary ones for load, and the one sender (and error reader) all drivers share.

Load bodies come from a seeded generator over a small pool of states, so some
requests reuse the KV prefix and some do not, as real traffic would, and every
run sends the same sequence.
"""

from __future__ import annotations

import json
import random
from typing import Any

import httpx

STATES = (
    "Invoice 4411 is 45 days overdue; two reminder emails went unanswered.",
    "Order 7781 left the warehouse on Monday; tracking has not updated for 9 days.",
    "The customer reports error E42 after the firmware update and cannot log in.",
    "A pull request changes the billing module and has no tests.",
    {"ticket": 1834, "priority": "high", "history": ["opened", "escalated"], "sla_hours": 4},
)
QUESTIONS = ("What should happen next?", "Which team should handle this?", "How urgent is it?")
OPTIONS = (("remind", "Send a reminder"), ("call", "Phone the customer"), ("escalate", "Escalate to a manager"),
           ("refund", "Refund in full"), ("wait", "Wait three more days"), ("close", "Close the case"))
VARIANTS = 8  # distinct suffixes per pool state: enough misses to exercise the cache, enough hits to use it
REQUEST_TIMEOUT_S = 120.0  # every driver's bound on one request (not the load's, which is SageMaker's 60 s)


def decision(decision_id: str = "case-1", state: object = STATES[0], question: str = QUESTIONS[0],
             options: int | list[tuple[str, str]] = 3, **knobs: object) -> dict[str, Any]:
    """A valid request: `options` is a count (taken from the pool) or explicit (id, description) pairs."""
    pairs = list(OPTIONS[:options]) if isinstance(options, int) else options
    return {"decision": {"id": decision_id, "state": state, "question": question,
                         "options": [{"id": i, "description": d} for i, d in pairs]}, **knobs}


def load_body(rng: random.Random, decision_id: str) -> dict[str, Any]:
    """One request of the load mix: 2-6 options, one in eight debiased by permutation (at most 3 options)."""
    state: object = rng.choice(STATES)
    variant = rng.randrange(VARIANTS)
    state = {**state, "variant": variant} if isinstance(state, dict) else f"{state} (case {variant})"
    permute = rng.random() < 0.125
    count = rng.randint(2, 3) if permute else rng.randint(2, len(OPTIONS))
    return decision(decision_id, state, rng.choice(QUESTIONS), count, debias="permute" if permute else "none")


def post_json(client: httpx.Client, url: str, body: dict[str, Any] | bytes, **kwargs: Any) -> httpx.Response:
    """POST a document (or raw bytes) as application/json."""
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.post(f"{url}/invocations", content=content, headers={"content-type": "application/json"},
                       **kwargs)


def error_code(response: httpx.Response) -> str | None:
    """`error.code` of a JSON error envelope, else None."""
    try:
        return response.json()["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None
