"""The decision client's typing and checks (fast), and its policy helper."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import boto3
import pytest

from semif_decision_client import (
    Decision,
    DecisionRequest,
    InvalidDecisionError,
    Option,
    Policy,
    as_boto3_session,
    parse_decision,
    runtime_client,
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


def test_knobs_are_sent_only_when_set() -> None:
    options = {"a": "Option A", "b": "Option B"}
    plain = DecisionRequest.build("d", "s", "q", options)
    assert set(plain.to_payload()) == {"decision"}  # the endpoint's defaults apply
    tuned = DecisionRequest.build("d", "s", "q", options, scoring="pmi", temperature=0.5, debias="permute")
    payload = tuned.to_payload()
    assert (payload["scoring"], payload["temperature"], payload["debias"]) == ("pmi", 0.5, "permute")
    assert DecisionRequest.from_payload(payload) == tuned


@pytest.mark.parametrize(("payload", "named"), [
    ({"debais": "permute"}, r"decision request: unknown field\(s\) \['debais'\]"),
    ({"decision": {"colour": "red"}}, r"decision: unknown field\(s\) \['colour'\]"),
    ({"decision": {"options": [{"id": "a", "description": "A"}, {"id": "b", "description": "B", "label": "x"}]}},
     r"decision.options\[1\]: unknown field\(s\) \['label'\]"),
])
def test_unknown_fields_are_refused_as_the_endpoint_refuses_them(payload: dict[str, object], named: str) -> None:
    body = json.loads(SAMPLE.read_text())
    body.update({k: v for k, v in payload.items() if k != "decision"})
    body["decision"].update(payload.get("decision", {}))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=named):
        DecisionRequest.from_payload(body)


@pytest.mark.parametrize(("knobs", "message"), [
    ({"scoring": "cloze"}, "scoring must be one of"),
    ({"debias": "shuffle"}, "debias must be one of"),
    ({"temperature": 0}, "temperature"),
    ({"temperature": -1.0}, "temperature"),
    ({"temperature": float("nan")}, "temperature"),
    ({"temperature": True}, "temperature"),
    ({"temperature": "0.5"}, "temperature"),
])
def test_bad_knobs_are_refused_before_any_call(knobs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecisionRequest.build("d", "s", "q", {"a": "A", "b": "B"}, **knobs)  # type: ignore[arg-type]


def test_scoring_warnings_and_calibration_are_exposed(request_: DecisionRequest) -> None:
    calibration = {"method": "temperature", "parameters": {"temperature": 2.0}, "sha256": "0123456789ab"}
    decision = parse_decision(request_, answer(scoring="pmi", warnings=["near_tie"], calibration=calibration))
    assert decision.scoring == "pmi"
    assert decision.warnings == ("near_tie",)
    assert dict(decision.calibration or {}) == calibration
    assert decision.raw["scoring"] == "pmi"
    bare = parse_decision(request_, answer())  # an endpoint that predates these fields
    assert (bare.scoring, bare.warnings, bare.calibration) == (None, (), None)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"scoring": "letters"}, "asked for scoring 'pmi'"),
    ({"warnings": "near_tie"}, "warnings is not a list"),
    ({"warnings": [1]}, "warnings is not a list"),
    ({"calibration": [2.0]}, "calibration is not an object"),
])
def test_quality_fields_that_do_not_match_are_refused(overrides: dict[str, object], message: str) -> None:
    request = DecisionRequest.build("t-1", "s", "q", {"refund": "R", "replace": "P", "escalate": "E"},
                                    scoring="pmi")
    with pytest.raises(InvalidDecisionError, match=message):
        parse_decision(request, answer(**overrides))


@pytest.mark.parametrize(("policy", "warnings", "chosen"), [
    (Policy(threshold=0.6, fallback="escalate"), ["near_tie"], "replace"),  # warnings ignored by default
    (Policy(threshold=0.6, fallback="escalate", on_warning="fallback"), ["near_tie"], "escalate"),
    (Policy(threshold=0.6, fallback="escalate", on_warning="fallback"), ["low_option_mass"], "escalate"),
    (Policy(threshold=0.6, fallback="escalate", on_warning="fallback"), [], "replace"),
    (Policy(threshold=0.6, fallback="escalate", on_warning="fallback", warning_codes={"low_option_mass"}),
     ["near_tie"], "replace"),  # only the listed codes trigger the fallback
])
def test_policy_can_fall_back_on_warnings(request_: DecisionRequest, policy: Policy, warnings: list[str],
                                          chosen: str) -> None:
    assert parse_decision(request_, answer(warnings=warnings)).choose(policy) == chosen


def test_policy_refuses_an_unknown_warning_mode() -> None:
    with pytest.raises(ValueError, match="on_warning"):
        Policy(threshold=0.5, fallback="x", on_warning="retry")
    with pytest.raises(ValueError, match="collection"):
        Policy(threshold=0.5, fallback="x", on_warning="fallback", warning_codes="near_tie")  # type: ignore[arg-type]


def test_sessions_accepted_are_boto3_or_an_sdk_session_holding_one() -> None:
    boto_session = boto3.Session(region_name="eu-west-1")
    assert as_boto3_session(boto_session) is boto_session
    assert as_boto3_session(SimpleNamespace(boto_session=boto_session)) is boto_session  # the SDK Session's shape
    assert isinstance(as_boto3_session(None), boto3.Session)
    with pytest.raises(TypeError, match=r"a boto3\.Session or a sagemaker Session, got str"):
        runtime_client(session="eu-west-1")
