"""boto3 itself against the local gateway, with the real model behind both endpoints (slow)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import boto3
import pytest

from scripts.smoke.answers import chat_content, stream_text
from semif_decision_client import DecisionClient, DecisionRejectedError, DecisionRequest, Policy, runtime_client

pytestmark = pytest.mark.slow
PAYLOADS = Path(__file__).resolve().parents[3] / "scripts" / "payloads"
CHAT = {**json.loads((PAYLOADS / "chat.json").read_text()), "max_tokens": 24, "temperature": 0}
DECISION = json.loads((PAYLOADS / "decision.json").read_text())


def _invoke(runtime: Any, name: str, body: dict[str, Any]) -> Any:
    return runtime.invoke_endpoint(EndpointName=name, ContentType="application/json", Body=json.dumps(body))


def test_chat_answers_through_invoke_endpoint(runtime: Any) -> None:
    response = _invoke(runtime, "local-chat", CHAT)
    assert response["ContentType"].startswith("application/json")
    assert response["InvokedProductionVariant"] == "AllTraffic"
    body = json.loads(response["Body"].read())
    assert chat_content(json.dumps(body).encode()).strip()
    assert body["usage"]["completion_tokens"] <= 24


def test_chat_stream_reassembles_into_the_non_streamed_answer(runtime: Any) -> None:
    plain = chat_content(_invoke(runtime, "local-chat", CHAT)["Body"].read())
    response = runtime.invoke_endpoint_with_response_stream(
        EndpointName="local-chat", ContentType="application/json", Body=json.dumps({**CHAT, "stream": True}))
    assert response["ContentType"].startswith("text/event-stream")
    parts = [event["PayloadPart"]["Bytes"] for event in response["Body"]]
    streamed = stream_text(parts)
    assert len(parts) > 2  # token by token, not one buffered blob
    assert streamed.done
    assert streamed.text == plain


def test_chat_error_is_a_model_error_with_llama_servers_status(runtime: Any) -> None:
    with pytest.raises(runtime.exceptions.ModelError) as raised:
        _invoke(runtime, "local-chat", {"messages": "not a list"})
    error = raised.value.response
    assert error["OriginalStatusCode"] == 400
    assert "messages" in json.loads(error["OriginalMessage"])["error"]["message"]


def test_decision_answers_with_one_probability_per_option(runtime: Any) -> None:
    body = json.loads(_invoke(runtime, "local-decision", DECISION)["Body"].read())
    assert body["decision_id"] == DECISION["decision"]["id"]
    assert body["option_ids"] == [o["id"] for o in DECISION["decision"]["options"]]
    assert sum(body["probabilities"]) == pytest.approx(1.0, abs=1e-6)
    assert len(body["option_logits"]) == len(body["option_ids"])


def test_decision_refusal_is_a_model_error_naming_the_field(runtime: Any) -> None:
    one_option = json.loads(json.dumps(DECISION))
    one_option["decision"]["options"] = one_option["decision"]["options"][:1]
    with pytest.raises(runtime.exceptions.ModelError) as raised:
        _invoke(runtime, "local-decision", one_option)
    assert raised.value.response["OriginalStatusCode"] == 400
    error = json.loads(raised.value.response["OriginalMessage"])["error"]
    assert error["field"].startswith("decision.options")
    assert error["code"]


@pytest.mark.parametrize("operation", ["invoke_endpoint", "invoke_endpoint_with_response_stream"])
def test_unknown_endpoint_name(runtime: Any, operation: str) -> None:
    with pytest.raises(runtime.exceptions.ValidationError, match="Endpoint local-nope of account"):
        getattr(runtime, operation)(EndpointName="local-nope", ContentType="application/json", Body=b"{}")


@pytest.fixture(scope="module")
def decision_client(local_endpoints: Any) -> DecisionClient:
    session = boto3.Session(aws_access_key_id="local", aws_secret_access_key="local", region_name="us-east-1")
    return DecisionClient("local-decision", client=runtime_client(session=session, endpoint_url=local_endpoints.url))


def test_decision_client_against_the_real_adapter(decision_client: DecisionClient) -> None:
    request = DecisionRequest.from_payload(DECISION)
    decision = decision_client.decide(request)
    assert decision.option_ids == request.option_ids
    assert set(decision.probabilities) == set(request.option_ids)
    assert decision.best in request.option_ids
    assert 0.0 <= decision.margin <= 1.0
    assert decision.choose(Policy(threshold=1.0, fallback="escalate")) == "escalate"
    assert decision.choose(Policy(threshold=0.0, fallback="escalate")) == decision.best
    # deterministic: the same request gives the same probabilities
    assert decision_client.decide(request).probabilities == decision.probabilities


def test_decision_client_sends_debias_and_temperature(decision_client: DecisionClient) -> None:
    request = DecisionRequest.from_payload(DECISION)
    plain = decision_client.decide(request)
    tuned = decision_client.decide(dataclasses.replace(request, debias="permute", temperature=2.0))
    assert (plain.raw["debias"], plain.raw["temperature"]) == ("none", 1.0)
    assert (tuned.raw["debias"], tuned.raw["temperature"]) == ("permute", 2.0)  # they reached the adapter
    assert tuned.logits != plain.logits  # permute averages each option's letter over every slot


def test_decision_client_surfaces_the_adapters_refusal(decision_client: DecisionClient) -> None:
    with pytest.raises(DecisionRejectedError) as raised:
        decision_client.decide({"decision": {**DECISION["decision"], "state": {}}})
    assert raised.value.status == 400
    assert raised.value.field == "decision.state"
