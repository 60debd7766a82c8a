"""Running the evaluator as a user does, and the small fixed file it runs on (shared by the evaluation tests)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from semif_adapter.settings import cpu_quota

REPO = Path(__file__).resolve().parents[3]
DATA = REPO / "tests" / "data"
SMALL = DATA / "decisions_small.jsonl"
RUN_TIMEOUT_S = 900.0  # 48 decisions; the shared 2-core machine can be slow
# Every adapter of these tests gets the same settings, so two processes give the same raw scores; no answers
# from the result cache, so a request asked again is computed again (the tests compare the two).
ADAPTER_ENV = {"SM_LLAMA_CPP_THREADS": str(cpu_quota()), "SEMIF_RESULT_CACHE_ENTRIES": "0"}


def evaluate(*args: str, timeout: float = RUN_TIMEOUT_S,
             env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m scripts.evaluate ARGS --no-progress` from the repository root."""
    return subprocess.run([sys.executable, "-m", "scripts.evaluate", *args, "--no-progress"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def calibrate(*args: str, timeout: float = RUN_TIMEOUT_S,
              env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`semif calibrate ARGS --no-progress` from the repository root (the venv's `semif`, the checkout's tools)."""
    semif = Path(sys.executable).with_name("semif")
    return subprocess.run([str(semif), "calibrate", *args, "--no-progress"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=timeout, check=False)


def data_builder(name: str) -> ModuleType:
    """A builder script of tests/data (`build_decisions`, ...), loaded as a module: scripts, not a package."""
    spec = importlib.util.spec_from_file_location(name, DATA / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def small_cases() -> list[dict[str, Any]]:
    return [json.loads(line) for line in SMALL.read_text(encoding="utf-8").splitlines()]


@dataclass(frozen=True)
class EvaluatorRun:
    process: subprocess.CompletedProcess[str]
    figures: dict[str, Any]  # the --json document
    responses: list[dict[str, Any]]  # the --responses lines
    calibration_text: str  # the `semif calibrate` document
    plot: Path

    def answers(self, order: str) -> dict[str, dict[str, Any]]:
        """The raw letters answers by decision id, for the options `given` or `reversed`."""
        return {r["id"]: r["response"] for r in self.responses if r["order"] == order and r["method"] == "letters"}


