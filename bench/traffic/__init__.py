"""Real traffic, a phase of the decision benchmark: interleaved and skewed workloads of concurrent clients, the
systems taking turns round by round, beside the machine's floor for the same tokens."""
