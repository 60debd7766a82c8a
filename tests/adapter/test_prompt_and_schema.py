"""Validation and prompt construction without the model: the parts that decide what the model reads."""

from __future__ import annotations

import json

import pytest

from semif_adapter.prompt import SLOT_LETTERS, ChatFrame, build_plan, canonical_state
from semif_adapter.request_schema import Debias, RequestError, parse_request

FRAME = ChatFrame(prefix="<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n",
                  suffix="<|im_end|>\n<|im_start|>assistant\n")


def request(options: list[str], **knobs: object):
    body = {"decision": {"id": "d", "state": {"b": 1, "a": [1, 2]}, "question": "Which?",
                         "options": [{"id": o, "description": f"about {o}"} for o in options]}, **knobs}
    return parse_request(json.dumps(body).encode())


def test_object_state_is_serialised_canonically():
    assert canonical_state({"b": 1, "a": "é"}) == '{"a":"é","b":1}'
    assert canonical_state("plain text") == '"plain text"'


def test_prompt_is_the_json_user_message_inside_the_template():
    plan = build_plan(FRAME, request(["x", "y"]))
    text = plan.head + plan.state + plan.question + "".join(plan.branches[0].pieces) + plan.tail
    assert text.startswith(FRAME.prefix) and text.endswith(FRAME.suffix)
    user = json.loads(text[len(FRAME.prefix):-len(FRAME.suffix)])
    assert user == {"evidence": {"a": [1, 2], "b": 1}, "criterion": "Which?",
                    "options": [{"letter": "A", "description": "about x"}, {"letter": "B", "description": "about y"}]}
    assert "x" not in "".join(plan.branches[0].pieces).replace("about x", "")  # ids never reach the model


def test_permute_rotates_a_canonical_order_so_input_order_does_not_matter():
    forward = build_plan(FRAME, request(["c", "a", "b"], debias="permute"))
    backward = build_plan(FRAME, request(["b", "a", "c"], debias="permute"))
    assert [b.pieces for b in forward.branches] == [b.pieces for b in backward.branches]
    assert len(forward.branches) == 3
    ids = ["c", "a", "b"]
    # every option sits under every letter exactly once
    for index in range(3):
        assert sorted(branch.order.index(index) for branch in forward.branches) == [0, 1, 2]
    assert [ids[i] for i in forward.branches[0].order] == ["a", "b", "c"]


def test_default_keeps_request_order_and_one_branch():
    plan = build_plan(FRAME, request(list("abcdefghijklmnop")))
    assert len(plan.branches) == 1 and plan.branches[0].order == tuple(range(16))
    assert all(f'"letter": "{letter}"' in piece for letter, piece in zip(SLOT_LETTERS, plan.branches[0].pieces,
                                                                        strict=True))


def test_knobs_default_and_validate():
    parsed = request(["a", "b"])
    assert (parsed.temperature, parsed.debias) == (1.0, Debias.NONE)
    with pytest.raises(RequestError) as caught:
        request(["a", "b"], temperature=-1)
    assert caught.value.field == "temperature"
    with pytest.raises(RequestError, match="Infinity is not valid JSON"):
        request(["a", "b"], temperature=float("inf"))


def test_chat_frame_needs_the_message_exactly_once():
    with pytest.raises(ValueError, match="exactly once"):
        ChatFrame.from_rendered("no sentinel here")
