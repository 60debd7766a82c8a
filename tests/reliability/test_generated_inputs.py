"""Generated inputs: hypothesis properties of the schema (in-process and over HTTP), schemathesis from OpenAPI; over
HTTP to an adapter on the tiny random-weight model (tests/reliability/conftest.py: `tiny_adapter`)."""

from __future__ import annotations

import json
from collections.abc import Callable

import httpx
import pytest

from bench.reliability.decisions_properties import check_decisions_http
from bench.reliability.fuzz import run_openapi_fuzz
from bench.reliability.openapi import decision_openapi
from bench.reliability.properties import check_http, check_validation
from bench.reliability.servers import Server
from semif_adapter.doors.request_schema import DecisionRequest


def test_validation_raises_only_request_errors_and_accepted_requests_round_trip() -> None:
    tried = check_validation(max_examples=250)
    assert set(tried) == {"valid", "mutated", "bytes"}


@pytest.mark.slow
def test_nothing_over_http_gets_a_server_error(post: Callable[[bytes], httpx.Response]) -> None:
    tried = check_http(max_examples=30, post=post)
    assert any(kind.startswith("valid -> 200") for kind in tried)
    assert any(kind.endswith("-> 400") for kind in tried)


def test_openapi_request_schema_is_the_adapters_own() -> None:
    document = decision_openapi()
    schemas = document["components"]["schemas"]
    generated = DecisionRequest.model_json_schema(ref_template="#/components/schemas/{model}")
    assert schemas["DecisionRequest"] == {key: value for key, value in generated.items() if key != "$defs"}
    assert {name: schemas[name] for name in generated["$defs"]} == generated["$defs"]


@pytest.mark.slow
def test_schemathesis_finds_no_server_error_nor_contract_break(tiny_adapter: Server) -> None:
    result = run_openapi_fuzz(tiny_adapter.url, max_examples=12)
    assert result["problems"] == [], result
    statuses = result["by_operation_and_status"]
    assert any(key.startswith("POST /invocations positive -> 200") for key in statuses)
    assert any(key.startswith("POST /invocations negative -> 4") for key in statuses)


@pytest.mark.slow
def test_the_openai_door_gives_no_server_error_and_keeps_serving(tiny_adapter: Server) -> None:
    with httpx.Client(timeout=120) as client:
        def post(raw: bytes) -> httpx.Response:
            return client.post(f"{tiny_adapter.url}/v1/decisions", content=raw,
                               headers={"content-type": "application/json"})

        tried = check_decisions_http(max_examples=40, post=post)
        assert any(kind.startswith("valid -> 200") for kind in tried), tried
        assert any(kind.endswith("-> 400") for kind in tried), tried
        after = post(json.dumps({"model": "jev-latest", "input": "Still serving?", "questions": [
            {"type": "predicate", "instructions": "Is this a question?"}]}).encode())
        assert after.status_code == 200 and after.json()["answers"][0]["type"] == "predicate"
