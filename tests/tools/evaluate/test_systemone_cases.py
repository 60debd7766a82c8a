"""Labelled System One cases: every line is checked before anything is sent, a bad one is named by its number.

Fast: no model, no server (an unreachable URL proves nothing was sent).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from scripts.evaluate.cases import CasesError
from scripts.evaluate.systemone_cases import (
    SEMIF,
    SYSTEMONE,
    check_methods,
    default_id,
    detect_format,
    load_systemone_cases,
)
from scripts.local.processes import free_port
from tools.evaluate.runs import REPO, calibrate, evaluate

CASE = {"id": "c-1", "state": "I was charged twice, please give me my money back.",
        "questions": {"refund": {"type": "noul", "instructions": "Is the customer asking for a refund?"},
                      "team": {"type": "choice", "instructions": "Which team?",
                               "criteria": {"billing": "Billing", "shipping": None}},
                      "urgency": {"type": "score", "criteria": ["low", {"level": "high"}]}},
        "gold": {"refund": True, "team": "billing", "urgency": 1}, "kind": "support"}


def line(**changes: object) -> str:
    return json.dumps({**CASE, "id": "changed", **changes})


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def test_a_case_reads_as_written(tmp_path: Path) -> None:
    case_file = load_systemone_cases(write(tmp_path, json.dumps(CASE)))
    (case,) = case_file.cases
    assert (case.id, case.kind, case.line, case.state) == ("c-1", "support", 1, CASE["state"])
    refund, team, urgency = case.labelled
    assert (refund.type, refund.answers, refund.gold, refund.gold_answer) == ("noul", ("true", "false"), 0, "true")
    assert (team.answers, team.gold_answer) == (("billing", "shipping"), "billing")
    assert (urgency.answers, urgency.gold) == (("0", "1"), 1)
    body = case.body("jev-latest", "pmi", 0.5)
    assert body == {"model": "jev-latest", "state": CASE["state"], "questions": CASE["questions"],
                    "x_scoring": "pmi", "x_temperature": 0.5}
    assert "x_scoring" not in case.body() and "x_temperature" not in case.body()


def test_an_id_is_optional_and_stable(tmp_path: Path) -> None:
    without = {key: value for key, value in CASE.items() if key != "id"}
    (case,) = load_systemone_cases(write(tmp_path, json.dumps(without))).cases
    assert case.id == default_id(CASE["state"], CASE["questions"])
    reordered = {"questions": dict(reversed(list(CASE["questions"].items()))), "state": CASE["state"]}
    assert default_id(reordered["state"], reordered["questions"]) == case.id  # canonical: key order is no matter


@pytest.mark.parametrize(("text", "message"), [
    ('{"state": "s", "questions"', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (line(colour="red"), r"unknown key\(s\) \['colour'\]"),
    (json.dumps({"state": "s", "questions": CASE["questions"]}), "missing 'gold'"),
    (line(kind=3), "'kind' and 'note' must be strings"),
    (line(id=""), "'id' must be a non-empty string"),
    (line(gold={"refund": True}), r"'gold' must give one answer per question id \['refund', 'team', 'urgency'\]"),
    (line(gold={**CASE["gold"], "refund": "yes"}), r"gold\['refund'\] \(noul\): expected true or false, got 'yes'"),
    (line(gold={**CASE["gold"], "team": "sales"}),
     r"gold\['team'\] \(choice\): expected one of the option names \['billing', 'shipping'\], got 'sales'"),
    (line(gold={**CASE["gold"], "urgency": 2}), r"gold\['urgency'\] \(score\): expected a level index 0\.\.1"),
    (line(gold={**CASE["gold"], "urgency": True}), r"gold\['urgency'\] \(score\): expected a level index"),
    (line(gold={**CASE["gold"], "urgency": "high"}), r"gold\['urgency'\] \(score\): expected a level index"),
    (line(questions={"q": {"type": "score", "criteria": {"0": "low", "1": "high"}}}, gold={"q": 0}),
     r"the endpoint would refuse this request: questions\.q\.score\.criteria: score criteria must be an array"),
    (line(questions={"q": {"type": "choice", "criteria": {"only": None}}}, gold={"q": "only"}),
     r"the endpoint would refuse this request: questions\.q\.choice\.criteria"),
    (line(questions={"q": {"type": "noul"}}, gold={"q": True}), "a noul needs instructions or a described outcome"),
    (line(questions={"q": {"type": "boolean", "instructions": "?"}}, gold={"q": True}),
     "the endpoint would refuse this request: questions.q"),
    (line(state=""), "the endpoint would refuse this request: state"),
    (line(questions={}), "the endpoint would refuse this request: questions"),
    (json.dumps(CASE), "case id 'c-1' already used on line 1"),
    ('{"state": "s", "state": "t", "questions": {}, "gold": {}}', "key 'state' appears twice"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, json.dumps(CASE), text)
    with pytest.raises(CasesError, match=rf"^{path}:2: .*{message}"):
        load_systemone_cases(path)


def test_the_format_is_detected_from_the_first_case(tmp_path: Path) -> None:
    assert detect_format(write(tmp_path, json.dumps(CASE))) == SYSTEMONE
    assert detect_format(REPO / "tests" / "data" / "decisions_small.jsonl") == SEMIF
    assert detect_format(write(tmp_path, "not json")) == SEMIF  # the SemIf loader then names the line
    assert detect_format(tmp_path / "missing.jsonl") == SEMIF


def test_letters_is_refused_over_16_options_before_sending(tmp_path: Path) -> None:
    many = {"type": "choice", "criteria": {f"option {i}": None for i in range(17)}}
    path = write(tmp_path, json.dumps(CASE), line(questions={"many": many}, gold={"many": "option 3"}))
    case_file = load_systemone_cases(path)
    check_methods(case_file, ["pmi", "likelihood", None])  # those score up to 255
    with pytest.raises(CasesError, match=rf"^{path}:2: .*x_scoring letters.*at most 16 options"):
        check_methods(case_file, ["pmi", "letters"])


def test_the_cli_stops_on_a_bad_line_before_sending_anything(tmp_path: Path) -> None:
    path = write(tmp_path, json.dumps(CASE), line(gold={**CASE["gold"], "team": "sales"}))
    result = evaluate(str(path), "--endpoint-url", closed_url())  # unreachable: it must not even try
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"evaluate: {path}:2: gold['team'] (choice): expected one of the option names ['billing', 'shipping'], "
        "got 'sales'"]
    assert result.stdout == ""


@pytest.mark.parametrize(("run", "args", "message"), [
    (evaluate, ["--debias", "permute"], "--debias applies to SemIf decisions only"),
    (evaluate, ["--scoring", "letters", "--format", "systemone"], "x_scoring letters"),
    (calibrate, ["-o", "{tmp}/calibration.json"], "cannot fit a calibration for choice questions"),
])
def test_usage_and_unfittable_files_exit_2_before_sending(
        tmp_path: Path, run: Callable[..., subprocess.CompletedProcess[str]], args: list[str], message: str) -> None:
    many = {"type": "choice", "criteria": {f"option {i}": None for i in range(20)}}
    path = write(tmp_path, line(questions={"many": many}, gold={"many": "option 0"}))
    result = run(str(path), "--endpoint-url", closed_url(), *(a.format(tmp=tmp_path) for a in args))
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "calibration.json").exists()


def test_model_applies_to_system_one_only() -> None:
    result = evaluate(str(REPO / "tests" / "data" / "decisions_small.jsonl"), "--endpoint-url", closed_url(),
                      "--model", "other")
    assert result.returncode == 2 and "--model applies to System One cases only" in result.stderr


def test_an_unreachable_server_exits_1_in_one_line(tmp_path: Path) -> None:
    url = closed_url()
    result = evaluate(str(write(tmp_path, json.dumps(CASE))), "--endpoint-url", url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"evaluate: cannot reach {url}")
