"""Load, soak, fuzz and fault drivers for the local endpoints and the decision adapter.

Each driver talks to a real server on loopback, runs for a bounded number of
requests or seconds, and returns figures plus a list of problems (empty when
the server behaved). `scripts/reliability_report.py` runs them at full size
and writes `docs/reliability/`; `tests/reliability/` runs the same code small.
"""
