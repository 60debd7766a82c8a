"""Every System One question is scored as if it were alone: bit-identical numbers whatever else the request asks,
in whatever order, under whatever ids, cached or not, and under concurrent clients (jevcompat checks this
statistically; here the bytes are compared)."""

from __future__ import annotations

import json
import random
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.systemone import EXTRA, QUESTIONS, TICKET, body, numbers

pytestmark = pytest.mark.slow
METHODS = ("letters", "likelihood", "pmi")


def ask(client, questions: dict, state: object = TICKET, method: str = "pmi") -> dict:
    response = client.post("/v1/systemone", content=json.dumps(body(questions, state, x_scoring=method)),
                           headers={"content-type": "application/json"}, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def fresh_state() -> str:
    """A state no earlier request evaluated: its first question evaluates it, the others reuse it."""
    return f"{TICKET} Ticket {uuid.uuid4().hex[:8]}."


@pytest.mark.parametrize("method", METHODS)
def test_a_question_scores_the_same_alone_with_others_reordered_and_renamed(client, method):
    state = fresh_state()
    together = ask(client, {**QUESTIONS, **EXTRA}, state, method)  # the first: the state evaluated here
    alone = {qid: ask(client, {qid: q}, state, method)[qid] for qid, q in QUESTIONS.items()}
    reordered = ask(client, dict(reversed(list({**EXTRA, **QUESTIONS}.items()))), state, method)
    renamed = ask(client, {f"renamed {qid} 🙂": q for qid, q in QUESTIONS.items()}, state, method)
    for qid in QUESTIONS:
        expected = numbers(alone[qid])
        assert numbers(together[qid]) == expected, qid
        assert numbers(reordered[qid]) == expected, qid
        assert numbers(renamed[f"renamed {qid} 🙂"]) == expected, qid


def test_a_choice_decoded_over_several_windows_scores_the_same_alone_and_after_others(client):
    """The engine drops each answer's cells once it is decoded, over more than one ubatch of answer tokens; where
    the later answers' tokens land must follow from the question alone."""
    words = ["invoice", "parcel", "refund", "outage", "upgrade", "password", "courier", "discount", "warranty"]
    criteria = {f"Queue {i}": " ".join(random.Random(i).choices(words, k=12)) for i in range(80)}
    many = {"type": "choice", "instructions": "Which queue should take this ticket?", "criteria": criteria}
    state = fresh_state()
    after_others = ask(client, {**QUESTIONS, "many": many}, state)["many"]  # the state evaluated by the first
    alone = ask(client, {"many": many}, state)["many"]
    assert alone["x_timing"]["evaluated_tokens"] > 512  # more than one ubatch (the default, 512) of answer tokens
    assert numbers(after_others) == numbers(alone)


def test_cached_and_uncached_states_give_the_same_bits(client):
    state = fresh_state()
    first = ask(client, QUESTIONS, state)
    again = ask(client, QUESTIONS, state)
    sources = {answer["x_timing"]["cache_source"] for answer in again.values()}
    assert sources <= {"kv", "host"}  # nothing recomputed the state the second time
    assert {q: numbers(a) for q, a in first.items()} == {q: numbers(a) for q, a in again.items()}


def test_eight_concurrent_clients_get_the_numbers_of_one_client_alone(client):
    states = [fresh_state() for _ in range(4)]
    reference = {index: {q: numbers(a) for q, a in ask(client, QUESTIONS, state).items()}
                 for index, state in enumerate(states)}
    jobs = [index % len(states) for index in range(8)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = list(pool.map(lambda index: (index, ask(client, QUESTIONS, states[index])), jobs))
    for index, answer in answers:
        assert {q: numbers(a) for q, a in answer.items()} == reference[index]


def test_a_system_one_choice_scores_what_the_same_semif_decision_scores(client):
    """One core behind both doors: the same texts under the same ids give the same raw scores."""
    options = {"refund": "Refund the order", "replace": "Send a replacement", "human": "Ask a human agent"}
    choice = {"type": "choice", "instructions": "What should support do next?",
              "criteria": {name: None for name in options.values()}}
    semif = {"decision": {"id": "d", "state": TICKET, "question": "What should support do next?",
                          "options": [{"id": text, "description": text} for text in options.values()]},
             "scoring": "pmi"}
    decided = client.post("/invocations", json=semif, timeout=300).json()
    answered = ask(client, {"q": choice})["q"]
    assert decided["option_logits"] == [answered["x_option_logits"][text] for text in options.values()]
    assert decided["probabilities"] == [answered["probabilities"][text] for text in options.values()]
