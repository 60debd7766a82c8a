"""The OpenAI Decisions door's whole input and knobs on the real adapter, driven by the unmodified openai SDK: every
input item kind, a long agent transcript, each invalid conversation as the SDK's exception with its `param`, the
same numbers through System One's message state, `prompt_cache_key` as a cache boundary, 400 questions, and
`safety_identifier` on the access-log line only. On the tiny model (`tiny_adapter`): the door is under test, not the
model."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from support.adapter_process import AdapterProcess
from support.openai_adapter import (
    CALL,
    CHOICE,
    CONVERSATION,
    CUSTOM,
    CUSTOM_OUTPUT,
    MESSAGE_STATE,
    OUTPUT,
    PREDICATE,
    SCORE,
    post,
    sdk,
)
from support.systemone import TICKET

from scripts.dev.tiny_model import tiny_model, tiny_model_name
from scripts.local.processes import wait_until

pytestmark = pytest.mark.slow
MODEL = tiny_model_name()  # the doors' tests run on the tiny model (tests/adapter/conftest.py, `tiny_adapter`)

@pytest.fixture(scope="module")
def cached_adapter() -> Iterator[AdapterProcess]:
    """An adapter with its result cache on (the shared one computes every answer)."""
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(tiny_model())})
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def test_every_input_item_kind_is_read_and_every_question_type_answered(tiny_adapter):
    decision = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=CONVERSATION,
                                                      questions=[PREDICATE, CHOICE, SCORE])
    assert [a.type for a in decision.answers] == ["predicate", "choice", "score"]
    assert 0 <= decision.answers[0].probability <= 1
    plain = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE])
    assert decision.answers[0].probability != plain.answers[0].probability  # the conversation, not the ticket alone
    assert decision.usage.input_tokens > plain.usage.input_tokens


def test_a_long_agent_transcript_with_several_tool_calls_is_answered(tiny_adapter):
    transcript: list[dict[str, Any]] = [{"role": "user", "content": TICKET}]
    for step in range(6):
        call = f"call_{step}"
        transcript += [{"role": "assistant", "content": f"Step {step}: checking the ledger."},
                       {"type": "function_call", "call_id": call, "name": "ledger", "arguments": f'{{"page": {step}}}'},
                       {"type": "function_call", "call_id": call + "b", "name": "refunds", "arguments": "{}"},
                       {"type": "function_call_output", "call_id": call + "b", "output": "no refund yet"},
                       {"type": "function_call_output", "call_id": call, "output": f"page {step}: 2 charges"}]
    transcript.append({"role": "assistant", "content": "I found the duplicate charge and queued the refund."})
    decision = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=transcript,
                                                      questions=[PREDICATE, CHOICE, SCORE])
    assert [a.type for a in decision.answers] == ["predicate", "choice", "score"]
    assert decision.usage.input_tokens > 500


def test_a_conversation_is_system_ones_message_state_bit_for_bit(tiny_client):
    """One conversation through OpenAI's door and System One's message state: the same internal question."""
    options = {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages, integrations"}
    openai_answer = post(tiny_client, {"model": MODEL, "input": CONVERSATION, "x_scoring": "pmi", "questions": [
        {"type": "choice", "instructions": CHOICE["instructions"],
         "choices": [{"value": k, "description": v} for k, v in options.items()]},
        {"type": "predicate", "instructions": "Is the customer asking for money back?"}]}).json()["answers"]
    systemone = post(tiny_client, {"model": "jev-latest", "state": MESSAGE_STATE, "x_scoring": "pmi", "questions": {
        "team": {"type": "choice", "instructions": CHOICE["instructions"], "criteria": options},
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}}},
        "/v1/systemone").json()["answers"]
    assert [p["probability"] for p in openai_answer[0]["probabilities"]] == \
        list(systemone["team"]["probabilities"].values())
    assert openai_answer[0]["x_option_logits"] == list(systemone["team"]["x_option_logits"].values())
    assert openai_answer[1]["probability"] == systemone["refund"]["noul"]


@pytest.mark.parametrize(("items", "param"), [
    ([OUTPUT], "input[0].call_id"),  # an output without its call
    ([{"role": "user", "content": TICKET}, OUTPUT, CALL], "input[1].call_id"),  # before its call
    ([CALL, {**CALL, "name": "again"}, OUTPUT], "input[1].call_id"),  # a repeated call_id
    ([CUSTOM, {**CUSTOM_OUTPUT, "call_id": "call_9"}], "input[1].call_id"),
    ([{"role": "tool", "content": "42"}], "input[0].role"),  # a role the API does not have
    ([{"type": "reasoning", "summary": []}], "input[0].type"),  # an item type the API does not have
    ([{"role": "user", "content": TICKET}, {"type": "function_call", "call_id": "c", "name": "f"}],
     "input[1].arguments"),
    ([{"role": "system", "content": [{"type": "input_json", "data": {}}]}], "input[0].content[0].type"),
    ([{"role": "assistant", "content": [{"type": "input_text", "text": "x"}]}], "input[0].content[0].type"),
    ([CALL, {**OUTPUT, "output": [{"type": "input_image", "image_url": "https://x.invalid/a.png"}]}],
     "input[1].output[0]"),
])
def test_each_invalid_conversation_is_a_400_naming_the_param(tiny_adapter, items, param):
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(tiny_adapter.url).decisions.create(model=MODEL, input=items, questions=[PREDICATE])
    assert raised.value.body["param"] == param and raised.value.body["type"] == "invalid_request_error"
    assert sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE]).answers  # serving


def test_an_invalid_message_state_is_system_ones_422_naming_the_field(tiny_client):
    refused = post(tiny_client, {"state": [{"role": "user", "content": TICKET}, {"role": "tool", "tool_call_id": "nope",
                                                                             "content": "x"}],
                            "questions": {"refund": {"type": "noul", "instructions": "Money back?"}}}, "/v1/systemone")
    assert refused.status_code == 422
    assert refused.json()["detail"][0]["loc"] == ["body", "state", 1, "tool_call_id"]


def test_prompt_cache_key_partitions_every_cache_and_safety_identifier_is_logged_only(cached_adapter):
    """A state computed under one key is computed again under another (never served from cache across keys) and
    served from cache under its own; the safety identifier is on the access-log line, not in the metrics."""
    process = cached_adapter
    api = sdk(process.url)
    state = TICKET + " (cache partition check)"

    def ask(key: str, **extra: Any) -> Any:
        return api.decisions.create(model=MODEL, input=state, questions=[PREDICATE], prompt_cache_key=key,
                                    prompt_cache_options={"mode": "implicit", "ttl": "30m"}, **extra)

    first = ask("tenant-a")
    other = ask("tenant-b")
    again = ask("tenant-a", safety_identifier="user-7f3a")
    written = first.usage.input_tokens_details.cache_write_tokens
    assert written > 0 and other.usage.input_tokens_details.cache_write_tokens == written  # computed twice
    assert other.usage.input_tokens_details.cached_tokens == first.usage.input_tokens_details.cached_tokens  # the
    # template's head only: nothing of tenant a's state was served to tenant b
    assert other.answers[0].x_timing["cache_source"] != "result"
    assert again.answers[0].x_timing["cache_source"] == "result"  # once under one key
    assert again.usage.input_tokens_details.cache_write_tokens == 0
    assert other.answers[0].probability == first.answers[0].probability  # the key never changes the numbers
    wait_until(lambda: "user-7f3a" in process.logs() and process.logs().count('"_aws"') >= 3, timeout_s=10,
               what="the access-log line and the metrics")  # both written after the response is sent
    lines = [json.loads(line) for line in process.logs().splitlines() if line.startswith("{")]
    access = [line for line in lines if line.get("safety_identifier") == "user-7f3a"]
    assert len(access) == 1 and access[0]["request_id"] and access[0]["path"] == "/v1/decisions"
    assert not [line for line in lines if "_aws" in line and "user-7f3a" in json.dumps(line)]


def test_400_questions_are_answered_and_the_401st_refused_naming_the_limit(cached_adapter):
    """The same question 400 times: computed once, the rest from the result cache (the count is what is tested)."""
    api = sdk(cached_adapter.url)
    decision = api.decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE] * 400)
    assert len(decision.answers) == 400 and {a.type for a in decision.answers} == {"predicate"}
    with pytest.raises(openai.BadRequestError) as raised:
        api.decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE] * 401)
    assert raised.value.body["param"] == "questions" and raised.value.code == "array_too_long"
    assert "400" in raised.value.body["message"]


def test_a_wrapped_message_state_is_its_messages_and_an_object_with_more_stays_json(tiny_client):
    def refund(state: object) -> Any:
        answer = post(tiny_client, {"state": state, "x_scoring": "pmi", "questions": {
            "refund": {"type": "noul", "instructions": "Money back?"}}}, "/v1/systemone")
        return answer.json()["answers"]["refund"]["noul"] if answer.status_code == 200 else answer.json()

    listed = refund(MESSAGE_STATE)
    assert refund({"messages": MESSAGE_STATE}) == listed  # llama.cpp's wrapped message state, to the bit
    assert refund({"messages": MESSAGE_STATE, "channel": "email"}) != listed  # a JSON state: nothing dropped
    refused = refund({"messages": [MESSAGE_STATE[0], {"role": "tool", "tool_call_id": "nope", "content": "x"}]})
    assert refused["detail"][0]["loc"] == ["body", "state", "messages", 1, "tool_call_id"]
