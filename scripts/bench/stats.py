"""Latency summaries: medians and tails, with the spread, never a lone mean."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def summarize(samples_ms: Sequence[float]) -> dict[str, float | int]:
    """p50/p95 plus min, max and the interquartile range, so a reader sees how noisy a figure is."""
    if not samples_ms:
        return {"n": 0}
    values = np.asarray(samples_ms, dtype=np.float64)
    p5, p25, p50, p75, p95 = np.percentile(values, [5, 25, 50, 75, 95])
    return {"n": len(values), "p50": round(float(p50), 2), "p95": round(float(p95), 2),
            "min": round(float(values.min()), 2), "max": round(float(values.max()), 2),
            "mean": round(float(values.mean()), 2), "iqr": round(float(p75 - p25), 2),
            "p5": round(float(p5), 2)}


def ratio(numerator: float, denominator: float) -> float:
    return round(numerator / denominator, 3) if denominator else float("nan")
