"""A run's record, the same for every benchmark: when and where it ran, on which commit, and each phase's wall time
and load (the machine is shared, so a figure is read beside the load it was measured under)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from bench.common.paths import ROOT

T = TypeVar("T")
# What a figure depends on: a change here outside a commit marks the run's commit "+local changes".
MEASURED_CODE = ("container/semif_adapter", "bench")


def load() -> list[float]:
    return [round(value, 2) for value in os.getloadavg()]


def cpu_model() -> str:
    with open("/proc/cpuinfo") as info:
        return next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")),
                    platform.processor())


def commit() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()

    dirty = git("status", "--porcelain", "--", *MEASURED_CODE)
    return git("rev-parse", "--short", "HEAD") + ("+local changes" if dirty else "")


class Phases:
    """Runs named phases, printing progress and recording wall time and load for each."""

    def __init__(self) -> None:
        self.log: dict[str, dict[str, Any]] = {}

    def run(self, name: str, function: Callable[..., T], *args: Any) -> T:
        before, started = load(), time.monotonic()
        print(f"bench: {name} (load {before[0]})", file=sys.stderr, flush=True)
        result = function(*args)
        self.log[name] = {"wall_s": round(time.monotonic() - started, 1), "load_before": before,
                          "load_after": load()}
        return result
