"""`python -m bench.doors`: OpenAI's door against System One's (bench/doors/run.py)."""

from bench.doors.run import main

raise SystemExit(main())
