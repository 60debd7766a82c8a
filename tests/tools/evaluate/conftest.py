"""The evaluator against the real adapter: one adapter and one evaluator run on the small fixed file, shared.

The run is the CLI a user types (`python -m scripts.evaluate`, a subprocess), with every output switched on,
so the figures, the raw answers, the plot and the fitted calibration all come from the same 48 decisions.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from bench.reliability.servers import Server, start_decision
from tools.evaluate.runs import ADAPTER_ENV, SMALL, EvaluatorRun, calibrate


@pytest.fixture(scope="session")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    server = start_decision(tmp_path_factory.mktemp("evaluation-adapter"), ADAPTER_ENV)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def http(adapter: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=adapter.url, timeout=120) as client:
        yield client


@pytest.fixture(scope="session")
def small_run(adapter: Server, tmp_path_factory: pytest.TempPathFactory) -> EvaluatorRun:
    out = tmp_path_factory.mktemp("evaluation-run")
    process = calibrate(str(SMALL), "-o", str(out / "calibration.json"), "--endpoint-url", adapter.url,
                        "--scoring", "letters", "--json", str(out / "figures.json"),
                        "--responses", str(out / "responses.jsonl"), "--plot", str(out / "reliability.png"))
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout}\n{process.stderr}"
    return EvaluatorRun(
        process, json.loads((out / "figures.json").read_text()),
        [json.loads(line) for line in (out / "responses.jsonl").read_text().splitlines()],
        (out / "calibration.json").read_text(), out / "reliability.png")
