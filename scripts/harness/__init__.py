"""The measuring harness, apart from the product's tools: `bench` (decision latency and throughput against the floor
and the alternatives, and the System One benchmark) and `reliability` (load, faults and hostile input). Both run only
in a clone of the repository and write the figures under docs/."""
