"""Benchmarks (GPU-only scripts); `benchmarks.timing` is shared by them."""
