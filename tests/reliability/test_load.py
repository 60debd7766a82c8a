"""Load on the decision endpoint, short: every request answered, no 5xx, no memory growth, slow senders harmless.

The report runs the same driver for 60 s with 16 clients (`python -m bench.reliability`).
"""

from __future__ import annotations

import pytest

from bench.reliability.load import LoadConfig, run_load
from bench.reliability.servers import Server

pytestmark = pytest.mark.slow


def test_load_with_slow_senders_loses_nothing_and_leaks_nothing(adapter: Server) -> None:
    result = run_load(adapter, LoadConfig(clients=6, duration_s=10, window_s=3))
    summary = result.summary()
    assert result.problems == [], summary
    assert summary["sent"] > 0 and summary["answered"] == summary["sent"]
    assert set(summary["by_status"]) == {"200"}  # 8 connections never fill a queue of 8: no 503 either
    assert summary["rss"]["growth"] < 0.05
    slow = {s["name"]: (s["status"], s["code"]) for s in summary["slow_senders"]}
    assert slow == {"finishes": (200, None), "stalls": (408, "body_timeout")}
    assert summary["answered_200_while_slow_senders_connected"] > 0
