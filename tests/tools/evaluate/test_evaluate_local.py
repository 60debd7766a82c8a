"""The evaluator's `--local` target: boto3 through the local gateway to the real adapter (slow)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]
SMALL = REPO / "tests" / "data" / "decisions_small.jsonl"


def test_evaluate_through_the_local_gateway(local_endpoints: Any, tmp_path: Path) -> None:
    cases = tmp_path / "two.jsonl"
    cases.write_text("".join(SMALL.read_text(encoding="utf-8").splitlines(keepends=True)[:2]), encoding="utf-8")
    figures, responses = tmp_path / "figures.json", tmp_path / "responses.jsonl"
    result = subprocess.run(
        [sys.executable, "-m", "scripts.evaluate", str(cases), "--local", "--port", str(local_endpoints.port),
         "--no-flip", "--no-progress", "--json", str(figures), "--responses", str(responses)],
        cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    document = json.loads(figures.read_text())
    answers = [json.loads(line) for line in responses.read_text().splitlines()]
    label = answers[0]["response"].get("scoring", "default")  # the method the endpoint says it used
    assert document["target"] == f"local-decision at http://127.0.0.1:{local_endpoints.port}"
    assert list(document["methods"]) == [label]
    figures_of = document["methods"][label]
    assert figures_of["n"] == 2 and figures_of["order_flip_rate"] is None
    assert [a["id"] for a in answers] == [json.loads(line)["decision"]["id"] for line in cases.read_text().splitlines()]
    assert figures_of["p50_latency_ms"] > 0
