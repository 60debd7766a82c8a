"""The decision benchmark: SemIf decisions through the adapter against the floor of their own tokens and the
alternatives (llama-server as chat and as a scorer, SemIf's own methods), run as `python -m bench.decisions`."""
