"""The adapter's guarantees on every model of the matrix: a chat model with a BPE vocabulary (SmolLM2) and a base
model with no chat template, a 262k SentencePiece vocabulary and K-quants (Gemma 3). The start-up checks pass, every
method answers on both contracts, and the numbers do not depend on neighbours, caches, workers or threads."""

from __future__ import annotations

import json
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from support.systemone import EXTRA, QUESTIONS, TICKET, body, numbers

from semif_adapter.settings import cpu_quota

pytestmark = pytest.mark.slow
METHODS = ("letters", "likelihood", "pmi")
LONG_STATE = TICKET + " " + " ".join(f"Earlier message {i}: the invoice for order {4400 + i} was wrong." for i in
                                     range(24))  # over 256 tokens: where a lone token's numbers move with threads


def ask(url: str, questions: dict, state: object = TICKET, method: str = "pmi") -> dict:
    response = httpx.post(url + "/v1/systemone", content=json.dumps(body(questions, state, x_scoring=method)),
                          headers={"content-type": "application/json"}, timeout=300)
    assert response.status_code == 200, response.text
    return response.json()["answers"]


def log_line(logs: str, event: str) -> dict:
    found = [json.loads(line) for line in logs.splitlines() if f'"event": "{event}"' in line]
    assert found, f"no {event!r} line in the adapter's log"
    return found[-1]


def test_start_up_checks_pass_and_the_frame_is_said(matrix_adapter):
    model, adapter = matrix_adapter
    ready = log_line(adapter.logs(), "ready")
    assert ready["exact_tokens"] is True  # the prompt's pieces are exactly the whole prompt's tokens
    assert ready["prompt_frame"] == ("model" if model.has_chat_template else "plain")
    assert ready["model"]["architecture"] == model.architecture
    assert log_line(adapter.logs(), "partial reuse")["enabled"] is True


@pytest.mark.parametrize("method", METHODS)
def test_every_method_answers_on_both_contracts_with_the_same_numbers(matrix_adapter, method):
    model, adapter = matrix_adapter
    texts = ["Refund the order", "Send a replacement", "Ask a human agent"]
    semif = httpx.post(adapter.url + "/invocations", timeout=300, json={
        "decision": {"id": "d", "state": TICKET, "question": "What should support do next?",
                     "options": [{"id": text, "description": text} for text in texts]}, "scoring": method}).json()
    assert math.isclose(sum(semif["probabilities"]), 1.0)
    assert semif["prompt"]["version"].endswith("-plain") is not model.has_chat_template
    answers = ask(adapter.url, {**QUESTIONS, "same": {"type": "choice", "instructions": "What should support do next?",
                                                      "criteria": dict.fromkeys(texts)}}, method=method)
    assert {a["type"] for a in answers.values()} == {"noul", "choice", "score"}
    assert semif["option_logits"] == [answers["same"]["x_option_logits"][text] for text in texts]


def test_numbers_do_not_depend_on_neighbours_caches_or_concurrent_clients(matrix_adapter):
    _, adapter = matrix_adapter
    state = f"{TICKET} Ticket {time.time_ns()}."
    together = ask(adapter.url, {**QUESTIONS, **EXTRA}, state)  # evaluates the state
    alone = {qid: numbers(ask(adapter.url, {qid: q}, state)[qid]) for qid, q in QUESTIONS.items()}
    assert {qid: numbers(together[qid]) for qid in QUESTIONS} == alone
    with ThreadPoolExecutor(max_workers=8) as pool:  # two workers, each on a context of its own
        runs = list(pool.map(lambda _: ask(adapter.url, QUESTIONS, state), range(8)))
    assert all({qid: numbers(run[qid]) for qid in QUESTIONS} == alone for run in runs)


def test_same_numbers_on_one_thread_as_on_every_core(matrix_adapter, start_adapter):
    """A shared endpoint runs the model on 1 thread, a dedicated one on every vCPU: the same bits either way (on
    both doors: the methods' test above holds SemIf's numbers to System One's)."""
    _, adapter = matrix_adapter
    one_thread = start_adapter({**adapter.env, "SM_LLAMA_CPP_THREADS": "1"})
    one_thread.wait_settled()
    assert re.search(r'"threads": 1, "workers": 1', one_thread.logs())  # one core: one decision at a time
    assert f'"workers": {min(2, cpu_quota())}' in adapter.logs()  # every core: two at once on 2 cores
    for method in METHODS:
        expected = ask(adapter.url, QUESTIONS, LONG_STATE, method)
        got = ask(one_thread.url, QUESTIONS, LONG_STATE, method)
        assert got["team"]["x_timing"]["prompt_tokens"] > 256
        assert {q: numbers(a) for q, a in got.items()} == {q: numbers(a) for q, a in expected.items()}, method
