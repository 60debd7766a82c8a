"""The three scoring methods on the real model over HTTP: determinism, order invariance, caches, warnings."""

from __future__ import annotations

import json
import math

import httpx
import numpy as np
import pytest
from support.decisions import decide, decide_together

from semif_adapter.core.calibration import parse_calibration
from semif_adapter.core.scoring import LOW_OPTION_MASS, NEAR_TIE, NEAR_TIE_MARGIN
from semif_adapter.engine.embedded_model import embedded_model_path

METHODS = ("letters", "likelihood", "pmi")
OPTIONS = [("billing", "Billing: charges, invoices and refunds"), ("shipping", "Shipping: parcels and delivery"),
           ("technical", "Technical support: errors and crashes"), ("sales", "Sales: prices and new orders")]
STATE = "I was charged twice for my March invoice, please refund one of the charges."
QUESTION = "Which team should handle this ticket?"


def by_id(answer: dict, key: str = "option_logits") -> dict[str, float]:
    return dict(zip(answer["option_ids"], answer[key], strict=True))


@pytest.mark.parametrize("method", METHODS)
def test_each_method_answers_with_its_own_prompt_and_fields(client, make_decision, method):
    answer = decide(client, make_decision(state=STATE, question=QUESTION, options=OPTIONS, scoring=method))
    assert answer["scoring"] == method and answer["calibration"] is None
    assert math.isclose(sum(answer["probabilities"]), 1.0, abs_tol=1e-9)
    assert np.allclose(answer["probabilities"], softmax(np.array(answer["option_logits"])), atol=1e-12)
    version, timing = answer["prompt"]["version"], answer["timing"]
    if method == "letters":
        assert version == "semif-options-v3" and 0 < answer["allowed_token_mass"] <= 1
        assert timing["output_rows"] == 1  # the letters' row at the one ordering's last token
    else:
        # a row per answer token (the first read at the question's end), twice when pmi computed its baseline
        passes = 1 if method == "likelihood" or timing["baseline_cached"] else 2
        assert passes * len(OPTIONS) <= timing["output_rows"] < timing["evaluated_tokens"]
        assert version == "semif-answers-v2" and answer["allowed_token_mass"] is None
        assert all(value < 0 for value in answer["option_logits"]) or method == "pmi"  # log-probabilities
    assert isinstance(answer["warnings"], list)


@pytest.mark.parametrize("method", ["likelihood", "pmi"])
def test_answer_methods_ignore_option_order_bit_for_bit(client, make_decision, method):
    orders = [OPTIONS, OPTIONS[::-1], OPTIONS[2:] + OPTIONS[:2]]
    answers = [decide(client, make_decision(state=STATE, question=QUESTION, options=order, scoring=method))
               for order in orders]
    assert all(by_id(a) == by_id(answers[0]) for a in answers[1:])
    assert all(by_id(a, "probabilities") == by_id(answers[0], "probabilities") for a in answers[1:])


@pytest.mark.parametrize("method", METHODS)
def test_same_numbers_cached_uncached_and_under_8_concurrent_clients(adapter, client, make_decision, method):
    bodies = [make_decision(f"m-{i}", state=f"Ticket {i} for {method}: error E{i} after the update, app crashes.",
                            question=QUESTION, options=OPTIONS, scoring=method) for i in range(8)]
    fresh = [decide(client, body) for body in bodies]  # each state new: only the head was reused
    assert all(a["timing"]["cache_source"] in ("kv", "host") for a in fresh)
    again = [decide(client, body) for body in bodies]  # each state restored from host memory
    assert {a["timing"]["cache_source"] for a in again} == {"host"}
    assert all(a["timing"]["cached_tokens"] > f["timing"]["cached_tokens"] for a, f in zip(again, fresh, strict=True))

    concurrent = decide_together(adapter.url, bodies)
    for answers in (again, concurrent):
        assert [a["probabilities"] for a in answers] == [f["probabilities"] for f in fresh]
        assert [a["option_logits"] for a in answers] == [f["option_logits"] for f in fresh]


