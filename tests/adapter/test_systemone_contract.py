"""The System One door on the real adapter: routes, answer shapes, bodies, errors, and the official SDK. On the tiny
model (`tiny_adapter`): the door is under test, not the model."""

from __future__ import annotations

import gzip
import json
import math

import httpx
import pytest
from backports import zstd
from support.systemone import CHOICE, NOUL, QUESTIONS, SCORE, TICKET, body, many_options
from typesafe_sdk import Choice, Noul, Score, TypeSafeClient

from scripts.dev.tiny_model import tiny_model_name

pytestmark = pytest.mark.slow
MODEL = tiny_model_name()  # the doors' tests run on the tiny model (tests/adapter/conftest.py, `tiny_adapter`)


LONG_S = 600.0  # a 255-option question decodes ~3,500 answer tokens (twice with pmi): a minute on a busy CPU


def post(client: httpx.Client, payload: object, path: str = "/v1/systemone", **headers: str) -> httpx.Response:
    return client.post(path, content=json.dumps(payload).encode(), timeout=LONG_S,
                       headers={"content-type": "application/json", **headers})


def detail_of(response: httpx.Response, status: int) -> object:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.json()["detail"]


def test_every_type_answers_in_the_spec_shape(tiny_client):
    response = post(tiny_client, body(QUESTIONS, x_scoring="pmi"))
    assert response.status_code == 200, response.text
    assert response.headers["x-typesafe-request-id"]
    answer = response.json()
    assert answer["model"] == MODEL and answer["x_scoring"] == "pmi"
    assert set(answer["answers"]) == set(QUESTIONS)
    assert answer["x_model"]["sha256"] and set(answer) <= {"model", "answers", "usage"} | {
        key for key in answer if key.startswith("x_")}
    usage = answer["usage"]
    assert usage["output_tokens"] == 0 and isinstance(usage["input_tokens"], int) and usage["input_tokens"] > 0
    noul, choice, score = (answer["answers"][key] for key in ("refund", "team", "anger"))
    assert noul["type"] == "noul" and 0 <= noul["noul"] <= 1 and "confidence" not in noul
    assert set(noul["x_option_logits"]) == {"true", "false"}
    assert choice["type"] == "choice" and list(choice["probabilities"]) == list(CHOICE["criteria"])
    assert math.isclose(sum(choice["probabilities"].values()), 1.0)
    assert choice["choice"] == max(choice["probabilities"], key=choice["probabilities"].get)
    top, n = max(choice["probabilities"].values()), len(choice["probabilities"])
    assert math.isclose(choice["confidence"], (top - 1 / n) / (1 - 1 / n))
    assert score["legend"] == {"0": "Calm", "1": "Frustrated", "2": "Very angry"}
    probabilities = [score["probabilities"][str(i)] for i in range(3)]
    assert math.isclose(score["score"], sum(i * p for i, p in enumerate(probabilities)))
    mode = probabilities.index(max(probabilities))
    spread = sum(p * abs(i - mode) for i, p in enumerate(probabilities)) / ((1 + 0 + 1) / 3)
    assert math.isclose(score["confidence"], max(0.0, 1 - spread))


def test_the_state_is_charged_once_however_many_questions_ask_about_it(tiny_client):
    def charged(questions: dict) -> int:
        return post(tiny_client, body(questions, x_scoring="pmi")).json()["usage"]["input_tokens"]

    alone = {qid: charged({qid: q}) for qid, q in QUESTIONS.items()}
    prefix = (sum(alone.values()) - charged(QUESTIONS)) // 2  # three questions: the opening counted twice less
    assert prefix > len(TICKET) // 8  # the state's tokens are in it
    assert charged({"refund": QUESTIONS["refund"], "anger": QUESTIONS["anger"]}) == \
        alone["refund"] + alone["anger"] - prefix


def test_255_options_are_answered_and_letters_refuses_17_naming_the_limit(tiny_client):
    question = {"type": "choice", "instructions": "Which queue?", "criteria": many_options(255)}
    response = post(tiny_client, body({"queue": question}, x_scoring="likelihood"))
    assert response.status_code == 200, response.text
    assert len(response.json()["answers"]["queue"]["probabilities"]) == 255
    refused = detail_of(post(tiny_client, body({"queue": {**question, "criteria": many_options(17)}},
                                          x_scoring="letters")), 422)
    assert refused[0]["loc"] == ["body", "questions", "queue", "choice", "criteria"]
    assert "at most 16" in refused[0]["msg"] and "pmi" in refused[0]["msg"]


