"""Scores from the real model over HTTP: shape, determinism, cache reuse, temperature, permute."""

from __future__ import annotations

import math

import httpx
import numpy as np
from support.decisions import decide, decide_together

SAME_STATE = "Order 7781: the parcel left the warehouse on Monday; tracking has not updated for 9 days."


def fresh_state(client: httpx.Client, make_decision) -> None:
    """Push another state through, so the next request's state is not in the KV cache."""
    decide(client, make_decision(state="An unrelated note about a printer that jams on Tuesdays."))


def test_response_shape_and_probabilities(client, make_decision):
    body = make_decision()
    result = decide(client, body)
    ids = [option["id"] for option in body["decision"]["options"]]
    assert result["decision_id"] == "case-1" and result["option_ids"] == ids
    assert len(result["probabilities"]) == len(result["option_logits"]) == len(ids)
    assert abs(sum(result["probabilities"]) - 1) < 1e-6
    assert all(0 < p < 1 for p in result["probabilities"])
    assert 0 < result["allowed_token_mass"] <= 1
    timing = result["timing"]
    assert timing["prompt_tokens"] > 0 and timing["total_ms"] >= timing["forward_ms"] > 0
    assert set(timing) >= {"queue_ms", "tokenize_ms", "forward_ms", "total_ms", "prompt_tokens", "cached_tokens"}
    model = result["model"]
    assert (model["file"], model["architecture"], model["quantization"]) == \
        ("SmolLM2-135M-Instruct.Q4_1.gguf", "llama", "Q4_1")
    assert len(model["sha256"]) == 64 and model["context"] == 4096
    assert result["prompt"]["version"] == "semif-options-v3" and len(result["prompt"]["sha256"]) == 64


def test_probabilities_are_softmax_of_logits_over_temperature(client, make_decision):
    cold = decide(client, make_decision(temperature=0.5))
    warm = decide(client, make_decision(temperature=2.0))
    logits = np.array(cold["option_logits"])
    assert cold["option_logits"] == warm["option_logits"]
    for result, temperature in ((cold, 0.5), (warm, 2.0)):
        expected = np.exp(logits / temperature - (logits / temperature).max())
        assert np.allclose(result["probabilities"], expected / expected.sum(), atol=1e-12)
    assert max(cold["probabilities"]) > max(warm["probabilities"])


def test_same_request_same_numbers_cached_or_not(client, make_decision):
    body = make_decision(state=SAME_STATE)
    fresh_state(client, make_decision)
    uncached = decide(client, body)
    cached = decide(client, body)
    assert uncached["timing"]["cached_tokens"] < cached["timing"]["cached_tokens"]
    assert cached["probabilities"] == uncached["probabilities"]  # bit-identical, not just close
    assert cached["option_logits"] == uncached["option_logits"]


def test_same_state_other_question_reuses_the_prefix(client, make_decision):
    state = "(Seen here first) " + SAME_STATE  # in no cache, and opening unlike the state the KV cache holds
    first = decide(client, make_decision(state=state, question="Should we refund the customer now?"))
    second = decide(client, make_decision(state=state, question="Is the carrier at fault?"))
    head = first["timing"]["cached_tokens"]
    assert head > 0  # the constant head (system text + template) was not recomputed
    assert second["timing"]["cached_tokens"] > head + 10  # ... and now the state is reused too
    assert second["timing"]["evaluated_tokens"] < first["timing"]["evaluated_tokens"]


def test_same_numbers_alone_and_under_8_concurrent_clients(adapter, client, make_decision):
    bodies = [make_decision(state=f"Ticket {i}: the customer reports error E{i} after the update.",
                            question="Which team should handle this ticket?",
                            options=[("billing", "Billing"), ("support", "Technical support"),
                                     ("sales", "Sales")]) for i in range(8)]
    alone = [decide(client, body)["probabilities"] for body in bodies]

    concurrent = decide_together(adapter.url, bodies)
    assert [r["probabilities"] for r in concurrent] == alone
    assert max(r["timing"]["queue_ms"] for r in concurrent) > 0


def test_permute_is_invariant_to_option_order(client, make_decision):
    options = [("refund", "Refund the customer in full"), ("reship", "Ship a replacement"),
               ("wait", "Ask the customer to wait three more days"), ("investigate", "Open a carrier claim")]
    orders = [options, list(reversed(options)), options[2:] + options[:2], [options[1], options[3], options[0],
                                                                         options[2]]]
    by_order = []
    for order in orders:
        result = decide(client, make_decision(state=SAME_STATE, options=order, debias="permute"))
        assert result["debias"] == "permute"
        assert abs(sum(result["probabilities"]) - 1) < 1e-6
        by_order.append(dict(zip(result["option_ids"], result["probabilities"], strict=True)))
    assert all(scores == by_order[0] for scores in by_order[1:])  # bit-identical per option id


def test_permute_removes_the_letter_preference_of_the_default(client, make_decision):
    """The default method follows the letter (the same slot wins whatever sits there); permute follows the id."""
    options = [("refund", "Refund the customer in full"), ("reship", "Ship a replacement"),
               ("wait", "Ask the customer to wait three more days")]
    rotations = [options[i:] + options[:i] for i in range(3)]
    default_winners, permute_winners = set(), set()
    for order in rotations:
        default = decide(client, make_decision(state=SAME_STATE, options=order))
        default_winners.add(default["option_ids"][int(np.argmax(default["probabilities"]))])
        permuted = decide(client, make_decision(state=SAME_STATE, options=order, debias="permute"))
        permute_winners.add(permuted["option_ids"][int(np.argmax(permuted["probabilities"]))])
    assert len(permute_winners) == 1
    assert len(default_winners) > 1, "the embedded model was expected to prefer a letter, not an option"


def test_permute_decodes_the_criterion_once_for_its_rotations(client, make_decision):
    body = make_decision(state=SAME_STATE, debias="permute")
    single = decide(client, make_decision(state=SAME_STATE))["timing"]
    result = decide(client, body)
    timing = result["timing"]
    # the shared prefix came from the cache; the criterion once, then three rotations of the options (their common
    # opening, the first slot letter's line start, once too)
    assert timing["cached_tokens"] == single["cached_tokens"] and timing["prompt_tokens"] == single["prompt_tokens"]
    one_branch = single["evaluated_tokens"]  # the criterion + one ordering of the options
    assert 2 * one_branch < timing["evaluated_tokens"] < 3 * one_branch
    assert math.isclose(sum(result["probabilities"]), 1.0, abs_tol=1e-6)
