"""The System One run as one figure: latency against the floor by question count and by option count, and
decisions/s per system."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers or in CI
import matplotlib.pyplot as plt

COLORS = ("#1f77b4", "#8c564b", "#2ca02c", "#ff7f0e", "#9467bd")


def _against_floor(axis: plt.Axes, rows: dict[str, dict[str, Any]], label: str) -> None:
    """p50 latency per system (solid) and the floor of its own tokens (dashed), by row value."""
    for index, (system, by_value) in enumerate(rows.items()):
        color = COLORS[index % len(COLORS)]
        values = [int(v) for v in by_value]
        p50 = [by_value[str(v)]["latency_ms"].get("p50", float("nan")) for v in values]
        floor = [by_value[str(v)]["floor_ms"].get("p50", float("nan")) for v in values]
        axis.plot(values, p50, "o-", color=color, label=f"{system} p50")
        axis.plot(values, floor, "x--", color=color, alpha=0.6, label=f"{system} floor")
    axis.set_xscale("log", base=2)
    axis.set_xlabel(label)
    axis.set_ylabel("ms per request")
    axis.legend(fontsize=7)


def _throughput(axis: plt.Axes, throughput: dict[str, Any]) -> None:
    names = list(throughput["systems"])
    values = [throughput["systems"][name]["decisions_per_s"] or 0.0 for name in names]
    axis.bar(names, values, color=[COLORS[i % len(COLORS)] for i in range(len(names))])
    axis.set_ylabel("decisions/s")
    axis.set_title("Throughput, same triage tickets")


def render_chart(results: dict[str, Any], path: Path) -> None:
    figure, axes = plt.subplots(1, 3, figsize=(15, 4.5))
    _against_floor(axes[0], results["questions"]["rows"], "questions about one state")
    axes[0].set_title("Questions per state")
    _against_floor(axes[1], results["options"]["rows"], "options of one choice")
    axes[1].set_title("Options per choice")
    if "throughput" in results:
        _throughput(axes[2], results["throughput"])
    else:
        axes[2].set_axis_off()
    meta = results["meta"]
    figure.suptitle(f"System One servers, {meta['model']}, {meta['cpus']} CPUs, load {meta['load_before']}",
                    fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
