"""Where the harness reads and writes: the checkout it runs from, and the docs folder its reports live in."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # bench/common/ -> the repository
DOCS = ROOT / "docs"
BENCH_DOCS = DOCS / "bench"
BUILD = ROOT / "build"
