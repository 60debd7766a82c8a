"""The GitHub Actions workflow: it loads, runs what the README says, and caches what it claims to."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"


def test_the_workflow_bootstraps_tests_synthesizes_every_environment_and_caches() -> None:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    steps = workflow["jobs"]["test"]["steps"]
    runs = [step.get("run", "") for step in steps]
    assert runs.index("make bootstrap") < runs.index("make test"), runs
    synth = next(run for run in runs if "cdk synth" in run)
    assert "context']['semif']['environments']" in synth and '-c "env=$env"' in synth
    environments = json.loads((REPO / "cdk.json").read_text())["context"]["semif"]["environments"]
    assert len(environments) >= 2  # the loop reads them from cdk.json, so a new environment is synthesized too
    cached = {path: step["with"]["key"] for step in steps if step.get("uses", "").startswith("actions/cache@")
              for path in step["with"]["path"].split()}
    assert set(cached) == {"~/.cache/pip", "~/.npm", "~/.cache/semif-sagemaker/llama.cpp",
                           "~/.cache/semif-sagemaker/sdist", "~/.cache/semif-sagemaker/venvs",
                           "~/.cache/semif-sagemaker/models"}
    assert "scripts/dev/pypi_models.py" in cached["~/.cache/semif-sagemaker/models"]
    assert "package-lock.json" in cached["~/.npm"]
    assert "requirements*.txt" in cached["~/.cache/pip"]
    llama_cpp = cached["~/.cache/semif-sagemaker/llama.cpp"]
    for source in ("container/llama-cpp-source.lock", "container/requirements.txt", "scripts/dev/build_llama_cpp.py"):
        assert source in llama_cpp, source
    assert cached["~/.cache/semif-sagemaker/sdist"] == llama_cpp
    # A saved entry is never rewritten: the venvs' key names all they are built from, the Python included.
    venvs = cached["~/.cache/semif-sagemaker/venvs"]
    for source in ("requirements*.txt", "container/requirements.txt", "container/llama-cpp-source.lock",
                   "scripts/dev/bootstrap.sh",
                   "scripts/dev/build_llama_cpp.py", "steps.python.outputs.python-version"):
        assert source in venvs, source
    python = next(step for step in steps if step.get("uses", "").startswith("actions/setup-python@"))
    assert python["id"] == "python"
    assert workflow["jobs"]["test"]["timeout-minutes"] <= 90
