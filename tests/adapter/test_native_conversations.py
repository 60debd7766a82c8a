"""A conversation on the native path: OpenAI's `input` items reach llama.cpp's decision engine as a message state,
and the answers are llama-server's own for that state (a fresh llama-server started with the adapter's command line
and asked the same request as its first, as tests/adapter/test_native_types.py compares)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from support.adapter_process import AdapterProcess
from support.openai_adapter import CONVERSATION, MESSAGE_STATE

from bench.native.run import fresh_answer, native_arguments
from scripts.dev.decision_models import decision_model

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def native() -> Iterator[tuple[list[str], httpx.Client]]:
    adapter = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(decision_model("openjev", tiny=True)),
                              "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    try:
        adapter.wait_ready()
        with httpx.Client(base_url=adapter.url, timeout=120) as client:
            yield native_arguments(adapter.logs())["arguments"], client
    finally:
        adapter.stop()


def test_a_conversation_reaches_llama_server_as_its_message_state(native):
    arguments, client = native
    ours = client.post("/v1/decisions", json={"model": "jev-latest", "input": CONVERSATION, "questions": [
        {"type": "predicate", "name": "refund", "instructions": "Is the customer asking for money back?"},
        {"type": "choice", "name": "team", "instructions": "Which team should handle this?",
         "choices": [{"value": "billing", "description": "payments and refunds"}, {"value": "shipping"}]}]})
    theirs = fresh_answer(arguments, {"state": MESSAGE_STATE, "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"},
        "team": {"type": "choice", "instructions": "Which team should handle this?",
                 "criteria": {"billing": "payments and refunds", "shipping": None}}}})
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    refund, team = ours.json()["answers"]
    reference = theirs.json()["answers"]
    assert refund["probability"] == reference["refund"]["noul"]
    assert {c["value"]: c["probability"] for c in team["probabilities"]} == reference["team"]["probabilities"]
    through_systemone = client.post("/v1/systemone", json={"state": MESSAGE_STATE, "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}}})
    assert through_systemone.status_code == 200, through_systemone.text


def test_a_wrapped_message_state_reaches_llama_server_as_it_was_sent(native):
    arguments, client = native
    body = {"state": {"messages": MESSAGE_STATE}, "questions": {
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}}}
    ours, theirs = client.post("/v1/systemone", json=body), fresh_answer(arguments, body)
    assert ours.status_code == theirs.status_code == 200, (ours.text, theirs.text)
    assert ours.json()["answers"]["refund"]["noul"] == theirs.json()["answers"]["refund"]["noul"]
    listed = client.post("/v1/systemone", json={**body, "state": MESSAGE_STATE}).json()["answers"]["refund"]["noul"]
    assert listed != ours.json()["answers"]["refund"]["noul"]  # llama.cpp's template reads the object, not the list
