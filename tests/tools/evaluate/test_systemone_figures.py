"""The System One figures on fixed, hand-written answers: values worked out on paper (fast, no server)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable

import pytest

from scripts.evaluate import metrics
from scripts.evaluate.systemone_cases import parse_systemone_case
from scripts.evaluate.systemone_collect import Answered, check_reply
from scripts.evaluate.systemone_metrics import systemone_method_figures
from scripts.evaluate.targets import Reply

NOUL = {"type": "noul", "instructions": "Is it late?"}
SCORE = {"type": "score", "criteria": ["none", "some", "much"]}
CHOICE = {"type": "choice", "criteria": {"a": None, "b": "B", "c": ["C"]}}


def case(number: int, gold: dict, kind: str) -> str:
    return json.dumps({"id": f"c{number}", "state": f"state {number}",
                       "questions": {"late": NOUL, "level": SCORE, "pick": CHOICE}, "gold": gold, "kind": kind})


# (gold, answer): p(yes) for the noul, the levels' probabilities, the options' probabilities
FIXED = [
    ({"late": True, "level": 0, "pick": "a"}, 0.9, [0.7, 0.2, 0.1], [0.5, 0.3, 0.2], "x"),
    ({"late": False, "level": 2, "pick": "b"}, 0.6, [0.1, 0.3, 0.6], [0.6, 0.3, 0.1], "x"),
    ({"late": False, "level": 1, "pick": "c"}, 0.2, [0.3, 0.3, 0.4], [0.1, 0.1, 0.8], "y"),
    ({"late": True, "level": 2, "pick": "a"}, 0.4, [0.5, 0.25, 0.25], [0.25, 0.5, 0.25], "y"),
]


def answered() -> list[Answered]:
    found = []
    for number, (gold, p_yes, levels, options, kind) in enumerate(FIXED):
        document = {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 0}, "x_timing": {"total_ms": number},
                    "answers": {
                        "late": {"type": "noul", "noul": p_yes, "x_warnings": ["near_tie"] if number == 3 else []},
                        "level": {"type": "score", "score": sum(i * p for i, p in enumerate(levels)),
                                  "legend": {"0": "none", "1": "some", "2": "much"},
                                  "probabilities": {str(i): p for i, p in enumerate(levels)}, "confidence": 0.5},
                        "pick": {"type": "choice", "choice": "abc"[options.index(max(options))],
                                 "probabilities": dict(zip("abc", options, strict=True)), "confidence": 0.5}}}
        found.append(check_reply(parse_systemone_case(case(number, gold, kind), number + 1),
                                 Reply(document, 10.0 * (number + 1)), "pmi"))
    return found


def test_noul_figures_show_the_yes_bias_arithmetic() -> None:
    noul = systemone_method_figures(answered())["types"]["noul"]
    # right: 0.9 (yes), 0.2 (no); wrong: 0.6 (said yes, gold no), 0.4 (said no, gold yes)
    assert noul["n"] == 4 and noul["accuracy"] == 0.5
    assert noul["yes_rate"] == 0.5 and noul["gold_yes_share"] == 0.5
    assert noul["mean_p_yes_gold_yes"] == pytest.approx((0.9 + 0.4) / 2)
    assert noul["mean_p_yes_gold_no"] == pytest.approx((0.6 + 0.2) / 2)
    assert noul["mean_confidence"] == pytest.approx((0.9 + 0.6 + 0.8 + 0.6) / 4)
    assert noul["brier"] == pytest.approx(2 * ((0.1 ** 2) + (0.6 ** 2) + (0.2 ** 2) + (0.6 ** 2)) / 4)
    assert noul["log_loss"] == pytest.approx(-(math.log(0.9) + math.log(0.4) + math.log(0.8) + math.log(0.4)) / 4)
    # bins: 0.9 -> [0.9, 1] right; 0.6, 0.6 -> [0.6, 0.7) both wrong; 0.8 -> [0.8, 0.9) right
    assert noul["ece"] == pytest.approx(0.25 * 0.1 + 0.5 * 0.6 + 0.25 * 0.2)
    assert noul["warning_rates"] == {"near_tie": 0.25}
    assert noul["per_kind"] == {"x": {"n": 2, "accuracy": 0.5}, "y": {"n": 2, "accuracy": 0.5}}
    assert noul["per_question"] == {"x/late": {"n": 2, "accuracy": 0.5}, "y/late": {"n": 2, "accuracy": 0.5}}
    # gold yes 0.9, 0.4 against gold no 0.6, 0.2: three of four pairs ordered right; within each question both are
    assert noul["auc"] == 0.75 and noul["auc_within_question"] == 1.0


def test_separation_counts_ties_half_and_ignores_rescaling() -> None:
    assert metrics.separation([0.5, 0.7], [0.5, 0.1]) == pytest.approx((0.5 + 1 + 1 + 1) / 4)
    assert metrics.separation([0.2], [0.8]) == 0.0
    logits = ([-1.0, 3.0, 0.5], [0.0, -2.0])
    squashed = [[1 / (1 + math.exp(-v / 7 + 0.3)) for v in side] for side in logits]
    assert metrics.separation(*logits) == metrics.separation(*squashed) == pytest.approx(5 / 6)
    assert metrics.separation([], [0.1]) is None


def test_score_figures_argmax_and_expected_level() -> None:
    level = systemone_method_figures(answered())["types"]["score"]
    # argmax levels 0, 2, 2, 0 against gold 0, 2, 1, 2: two right
    assert level["accuracy"] == 0.5 and level["chance_accuracy"] == pytest.approx(1 / 3)
    # expected levels 0.4, 1.5, 1.1, 0.75 against gold 0, 2, 1, 2
    assert level["mae"] == pytest.approx((0.4 + 0.5 + 0.1 + 1.25) / 4)
    assert level["log_loss"] == pytest.approx(-(math.log(0.7) + math.log(0.6) + math.log(0.3) + math.log(0.25)) / 4)


def test_choice_figures_and_the_requests() -> None:
    figures = systemone_method_figures(answered())
    pick = figures["types"]["choice"]
    # argmax a, a, c, b against gold a, b, c, a: two right
    assert pick["accuracy"] == 0.5 and pick["n"] == 4
    assert pick["brier"] == pytest.approx(((0.5 ** 2 + 0.3 ** 2 + 0.2 ** 2) + (0.6 ** 2 + 0.7 ** 2 + 0.1 ** 2)
                                           + (0.1 ** 2 + 0.1 ** 2 + 0.2 ** 2) + (0.75 ** 2 + 0.5 ** 2 + 0.25 ** 2))
                                          / 4)
    assert (figures["n_cases"], figures["n_questions"]) == (4, 12)
    assert figures["p50_latency_ms"] == pytest.approx(25.0) and figures["p50_server_ms"] == pytest.approx(1.5)


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["answers"].pop("late"), r"answers for \['level', 'pick'\], asked \['late', 'level', 'pick'\]"),
    (lambda d: d["answers"].update(extra={"type": "noul", "noul": 0.5}), "answers for"),
    (lambda d: d["answers"]["late"].update(type="boolean"), "expected an answer of type 'noul', got 'boolean'"),
    (lambda d: d["answers"]["late"].update(noul=1.5), r"answers\['late'\]\.noul: not a probability"),
    (lambda d: d["answers"]["late"].update(noul=float("nan")), "expected a finite number"),
    (lambda d: d["answers"]["pick"]["probabilities"].pop("c"), r"answers\['pick'\]\.probabilities: expected the keys"),
    (lambda d: d["answers"]["pick"]["probabilities"].update(a=0.9), "not a probability distribution"),
    (lambda d: d["answers"]["level"].pop("score"), r"answers\['level'\]\.score: expected a finite number"),
    (lambda d: d["answers"]["level"].update(x_option_logits={"0": 1.0}), r"x_option_logits: expected the keys"),
    (lambda d: d.update(x_scoring="letters"), "asked x_scoring 'pmi', the response says it used 'letters'"),
    (lambda d: d.pop("answers"), "the response has no 'answers' object"),
])
def test_a_malformed_answer_is_refused_with_a_reason(change: Callable[[dict], object], message: str) -> None:
    good = answered()[0]
    document = {**good.reply.document, "answers": {k: dict(v) for k, v in good.reply.document["answers"].items()}}
    document["answers"]["pick"]["probabilities"] = dict(document["answers"]["pick"]["probabilities"])
    change(document)
    with pytest.raises(ValueError, match=message):
        check_reply(good.case, Reply(document, 1.0), "pmi")
