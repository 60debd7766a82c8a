"""What the benchmarks share: the synthetic workload, the servers under test, the loopback HTTP clients, the
in-process floor through the adapter's own llama.cpp layer, a run's record and the report tables."""
