"""Validation and prompt construction without the model: the parts that decide what the model reads."""

from __future__ import annotations

import json

import pytest

from semif_adapter.core.prompt import answers_plan, letters_plan
from semif_adapter.core.question import Debias, Question, Scoring, canonical_state
from semif_adapter.doors.request_schema import DecisionRequest, parse_request
from semif_adapter.engine.prompt_plan import SLOT_LETTERS, ChatFrame
from semif_adapter.errors import RequestError

FRAME = ChatFrame(prefix="<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n",
                  suffix="<|im_end|>\n<|im_start|>assistant\n")


def parsed(options: list[str], **knobs: object) -> DecisionRequest:
    body = {"decision": {"id": "d", "state": {"b": 1, "a": [1, 2]}, "question": "Which?",
                         "options": [{"id": o, "description": f"about {o}"} for o in options]}, **knobs}
    return parse_request(json.dumps(body).encode())


def request(options: list[str], **knobs: object) -> Question:
    """The decision as the core's question (what prompts are built from)."""
    return parsed(options, **knobs).to_question("letters")


def test_object_state_is_serialised_canonically():
    assert canonical_state({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert canonical_state("plain text") == '"plain text"'


def test_prompt_is_the_json_user_message_inside_the_template():
    plan = letters_plan(FRAME, request(["x", "y"]))
    text = plan.text(0)
    assert text.startswith(FRAME.prefix) and text.endswith(FRAME.suffix)
    user = json.loads(text[len(FRAME.prefix):-len(FRAME.suffix)])
    assert user == {"evidence": {"a": [1, 2], "b": 1}, "criterion": "Which?",
                    "options": [{"letter": "A", "description": "about x"}, {"letter": "B", "description": "about y"}]}
    options_text = "".join(t.text for t in plan.branches[0].texts)
    assert "x" not in options_text.replace("about x", "")  # ids never reach the model


def test_cuts_sit_where_the_pre_split_breaks():
    """Each user piece starts with a space before punctuation and the pieces before it end in punctuation;
    the criterion's key ends the cached state piece, so every question about a state reuses it."""
    for plan in (letters_plan(FRAME, request(["x", "y"])), answers_plan(FRAME, request(["x", "y"]))):
        assert plan.head.endswith('"evidence":') and plan.state.startswith(" {")
        assert plan.state.endswith(', "criterion":')
        assert plan.common[0].text.startswith(' "Which?"') and not plan.common[0].template
    letters = letters_plan(FRAME, request(["x", "y"]))
    assert letters.common[0].text.endswith(",") and letters.branches[0].texts[0].text.startswith(' "options": [')
    assert letters.branches[0].texts[1] == type(letters.branches[0].texts[1])(FRAME.suffix, template=True)


def test_answers_prompt_holds_evidence_and_criterion_and_scores_each_text_canonically():
    forward = answers_plan(FRAME, request(["c", "a", "b"]))
    backward = answers_plan(FRAME, request(["b", "a", "c"]))
    assert forward.sha256 == backward.sha256 and forward.common == backward.common
    assert [b.texts[0].text for b in forward.branches] == ["about a", "about b", "about c"]
    assert [b.order for b in forward.branches] == [(1,), (2,), (0,)]  # request indexes of a, b, c
    user = json.loads((forward.head + forward.state + forward.common[0].text)[len(FRAME.prefix):])
    assert user == {"evidence": {"a": [1, 2], "b": 1}, "criterion": "Which?"}  # the options are not listed
    assert forward.common[1].template and forward.common[1].text == FRAME.suffix
    baseline = answers_plan(FRAME, request(["c", "a", "b"]), content_free=True)
    assert baseline.state == ' "N/A", "criterion":' and baseline.common == forward.common


def test_permute_rotates_a_canonical_order_so_input_order_does_not_matter():
    forward = letters_plan(FRAME, request(["c", "a", "b"], debias="permute"))
    backward = letters_plan(FRAME, request(["b", "a", "c"], debias="permute"))
    assert [b.texts for b in forward.branches] == [b.texts for b in backward.branches]
    assert len(forward.branches) == 3
    ids = ["c", "a", "b"]
    # every option sits under every letter exactly once
    for index in range(3):
        assert sorted(branch.order.index(index) for branch in forward.branches) == [0, 1, 2]
    assert [ids[i] for i in forward.branches[0].order] == ["a", "b", "c"]


def test_default_keeps_request_order_and_one_branch():
    plan = letters_plan(FRAME, request(list("abcdefghijklmnop")))
    assert len(plan.branches) == 1 and plan.branches[0].order == tuple(range(16))
    options_text = plan.branches[0].texts[0].text
    assert [options_text.index(f'"letter": "{letter}"') for letter in SLOT_LETTERS] == \
        sorted(options_text.index(f'"letter": "{letter}"') for letter in SLOT_LETTERS)


def test_knobs_default_and_validate():
    plain = parsed(["a", "b"])
    assert (plain.temperature, plain.debias, plain.scoring) == (1.0, Debias.NONE, None)
    assert parsed(["a", "b"], scoring="pmi").scoring is Scoring.PMI
    assert parsed(["a", "b"], scoring="pmi").to_question("letters").method is Scoring.PMI
    assert plain.to_question("likelihood").method is Scoring.LIKELIHOOD  # the endpoint's default
    with pytest.raises(RequestError) as unknown:
        parsed(["a", "b"], scoring="letter")
    assert unknown.value.field == "scoring"
    with pytest.raises(RequestError) as caught:
        parsed(["a", "b"], temperature=-1)
    assert caught.value.field == "temperature"
    with pytest.raises(RequestError, match="Infinity is not valid JSON"):
        parsed(["a", "b"], temperature=float("inf"))


def test_chat_frame_needs_the_message_exactly_once():
    with pytest.raises(ValueError, match="exactly once"):
        ChatFrame.from_rendered("no sentinel here")
