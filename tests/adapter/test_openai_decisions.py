"""The OpenAI Decisions door on the real adapter, driven by the unmodified openai SDK (sync and async): answer
shapes, names, typed choice values, refusals, usage, every error mapped to the SDK's exception class, and the same
numbers as the other two doors. On the tiny model (`tiny_adapter`) but for the overload test, which needs decisions
slow enough to queue."""

from __future__ import annotations

import asyncio
import json
import math
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI
from support.openai_adapter import BOOLEAN, CHOICE, LONG_S, PREDICATE, SCORE, error_of, post, sdk
from support.openai_adapter import MODEL as EMBEDDED_MODEL
from support.systemone import TICKET, numbers

from scripts.dev.tiny_model import tiny_model, tiny_model_name
from semif_adapter.doors.api_keys import HASH_PREFIX, digest
from semif_adapter.engine.embedded_model import embedded_model_path

pytestmark = pytest.mark.slow
MODEL = tiny_model_name()  # the doors' tests run on the tiny model (tests/adapter/conftest.py, `tiny_adapter`)

def test_every_type_answers_in_the_sdks_types_in_question_order(tiny_adapter):
    decision = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET,
                                                 questions=[PREDICATE, CHOICE, BOOLEAN, SCORE])
    predicate, team, boolean, anger = decision.answers
    assert decision.model == MODEL
    assert [a.type for a in decision.answers] == ["predicate", "choice", "choice", "score"]
    assert [a.name for a in decision.answers] == ["refund", "team", None, "anger"]
    assert 0 <= predicate.probability <= 1
    assert [p.value for p in team.probabilities] == ["Billing", "Technical", "Sales"]
    assert math.isclose(sum(p.probability for p in team.probabilities), 1.0)
    assert team.choice == max(team.probabilities, key=lambda p: p.probability).value
    n, top = 3, max(p.probability for p in team.probabilities)
    assert math.isclose(team.confidence, (top - 1 / n) / (1 - 1 / n))
    # typed values: the boolean true and the string "true" are two choices, each returned as its own type
    assert [p.value for p in boolean.probabilities] == [True, "true", False]
    assert [type(p.value) for p in boolean.probabilities] == [bool, str, bool]
    assert [(p.value, p.label) for p in anger.probabilities] == [(0, "Calm"), (1, "Frustrated"), (2, "Very angry")]
    assert math.isclose(anger.score, sum(p.value * p.probability for p in anger.probabilities))
    usage = decision.usage
    assert usage.output_tokens == 0 and usage.output_tokens_details.reasoning_tokens == 0
    assert usage.total_tokens == usage.input_tokens > 0
    assert 0 <= usage.input_tokens_details.cached_tokens <= usage.input_tokens


def test_the_input_is_charged_once_and_a_repeat_is_served_from_the_cache(tiny_adapter):
    client = sdk(tiny_adapter.url)
    state = TICKET + " (usage check)"
    one = client.decisions.create(model=MODEL, input=state, questions=[PREDICATE]).usage
    assert one.input_tokens_details.cache_write_tokens > 0  # the input was computed here and saved
    two = client.decisions.create(model=MODEL, input=state, questions=[PREDICATE, PREDICATE]).usage
    own = two.input_tokens - one.input_tokens  # the second question's own tokens: the input is charged once
    assert 0 < own < one.input_tokens_details.cache_write_tokens
    assert two.input_tokens_details.cached_tokens >= one.input_tokens_details.cache_write_tokens
    assert two.input_tokens_details.cache_write_tokens == 0


def test_the_async_client_gets_the_same_numbers(tiny_adapter):
    async def ask() -> Any:
        async with AsyncOpenAI(base_url=tiny_adapter.url + "/v1", api_key="unused", max_retries=0,
                               timeout=LONG_S) as client:
            return await client.decisions.create(model=MODEL, input=TICKET, questions=[CHOICE, SCORE])

    asynchronous = asyncio.run(ask())
    synchronous = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET, questions=[CHOICE, SCORE])
    assert [a.model_dump(exclude={"x_timing"}) for a in asynchronous.answers] == \
        [a.model_dump(exclude={"x_timing"}) for a in synchronous.answers]


def test_messages_and_parts_read_as_the_same_input(tiny_adapter):
    client = sdk(tiny_adapter.url)
    plain = client.decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE])
    messages = client.decisions.create(model=MODEL, questions=[PREDICATE], input=[
        {"role": "user", "content": [{"type": "input_text", "text": TICKET}]}])
    assert messages.answers[0].probability == plain.answers[0].probability


