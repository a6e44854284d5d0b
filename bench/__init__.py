"""Benchmarks and the simulated Spark standalone cluster (never used by Drover itself)."""
