"""`python -m bench.page`: docs/benchmarks.md again from the run files (bench/page/benchmarks.py)."""

from bench.page.benchmarks import main

raise SystemExit(main())
