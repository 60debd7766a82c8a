"""The openai SDK range: the oldest supported version (requirements-dev.txt's pin, in .venv) and the current one
(requirements-openai.txt, in .venv-openai, installed by `make bootstrap`), each unmodified, sync and async, with a
Bearer key through the local gateway and through SageMakerTransport (SigV4), a string input and a conversation of
every input item kind: the same answers from both versions; and langchain-openai's `OpenAIDecisions` on the
current one. `openai_calls.py` runs in each venv as user code does.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
VENVS = {"oldest": (REPO / ".venv", REPO / "requirements-dev.txt"),
         "current": (REPO / ".venv-openai", REPO / "requirements-openai.txt")}
TIMEOUT_S = 600
pytestmark = pytest.mark.slow


def pinned(requirements: Path) -> str:
    found = re.search(r"^openai==(\S+)$", requirements.read_text(), re.MULTILINE)
    assert found, f"{requirements.name} pins no openai version"
    return found[1]


@pytest.fixture(scope="module")
def reports(local_endpoints: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    home = tmp_path_factory.mktemp("openai-home")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "PYTHONPATH": str(REPO / "clients" / "python")}
    found = {}
    for name, (venv, _) in VENVS.items():
        python = venv / "bin" / "python"
        if not python.exists():
            pytest.fail(f"{venv} is missing: run `make bootstrap`")
        result = subprocess.run([str(python), str(Path(__file__).with_name("openai_calls.py")), local_endpoints.url],
                                cwd=home, env=env, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
        assert result.returncode == 0, f"the {name} SDK's script failed:\n{result.stderr[-4000:]}"
        found[name] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def test_each_venv_holds_its_pinned_sdk_and_the_range_is_two_versions(reports):
    versions = {name: reports[name]["version"] for name in VENVS}
    assert versions == {name: pinned(requirements) for name, (_, requirements) in VENVS.items()}
    assert versions["oldest"] != versions["current"]


@pytest.mark.parametrize("version", list(VENVS))
def test_sync_and_async_bearer_and_sigv4_give_the_same_answers(reports, version):
    report = reports[version]
    reference = report["bearer"]["sync"]
    for way in ("bearer", "sigv4"):
        for mode in ("sync", "async"):
            seen = report[way][mode]
            assert seen["text"] == reference["text"] and seen["conversation"] == reference["conversation"], \
                (way, mode)
        assert report[way]["invalid_param"] == "input[0].call_id"
    text, conversation = reference["text"], reference["conversation"]
    assert [(a["type"], a["name"]) for a in conversation] == [("predicate", "refund"), ("choice", "team"),
                                                              ("score", "anger")]
    assert [p["value"] for p in conversation[1]["probabilities"]] == ["billing", True, "true"]
    assert math.isclose(sum(p["probability"] for p in conversation[1]["probabilities"]), 1.0)
    assert text[0]["probability"] != conversation[0]["probability"]  # the conversation was read, not the ticket
    usage = reference["usage"]
    assert usage["total_tokens"] == usage["input_tokens"] > 0 and usage["output_tokens"] == 0
    assert usage["input_tokens_details"]["cached_tokens"] >= 0
    assert usage["output_tokens_details"]["reasoning_tokens"] == 0


def test_both_sdk_versions_read_the_same_numbers(reports):
    assert reports["oldest"]["bearer"]["sync"]["text"] == reports["current"]["bearer"]["sync"]["text"]
    assert reports["oldest"]["bearer"]["sync"]["conversation"] == reports["current"]["bearer"]["sync"]["conversation"]


def test_langchain_openai_on_the_current_sdk_reads_the_same_numbers(reports):
    """langchain-openai's OpenAIDecisions (current venv only), sync and async, through the gateway."""
    assert reports["oldest"]["langchain"] is None
    seen = reports["current"]["langchain"]
    assert seen["sync"] == seen["async"]
    assert seen["sync"]["refund"] == reports["current"]["bearer"]["sync"]["text"][0]["probability"]
    assert seen["sync"]["team"] in ("billing", "other")
