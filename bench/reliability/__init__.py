"""The reliability probes: both local endpoints under load, faults and hostile input, as `python -m bench.reliability`
(the full report, bench/reliability/__main__.py) and as `tests/reliability/` (the same drivers, small)."""
