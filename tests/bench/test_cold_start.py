"""The cold-start measurement runs the adapter as the image does and reports each phase (figures, not targets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.sizing import cold_start

pytestmark = pytest.mark.slow


def test_one_cold_start_reports_its_phases_in_order(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cold.json"
    assert cold_start.main(["--rounds", "1", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    (only,) = result["raw"]
    assert result["rounds"] == 1 and result["model"].endswith(".gguf")
    # The ready line's load (sha256 included) happens before /ping says 200, and the answers after it.
    assert 0 < only["model_hash_ms"] < only["load_ms"] < only["ping_s"] * 1000 < only["first_answers_s"] * 1000
    assert set(only["answers"]) == set(cold_start.METHODS)
    for answer in only["answers"].values():
        assert answer["round_trip_ms"] >= answer["server_ms"] > 0 and answer["warm_round_trip_ms"] > 0
    assert "spawn to `/ping` 200" in capsys.readouterr().out
