"""OpenAI Decisions requests and clients the adapter tests share (tests/adapter): the unmodified openai SDK pointed
at an adapter on the embedded model, questions of every type, and raw posts for what the SDK would not send."""

from __future__ import annotations

import json
from typing import Any

import httpx
from openai import OpenAI

from support.systemone import TICKET

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


CALL = {"type": "function_call", "call_id": "call_1", "name": "lookup_order", "arguments": '{"order": 4471}'}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": '{"charged": 2, "refund": "pending"}'}
CUSTOM = {"type": "custom_tool_call", "call_id": "call_2", "name": "shell", "input": "grep 4471 refunds.log"}
CUSTOM_OUTPUT = {"type": "custom_tool_call_output", "call_id": "call_2",
                 "output": [{"type": "input_text", "text": "4471 refund queued 2026-03-02"}]}
CONVERSATION = [
    {"role": "system", "content": "You are the support desk's triage agent."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Look orders up before you answer."}]},
    {"role": "user", "content": [{"type": "input_text", "text": TICKET},
                                 {"type": "input_json", "data": {"order": 4471, "plan": "pro"}}]},
    {"role": "assistant", "content": [{"type": "output_text", "text": "Let me check that order."}],
     "phase": "commentary"},
    CALL, OUTPUT, CUSTOM, CUSTOM_OUTPUT,
    {"role": "assistant", "content": [{"type": "output_text", "text": "You were charged twice; the refund is queued."},
                                      {"type": "refusal", "refusal": "I cannot promise a date."}]},
]
# The same conversation as System One's message state (Chat Completions' shape, as llama.cpp reads it): a call joins
# the assistant message before it, an output is a `tool` message, parts are read as their text joined by blank lines.
MESSAGE_STATE = [
    {"role": "system", "content": "You are the support desk's triage agent."},
    {"role": "developer", "content": "Look orders up before you answer."},
    {"role": "user", "content": TICKET + '\n\n{"order":4471,"plan":"pro"}'},
    {"role": "assistant", "content": "Let me check that order.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": 4471}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"charged": 2, "refund": "pending"}'},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_2", "type": "custom", "custom": {"name": "shell", "input": "grep 4471 refunds.log"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "4471 refund queued 2026-03-02"},
    {"role": "assistant", "content": "You were charged twice; the refund is queued.\n\nI cannot promise a date."},
]
