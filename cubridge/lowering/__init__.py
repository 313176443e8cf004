"""Lowering: a transferred CuIR kernel back to CUDA by patching its reference source at the seams the IR changed
(reference-guided reconstruction). See docs/lowering.md."""

from cubridge.lowering.source import REFERENCES, Instance, LoweredKernel, ReferenceSource, cloned_pairs, lower_module

__all__ = ["REFERENCES", "Instance", "LoweredKernel", "ReferenceSource", "cloned_pairs", "lower_module"]
