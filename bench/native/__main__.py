"""`python -m bench.native`: the native path against llama-server called directly (bench/native/run.py)."""

from bench.native.run import main

raise SystemExit(main())
