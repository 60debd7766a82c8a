"""Bad cases files and unreachable targets: one line on stderr, the line number, an exit status; nothing sent."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from scripts.evaluate.cases import CasesError, load_cases
from scripts.local.processes import free_port
from tools.evaluate.runs import SMALL, calibrate, evaluate

GOOD = SMALL.read_text(encoding="utf-8").splitlines()[:3]


def bad_file(tmp_path: Path, line: str, at: int = 2) -> Path:
    """The first three small cases with `line` put at 1-based line `at`."""
    lines = list(GOOD)
    lines.insert(at - 1, line)
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def case(**changes: object) -> str:
    document = json.loads(GOOD[0])
    document["decision"]["id"] = "changed"
    document.update(changes)
    return json.dumps(document)


def closed_url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize(("line", "message"), [
    ('{"decision": {"id": "x"', "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    (case(gold="refund"), "gold 'refund' is not one of the options"),
    (case(colour="red"), r"unknown key\(s\) \['colour'\]"),
    (case(gold=None), "'gold', 'kind' and 'note' must be strings"),
    (json.dumps({"decision": json.loads(GOOD[0])["decision"]}), "missing 'gold'"),
    (GOOD[0], "already used on line 1"),
    (case(decision={"id": "one", "state": "s", "question": "q", "options": [{"id": "a", "description": "A"}]},
          gold="a"), "the endpoint would refuse this decision: decision.options"),
    ('{"decision": {}, "gold": "a", "gold": "b"}', "key 'gold' appears twice"),
])
def test_a_bad_line_is_named_with_its_number(tmp_path: Path, line: str, message: str) -> None:
    path = bad_file(tmp_path, line)
    with pytest.raises(CasesError, match=rf"^{path}:2: .*{message}"):
        load_cases(path)


def test_the_cli_stops_on_a_bad_line_before_sending_anything(tmp_path: Path) -> None:
    path = bad_file(tmp_path, case(gold="refund"), at=3)
    result = evaluate(str(path), "--endpoint-url", closed_url())  # unreachable: it must not even try
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"evaluate: {path}:3: gold 'refund' is not one of the options "
        f"{[o['id'] for o in json.loads(GOOD[0])['decision']['options']]}"]
    assert result.stdout == ""


def test_a_malformed_line_exits_2_with_its_number(tmp_path: Path) -> None:
    path = bad_file(tmp_path, "not json at all", at=1)
    result = evaluate(str(path), "--endpoint-url", closed_url())
    assert result.returncode == 2
    assert result.stderr.startswith(f"evaluate: {path}:1: not valid JSON")
    assert len(result.stderr.strip().splitlines()) == 1


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(CasesError, match="no cases"):
        load_cases(empty)
    result = evaluate(str(tmp_path / "nope.jsonl"), "--endpoint-url", closed_url())
    assert result.returncode == 2 and "cannot read" in result.stderr


def test_an_unreachable_container_exits_1_in_one_line(tmp_path: Path) -> None:
    url = closed_url()
    result = evaluate(str(SMALL), "--endpoint-url", url)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"evaluate: cannot reach {url}")


def test_an_unreachable_gateway_exits_1_in_one_line() -> None:
    port = free_port()
    result = evaluate(str(SMALL), "--local", "--port", str(port))
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"local-decision at http://127.0.0.1:{port}" in lines[0]


def test_an_aws_endpoint_without_a_region_exits_1_in_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_CONFIG_FILE=str(tmp_path / "none"), AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"))
    result = evaluate(str(SMALL), "--endpoint", "semif-dev-decision", env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == ["evaluate: You must specify a region."]


@pytest.mark.parametrize(("args", "message"), [
    (["--scoring", "cloze"], "expected distinct methods"),
    (["--scoring", "letters,letters"], "expected distinct methods"),
    (["--temperature", "0"], "expected a number > 0"),
    (["--debias", "shuffle"], "invalid choice"),
    (["--port", "9000"], "--port and --prefix apply to --local only"),
    (["--scoring", "letters,pmi", "--debias", "permute"], "--debias permute applies to letters only"),
])
def test_usage_errors_exit_2(args: list[str], message: str) -> None:
    result = evaluate(str(SMALL), "--endpoint-url", closed_url(), *args)
    assert result.returncode == 2 and message in result.stderr


def test_a_split_with_no_held_out_case_is_refused_before_sending(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    path.write_text(GOOD[0] + "\n")
    result = calibrate(str(path), "-o", str(tmp_path / "c.json"), "--endpoint-url", closed_url())
    assert result.returncode == 2 and "cannot fit a calibration" in result.stderr
    assert not (tmp_path / "c.json").exists()
