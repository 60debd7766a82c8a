"""Tool calls as the model's own chat template shows them: a template written for tools (the test model's, in Qwen
2.5's layout: scripts/dev/tool_template_model.py, plumbing only) renders a conversation's function calls and their
outputs itself; a template without tool calls (SmolLM2's own) or a conversation with a custom call keeps llama.cpp's
template call, each call a JSON line in its assistant turn. The expected prompts are written out here by hand."""

from __future__ import annotations

from collections.abc import Iterator

import gguf
import httpx
import pytest
from support.adapter_process import AdapterProcess
from support.openai_adapter import CALL, OUTPUT, post

from scripts.dev.tool_template_model import TOOL_TEMPLATE, tool_template_model
from semif_adapter.core.conversation import message_state, template_messages
from semif_adapter.engine.embedded_model import embedded_model_path
from semif_adapter.engine.tool_call_template import ToolCallTemplate

ASK = "Is the customer asking for money back?"
CALLED = [
    {"role": "system", "content": "You are the support desk's triage agent."},
    {"role": "user", "content": "I was charged twice for order 4471."},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "lookup_order", "arguments": '{"order": 4471}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": '{"charged": 2, "refund": "pending"}'},
]
# CALLED as the test model's template lays it out (no assistant turn opened after it).
CALLED_AS_TEMPLATE = (
    "<|im_start|>system\nYou are the support desk's triage agent.<|im_end|>\n"
    "<|im_start|>user\nI was charged twice for order 4471.<|im_end|>\n"
    "<|im_start|>assistant\nLet me check.\n<tool_call>\n"
    '{"name": "lookup_order", "arguments": {"order": 4471}}\n</tool_call><|im_end|>\n'
    "<|im_start|>user\n<tool_response>\n"
    '{"charged": 2, "refund": "pending"}\n</tool_response><|im_end|>\n'
)
CUSTOM = [
    {"role": "user", "content": "Was my refund queued?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "call_2", "type": "custom", "custom": {"name": "shell", "input": "grep 4471 refunds.log"}}]},
    {"role": "tool", "tool_call_id": "call_2", "content": "4471 refund queued"},
]
# CUSTOM through llama.cpp's template call (ChatML, which it recognises in the template): the call as one canonical
# JSON line in its assistant turn, the output as a `tool` turn.
CUSTOM_AS_TURNS = (
    "<|im_start|>user\nWas my refund queued?<|im_end|>\n"
    '<|im_start|>assistant\n{"custom":{"input":"grep 4471 refunds.log","name":"shell"},"id":"call_2","type":"custom"}'
    "<|im_end|>\n"
    "<|im_start|>tool\n4471 refund queued<|im_end|>\n"
)


def test_a_template_shows_tool_calls_only_where_a_probe_call_and_its_output_reach_its_text():
    assert ToolCallTemplate(TOOL_TEMPLATE, "<|im_end|>").shows_tool_calls
    smollm2 = gguf.GGUFReader(str(embedded_model_path())).fields["tokenizer.chat_template"].contents()
    assert not ToolCallTemplate(smollm2, "<|im_end|>").shows_tool_calls  # it writes role and content only
    assert not ToolCallTemplate("{{ raise_exception('roles must alternate') }}", "").shows_tool_calls
    assert not ToolCallTemplate("{% for m in messages %}", "").shows_tool_calls  # does not compile
    assert ToolCallTemplate(TOOL_TEMPLATE, "<|im_end|>").render(template_messages(message_state(CALLED)) or []) \
        == CALLED_AS_TEMPLATE


def test_the_messages_a_template_reads_carry_object_arguments_and_named_outputs():
    messages = template_messages(message_state(CALLED))
    assert messages is not None
    assert messages[2]["tool_calls"][0]["function"]["arguments"] == {"order": 4471}
    assert messages[3] == {"role": "tool", "content": '{"charged": 2, "refund": "pending"}', "tool_call_id": "call_1",
                           "name": "lookup_order"}
    not_json = [*CALLED[:2], {**CALLED[2], "tool_calls": [{**CALLED[2]["tool_calls"][0], "function": {
        "name": "lookup_order", "arguments": "order 4471"}}]}, CALLED[3]]
    assert template_messages(message_state(not_json))[2]["tool_calls"][0]["function"]["arguments"] == "order 4471"
    assert template_messages(message_state(CUSTOM)) is None  # no chat template knows custom calls
    assert template_messages(message_state([CALLED[0], CALLED[1]])) is None  # no call: llama.cpp's call as before


@pytest.fixture(scope="module")
def tool_client() -> Iterator[httpx.Client]:
    process = AdapterProcess({"SM_LLAMA_CPP_MODEL": str(tool_template_model()), "SEMIF_RESULT_CACHE_ENTRIES": "0"})
    try:
        process.wait_ready()
        with httpx.Client(base_url=process.url, timeout=600) as client:
            yield client
    finally:
        process.stop()


def _refund(client: httpx.Client, state: object, path: str = "/v1/systemone") -> float:
    body = {"state": state, "x_scoring": "pmi", "questions": {"refund": {"type": "noul", "instructions": ASK}}}
    answer = post(client, body, path)
    assert answer.status_code == 200, answer.text
    return float(answer.json()["answers"]["refund"]["noul"])


@pytest.mark.slow
def test_function_calls_read_as_the_models_template_writes_them_through_both_doors(tool_client):
    rendered = _refund(tool_client, CALLED_AS_TEMPLATE)
    assert _refund(tool_client, CALLED) == rendered  # the conversation is that text, to the bit
    assert _refund(tool_client, {"messages": CALLED}) == rendered  # llama.cpp's wrapped message state
    model = tool_client.get("/v1/models").json()["models"][0]["name"]
    through_openai = post(tool_client, {"model": model, "x_scoring": "pmi", "input": [
        {"role": "system", "content": CALLED[0]["content"]}, {"role": "user", "content": CALLED[1]["content"]},
        {"role": "assistant", "content": "Let me check."}, CALL, OUTPUT],
        "questions": [{"type": "predicate", "instructions": ASK}]})
    assert through_openai.status_code == 200, through_openai.text
    assert through_openai.json()["answers"][0]["probability"] == rendered


@pytest.mark.slow
def test_a_custom_call_keeps_llama_cpps_template_call_with_the_call_as_a_json_line(tool_client):
    assert _refund(tool_client, CUSTOM) == _refund(tool_client, CUSTOM_AS_TURNS)
