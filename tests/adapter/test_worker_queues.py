"""A request's questions in worker queues (one worker each, in turn): a second queue only where it finishes
sooner, every question in exactly one queue, each queue in the reuse order; and, on the real adapter, a request
whose questions differ widely in cost runs in one queue, the state held in one context between them."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.systemone import TICKET, body

from semif_adapter.core.question import Answer, Question, Scoring
from semif_adapter.core.worker_queues import (
    PARALLEL_GAIN,
    plan_worker_queues,
    question_cost,
    reuse_order,
    worker_queues,
)


def test_a_question_that_dominates_keeps_its_request_in_one_queue():
    assert plan_worker_queues([210, 42], [0, 1], workers=2) == [[0, 1]]
    assert plan_worker_queues([42, 210], [1, 0], workers=2) == [[1, 0]]  # the reuse order, not the cost order


def test_questions_of_about_one_cost_split_over_the_workers_each_queue_in_order():
    assert plan_worker_queues([100, 100], [0, 1], workers=2) == [[0], [1]]
    assert plan_worker_queues([50, 60, 55, 45], [3, 2, 1, 0], workers=2) == [[3, 1], [2, 0]]
    assert plan_worker_queues([100, 100, 100], [0, 1, 2], workers=3) == [[0], [1], [2]]


def test_one_worker_or_one_question_is_one_queue():
    assert plan_worker_queues([100, 100, 100], [2, 0, 1], workers=1) == [[2, 0, 1]]
    assert plan_worker_queues([7], [0], workers=4) == [[0]]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40), st.integers(1, 6), st.randoms())
def test_every_question_is_in_exactly_one_queue_in_the_given_order(costs, workers, rng):
    order = list(range(len(costs)))
    rng.shuffle(order)
    queues = plan_worker_queues(costs, order, workers)
    assert 1 <= len(queues) <= min(workers, len(costs))
    assert sorted(i for queue in queues for i in queue) == sorted(order)
    rank = {index: position for position, index in enumerate(order)}
    for queue in queues:
        assert queue and [rank[i] for i in queue] == sorted(rank[i] for i in queue)
    if len(queues) > 1:  # split only where the estimate says it finishes sooner than one queue
        loads = [sum(costs[i] for i in queue) for queue in queues]
        assert max(loads) * len(queues) / PARALLEL_GAIN < sum(costs)


def test_a_question_costs_its_criterion_and_its_answers():
    short = Question("state", "Refund?", (Answer("true", "Yes"), Answer("false", "No")), Scoring.PMI)
    longer = Question("a much longer state that costs nothing here", "Refund?",
                      (Answer("true", "Yes, the customer asks for a refund"), Answer("false", "No")), Scoring.PMI)
    assert question_cost(short) == len('"Refund?"') + len("Yes") + len("No")
    assert question_cost(longer) > question_cost(short)


@pytest.mark.slow
def test_a_cheap_question_after_an_expensive_one_reads_the_state_its_worker_holds(client):
    """A four-option choice and a yes/no question: one queue, so the yes/no question finds the state in the
    context the choice just used (`kv`), not restored from the host cache nor evaluated again. Likelihood: pmi
    would evaluate the yes/no question's content-free baseline first, in that same context."""
    questions = {"team": {"type": "choice", "instructions": "Which team should own this case?",
                          "criteria": {"billing": "Charges, invoices, refunds and payment terms",
                                       "logistics": "Parcels, carriers, warehouses and deliveries",
                                       "support": "Answers questions and calls customers back",
                                       "risk": "Fraud checks, disputes and collections"}},
                 "refund": {"type": "noul", "instructions": "Does the customer ask for money back?"}}
    state = f"{TICKET} Ticket {uuid.uuid4().hex[:8]}."
    response = client.post("/v1/systemone", content=json.dumps(body(questions, state, x_scoring="likelihood")),
                           headers={"content-type": "application/json"}, timeout=300)
    assert response.status_code == 200, response.text
    timings = {qid: answer["x_timing"] for qid, answer in response.json()["answers"].items()}
    assert timings["team"]["cached_tokens"] < timings["refund"]["cached_tokens"]  # the choice read the state
    assert timings["refund"]["cache_source"] == "kv"  # a second queue would restore it from the host cache
    assert timings["refund"]["queue_ms"] >= timings["team"]["total_ms"]  # one after the other


def test_a_request_about_several_states_gets_one_queue_per_state_each_in_the_reuse_order():
    def asked(state: str, criterion: str, method: Scoring = Scoring.PMI) -> Question:
        return Question(state, criterion, (Answer("a", "Yes"), Answer("b", "No")), method)

    questions = [asked("s1", "q2"), asked("s2", "q1"), asked("s1", "q1"), asked("s2", "q1", Scoring.LETTERS),
                 asked("s2", "q2")]
    assert worker_queues(questions, workers=2) == [[0, 2], [1, 4], [3]]
    assert reuse_order(questions) == [0, 2, 1, 4, 3]
    same_state = [asked("s", "a much longer criterion than the other one"), asked("s", "q")]
    assert worker_queues(same_state, workers=2) == [[0, 1]]  # one state: plan_worker_queues