def test_the_same_question_through_three_doors_gives_the_same_numbers(tiny_client):
    """OpenAI's choice, System One's choice and a SemIf decision are one internal question: equal to the bit."""
    options = {"Billing": "Payments, invoices, refunds", "Technical": "Bugs, outages, integrations"}
    instructions = "Which team should handle this ticket?"
    openai_answer = post(tiny_client, {"model": MODEL, "input": TICKET, "x_scoring": "pmi", "questions": [
        {"type": "choice", "instructions": instructions,
         "choices": [{"value": k, "description": v} for k, v in options.items()]},
        {"type": "predicate", "instructions": "Is the customer asking for money back?"}]}).json()["answers"]
    systemone = post(tiny_client, {"model": "jev-latest", "state": TICKET, "x_scoring": "pmi", "questions": {
        "team": {"type": "choice", "instructions": instructions, "criteria": options},
        "refund": {"type": "noul", "instructions": "Is the customer asking for money back?"}}},
        "/v1/systemone").json()["answers"]
    semif = post(tiny_client, {"scoring": "pmi", "decision": {
        "id": "t-1", "state": TICKET, "question": instructions,
        "options": [{"id": k, "description": v} for k, v in options.items()]}}, "/invocations").json()
    on_invocations = post(tiny_client, {"model": MODEL, "input": TICKET, "x_scoring": "pmi", "questions": [
        {"type": "choice", "instructions": instructions,
         "choices": [{"value": k, "description": v} for k, v in options.items()]}]}, "/invocations").json()
    team = [p["probability"] for p in openai_answer[0]["probabilities"]]
    assert team == list(systemone["team"]["probabilities"].values()) == semif["probabilities"]
    assert openai_answer[0]["x_option_logits"] == list(systemone["team"]["x_option_logits"].values()) \
        == semif["option_logits"]
    assert on_invocations["answers"][0] == {**openai_answer[0], "x_timing": on_invocations["answers"][0]["x_timing"]}
    assert openai_answer[1]["probability"] == systemone["refund"]["noul"]
    assert openai_answer[0]["choice"] == systemone["team"]["choice"] == semif["option_ids"][
        semif["probabilities"].index(max(semif["probabilities"]))]
    assert numbers(systemone["team"])  # the System One answer carried every number compared


def test_invocations_named_as_the_decisions_route_answer_in_its_shape_whatever_the_body(tiny_client):
    """SageMaker routes only /invocations: a caller that names the route gets OpenAI's errors even for a body that
    does not look like OpenAI's (no `input`)."""
    response = tiny_client.post("/invocations", content=json.dumps({"model": MODEL, "questions": {"a": PREDICATE}}),
                           headers={"content-type": "application/json",
                                    "x-amzn-sagemaker-custom-attributes": "route=/v1/decisions"})
    assert error_of(response, 400)["param"] in ("input", "questions")
    unnamed = post(tiny_client, {"model": MODEL, "questions": {"a": PREDICATE}}, "/invocations")
    assert unnamed.status_code == 422 and "detail" in unnamed.json()  # System One's, as the body reads


def test_a_question_that_does_not_fit_is_refused_and_the_others_answered(tiny_adapter):
    long_instructions = "Consider every word of this sentence carefully. " * 600  # over the 4096-token context
    decision = sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET, questions=[
        PREDICATE, {"type": "predicate", "instructions": long_instructions, "name": "too-long"}, SCORE])
    assert [a.type for a in decision.answers] == ["predicate", "refusal", "score"]
    refusal = decision.answers[1].model_dump()
    assert refusal["name"] == "too-long" and refusal["x_reason"]["code"] == "context_length_exceeded"


def test_an_input_that_does_not_fit_is_a_400_naming_the_counts(tiny_adapter):
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(tiny_adapter.url).decisions.create(model=MODEL, input="A long complaint. " * 3000, questions=[PREDICATE])
    error = raised.value.body
    assert raised.value.code == "context_length_exceeded" and error["param"] == "input"
    assert "tokens" in error["message"] and "4096" in error["message"]


@pytest.mark.parametrize(("question", "param", "code"), [
    ({**CHOICE, "choices": [{"value": "A"}]}, "questions[1].choices", "array_too_short"),
    ({**CHOICE, "choices": [{"value": "A"}, {"value": "A", "description": "again"}]},
     "questions[1].choices[1].value", "duplicate_value"),
    ({**CHOICE, "choices": [{"value": "A"}, {"value": 3}]}, "questions[1].choices[1].value", "invalid_value"),
    ({**SCORE, "levels": [{"label": f"L{i}"} for i in range(11)]}, "questions[1].levels", "array_too_long"),
    ({"type": "verdict", "instructions": "?"}, "questions[1].type", "invalid_value"),
    ({"type": "predicate"}, "questions[1].instructions", "missing_required_parameter"),
    ({"type": "predicate", "instructions": [{"type": "input_image", "image_url": "data:image/png;base64,AA=="}]},
     "questions[1].instructions[0]", "unsupported_content"),
])
def test_each_bad_question_is_a_400_naming_the_field(tiny_adapter, question, param, code):
    with pytest.raises(openai.BadRequestError) as raised:
        sdk(tiny_adapter.url).decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE, question])
    assert raised.value.body["param"] == param and raised.value.code == code
    assert raised.value.body["type"] == "invalid_request_error"


