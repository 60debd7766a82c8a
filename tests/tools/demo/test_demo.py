"""The README's demo, up to the CDK step (the CDK tests own synthesis): it must pass and stop cleanly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[3]


def test_demo_without_synth_passes_every_step() -> None:
    process = subprocess.Popen([sys.executable, "-m", "scripts.demo", "--skip-synth"], cwd=REPO,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 0, output
    for step in ("package model.tar.gz", "start local endpoints", "smoke chat --local", "smoke chat --stream --local",
                 "smoke decision --local", "stop local endpoints"):
        assert f"demo:    {step}: ok" in output, output
    assert "tarball sha256:" in output
    assert "none left behind" in output
    assert "cdk synth" not in output
