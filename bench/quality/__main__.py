"""`python -m bench.quality`: sys1bench and jevbench against a System One server (bench/quality/run.py)."""

from bench.quality.run import main

raise SystemExit(main())
