"""`python -m bench.systemone`: the System One benchmark (bench/systemone/run.py)."""

from bench.systemone.run import main

raise SystemExit(main())
