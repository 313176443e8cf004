"""CuBridge GPU runtime: device primitives (include/cubridge/*.cuh), reference kernels (kernels/*.cu), an
nvcc compiler with an on-disk cubin cache, and launches through cuda-python on torch's current stream.

Importing this package needs neither a GPU nor cuda-python: cuda.bindings is imported on first launch.
"""

from cubridge.runtime.attention import attention_sm80
from cubridge.runtime.attention_sm90 import attention_sm90
from cubridge.runtime.compiler import CompiledKernel, arch_flags, cache_dir, compile_cubin
from cubridge.runtime.errors import (
    CompileError,
    CuBridgeRuntimeError,
    CudaUnavailableError,
    DriverError,
    InvalidInputError,
    NvccNotFoundError,
    UnsupportedArchError,
)

__all__ = [
    "CompileError",
    "CompiledKernel",
    "CuBridgeRuntimeError",
    "CudaUnavailableError",
    "DriverError",
    "InvalidInputError",
    "NvccNotFoundError",
    "UnsupportedArchError",
    "arch_flags",
    "attention_sm80",
    "attention_sm90",
    "cache_dir",
    "compile_cubin",
]
