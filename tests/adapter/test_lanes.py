"""A request's questions in lanes (one worker each, in turn): a second lane only where it finishes sooner, every
question in exactly one lane, each lane in the reuse order; and, on the real adapter, a request whose questions
differ widely in cost runs in one lane, the state held in one context between them."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.systemone import TICKET, body

from semif_adapter.core.lanes import PARALLEL_GAIN, plan_lanes, question_cost, request_lanes, reuse_order
from semif_adapter.core.question import Answer, Question, Scoring


def test_a_question_that_dominates_keeps_its_request_in_one_lane():
    assert plan_lanes([210, 42], [0, 1], workers=2) == [[0, 1]]
    assert plan_lanes([42, 210], [1, 0], workers=2) == [[1, 0]]  # the reuse order, not the cost order


def test_questions_of_about_one_cost_split_over_the_workers_each_lane_in_order():
    assert plan_lanes([100, 100], [0, 1], workers=2) == [[0], [1]]
    assert plan_lanes([50, 60, 55, 45], [3, 2, 1, 0], workers=2) == [[3, 1], [2, 0]]
    assert plan_lanes([100, 100, 100], [0, 1, 2], workers=3) == [[0], [1], [2]]


def test_one_worker_or_one_question_is_one_lane():
    assert plan_lanes([100, 100, 100], [2, 0, 1], workers=1) == [[2, 0, 1]]
    assert plan_lanes([7], [0], workers=4) == [[0]]


@given(st.lists(st.integers(0, 10_000), min_size=1, max_size=40), st.integers(1, 6), st.randoms())
def test_every_question_is_in_exactly_one_lane_in_the_given_order(costs, workers, rng):
    order = list(range(len(costs)))
    rng.shuffle(order)
    lanes = plan_lanes(costs, order, workers)
    assert 1 <= len(lanes) <= min(workers, len(costs))
    assert sorted(i for lane in lanes for i in lane) == sorted(order)
    rank = {index: position for position, index in enumerate(order)}
    for lane in lanes:
        assert lane and [rank[i] for i in lane] == sorted(rank[i] for i in lane)
    if len(lanes) > 1:  # split only where the estimate says it finishes sooner than one lane
        loads = [sum(costs[i] for i in lane) for lane in lanes]
        assert max(loads) * len(lanes) / PARALLEL_GAIN < sum(costs)


def test_a_question_costs_its_criterion_and_its_answers():
    short = Question("state", "Refund?", (Answer("true", "Yes"), Answer("false", "No")), Scoring.PMI)
    longer = Question("a much longer state that costs nothing here", "Refund?",
                      (Answer("true", "Yes, the customer asks for a refund"), Answer("false", "No")), Scoring.PMI)
    assert question_cost(short) == len('"Refund?"') + len("Yes") + len("No")
    assert question_cost(longer) > question_cost(short)


@pytest.mark.slow
def test_a_cheap_question_after_an_expensive_one_reads_the_state_its_worker_holds(client):
    """A four-option choice and a yes/no question: one lane, so the yes/no question finds the state in the
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
    assert timings["refund"]["cache_source"] == "kv"  # a second lane would restore it from the host cache
    assert timings["refund"]["queue_ms"] >= timings["team"]["total_ms"]  # one after the other


def test_a_request_about_several_states_gets_one_lane_per_state_each_in_the_reuse_order():
    def asked(state: str, criterion: str, method: Scoring = Scoring.PMI) -> Question:
        return Question(state, criterion, (Answer("a", "Yes"), Answer("b", "No")), method)

    questions = [asked("s1", "q2"), asked("s2", "q1"), asked("s1", "q1"), asked("s2", "q1", Scoring.LETTERS),
                 asked("s2", "q2")]
    assert request_lanes(questions, workers=2) == [[0, 2], [1, 4], [3]]
    assert reuse_order(questions) == [0, 2, 1, 4, 3]
    same_state = [asked("s", "a much longer criterion than the other one"), asked("s", "q")]
    assert request_lanes(same_state, workers=2) == [[0, 1]]  # one state: plan_lanes
