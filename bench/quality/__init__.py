"""Decision quality through a System One server, as its users measure it: sys1bench's canary and jevbench's suite
from their own venv, run as `python -m bench.quality`."""
