"""Benchmarks (GPU-only scripts); their paired timing is `cubridge.tools.timing`."""