def test_request_level_errors_map_to_the_sdks_exceptions(tiny_adapter, tiny_client):
    api = sdk(tiny_adapter.url)
    with pytest.raises(openai.NotFoundError) as missing:
        api.decisions.create(model="gpt-6-luna", input=TICKET, questions=[PREDICATE])
    assert missing.value.code == "model_not_found" and missing.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as image:
        api.decisions.create(model=MODEL, questions=[PREDICATE], input=[{"role": "user", "content": [
            {"type": "input_text", "text": TICKET}, {"type": "input_image", "image_url": "https://x.invalid/a.png"}]}])
    assert image.value.body["param"] == "input[0].content[1]"
    with pytest.raises(openai.BadRequestError) as none:
        api.decisions.create(model=MODEL, input=TICKET, questions=[])
    assert none.value.body["param"] == "questions"
    with pytest.raises(openai.BadRequestError) as role:
        api.decisions.create(model=MODEL, input=[{"role": "critic", "content": "Hi"}], questions=[PREDICATE])
    assert role.value.body["param"] == "input[0].role"
    not_json = tiny_client.post("/v1/decisions", content=b"{not json", headers={"content-type": "application/json"})
    assert error_of(not_json, 400)["type"] == "invalid_request_error"
    assert error_of(tiny_client.get("/v1/decisions"), 405)["param"] == "path"
    assert error_of(post(tiny_client, [1, 2]), 400)["code"] == "invalid_type"
    # unknown fields are ignored, safety_identifier accepted
    ok = post(tiny_client, {"model": "jev-latest", "input": TICKET, "questions": [PREDICATE],
                            "safety_identifier": "u-1", "metadata": {"anything": True}})
    assert ok.status_code == 200 and ok.json()["answers"][0]["type"] == "predicate"


def test_a_key_is_required_when_keys_are_on(start_adapter, tmp_path):
    keys = tmp_path / "keys.txt"
    keys.write_text(f"decisions {HASH_PREFIX}{digest('sk-test-1').hex()}\n")
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(tiny_model()), "SEMIF_API_KEYS_FILE": str(keys)})
    process.wait_ready()
    with pytest.raises(openai.AuthenticationError) as wrong:
        sdk(process.url, "sk-wrong").decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE])
    assert wrong.value.status_code == 401 and wrong.value.code == "invalid_api_key"
    missing = httpx.post(process.url + "/v1/decisions", json={"model": MODEL, "input": TICKET,
                                                               "questions": [PREDICATE]}, timeout=LONG_S)
    assert error_of(missing, 401)["code"] == "invalid_api_key"
    allowed = sdk(process.url, "sk-test-1").decisions.create(model=MODEL, input=TICKET, questions=[PREDICATE])
    assert allowed.answers[0].type == "predicate"


def test_overload_is_429_with_retry_after_and_the_sdks_rate_limit_error(start_adapter):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_QUEUE_SIZE": "1"})
    process.wait_ready()
    client = sdk(process.url)

    def ask(index: int) -> Any:
        try:
            evidence = f"Case {index}: " + "a long piece of evidence. " * 40
            return client.decisions.create(model=EMBEDDED_MODEL, input=evidence, questions=[PREDICATE])
        except openai.APIStatusError as error:
            return error

    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(ask, range(6)))
    refused = [o for o in outcomes if isinstance(o, openai.APIStatusError)]
    assert refused and len(refused) < len(outcomes), outcomes
    assert all(isinstance(error, openai.RateLimitError) for error in refused), refused
    assert refused[0].response.headers["retry-after"] == "1" and refused[0].code == "queue_full"
    assert client.decisions.create(model=EMBEDDED_MODEL, input=TICKET, questions=[PREDICATE]).answers  # serving goes on


def test_the_models_list_answers_both_sdks(tiny_adapter, tiny_client):
    listed = [model.id for model in sdk(tiny_adapter.url).models.list()]
    assert listed[0] == MODEL and "jev-latest" in listed
    document = tiny_client.get("/v1/models").json()
    assert document["object"] == "list" and document["models"][0]["name"] == MODEL


def test_an_oversized_body_sent_before_reading_gets_its_413(tiny_adapter):
    """A client that writes its whole body before it reads (urllib, urllib3, botocore) must still see the 413."""
    host, port = tiny_adapter.url.removeprefix("http://").split(":")
    body = b'{"input": "' + b"x" * (7 * 1024 * 1024) + b'"}'
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(b"POST /v1/decisions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        answer = b""
        while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    head, _, payload = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    assert json.loads(payload)["error"]["code"] == "body_too_large"
