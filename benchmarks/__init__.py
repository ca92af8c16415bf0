"""Benchmarks for anycode (run as modules, e.g. ``python -m benchmarks.bench_store``)."""
