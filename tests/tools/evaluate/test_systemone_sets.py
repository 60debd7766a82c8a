"""The labelled System One sets: what tests/data/README.md promises about them holds, and the files are what their
builders write (the hand-written one by its script; the sys1bench one by its digest, and regenerated where
sys1bench is installed)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections import Counter, defaultdict

from scripts.evaluate.calibration_fit import held_out
from scripts.evaluate.systemone_cases import load_systemone_cases
from tools.evaluate.runs import DATA, data_builder

OWN = DATA / "systemone.jsonl"
REPO = DATA.parents[1]
SYS1BENCH = DATA / "systemone_sys1bench.jsonl"


def own_lines() -> list[dict]:
    return [json.loads(line) for line in OWN.read_text(encoding="utf-8").splitlines()]


def questions(question_type: str) -> list[tuple[dict, str, dict]]:
    return [(case, qid, q) for case in own_lines() for qid, q in case["questions"].items()
            if q["type"] == question_type]


def test_the_committed_file_is_what_the_builder_writes() -> None:
    build = data_builder("build_systemone")
    assert OWN.read_text(encoding="utf-8") == data_builder("build_decisions").jsonl(list(build.build()))


def test_size_types_and_split() -> None:
    case_file = load_systemone_cases(OWN)  # every line is a case the evaluator (and the endpoint) accepts
    by_type = Counter(question.type for _, question in case_file.questions())
    assert sum(by_type.values()) >= 150 and min(by_type.values()) >= 60
    for question_type in by_type:  # the calibration can be fitted and checked for every type
        sides = Counter(held_out(case.id) for case, _ in case_file.questions(question_type))
        assert min(sides[True], sides[False]) >= 10, (question_type, sides)


def test_noul_gold_is_balanced_and_every_question_meets_both_answers() -> None:
    asked = questions("noul")
    assert Counter(case["gold"][qid] for case, qid, _ in asked) == {True: len(asked) // 2, False: len(asked) // 2}
    per_question: defaultdict[tuple[str, str], Counter[bool]] = defaultdict(Counter)
    for case, qid, _ in asked:
        per_question[(case["kind"], qid)][case["gold"][qid]] += 1
    for key, answers in per_question.items():
        assert answers[True] == answers[False] >= 3, (key, answers)  # the same question, yes and no states alike


def test_noul_comes_in_every_criteria_form() -> None:
    forms: Counter[str] = Counter()
    for _, _, question in questions("noul"):
        criteria = question.get("criteria", "absent")
        forms["absent" if criteria == "absent" else "null" if criteria is None else
              "two-sided" if set(criteria) == {"true", "false"} else f"one-sided {next(iter(criteria))}"] += 1
        forms["no instructions"] += "instructions" not in question
        forms[f"{type(question.get('instructions')).__name__} instructions"] += 1
    for form in ("absent", "null", "two-sided", "one-sided true", "one-sided false", "no instructions",
                 "dict instructions", "list instructions"):
        assert forms[form] >= 6, (form, forms)


def test_choice_options_forms_and_gold_positions() -> None:
    asked = questions("choice")
    counts = Counter(len(q["criteria"]) for _, _, q in asked)
    assert min(counts) == 2 and max(counts) == 12 and len(counts) >= 6
    descriptions = Counter(type(d).__name__ for _, _, q in asked for d in q["criteria"].values())
    assert min(descriptions["NoneType"], descriptions["dict"], descriptions["list"], descriptions["str"]) >= 8
    assert any(isinstance(q["instructions"], dict) for _, _, q in asked)
    assert any(not name.isascii() for _, _, q in asked for name in q["criteria"])  # Unicode option names
    positions: defaultdict[int, Counter[int]] = defaultdict(Counter)
    for case, qid, q in asked:
        positions[len(q["criteria"])][list(q["criteria"]).index(case["gold"][qid])] += 1
    for count, seen in positions.items():
        shares = [seen[p] for p in range(count)]
        assert max(shares) - min(shares) <= 1, (count, seen)


def test_score_levels_and_gold_spread() -> None:
    asked = questions("score")
    assert {len(q["criteria"]) for _, _, q in asked} == set(range(2, 11))
    assert any(isinstance(level, dict) for _, _, q in asked for level in q["criteria"])
    thirds = Counter(min(2, int(3 * case["gold"][qid] / (len(q["criteria"]) - 1))) for case, qid, q in asked)
    assert min(thirds.values()) >= len(asked) // 5, thirds  # low, middle and high levels are all gold often
    golds: defaultdict[tuple[str, str, int], set[int]] = defaultdict(set)
    for case, qid, q in asked:
        golds[(case["kind"], qid, len(q["criteria"]))].add(case["gold"][qid])
    for (kind, qid, levels), seen in golds.items():  # every scale is asked where its ends are the answer
        assert {0, levels - 1} <= seen, (kind, qid, seen)


def test_the_sys1bench_set_is_the_recorded_one() -> None:
    build = data_builder("build_sys1bench")
    assert hashlib.sha256(SYS1BENCH.read_bytes()).hexdigest() == build.SHA256
    case_file = load_systemone_cases(SYS1BENCH)
    assert len(case_file.cases) == build.ITEMS_PER_GENERATOR * len(build.GENERATORS) == 240
    assert Counter(case.kind for case in case_file.cases) == {
        "support_triage": 60, "email_security": 60, "log_triage": 60, "policy_compliance": 60}
    assert Counter(question.type for _, question in case_file.questions()) == {"choice": 240, "noul": 540,
                                                                               "score": 240}


def test_sys1bench_regenerates_the_same_file() -> None:
    """sys1bench lives in the benchmark tools' venv (the bootstrap makes it): its generators, run there, write the
    committed file again byte for byte."""
    python = REPO / ".venv-bench" / "bin" / "python"
    assert python.exists(), "the bootstrap makes .venv-bench (requirements-bench.txt): run make bootstrap"
    done = subprocess.run([str(python), str(DATA / "build_sys1bench.py"), "--check"], cwd=REPO, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
