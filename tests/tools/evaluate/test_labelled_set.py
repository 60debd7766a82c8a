"""The project's labelled set: what the README promises about it holds, and the files are what the builder writes."""

from __future__ import annotations

import json
from collections import Counter, defaultdict

from scripts.evaluate.calibration_fit import held_out
from scripts.evaluate.cases import load_cases
from tools.evaluate.runs import DATA, SMALL, data_builder

FULL = DATA / "decisions.jsonl"


def test_committed_files_are_what_the_builder_writes() -> None:
    build = data_builder("build_decisions")
    cases = list(build.build())
    assert FULL.read_text(encoding="utf-8") == build.jsonl(cases)
    assert SMALL.read_text(encoding="utf-8") == build.jsonl(build.small(cases))


def test_size_kinds_and_option_counts() -> None:
    case_file = load_cases(FULL)  # every line is a case the evaluator (and the endpoint) accepts
    kinds = Counter(case.kind for case in case_file.cases)
    counts = Counter(len(case.request.options) for case in case_file.cases)
    assert len(case_file.cases) >= 200
    assert len(kinds) >= 6 and min(kinds.values()) >= 25
    assert set(counts) == set(range(2, 9))
    assert sum(isinstance(case.request.state, dict) for case in case_file.cases) >= 20  # JSON states too


def test_gold_positions_are_balanced() -> None:
    """Per option count, and per (kind, option count, gold id), no position holds more than one extra case."""
    positions: defaultdict[tuple, Counter[int]] = defaultdict(Counter)
    for line in FULL.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        ids = [option["id"] for option in case["decision"]["options"]]
        where = ids.index(case["gold"])
        positions[("count", len(ids))][where] += 1
        positions[("stratum", case["kind"], len(ids), case["gold"])][where] += 1
    for key, seen in positions.items():
        count = key[1] if key[0] == "count" else key[2]
        shares = [seen[p] for p in range(count)]
        assert max(shares) - min(shares) <= 1, (key, seen)


def test_the_small_file_has_both_sides_of_the_split() -> None:
    cases = load_cases(SMALL).cases
    sides = Counter((case.kind, held_out(case.id)) for case in cases)
    assert len(cases) == 24 and set(sides.values()) == {1, 2}
    assert sum(held_out(case.id) for case in cases) == 8
