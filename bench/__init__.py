"""The measuring harness, beside the product: benchmarks and reliability probes, run only from a checkout.

Not in the wheel and not a `semif` command: each subject is one package, run as `python -m bench.<subject>` from the
repository's root (docs/benchmarks.md lists them), and writes its figures under docs/ for the report that cites
them. It imports the product (`semif_adapter`, `scripts.local`, ...); the product never imports it.
"""
