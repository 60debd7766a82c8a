"""The System One benchmark in its quick form against `jevcompat mock`, run as a user runs it.

No timing assertions (the figures live in the benchmark's output); only that every phase ran against a real server,
the outputs are complete, the report shows the figures the JSON holds, and the arithmetic behind the figures holds.
The mock is the conformance suite's own reference server: it has no model, so its latencies say nothing, but every
request and every report path is the one a real server goes through.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.common.tables import cell_text
from bench.quality.run import argmax_accuracy, summary_lines
from bench.systemone.floor import Layout, Piece, RawFloor, reported_layout
from bench.systemone.phases import extra_question_cost
from bench.systemone.workload import QUESTION_BANK, option_names, options_body, questions_body
from semif_adapter.engine.embedded_model import embedded_model_path

ROOT = Path(__file__).resolve().parents[2]
MOCK = "jevcompat-mock"


def test_the_bank_asks_the_first_k_questions_of_all_three_types() -> None:
    body = questions_body("short", 7, 4)
    assert list(body["questions"]) == [name for name, _ in QUESTION_BANK[:4]]
    assert {q["type"] for q in body["questions"].values()} == {"choice", "noul", "score"}
    assert questions_body("short", 7, 1)["state"] == body["state"] != questions_body("short", 8, 1)["state"]
    with pytest.raises(ValueError, match="questions"):
        questions_body("short", 7, len(QUESTION_BANK) + 1)


def test_option_sweep_names_255_distinct_options() -> None:
    options = option_names(255)
    assert len(options) == 255 and len(set(options.values())) == 255
    assert list(options_body("short", 1, 16)["questions"]["next_step"]["criteria"]) == list(option_names(16))
    with pytest.raises(ValueError, match="options"):
        option_names(257)


def test_layout_from_x_timing_then_semif_blocks_then_usage() -> None:
    ours = {"answers": {"a": {"x_timing": {"prompt_tokens": 95, "cached_tokens": 34, "evaluated_tokens": 96},
                              "x_option_logits": {"x": 1.0, "y": 2.0}},
                        "b": {"x_timing": {"prompt_tokens": 99, "cached_tokens": 75, "evaluated_tokens": 54},
                              "x_option_logits": {"0": 1.0, "1": 0.0, "2": 0.5}}},
            "usage": {"input_tokens": 170}}
    layout = reported_layout(ours)
    assert layout == Layout((Piece(34, 61, (18, 17)), Piece(75, 24, (10, 10, 10))), "x_timing")
    assert (layout.evaluated, layout.cached) == (150, 34)
    semif = {"answers": {"a": {"semif": {"input_tokens": 113}}, "b": {"semif": {"input_tokens": 98}}},
             "semif": {"mode": "shared", "timing": {"prefix_tokens": 60}}, "usage": {"input_tokens": 151}}
    assert reported_layout(semif) == Layout((Piece(0, 60, (53, 38)),), "semif")
    direct = {"answers": {"a": {"semif": {"input_tokens": 120}}}, "semif": {"mode": "direct", "timing": {}}}
    assert reported_layout(direct) == Layout((Piece(0, 120),), "semif")
    assert reported_layout({"answers": {"a": {}}, "usage": {"input_tokens": 40}}) == Layout((Piece(0, 40),), "usage")
    counted = {"answers": {"a": {"x_timing": {"prompt_tokens": 95, "cached_tokens": 34, "evaluated_tokens": 96,
                                              "output_rows": 36}, "x_option_logits": {"x": 1.0, "y": 2.0}}}}
    (piece,) = reported_layout(counted).pieces
    assert piece == Piece(34, 61, (18, 17), 36) and piece.rows() == (18, 17)  # every answer token's row
    assert piece.shared_rows() == 1  # the 36th: in the first answer's tokens, which `prompt_tokens` holds
    assert Piece(0, 9, (5, 5, 5), 7).rows() == (3, 2, 2) and Piece(0, 9, (5, 5)).rows() == (1, 1)
    assert Piece(0, 9, (5, 5, 5), 7).shared_rows() == Piece(0, 9, (5, 5)).shared_rows() == 0
    assert Piece(300, 27, (5, 5, 5, 5), 33).shared_rows() == 13 and Piece(0, 4, (1,), 9).shared_rows() == 4
    door = {"option_ids": ["a", "b"], "option_logits": [0.1, 0.2],  # our SemIf door: one decision
            "timing": {"prompt_tokens": 95, "cached_tokens": 34, "evaluated_tokens": 96}}
    assert reported_layout(door) == Layout((Piece(34, 61, (18, 17)),), "x_timing")
    assert reported_layout({"answers": {}}) is None


@pytest.mark.slow
def test_floor_decodes_branches_and_refuses_what_does_not_fit() -> None:
    floor = RawFloor(embedded_model_path())
    try:
        text = "The parcel arrived late and the box was dented."
        assert floor.ms(Layout((Piece(10, 20, (5, 5, 5)), Piece(0, 12)), "x_timing"), text) > 0
        # groups of about one ubatch (the adapter's 512), the first sharing it with the shared tokens; at most
        # every sequence but the trunk
        assert floor._groups(Piece(0, 10, (3,) * 300)) == [(3,) * 167, (3,) * 133]
        assert floor._groups(Piece(0, 0, (1,) * 300)) == [(1,) * 254, (1,) * 46]
        assert floor.ms(Layout((Piece(0, 10, (3,) * 300),), "x_timing"), text) > 0
        assert floor.ms(Layout((Piece(0, floor.runtime.n_ctx + 1),), "usage"), text) is None
    finally:
        floor.close()


def test_extra_question_cost_pairs_each_round_and_keeps_the_unpaired_difference() -> None:
    def sample(ms: float, floor: float, tokens: int, answered: bool = True) -> dict[str, Any]:
        return {"ms": ms, "floor_ms": floor, "evaluated": tokens, "answered": answered}

    def row(samples: list[dict[str, Any]]) -> dict[str, Any]:
        answered = [s for s in samples if s["answered"]]
        return {"latency_ms": {"p50": statistics.median(s["ms"] for s in answered)},
                "floor_ms": {"p50": statistics.median(s["floor_ms"] for s in answered)},
                "evaluated_tokens": {"p50": statistics.median(s["evaluated"] for s in answered)}, "samples": samples}

    # the machine slows down round by round: a question costs 50 ms over one whose floor is 40 ms, in every round
    one = [sample(300 + 100 * r, 250 + 80 * r, 100) for r in range(3)]
    four = [sample(450 + 100 * r, 370 + 80 * r, 160) for r in range(3)]
    four.append(sample(9_999, 1, 1, answered=False))  # a refusal pairs with nothing
    (cost,) = extra_question_cost({"1": row(one), "4": row(four)})
    assert cost == {"questions": 4, "extra_ms": 50.0, "extra_floor_ms": 40.0, "extra_evaluated_tokens": 20.0,
                    "over_floor": 1.25, "unpaired_extra_ms": 50.0, "unpaired_extra_floor_ms": 40.0,
                    "unpaired_over_floor": 1.25}
    # one slow spell in a round: the other rounds' pairs still see 50 ms a question, the p50s do not
    one = [sample(300, 250, 100), sample(310, 250, 100), sample(900, 250, 100)]
    four = [sample(450, 370, 160), sample(1_000, 370, 160), sample(1_050, 370, 160)]
    (cost,) = extra_question_cost({"1": row(one), "4": row(four)})
    assert (cost["extra_ms"], cost["over_floor"]) == (50.0, 1.25)
    assert cost["unpaired_extra_ms"] == 230.0 and cost["unpaired_over_floor"] == 5.75


def test_argmax_accuracy_counts_as_jevbench_does() -> None:
    cases = {"c": {"questions": {"n": {"type": "noul"}, "k": {"type": "choice"}, "s": {"type": "score"},
                                 "u": {"type": "noul"}}}}
    bases = {"c": {"base": {"n": {"true": 0.7, "false": 0.3}, "k": {"x": 0.5, "y": 0.5, "z": 0.0},
                            "s": {"0": 0.2, "1": 0.8}, "u": {"true": 0.1, "false": 0.9}}}}
    gold = {"c": {"n": True, "k": "y", "s": 0, "u": "unknown"}}
    found = argmax_accuracy(bases, gold, cases)
    assert found["n"] == 3  # "unknown" is left out
    assert found["accuracy"] == pytest.approx((1 + 0.5 + 0) / 3)  # a two-way tie earns a half
    assert found["gold_probability"] == pytest.approx((0.7 + 0.5 + 0.2) / 3)
    by_type = found["by_type"]
    assert (by_type["choice"]["accuracy"], by_type["noul"]["accuracy"], by_type["score"]["accuracy"]) == (0.5, 1, 0)
    assert by_type["noul"]["n"] == 1 and by_type["noul"]["gold_yes_rate"] == by_type["noul"]["answered_yes_rate"] == 1


def test_argmax_accuracy_says_how_often_noul_answers_yes() -> None:
    cases = {"c": {"questions": {f"q{i}": {"type": "noul"} for i in range(4)}}}
    bases = {"c": {"base": {f"q{i}": {"true": 0.9, "false": 0.1} for i in range(4)}}}
    gold = {"c": {"q0": True, "q1": False, "q2": False, "q3": False}}
    by_type = argmax_accuracy(bases, gold, cases)["by_type"]
    noul = by_type["noul"]
    assert (noul["accuracy"], noul["gold_yes_rate"], noul["answered_yes_rate"]) == (0.25, 0.25, 1.0)
    assert "choice" not in by_type
    assert argmax_accuracy({}, gold, cases) == {"accuracy": None, "gold_probability": None, "n": 0, "by_type": {}}


def test_summary_prints_the_accuracy_per_type() -> None:
    cases = {"c": {"questions": {"n": {"type": "noul"}, "k": {"type": "choice"}}}}
    bases = {"c": {"base": {"n": {"true": 0.9, "false": 0.1}, "k": {"x": 0.2, "y": 0.8}}}}
    bench = {"suite": "mini", "coherence_score": 80.0, "ci": [79.0, 81.0], "batch_independence": 100.0,
             "dimensions": {}, "requests": 2, "errors": 0,
             "argmax_accuracy": argmax_accuracy(bases, {"c": {"n": False, "k": "y"}}, cases)}
    lines = summary_lines({"endpoint": "http://x/v1/systemone", "wall_s": 1.0, "jevbench": bench})
    assert any("argmax accuracy 0.500" in line for line in lines)
    assert "| choice | 1 | 1.000 | 0.800 | - | - |" in lines
    assert "| noul | 1 | 0.000 | 0.100 | 0.000 | 1.000 |" in lines


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("systemone")
    subprocess.run([sys.executable, "-m", "bench.systemone", "--quick", "--mock", "--out", str(out)],
                   check=True, timeout=600, cwd=ROOT)
    return out


@pytest.mark.slow
def test_quick_run_answers_every_request_and_times_its_floor(quick_run: Path) -> None:
    results = json.loads((quick_run / "systemone.json").read_text())
    assert results["systems"] == {MOCK: results["systems"][MOCK]} and results["meta"]["quick"]
    for phase, values in (("questions", ["1", "2"]), ("options", ["2", "16"])):
        rows = results[phase]["rows"][MOCK]
        assert list(rows) == values
        for row in rows.values():
            assert row["answered"] == row["requests"] == 1 and row["refused"] == row["failed"] == 0
            # the mock reports no x_timing: the floor is that of what it says it read
            assert row["tokens_source"] == ["usage"] and row["floor_ms"]["p50"] > 0
    (extra,) = results["questions"]["extra_question"][MOCK]
    assert extra["questions"] == 2 and extra["extra_evaluated_tokens"] > 0
    warm = results["questions"]["warm_rows"][MOCK]  # each request after an uncounted question about its state
    assert list(warm) == ["1", "2"] and all(row["answered"] == row["requests"] == 1 for row in warm.values())
    assert [e["questions"] for e in results["questions"]["warm_extra_question"][MOCK]] == [2]
    assert "semif" not in results  # the SemIf door is the adapter's alone
    throughput = results["throughput"]["systems"][MOCK]
    assert (throughput["requests"], throughput["errors"], throughput["decisions"]) == (4, 0, 12)
    verdict = results["conformance"][MOCK]
    assert verdict["verdict"] == "conformant" and verdict["MUST"]["passed"] == verdict["MUST"]["tested"] > 30
    assert Path(verdict["report"]).exists()


@pytest.mark.slow
def test_quick_run_report_shows_what_it_measured(quick_run: Path) -> None:
    results = json.loads((quick_run / "systemone.json").read_text())
    report = (quick_run / "systemone.md").read_text()
    assert (quick_run / "systemone.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for phase, key in (("questions", "rows"), ("options", "rows"), ("questions", "warm_rows")):
        for value, row in results[phase][key][MOCK].items():
            cells = [MOCK, value, row["answered"], row["refused"], row["failed"], row["latency_ms"]["p50"],
                     row["latency_ms"]["p95"], row["evaluated_tokens"]["p50"], "usage", row["floor_ms"]["p50"],
                     row["over_floor"]["p50"]]
            assert "| " + " | ".join(cell_text(c) for c in cells) + " |" in report, (phase, key, value)
    assert "## Questions about a short state the server has just read" in report
    assert f"| {MOCK} | {cell_text(results['throughput']['systems'][MOCK]['decisions_per_s'])} |" in report
    assert f"| {MOCK} | conformant | " in report
    # a server that does not say what it computed gets no verdict on the cost targets
    assert "not measurable: the server does not report the tokens it computed" in report
