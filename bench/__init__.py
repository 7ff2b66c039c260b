"""Benchmarks for ``make bench``: every figure is a ratio to a baseline measured in the same run."""