def test_unicode_names_and_ids_round_trip_byte_for_byte(tiny_client):
    names = {"환불 요청": "고객이 돈을 돌려받기를 원함", "배송 문의": None, "🙂 기타": "그 외"}
    response = post(tiny_client, body({"질문 🎯": {"type": "choice", "instructions": "유형?", "criteria": names}},
                                 state="배송이 3일째 안 와요 😡"))
    assert response.status_code == 200
    assert b"\xed\x99\x98\xeb\xb6\x88 \xec\x9a\x94\xec\xb2\xad" in response.content  # UTF-8, not \u escapes
    answer = response.json()["answers"]["질문 🎯"]
    assert list(answer["probabilities"]) == list(names)


def test_structured_text_and_every_noul_criteria_form_are_accepted(tiny_client):
    forms = [None, {"true": "They want a refund"}, {"false": "They only ask a question"},
             {"true": {"examples": ["refund me"]}, "false": ["questions", "complaints"]}]
    questions = {f"n{i}": {**NOUL, "criteria": form} for i, form in enumerate(forms)}
    questions["bare"] = {"type": "noul", "criteria": {"true": "The customer threatens a chargeback"}}
    questions["structured"] = {"type": "choice", "instructions": ["Route it.", "Pick one team."],
                               "criteria": {"Billing": {"owns": ["invoices"]}, "Technical": ["bugs"]}}
    response = post(tiny_client, body(questions, state={"subject": "Charged twice", "body": TICKET}))
    assert response.status_code == 200, response.text
    assert set(response.json()["answers"]) == set(questions)


@pytest.mark.parametrize(("questions", "loc", "kind"), [
    ({"anger": {**SCORE, "criteria": {"0": "Calm", "1": "Angry"}}}, ["questions", "anger", "score", "criteria"],
     "list_type"),
    ({"where": {"type": "box", "instructions": "Find the dog"}}, ["questions", "where", "box"],
     "unsupported_question_type"),
    ({"team": {**CHOICE, "criteria": {"Billing": None}}}, ["questions", "team", "choice", "criteria"], "too_short"),
    ({"anger": {**SCORE, "criteria": [f"Level {i}" for i in range(11)]}}, ["questions", "anger", "score", "criteria"],
     "too_long"),
    ({"x": {"type": "boolean", "instructions": "?"}}, ["questions", "x"], "union_tag_invalid"),
    ({}, ["questions"], "too_short"),
])
def test_invalid_questions_get_422_with_fastapi_detail(tiny_client, questions, loc, kind):
    found = detail_of(post(tiny_client, body(questions)), 422)
    assert {"loc": ["body", *loc], "type": kind} in [{"loc": d["loc"], "type": d["type"]} for d in found]


def test_score_map_form_is_refused_saying_why(tiny_client):
    found = detail_of(post(tiny_client, body({"anger": {**SCORE, "criteria": {"0": "Calm", "1": "Angry"}}})), 422)
    assert "array of levels" in found[0]["msg"]


def test_image_assets_are_refused_clearly_on_a_text_only_model(tiny_client):
    asset = {"a": {"type": "image", "part": "asset-0"}}
    found = detail_of(post(tiny_client, body({"refund": NOUL}, assets=asset)), 422)
    assert found[0]["loc"] == ["body", "assets"] and "text only" in found[0]["msg"]
    multipart = tiny_client.post("/v1/systemone", files={"request": ("r.json", b"{}", "application/json")})
    assert "text only" in detail_of(multipart, 422)[0]["msg"]


def test_unknown_model_is_404_and_unknown_top_level_fields_are_ignored(tiny_client):
    missing = detail_of(post(tiny_client, {**body({"refund": NOUL}), "model": "no-such-model"}), 404)
    assert missing["error_type"] == "not_found_error" and "jev-latest" in missing["message"]
    assert post(tiny_client, {**body({"refund": NOUL}), "model": MODEL, "seed": 7,
                         "x_trace": "t"}).status_code == 200


