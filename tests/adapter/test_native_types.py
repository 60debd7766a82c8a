"""Every decision type llama.cpp b11434 serves, through every door, with the numbers a fresh llama-server gives.

The test models are the tiny random-weight model with the embedded model's tokenizer and each type's metadata
(scripts/dev/decision_models.py, `tiny=True`: their answers mean nothing; the test is of plumbing, which needs the
same file on both sides, not a trained one). The reference of every answer is
llama-server b11434 started with the adapter's own arguments (from its log), one per type, whose slot is erased
before each reference request: an erased slot answers as a new server's first request does, to the bit, which
`test_an_erased_slot_answers_what_a_new_server_answers_first` holds per type against a server started for it.
Tolerance: probabilities exactly (floats relayed, never recomputed); what a door derives from them (confidence, a
score's expectation) within 1e-12. Each adapter is asked other requests
before, between and after, and the same request twice in a row: its answers do not move.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from support.adapter_process import AdapterProcess
from support.native_answers import TOLERANCE, same_answer
from support.systemone import many_options

from bench.native.run import DirectServer, fresh_answer, native_arguments
from scripts.dev.decision_models import decision_model
from semif_adapter.engine.decision_types import DECISION_TYPES

pytestmark = pytest.mark.slow
STATE = "I was charged twice for my order last week and nobody has replied."
STRUCTURED = {"customer": "Dana", "message": "Where is my parcel? It was due on Monday.",
              "order": {"id": 4471, "items": ["laptop", "charger"], "express": True}}
ROUTE = {"type": "choice", "instructions": "Which team should handle this?",
         "criteria": {"shipping": None, "billing": "payments and refunds", "technical": None}}  # not in key order
URGENCY = {"type": "score", "instructions": "How urgent is this?",
           "criteria": ["can wait", "this week", "today", "right now"]}
ANGRY = {"type": "noul", "instructions": "Is the customer angry?",
         "criteria": {"true": "the customer is angry", "false": "the customer is calm"}}
THREE = {"route": ROUTE, "urgency": URGENCY, "angry": ANGRY}
REVERSED = {"angry": ANGRY, "urgency": URGENCY, "route": ROUTE}
TWELVE = {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": many_options(12)},
          "late": {"type": "noul", "instructions": "Is the parcel late?"}}  # a noul without criteria

SEMIF = {"decision": {"id": "case-1", "state": STATE, "question": "Which team should handle this?",
                      "options": [{"id": "shipping", "description": "deliveries"},
                                  {"id": "billing", "description": "payments and refunds"}]}}
SEMIF_ASKED = {"state": STATE, "questions": {"decision": {
    "type": "choice", "instructions": "Which team should handle this?",
    "criteria": {"shipping": "deliveries", "billing": "payments and refunds"}}}}
OPENAI = {"model": "jev-latest", "input": STATE, "questions": [
    {"type": "predicate", "name": "angry", "instructions": "Is the customer angry?"},
    {"type": "choice", "name": "route", "instructions": "Which team should handle this?",
     "choices": [{"value": "technical"}, {"value": "billing", "description": "payments and refunds"}]},
    {"type": "score", "name": "urgency", "instructions": "How urgent is this?",
     "levels": [{"label": "can wait"}, {"label": "today", "description": "before tonight"}]}]}
OPENAI_ASKED = {"state": STATE, "questions": {
    "angry": {"type": "noul", "instructions": "Is the customer angry?"},
    "route": {"type": "choice", "instructions": "Which team should handle this?",
              "criteria": {"technical": None, "billing": "payments and refunds"}},
    "urgency": {"type": "score", "instructions": "How urgent is this?",
                "criteria": ["can wait", "today: before tonight"]}}}


def systemone(questions: dict[str, Any], state: Any = STATE) -> dict[str, Any]:
    return {"state": state, "questions": questions}


@dataclass
class Served:
    name: str
    adapter: AdapterProcess
    client: httpx.Client
    arguments: list[str]
    reference: DirectServer
    references: dict[str, dict[str, Any]]

    def fresh(self, key: str, body: dict[str, Any]) -> dict[str, Any]:
        """llama-server's answer to `body` on an erased slot, a new server's first answer (once per body and type)."""
        if key not in self.references:
            answered = self.reference.ask_fresh(body)
            assert answered.status_code == 200, answered.text
            self.references[key] = answered.json()
        return self.references[key]


def adapter_env(name: str) -> dict[str, str]:
    """The type's test model; a head that reads the embeddings output gets a physical batch that holds 255 options
    (llama.cpp's embedding mode reads a question and its options in one: 512 tokens by default)."""
    wide = {"SM_LLAMA_CPP_UBATCH_SIZE": "2048"} if DECISION_TYPES[name].reads_embeddings else {}
    return {"SM_LLAMA_CPP_MODEL": str(decision_model(name, tiny=True)), **wide}


@pytest.fixture(scope="module", params=list(DECISION_TYPES))
def served(request: pytest.FixtureRequest) -> Iterator[Served]:
    adapter = AdapterProcess(adapter_env(request.param))
    try:
        adapter.wait_ready()
        arguments = native_arguments(adapter.logs())["arguments"]
        reference = DirectServer(arguments)
        try:
            with httpx.Client(base_url=adapter.url, timeout=120) as client:
                yield Served(request.param, adapter, client, arguments, reference, {})
        finally:
            reference.stop()
    finally:
        adapter.stop()



def same_answers(ours: dict[str, Any], theirs: dict[str, Any], asked: dict[str, Any]) -> None:
    assert list(ours["answers"]) == list(asked)  # the request's order of questions
    for name, question in asked.items():
        same_answer(ours["answers"][name], theirs["answers"][name])
        if question["type"] == "choice":  # and of options, whatever order the head read them in
            assert list(ours["answers"][name]["probabilities"]) == list(question["criteria"])
    assert ours["usage"] == theirs["usage"]


def test_an_erased_slot_answers_what_a_new_server_answers_first(served: Served) -> None:
    """The reference's own premise, per type: after other requests, an erased slot gives a new llama-server's first
    answer to the same request, to the bit (the adapter asks every request so, `NativeServer.ask_fresh`)."""
    body = systemone(THREE, STRUCTURED)
    served.fresh("alone", systemone({"angry": ANGRY}, STRUCTURED))  # the reference has answered before
    erased = served.reference.ask_fresh(body)
    new = fresh_answer(served.arguments, body)
    assert erased.status_code == new.status_code == 200, (erased.text, new.text)
    assert erased.json() == new.json()


def test_system_one_answers_what_a_fresh_server_answers_whatever_came_before(served: Served) -> None:
    """Both System One routes, several questions and one, a structured state, 12 options, the questions in another
    order, and the same request twice in a row (which llama-server b11434 itself answers with a 500 on lev, nimble
    and clef, its cached prompt leaving the head no row to read)."""
    asks = [("/v1/systemone", "three", THREE, STATE), ("/invocations", "twelve", TWELVE, STRUCTURED),
            ("/invocations", "three", THREE, STATE), ("/v1/systemone", "reversed", REVERSED, STATE),
            ("/v1/systemone", "alone", {"angry": ANGRY}, STRUCTURED), ("/v1/systemone", "three", THREE, STATE),
            ("/v1/systemone", "three", THREE, STATE)]
    for route, key, questions, state in asks:
        ours = served.client.post(route, json={"model": "jev-latest", **systemone(questions, state)})
        assert ours.status_code == 200, ours.text
        same_answers(ours.json(), served.fresh(key, systemone(questions, state)), questions)
        assert ours.json()["x_scoring"] == f"native:{served.name}"


def test_semif_and_openai_doors_answer_what_a_fresh_server_answers(served: Served) -> None:
    """A SemIf decision is one choice question (its option ids in the caller's order); OpenAI's predicate, choice
    and score are noul, choice and score."""
    for _ in range(2):  # and again, after the other door's request
        semif = served.client.post("/invocations", json=SEMIF)
        assert semif.status_code == 200, semif.text
        expected = served.fresh("semif", SEMIF_ASKED)["answers"]["decision"]["probabilities"]
        got = semif.json()
        assert got["option_ids"] == ["shipping", "billing"]
        assert dict(zip(got["option_ids"], got["probabilities"], strict=True)) == expected
        assert got["scoring"] == f"native:{served.name}"

        openai = served.client.post("/v1/decisions", json=OPENAI)
        assert openai.status_code == 200, openai.text
        reference = served.fresh("openai", OPENAI_ASKED)["answers"]
        angry, route, urgency = openai.json()["answers"]
        assert (angry["name"], route["name"], urgency["name"]) == ("angry", "route", "urgency")
        assert angry["probability"] == reference["angry"]["noul"]
        assert [c["value"] for c in route["probabilities"]] == ["technical", "billing"]
        assert {c["value"]: c["probability"] for c in route["probabilities"]} == reference["route"]["probabilities"]
        assert route["choice"] == reference["route"]["choice"]
        assert [level["probability"] for level in urgency["probabilities"]] == \
            list(reference["urgency"]["probabilities"].values())
        assert math.isclose(urgency["score"], reference["urgency"]["score"], rel_tol=TOLERANCE)


def queues(count: int) -> dict[str, None]:
    """`count` short options, without descriptions: 255 of them fit the test's 4096-token context on every head."""
    return {f"Q{i}": None for i in range(count)}


def test_the_most_options_the_head_tells_apart_and_two(served: Served) -> None:
    """The type's option limit (255; openjev's 52 letters) answered as a fresh server answers it; one more is the
    door's 4xx naming the limit."""
    limit = DECISION_TYPES[served.name].option_limit
    for count in (2, limit):
        questions = {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": queues(count)}}
        ours = served.client.post("/v1/systemone", json=systemone(questions))
        assert ours.status_code == 200, ours.text
        same_answers(ours.json(), served.fresh(f"options-{count}", systemone(questions)), questions)
    over = served.client.post("/v1/systemone", json=systemone(
        {"queue": {"type": "choice", "instructions": "Which queue?", "criteria": queues(limit + 1)}}))
    if limit < 255:
        assert over.status_code == 422, over.text
        assert over.json()["detail"][0]["type"] == "too_many_options"
        assert f"more than the {limit}" in over.json()["detail"][0]["msg"]
    else:  # System One's own limit comes first
        assert over.status_code == 422 and "255" in over.text, over.text
