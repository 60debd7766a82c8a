"""The System One benchmark: System One servers side by side (questions per state, options per choice, decisions/s,
conformance) against the raw-decode floor of their own tokens, run as `python -m bench.systemone`."""
