"""OpenAI Decisions requests and clients the adapter tests share (tests/adapter): the unmodified openai SDK pointed
at an adapter on the embedded model, questions of every type, and raw posts for what the SDK would not send."""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import OpenAI

MODEL = "SmolLM2-135M-Instruct.Q4_1"
LONG_S = 600.0
PREDICATE = {"type": "predicate", "instructions": "The customer is asking for money back.", "name": "refund"}
CHOICE = {"type": "choice", "instructions": "Which team should handle this ticket?", "name": "team",
          "choices": [{"value": "Billing", "description": "Payments, invoices, refunds"},
                      {"value": "Technical", "description": "Bugs, outages, integrations"},
                      {"value": "Sales"}]}
BOOLEAN = {"type": "choice", "instructions": "Is this about an invoice?",
           "choices": [{"value": True}, {"value": "true"}, {"value": False, "description": "Not about an invoice"}]}
SCORE = {"type": "score", "instructions": "How frustrated is the customer?", "name": "anger",
         "levels": [{"label": "Calm"}, {"label": "Frustrated", "description": "upset but polite"},
                    {"label": "Very angry"}]}


def sdk(url: str, key: str = "unused", **options: Any) -> OpenAI:
    return OpenAI(base_url=url + "/v1", api_key=key, max_retries=0, timeout=LONG_S, **options)


def post(client: httpx.Client, payload: object, path: str = "/v1/decisions") -> httpx.Response:
    return client.post(path, content=json.dumps(payload).encode(), timeout=LONG_S,
                       headers={"content-type": "application/json"})


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error
