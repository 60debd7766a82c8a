"""The decision client's typing and checks (fast), and its policy helper."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.decision_client import (
    Decision,
    DecisionRequest,
    InvalidDecisionError,
    Option,
    Policy,
    parse_decision,
)

SAMPLE = Path(__file__).resolve().parents[2] / "scripts" / "payloads" / "decision.json"


@pytest.fixture
def request_() -> DecisionRequest:
    return DecisionRequest.build("t-1", "the parcel arrived broken", "What next?",
                                 {"refund": "Refund", "replace": "Replace", "escalate": "Ask a human"})


def answer(**overrides: object) -> dict[str, object]:
    body: dict[str, object] = {
        "decision_id": "t-1", "option_ids": ["refund", "replace", "escalate"],
        "probabilities": [0.2, 0.7, 0.1], "option_logits": [1.0, 2.25, 0.3],
        "timing": {"total_ms": 12.0}, "model": {"name": "m"}, "prompt": {"sha256": "ab"},
        "allowed_token_mass": 0.93,
    }
    body.update(overrides)
    return body


def test_sample_payload_round_trips(request_: DecisionRequest) -> None:
    payload = json.loads(SAMPLE.read_text())
    parsed = DecisionRequest.from_payload(payload)
    assert parsed.to_payload() == payload
    assert parsed.option_ids == ("refund", "replace", "escalate")


def test_decision_is_keyed_by_option_id(request_: DecisionRequest) -> None:
    decision = parse_decision(request_, json.dumps(answer()).encode())
    assert decision.best == "replace"
    assert decision.ranked == ("replace", "refund", "escalate")
    assert decision.margin == pytest.approx(0.5)
    assert dict(decision.probabilities) == {"refund": 0.2, "replace": 0.7, "escalate": 0.1}
    assert decision.logits["replace"] == 2.25
    assert decision.allowed_token_mass == pytest.approx(0.93)
    assert decision.details["timing"] == {"total_ms": 12.0}
    with pytest.raises(TypeError):
        decision.probabilities["refund"] = 1.0  # type: ignore[index]


@pytest.mark.parametrize(("policy", "chosen"), [
    (Policy(threshold=0.6, fallback="escalate"), "replace"),
    (Policy(threshold=0.8, fallback="escalate"), "escalate"),  # not confident enough
    (Policy(threshold=0.6, fallback="human", min_margin=0.6), "human"),  # too close to the runner-up
])
def test_policy_branches_on_stable_ids(request_: DecisionRequest, policy: Policy, chosen: str) -> None:
    assert parse_decision(request_, answer()).choose(policy) == chosen


def test_policy_refuses_nonsense_thresholds() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Policy(threshold=1.5, fallback="x")


def test_ties_keep_request_order() -> None:
    decision = Decision("d", ("a", "b"), {"a": 0.5, "b": 0.5}, {"a": 0.0, "b": 0.0})
    assert decision.best == "a"
    assert decision.margin == 0.0


@pytest.mark.parametrize(("overrides", "message"), [
    ({"option_ids": ["refund", "escalate", "replace"]}, "do not match"),
    ({"option_ids": ["refund", "replace"]}, "do not match"),
    ({"probabilities": [0.2, 0.2, 0.1]}, "sum to 0.5"),
    ({"probabilities": [0.5, 0.5]}, "probabilities"),
    ({"probabilities": [1.2, -0.1, -0.1]}, r"outside \[0, 1\]"),
    ({"decision_id": "other"}, "decision_id"),
    ({"probabilities": None}, "well-formed"),
])
def test_answers_that_do_not_match_the_request_are_refused(request_: DecisionRequest, overrides: dict[str, object],
                                                           message: str) -> None:
    with pytest.raises(InvalidDecisionError, match=message):
        parse_decision(request_, answer(**overrides))


def test_non_json_answer_is_refused(request_: DecisionRequest) -> None:
    with pytest.raises(InvalidDecisionError, match="not JSON"):
        parse_decision(request_, b"<html>")


def test_duplicate_option_ids_are_refused_before_any_call() -> None:
    with pytest.raises(ValueError, match="unique"):
        DecisionRequest("d", "s", "q", (Option("a", "x"), Option("a", "y")))


def test_malformed_payload_is_named() -> None:
    with pytest.raises(ValueError, match="options"):
        DecisionRequest.from_payload({"decision": {"id": "d", "state": "s", "question": "q"}})
