"""The evaluator's System One plumbing against a real, spec-exact System One server: `jevcompat mock` (PyPI's
conformance suite's reference server, a deterministic fake model), started on loopback as a subprocess.

The whole labelled file goes through the CLI a user types; the figures must equal the arithmetic a test does on
the raw answers it recorded. The mock reports no raw scores (x_option_logits), so a calibration fit is refused
with a reason while the figures are still written. (The same run against this project's adapter is the adapter's
end-to-end test.)
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from jevcompat.mock import MockConfig, Running

from scripts.evaluate.systemone_cases import load_systemone_cases
from scripts.evaluate.systemone_collect import collect_systemone
from scripts.evaluate.targets import HttpTarget, RuntimeTarget, TargetError
from scripts.local.processes import Child, free_port, start_child, wait_for_ping
from tools.evaluate.arithmetic import expected_calibration_error, gold_key, systemone_rows
from tools.evaluate.runs import REPO, calibrate, evaluate

CASES = REPO / "tests" / "data" / "systemone.jsonl"
SYS1BENCH = REPO / "tests" / "data" / "systemone_sys1bench.jsonl"
EXACT = {"rel": 1e-12, "abs": 1e-12}


@pytest.fixture(scope="module")
def mock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    jevcompat = Path(sys.executable).with_name("jevcompat")
    child: Child = start_child("jevcompat mock", [str(jevcompat), "mock", "--host", "127.0.0.1", "--port", str(port)],
                               dict(os.environ), tmp_path_factory.mktemp("mock") / "mock.log")
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for_ping(child, f"{url}/v1/models", timeout_s=60)
        yield url
    finally:
        child.stop()


@pytest.fixture(scope="module")
def run(mock: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("systemone-run")
    process = calibrate(str(CASES), "-o", str(out / "calibration.json"), "--endpoint-url", mock, "--scoring", "pmi",
                        "--temperature", "0.5", "--json", str(out / "figures.json"),
                        "--responses", str(out / "responses.jsonl"), "--plot", str(out / "reliability.png"))
    return {"process": process, "out": out, "figures": json.loads((out / "figures.json").read_text()),
            "responses": [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()]}


def test_every_case_is_sent_once_and_answered(run: dict[str, Any], mock: str) -> None:
    cases = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines()]
    responses = run["responses"]
    assert [r["id"] for r in responses] == [case["id"] for case in cases]
    assert {r["method"] for r in responses} == {"pmi"}
    for case, recorded in zip(cases[:5], responses[:5], strict=True):
        assert set(recorded["response"]["answers"]) == set(case["questions"])
        again = httpx.post(f"{mock}/v1/systemone", json={"model": "jev-latest", "state": case["state"],
                                                           "questions": case["questions"]}).json()
        assert again["answers"] == recorded["response"]["answers"]  # the server's own answers, recorded whole


def test_figures_equal_the_arithmetic_on_the_raw_answers(run: dict[str, Any]) -> None:
    cases = {case["id"]: case for case in map(json.loads, CASES.read_text(encoding="utf-8").splitlines())}
    by_type: defaultdict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for recorded in run["responses"]:
        case = cases[recorded["id"]]
        for qid, question in case["questions"].items():
            answer = recorded["response"]["answers"][qid]
            probabilities, keys = systemone_rows(question, answer)
            gold = gold_key(question, case["gold"][qid])
            best = keys[probabilities.index(max(probabilities))]
            got = by_type[question["type"]]
            got["correct"].append(best == gold)
            got["confidence"].append(max(probabilities))
            got["brier"].append(sum((p - (key == gold)) ** 2 for p, key in zip(probabilities, keys, strict=True)))
            got["kind"].append((case["kind"], best == gold))
            if question["type"] == "noul":
                got["p_yes"].append((answer["noul"], case["gold"][qid]))
            if question["type"] == "score":
                got["error"].append(abs(answer["score"] - case["gold"][qid]))
    figures = run["figures"]["methods"]["pmi"]["types"]
    assert set(figures) == {"choice", "noul", "score"}
    for kind, got in by_type.items():
        n = len(got["correct"])
        assert figures[kind]["n"] == n
        assert figures[kind]["accuracy"] == pytest.approx(sum(got["correct"]) / n, **EXACT)
        assert figures[kind]["mean_confidence"] == pytest.approx(sum(got["confidence"]) / n, **EXACT)
        assert figures[kind]["brier"] == pytest.approx(sum(got["brier"]) / n, **EXACT)
        assert figures[kind]["ece"] == pytest.approx(expected_calibration_error(got["confidence"], got["correct"]),
                                                     **EXACT)
        per_kind: defaultdict[str, list[bool]] = defaultdict(list)
        for name, ok in got["kind"]:
            per_kind[name].append(ok)
        assert figures[kind]["per_kind"] == {name: {"n": len(hits), "accuracy": pytest.approx(sum(hits) / len(hits))}
                                             for name, hits in per_kind.items()}
    noul = by_type["noul"]["p_yes"]
    assert figures["noul"]["yes_rate"] == pytest.approx(sum(p >= 0.5 for p, _ in noul) / len(noul), **EXACT)
    assert figures["noul"]["mean_p_yes_gold_yes"] == pytest.approx(
        sum(p for p, yes in noul if yes) / sum(1 for _, yes in noul if yes), **EXACT)
    assert figures["noul"]["mean_p_yes_gold_no"] == pytest.approx(
        sum(p for p, yes in noul if not yes) / sum(1 for _, yes in noul if not yes), **EXACT)
    errors = by_type["score"]["error"]
    assert figures["score"]["mae"] == pytest.approx(sum(errors) / len(errors), **EXACT)


def test_the_report_and_an_unfittable_calibration(run: dict[str, Any]) -> None:
    process = run["process"]
    assert process.returncode == 2  # the fit is refused; everything else was done
    assert process.stderr.strip().splitlines() == [
        "evaluate: pmi choice: some answers carry no x_option_logits to fit on (the endpoint does not report its "
        "raw scores; this project's adapter does)"]
    assert not (run["out"] / "calibration.json").exists()
    figures = run["figures"]
    assert figures["cases"]["n"] == 128 and figures["cases"]["questions"] == {"choice": 68, "noul": 70,
                                                                              "score": 71}
    assert figures["request"] == {"model": "jev-latest", "temperature": 0.5}
    out = process.stdout
    assert "128 cases, 209 questions (choice 68, noul 70, score 71)" in out
    for heading in ("choice:", "noul:", "score:", "noul accuracy per question:"):
        assert heading in out.splitlines()
    noul_row = out.splitlines()[out.splitlines().index("noul:") + 2]
    assert noul_row.startswith("pmi ") and f"{figures['methods']['pmi']['types']['noul']['yes_rate']:.3f}" in noul_row
    assert (run["out"] / "reliability.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_sys1bench_set_is_accepted_and_answered_whole(mock: str, tmp_path: Path) -> None:
    process = evaluate(str(SYS1BENCH), "--endpoint-url", mock, "--json", str(tmp_path / "figures.json"))
    assert process.returncode == 0, process.stderr
    figures = json.loads((tmp_path / "figures.json").read_text())
    method = figures["methods"]["default"]  # the mock names no method: the run is labelled "default"
    assert (method["n_cases"], method["n_questions"]) == (240, 1020)
    assert {kind: method["types"][kind]["n"] for kind in method["types"]} == {"choice": 240, "noul": 540,
                                                                              "score": 240}


def test_a_busy_server_is_given_time() -> None:
    """Every second request gets 429 with Retry-After: 0 (the mock's rate limiting): the run still completes."""
    case_file = load_systemone_cases(CASES)
    config = MockConfig(busy_every=2)
    with Running(config) as server:
        target = HttpTarget(server.url)
        results = collect_systemone(case_file.cases[:6], target, ["pmi"], model="jev-latest", temperature=None)
        target.close()
    assert config.requests == 11  # 6 answered, and the 5 refused in between asked again
    assert [a.case.id for a in results["pmi"]] == [case.id for case in case_file.cases[:6]]


def test_an_endpoint_gets_the_same_body_through_invocations() -> None:
    """SageMaker only routes /invocations: the System One body goes there unchanged (botocore's Stubber stands in
    for AWS), and a refusal is reported with the container's own message."""
    (case, *_) = load_systemone_cases(CASES).cases
    runtime = boto3.Session(region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s") \
        .client("sagemaker-runtime")
    body = case.body("jev-latest", "pmi", None)
    answer = {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 0},
              "answers": {"refund": {"type": "noul", "noul": 0.25},
                          "deadline": {"type": "score", "score": 1.0, "legend": {},
                                       "probabilities": {"0": 0.25, "1": 0.5, "2": 0.25, "3": 0.0}}}}
    raw = json.dumps(answer).encode()
    refusal = json.dumps({"detail": [{"loc": ["body", "questions", "refund"], "msg": "bad noul", "type": "x"}]})
    with Stubber(runtime) as stub:
        stub.add_response("invoke_endpoint", {"Body": StreamingBody(io.BytesIO(raw), len(raw)),
                                              "ContentType": "application/json"},
                          {"EndpointName": "semif-dev-decision", "ContentType": "application/json",
                           "Accept": "application/json", "Body": json.dumps(body).encode()})
        stub.add_client_error("invoke_endpoint", "ModelError", "Received client error (422)", 424,
                              modeled_fields={"OriginalStatusCode": 422, "OriginalMessage": refusal})
        target = RuntimeTarget("semif-dev-decision", runtime, "endpoint semif-dev-decision")
        results = collect_systemone([case], target, ["pmi"], model="jev-latest", temperature=None)
        assert results["pmi"][0].answers["refund"].probabilities == (0.25, 0.75)
        with pytest.raises(TargetError, match=r"refused a System One request: .*questions\.refund: bad noul"):
            target.ask(body)
