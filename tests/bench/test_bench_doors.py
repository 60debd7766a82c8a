"""The door benchmark's translation: its OpenAI bodies ask the same questions as its System One bodies."""

from __future__ import annotations

import pytest

from bench.doors.run import as_conversation, as_decisions, report
from bench.systemone.workload import questions_body
from semif_adapter.core.conversation import Conversation
from semif_adapter.core.question_frames import DEFAULT_FRAMES
from semif_adapter.doors import openai_contract, openai_schema, systemone_questions, systemone_schema


def test_the_openai_body_is_the_same_internal_questions_as_the_systemone_body():
    body = questions_body("short", 7, 4)
    systemone = systemone_questions.to_questions(systemone_schema.validate(body), "pmi", DEFAULT_FRAMES)
    decisions = openai_contract.to_questions(openai_schema.validate(as_decisions(body)), "pmi", DEFAULT_FRAMES)
    assert [question for _, question in systemone] == decisions


def test_the_conversation_through_either_door_is_the_same_internal_questions():
    body = questions_body("short", 7, 4)
    systemone = systemone_questions.to_questions(
        systemone_schema.validate(as_conversation(body, "systemone")), "pmi", DEFAULT_FRAMES)
    decisions = openai_contract.to_questions(
        openai_schema.validate(as_conversation(as_decisions(body), "decisions")), "pmi", DEFAULT_FRAMES)
    assert [question for _, question in systemone] == decisions
    assert isinstance(decisions[0].state, Conversation) and len(decisions[0].state) == 5  # a conversation, not text


def test_a_noul_with_described_outcomes_has_no_predicate_to_become():
    body = {"model": "m", "state": "s", "questions": {"q": {"type": "noul", "instructions": "?",
                                                           "criteria": {"true": "yes"}}}}
    with pytest.raises(ValueError, match="described outcomes"):
        as_decisions(body)


def test_the_report_says_whether_the_target_was_met():
    rows = [{"questions": k, "rounds": 3, "p50_ms": {"systemone": 100.0, "decisions": 101.0 + k},
             "paired_ratio": ratio, "unpaired_ratio": ratio, "met": ratio <= 1.02}
            for k, ratio in ((1, 1.01), (4, 1.05))]
    text = report(rows, "python -m bench.doors.run")
    assert "1.010x met" in text and "1.050x MISSED" in text and "3 rounds" in text
