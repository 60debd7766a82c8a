"""The committed report: its markdown is rendered from its JSON, and it holds every figure the issue asks for."""

from __future__ import annotations

import json
from pathlib import Path

from bench.reliability.report import render_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "reliability"


def test_committed_markdown_is_the_rendering_of_the_committed_json() -> None:
    report = json.loads((DOCS / "report.json").read_text())
    assert (DOCS / "report.md").read_text() == render_markdown(report), \
        "regenerate with: python -m bench.reliability"


def test_report_holds_the_required_figures() -> None:
    report = json.loads((DOCS / "report.json").read_text())
    load = report["decision"]["load"]
    assert load["config"]["clients"] == 16 and load["config"]["duration_s"] == 60
    assert load["sent"] == load["answered"] == sum(load["by_status"].values()) > 0
    assert {"p50", "p95"} <= set(load["latency_ms"]) and {"before_kib", "after_kib", "growth"} <= set(load["rss"])
    assert report["inputs_tried_per_category"] and all(n > 0 for n in report["inputs_tried_per_category"].values())
    assert report["verdict"] == ("pass" if not report["problems"] else "fail")
