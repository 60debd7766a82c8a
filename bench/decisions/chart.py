"""The PNG shown in the README: latency against the floor and the alternatives, concurrency, fan-out, real
traffic against llama-server and the serial-prefix mode, and the scoring methods' cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers or in CI
import matplotlib.pyplot as plt
import numpy as np

SERIES = (("floor_uncached_p50", "floor (uncached tokens)", "#9e9e9e"), ("adapter_p50", "adapter p50", "#1f77b4"),
          ("reference_p50", "reference (fresh, SemIf)", "#ff7f0e"), ("chat_p50", "chat (llama-server)", "#2ca02c"),
          ("server_p50", "llama-server /completion", "#98df8a"), ("serial_p50", "serial prefix (SemIf)", "#8c564b"))


def _latency(axis: plt.Axes, table: list[dict[str, Any]]) -> None:
    names = [row["scenario"] for row in table]
    x = np.arange(len(names))
    width = 0.8 / len(SERIES)
    for index, (key, label, color) in enumerate(SERIES):
        values = [row.get(key) or float("nan") for row in table]  # NaN: not measured, no bar
        bars = axis.bar(x + (index - (len(SERIES) - 1) / 2) * width, values, width, label=label, color=color)
        if key == "adapter_p50":
            errors = [max(0.0, (row["adapter_p95"] or 0.0) - (row["adapter_p50"] or 0.0)) for row in table]
            axis.errorbar([b.get_x() + b.get_width() / 2 for b in bars], values, yerr=[np.zeros(len(errors)), errors],
                          fmt="none", ecolor="black", capsize=2, linewidth=0.8)
    axis.set_yscale("log")
    axis.set_xticks(x, names, rotation=45, ha="right", fontsize=8)
    axis.set_ylabel("ms per decision (log)")
    axis.set_title("Latency per scenario (size/options/mode); whisker: adapter p95")
    axis.legend(fontsize=8)


def _concurrency(axis: plt.Axes, run: dict[str, Any]) -> None:
    levels = run["levels"]
    labels = [str(level["clients"]) for level in levels]
    axis.bar(labels, [level["throughput_per_s"] for level in levels], color="#1f77b4")
    axis.set_xlabel("concurrent clients")
    axis.set_ylabel("decisions/s", color="#1f77b4")
    twin = axis.twinx()
    twin.plot(labels, [level["latency_ms"]["p95"] for level in levels], "o-", color="#d62728", label="p95")
    twin.plot(labels, [level["p95_bound_ms"] for level in levels], "--", color="#d62728", alpha=0.5,
              label="queue bound")
    twin.set_ylabel("p95 ms", color="#d62728")
    twin.legend(fontsize=8, loc="upper left")
    errors = sum(level["errors"] for level in levels)
    axis.set_title(f"Concurrency ({run['scenario']}), {errors} errors")


def _fanout(axis: plt.Axes, fan: dict[str, Any], reference: float | None) -> None:
    modes = dict(fan["per_decision_ms"])
    labels = [*modes, *(["reference"] if reference else [])]
    values = [s["p50"] for s in modes.values()] + ([reference] if reference else [])
    axis.bar(labels, values, color=["#1f77b4", "#1f77b4", "#9467bd", "#ff7f0e"][:len(labels)])
    axis.set_ylabel("ms per decision")
    axis.set_title(f"{fan['questions']} questions about one {fan['size']} state")


TRAFFIC_COLORS = {"adapter": "#1f77b4", "server": "#2ca02c", "serial": "#8c564b", "floor": "#7f7f7f"}


def _traffic(axis: plt.Axes, traffic: dict[str, Any]) -> None:
    workloads = list(traffic.values())
    systems = list(TRAFFIC_COLORS)
    x = np.arange(len(workloads))
    width = 0.8 / len(systems)
    for index, name in enumerate(systems):
        values = [w["systems"].get(name, {}).get("throughput_per_s") or float("nan") for w in workloads]
        axis.bar(x + (index - (len(systems) - 1) / 2) * width, values, width, label=name,
                 color=TRAFFIC_COLORS[name])
    axis.set_xticks(x, [w["workload"] for w in workloads], fontsize=8)
    axis.set_ylabel("decisions/s")
    axis.set_title("Real traffic: adapter, llama-server (prompt cache), serial prefix, floor")
    axis.legend(fontsize=8)


def _methods(axis: plt.Axes, methods: dict[str, Any]) -> None:
    names = list(methods)
    kinds = ("letters", "likelihood", "pmi")
    x = np.arange(len(names))
    width = 0.8 / len(kinds)
    for index, (kind, color) in enumerate(zip(kinds, ("#1f77b4", "#ff7f0e", "#9467bd"), strict=True)):
        values = [methods[name][kind]["latency_ms"].get("p50") or float("nan") for name in names]
        axis.bar(x + (index - 1) * width, values, width, label=kind, color=color)
    axis.set_xticks(x, names, fontsize=8)
    axis.set_ylabel("p50 ms per decision")
    axis.set_title("Scoring methods (adapter)")
    axis.legend(fontsize=8)


def render_chart(results: dict[str, Any], path: Path) -> None:
    figure = plt.figure(figsize=(13, 13))
    grid = figure.add_gridspec(3, 2, height_ratios=[1.3, 1, 1])
    _latency(figure.add_subplot(grid[0, :]), results["rows"])
    _concurrency(figure.add_subplot(grid[1, 0]), results["concurrency"])
    fan = results["fanout"]
    reference = next((row["reference_p50"] for row in results["rows"]
                      if row["scenario"] == f"{fan['size']}/{fan['options']}/same"), None)
    _fanout(figure.add_subplot(grid[1, 1]), fan, reference)
    _traffic(figure.add_subplot(grid[2, 0]), results["traffic"])
    _methods(figure.add_subplot(grid[2, 1]), results["methods"])
    meta = results["meta"]
    figure.suptitle(f"SemIf adapter, {meta['model']}, {meta['cpus']} CPUs, load {meta['load_before']}", fontsize=11)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
