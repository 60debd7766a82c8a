"""Faults not covered by tests/adapter: an unreadable model file, and SIGTERM in the middle of real load."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.reliability.faults import make_fault, run_fault, sigterm_under_load

pytestmark = pytest.mark.slow


def test_unreadable_model_stops_startup_clearly(tmp_path: Path, log_dir: Path) -> None:
    fault = make_fault("unreadable", tmp_path / "model")
    result = run_fault(fault, log_dir)
    assert result["problems"] == [], result
    assert result["exit_status"] == 1 and result["pings_200"] == 0
    reason = "Input/output error" if os.geteuid() == 0 else "Permission denied"
    assert "cannot be read" in result["message"] and reason in result["message"]


def test_sigterm_under_load_finishes_in_flight_refuses_new_and_exits_0(log_dir: Path) -> None:
    result = sigterm_under_load(log_dir, clients=8, signal_after_s=4)
    assert result["problems"] == [], result
    assert result["exit_status"] == 0 and result["exit_s"] < 30
    assert result["outcomes"].get("in flight, finished", 0) > 0
    assert result["outcomes"].get("after, refused", 0) > 0