@pytest.mark.parametrize("path", ["/v1/systemone", "/invocations"])
def test_a_hundred_thousand_digit_integer_is_the_clients_error(tiny_client, path):
    payload = b'{"model": "jev-latest", "state": "x", "questions": {"q": {"type": "noul", "instructions": "?"}}, ' \
              b'"n": ' + b"9" * 100_000 + b"}"
    response = tiny_client.post(path, content=payload, headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    semif = tiny_client.post("/invocations", content=b'{"decision": ' + b"7" * 100_000 + b"}",
                        headers={"content-type": "application/json"})
    assert semif.status_code == 400 and semif.json()["error"]["code"] == "invalid_json"


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_compressed_bodies_are_decoded_and_give_the_plain_answer(tiny_client, encoding):
    raw = json.dumps(body(QUESTIONS)).encode()
    packed = zstd.compress(raw) if encoding == "zstd" else gzip.compress(raw)
    plain = tiny_client.post("/v1/systemone", content=raw, headers={"content-type": "application/json"})
    squeezed = tiny_client.post("/v1/systemone", content=packed, headers={"content-type": "application/json",
                                                                     "content-encoding": encoding})
    assert squeezed.status_code == 200, squeezed.text
    strip = {qid: {k: v for k, v in a.items() if k != "x_timing"} for qid, a in plain.json()["answers"].items()}
    assert {qid: {k: v for k, v in a.items() if k != "x_timing"}
            for qid, a in squeezed.json()["answers"].items()} == strip


@pytest.mark.parametrize("encoding", ["zstd", "gzip"])
def test_a_decompression_bomb_is_413_and_the_server_keeps_serving(tiny_client, encoding):
    bomb = b'{"state": "' + b"a" * (64 << 20) + b'"}'  # 64 MiB that compresses to a few KB
    packed = zstd.compress(bomb) if encoding == "zstd" else gzip.compress(bomb)
    assert len(packed) < 1 << 20
    refused = tiny_client.post("/v1/systemone", content=packed, headers={"content-type": "application/json",
                                                                    "content-encoding": encoding})
    found = detail_of(refused, 413)
    assert found["error_type"] == "request_too_large" and "limit" in found["message"]
    assert post(tiny_client, body({"refund": NOUL})).status_code == 200


def test_unknown_encodings_and_corrupt_data_are_refused(tiny_client):
    headers = {"content-type": "application/json"}
    assert detail_of(tiny_client.post("/v1/systemone", content=b"{}", headers={**headers, "content-encoding": "br"}),
                     415)["error_type"] == "invalid_request_error"
    corrupt = tiny_client.post("/v1/systemone", content=b"not zstd", headers={**headers, "content-encoding": "zstd"})
    assert 400 <= corrupt.status_code < 500 and "zstd" in corrupt.text


def test_invocations_with_questions_answers_in_the_system_one_shape(tiny_client):
    via_sagemaker = post(tiny_client, body(QUESTIONS), path="/invocations")
    direct = post(tiny_client, body(QUESTIONS), path="/v1/systemone")
    assert via_sagemaker.status_code == 200
    assert {q: a["probabilities"] if "probabilities" in a else a["noul"]
            for q, a in via_sagemaker.json()["answers"].items()} == {
        q: a["probabilities"] if "probabilities" in a else a["noul"] for q, a in direct.json()["answers"].items()}
    assert detail_of(post(tiny_client, body({}), path="/invocations"), 422)[0]["loc"] == ["body", "questions"]
    models = tiny_client.post("/invocations", content=b"{}", headers={"content-type": "application/json",
                                                                "x-amzn-sagemaker-custom-attributes":
                                                                    "route=/v1/models"})
    assert models.json() == tiny_client.get("/v1/models").json()


def test_models_lists_the_served_name_and_the_alias(tiny_client):
    listed = tiny_client.get("/v1/models").json()["models"]
    assert [m["name"] for m in listed] == [MODEL, "jev-latest"]
    assert all(len(m["release_date"]) == 10 and m["description"] for m in listed)
    wrong = tiny_client.get("/v1/systemone")
    assert detail_of(wrong, 405)["error_type"] == "invalid_request_error"


def test_system_one_json_lines_answer_each_line_in_its_own_contract(tiny_client, make_decision):
    lines = [json.dumps(body({"refund": NOUL})), json.dumps(make_decision("semif")), "{not json",
             json.dumps(body({"anger": {**SCORE, "criteria": {"0": "a"}}}))]
    response = tiny_client.post("/invocations", content="\n".join(lines) + "\n",
                           headers={"content-type": "application/jsonlines"})
    answers = [json.loads(line) for line in response.text.splitlines()]
    assert len(answers) == 4
    assert answers[0]["answers"]["refund"]["type"] == "noul"
    assert answers[1]["decision_id"] == "semif"
    assert answers[2] == {"error": answers[2]["error"], "line": 3} and answers[2]["error"]["code"] == "invalid_json"
    assert answers[3]["line"] == 4 and answers[3]["detail"][0]["type"] == "list_type"


def test_the_official_sdk_parses_every_answer_type(tiny_adapter):
    with TypeSafeClient(api_key="any-key", base_url=tiny_adapter.url, timeout=120) as sdk:
        result = sdk.system_one(state=TICKET, questions={
            "refund": Noul(instructions=NOUL["instructions"]),
            "team": Choice(instructions=CHOICE["instructions"], criteria=CHOICE["criteria"]),
            "anger": Score(instructions=SCORE["instructions"], criteria=SCORE["criteria"])},
            extra_body={"x_scoring": "pmi"})
        listed = sdk.models.list()
    assert 0 <= result.nouls["refund"].noul <= 1
    assert result.choices["team"].choice in CHOICE["criteria"]
    assert set(result.scores["anger"].probabilities) == {0, 1, 2}
    assert result.usage.input_tokens and result.model == MODEL
    assert "jev-latest" in [model.name for model in listed.models]
