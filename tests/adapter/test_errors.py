"""Every error code over HTTP: JSON body with code, message and field; the server keeps serving."""

from __future__ import annotations

import json
import re
import threading

import httpx
import pytest

from semif_adapter.engine.embedded_model import embedded_model_path

JSON = {"content-type": "application/json"}


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()["error"]


def without(document: dict, *path: str) -> dict:
    copy = json.loads(json.dumps(document))
    target = copy
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copy


@pytest.mark.parametrize("body, field, words", [
    (b'{"decision": ', None, "not valid UTF-8 JSON"),
    (b"\xff\xfe{}", None, "not valid UTF-8 JSON"),
    (b"[1, 2]", None, "must be a JSON object"),
    (b'{"decision": {"id": 1}, "decision": {}}', "decision", "more than once"),
    (b'{"temperature": NaN}', None, "NaN is not valid JSON"),
])
def test_malformed_json_is_400(client, body, field, words):
    error = error_of(client.post("/invocations", content=body, headers=JSON), 400)
    assert words in error["message"]
    assert error.get("field") == field


def schema_cases(base: dict) -> list[tuple[dict, str]]:
    def edit(change) -> dict:
        copy = json.loads(json.dumps(base))
        change(copy)
        return copy

    many = [{"id": f"o{i}", "description": f"option {i}"} for i in range(17)]
    return [
        (without(base, "decision"), "decision"),
        (without(base, "decision", "question"), "decision.question"),
        (edit(lambda d: d["decision"].update(options=d["decision"]["options"][:1])), "decision.options"),
        (edit(lambda d: d["decision"].update(options=many)), "decision.options"),
        (edit(lambda d: d["decision"].update(options=[])), "decision.options"),
        (edit(lambda d: d["decision"]["options"][1].update(id=d["decision"]["options"][0]["id"])),
         "decision.options"),
        (edit(lambda d: d["decision"]["options"][2].update(id="")), "decision.options[2].id"),
        (edit(lambda d: d["decision"]["options"][0].update(description=7)), "decision.options[0].description"),
        (edit(lambda d: d["decision"].update(id="x" * 129)), "decision.id"),
        (edit(lambda d: d["decision"].update(state="")), "decision.state"),
        (edit(lambda d: d["decision"].update(state={})), "decision.state"),
        (edit(lambda d: d["decision"].update(question=["why"])), "decision.question"),
        (edit(lambda d: d.update(temperature=0)), "temperature"),
        (edit(lambda d: d.update(temperature="hot")), "temperature"),
        (edit(lambda d: d.update(debias="reverse")), "debias"),
        (edit(lambda d: d.update(debais="permute")), "debais"),
        (edit(lambda d: d["decision"].update(extra=True)), "decision.extra"),
    ]


def test_every_schema_violation_is_400_naming_the_field(client, make_decision):
    for body, field in schema_cases(make_decision()):
        error = error_of(client.post("/invocations", json=body), 400)
        assert error["code"] == "invalid_request"
        assert error["field"] == field, (body, error)
        assert error["message"].startswith(field)


def test_unpaired_surrogate_is_400(client):
    body = b'{"decision": {"id": "x", "state": "bad \\ud800 text", "question": "q", "options": []}}'
    error = error_of(client.post("/invocations", content=body, headers=JSON), 400)
    assert error["code"] == "invalid_text" and error["field"] == "decision.state"


def test_deep_nesting_is_400(client, make_decision):
    state: object = "leaf"
    for _ in range(200):
        state = {"k": state}
    error = error_of(client.post("/invocations", json=make_decision(state=state)), 400)
    assert error["code"] == "too_deep"


def test_body_over_6_mb_is_413(client):
    body = b'{"decision": {"state": "' + b"x" * (6 * 1024 * 1024) + b'"}}'
    error = error_of(client.post("/invocations", content=body, headers=JSON), 413)
    assert error["code"] == "body_too_large" and error["field"] == "body"


REPORT = "The quarterly report lists revenue, costs and a long appendix of numbers. "


def test_state_alone_over_context_is_413_naming_the_state(client, make_decision):
    error = error_of(client.post("/invocations", json=make_decision(state=REPORT * 400)), 413)
    assert error["code"] == "prompt_too_long" and error["field"] == "decision.state"
    assert "decision.state alone" in error["message"] and "the context holds 4096" in error["message"]


def test_a_state_too_long_for_any_tokens_is_413_without_being_tokenized(client, make_decision):
    state = REPORT * 10_000  # 760 kB: more bytes than 4096 of the vocabulary's longest pieces (81 bytes) hold
    error = error_of(client.post("/invocations", json=make_decision(state=state)), 413)
    assert error["code"] == "prompt_too_long" and error["field"] == "decision.state"
    needed = re.search(r"needs at least (\d+) tokens", error["message"])
    assert needed and int(needed[1]) >= len(state) // 81 and "the context holds 4096" in error["message"], error


def test_parts_that_fit_alone_but_not_together_are_413_with_token_counts(client, make_decision):
    request = make_decision(state=REPORT * 150, question=REPORT * 150 + "Which option?")
    error = error_of(client.post("/invocations", json=request), 413)
    assert error["code"] == "prompt_too_long" and error["field"] == "decision"
    assert " prefix + " in error["message"] and " common + " in error["message"]
    assert "the context holds 4096" in error["message"]


def test_wrong_content_type_is_415(client, make_decision):
    response = client.post("/invocations", content=json.dumps(make_decision()), headers={"content-type": "text/csv"})
    error = error_of(response, 415)
    assert error["field"] == "Content-Type" and "text/csv" in error["message"]


def test_unknown_path_is_404_and_wrong_method_is_405(client):
    assert error_of(client.get("/v1/chat/completions"), 404)["code"] == "not_found"
    assert error_of(client.get("/invocations"), 405)["code"] == "method_not_allowed"
    assert error_of(client.post("/ping"), 405)["code"] == "method_not_allowed"


def test_full_queue_is_503_with_retry_after(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()), "SEMIF_QUEUE_SIZE": "1"})
    process.wait_ready()
    responses: list[httpx.Response] = []

    def call(index: int) -> None:
        state = f"Case {index}: " + "a long and slow piece of evidence. " * 40
        responses.append(httpx.post(process.url + "/invocations", json=make_decision(state=state), timeout=60))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    statuses = sorted(r.status_code for r in responses)
    assert statuses.count(200) >= 1 and statuses.count(503) >= 1 and set(statuses) == {200, 503}
    refused = next(r for r in responses if r.status_code == 503)
    assert refused.json()["error"]["code"] == "queue_full" and refused.headers["retry-after"] == "1"
    assert httpx.post(process.url + "/invocations", json=make_decision(), timeout=60).status_code == 200


@pytest.mark.parametrize("scoring", ["likelihood", "pmi"])
def test_option_of_no_tokens_is_400_naming_it_for_answer_methods(client, make_decision, scoring):
    """SmolLM2's vocabulary has no token for U+0004: that answer has no likelihood; letters still score it."""
    request = make_decision()
    request["decision"]["options"][1]["description"] = "\x04"
    error = error_of(client.post("/invocations", json={**request, "scoring": scoring}), 400)
    assert error["code"] == "option_without_tokens" and error["field"] == "decision.options[1].description"
    letters = client.post("/invocations", json={**request, "scoring": "letters"})
    assert letters.status_code == 200 and len(letters.json()["probabilities"]) == len(request["decision"]["options"])
