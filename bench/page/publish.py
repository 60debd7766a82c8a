"""A run's files, written the same way by every benchmark: the run as JSON, its report and its chart side by side
(STEM.json, STEM.md, STEM.png), the report on stdout, and docs/benchmarks.md rendered again when the run was
written under docs/bench/ (the page quotes the newest runs there, so it never lags a run)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.page.benchmarks import refresh

Chart = Callable[[dict[str, Any], Path], None]


def publish(results: dict[str, Any], report: str, out: Path | None, stem: str, chart: Chart | None = None) -> None:
    """Print the report; with `out`, write the run's files there and refresh the page (a run elsewhere: files only)."""
    print(report)
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / f"{stem}.md").write_text(report if report.endswith("\n") else report + "\n")
    if chart is not None:
        chart(results, out / f"{stem}.png")
    if page := refresh(out):
        print(f"bench: rewrote {page}", file=sys.stderr)
