"""Latency summaries: medians and tails, with the spread, never a lone mean (benchmark and reliability report)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(samples: Sequence[float], digits: int = 2) -> dict[str, float | int]:
    """p50/p95 plus min, max and the interquartile range, so a reader sees how noisy a figure is."""
    if not samples:
        return {"n": 0}
    values = np.asarray(samples, dtype=np.float64)
    p5, p25, p50, p75, p95 = (round(float(v), digits) for v in np.percentile(values, [5, 25, 50, 75, 95]))
    return {"n": len(values), "p50": p50, "p95": p95, "min": round(float(values.min()), digits),
            "max": round(float(values.max()), digits), "mean": round(float(values.mean()), digits),
            "iqr": round(p75 - p25, digits), "p5": p5}


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3) if denominator else float("nan")