def test_pmi_computes_its_content_free_baseline_once_per_criterion_and_options(client, make_decision):
    states, question = ["A brand new state for pmi.", "Another state, same criterion."], "Which desk is it for?"
    first = decide(client, make_decision(state=states[0], question=question, options=OPTIONS, scoring="pmi"))
    second = decide(client, make_decision(state=states[1], question=question, options=OPTIONS[::-1], scoring="pmi"))
    assert first["timing"]["baseline_cached"] is False and second["timing"]["baseline_cached"] is True
    assert second["timing"]["evaluated_tokens"] < first["timing"]["evaluated_tokens"]
    # evidence that is the content-free one itself raises no answer: pmi is exactly 0 for every option
    null = decide(client, make_decision(state="N/A", question=question, options=OPTIONS, scoring="pmi"))
    assert null["option_logits"] == [0.0] * len(OPTIONS) and null["timing"]["baseline_cached"] is True


def softmax(values: np.ndarray) -> np.ndarray:
    shifted = np.exp(values - values.max())
    return shifted / shifted.sum()


def test_permute_belongs_to_letters(client, make_decision):
    refused = client.post("/invocations", json=make_decision(scoring="pmi", debias="permute"))
    assert refused.status_code == 400
    assert refused.json()["error"]["field"] == "debias" and "letters" in refused.json()["error"]["message"]
    implied = decide(client, make_decision(debias="permute"))
    assert implied["scoring"] == "letters" and implied["debias"] == "permute"


def test_warnings_follow_their_documented_thresholds(client, make_decision):
    for method in METHODS:
        answer = decide(client, make_decision(state=STATE, question=QUESTION, options=OPTIONS, scoring=method))
        top, second = sorted(answer["probabilities"])[-1:-3:-1]
        assert (NEAR_TIE in answer["warnings"]) == (top - second < NEAR_TIE_MARGIN)
        mass = answer["allowed_token_mass"]
        assert (LOW_OPTION_MASS in answer["warnings"]) == (mass is not None and mass < 0.5)
    # the embedded 135M model spreads its next token far beyond the letters: letters answers say so
    assert LOW_OPTION_MASS in decide(client, make_decision(scoring="letters"))["warnings"]


def test_result_cache_answers_repeats_with_the_same_bits(start_adapter, make_decision):
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path())})
    process.wait_ready()
    with httpx.Client(base_url=process.url, timeout=60) as session:
        body = make_decision(state=STATE, question=QUESTION, options=OPTIONS, scoring="pmi")
        first, repeat = decide(session, body), decide(session, body)
        hotter = decide(session, {**body, "temperature": 0.5})
    assert first["timing"]["cache_source"] != "result" and repeat["timing"]["cache_source"] == "result"
    assert repeat["probabilities"] == first["probabilities"] and repeat["option_logits"] == first["option_logits"]
    assert repeat["timing"]["evaluated_tokens"] == 0 and repeat["timing"]["forward_ms"] == 0
    # raw scores are kept, so another temperature is still a repeat, with its own probabilities
    assert hotter["timing"]["cache_source"] == "result" and hotter["option_logits"] == first["option_logits"]
    assert np.allclose(hotter["probabilities"], softmax(np.array(first["option_logits"]) / 0.5))


def test_calibration_is_applied_and_named(start_adapter, make_decision):
    document = {"format": "semif-calibration-v1",
                "methods": {"letters": {"temperature": 2.0, "slot_bias": [1.5, 0.0, -0.5]},
                            "likelihood": {"temperature": 0.5}}}
    calibration = parse_calibration(json.dumps(document))
    process = start_adapter({"SM_LLAMA_CPP_MODEL": str(embedded_model_path()),
                             "SEMIF_CALIBRATION": json.dumps(document)})
    process.wait_ready()
    with httpx.Client(base_url=process.url, timeout=60) as session:
        letters = decide(session, make_decision(scoring="letters"))
        likelihood = decide(session, make_decision(scoring="likelihood", temperature=2.0))
        pmi = decide(session, make_decision(scoring="pmi"))
    assert letters["calibration"] == {"method": "temperature+slot_bias", "sha256": calibration.sha256[:12],
                                      "parameters": {"temperature": 2.0, "slot_bias": [1.5, 0.0, -0.5]}}
    assert np.allclose(letters["probabilities"], softmax((np.array(letters["option_logits"]) - [1.5, 0.0, -0.5]) / 2))
    assert likelihood["calibration"]["parameters"] == {"temperature": 0.5}
    # the calibration's temperature, then the request's
    assert np.allclose(likelihood["probabilities"], softmax(np.array(likelihood["option_logits"]) / 0.5 / 2.0))
    assert pmi["calibration"] is None  # not calibrated: the raw scores' softmax
