"""Errors raised by cubridge.runtime; every one is a CuBridgeRuntimeError with a one-line summary first."""


class CuBridgeRuntimeError(RuntimeError):
    """Base class of every error cubridge.runtime raises on purpose."""


class CudaUnavailableError(CuBridgeRuntimeError):
    """No CUDA GPU visible to torch, or cuda-python (cuda.bindings) not installed."""


class NvccNotFoundError(CuBridgeRuntimeError):
    """nvcc is neither on PATH nor under $CUDA_HOME/bin."""


class CompileError(CuBridgeRuntimeError):
    """nvcc rejected a kernel source; the message starts with the first `file:line: error` nvcc printed."""


class UnsupportedArchError(CuBridgeRuntimeError):
    """The GPU is older than the kernel's minimum architecture (e.g. below sm_80)."""


class DriverError(CuBridgeRuntimeError):
    """A CUDA driver API call through cuda-python returned an error code."""


class InvalidSettingError(CuBridgeRuntimeError, ValueError):
    """An environment setting of the runtime (a CUBRIDGE_* variable) has a value it cannot use."""


class InvalidInputError(CuBridgeRuntimeError, ValueError):
    """A tensor argument has the wrong dtype, device, shape, strides or head dimension."""
