"""docs/benchmarks.md, generated from the run files under docs/bench/ (`python -m bench.page`)."""
