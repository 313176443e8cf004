"""Load cubins and launch kernels through cuda-python's driver API on torch's current stream.

cuda.bindings is imported on first use, so importing cubridge.runtime needs neither a GPU nor cuda-python.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Any

import torch

from cubridge.runtime.compiler import CompiledKernel
from cubridge.runtime.errors import CudaUnavailableError, DriverError

CUDA_PYTHON_REQUIREMENT = "cuda-python>=12.8"
_DEFAULT_SHARED_LIMIT = 48 * 1024
_loaded_functions: dict[tuple[str, str, int], Any] = {}
_RAW_STREAM = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # private to torch: looked up, not assumed


@functools.cache
def cuda_driver():
    """The cuda.bindings.driver module (imported once); CudaUnavailableError when cuda-python is missing."""
    try:
        from cuda.bindings import driver
    except ImportError as error:
        raise CudaUnavailableError(
            f"cuda-python is not installed (cuda.bindings missing): pip install '{CUDA_PYTHON_REQUIREMENT}'"
        ) from error
    return driver


def check(call_name: str, result: Any) -> Any:
    """Unpacks a cuda-python (CUresult, values...) tuple; DriverError naming the call unless CUDA_SUCCESS."""
    driver = cuda_driver()
    status = result[0] if isinstance(result, tuple) else result
    if status != driver.CUresult.CUDA_SUCCESS:
        _, name = driver.cuGetErrorName(status)
        _, text = driver.cuGetErrorString(status)
        raise DriverError(f"{call_name} failed: {name.decode()} ({text.decode()})")
    if not isinstance(result, tuple) or len(result) == 1:
        return None
    return result[1] if len(result) == 2 else result[1:]


def load_function(compiled: CompiledKernel, name: str, device_index: int, dynamic_shared_bytes: int):
    """CUfunction `name` of `compiled` on device `device_index`, loaded once per process and device, with its
    dynamic shared-memory limit raised to `dynamic_shared_bytes` when that is above 48 KB."""
    key = (str(compiled.path), name, device_index)
    if key in _loaded_functions:
        return _loaded_functions[key]
    driver = cuda_driver()
    with torch.cuda.device(device_index):
        torch.cuda.init()
        torch.cuda.current_stream()  # makes torch's primary context current on this thread
        module = check("cuModuleLoadData", driver.cuModuleLoadData(compiled.cubin))
        function = check("cuModuleGetFunction", driver.cuModuleGetFunction(module, name.encode()))
        if dynamic_shared_bytes > _DEFAULT_SHARED_LIMIT:
            attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
            check("cuFuncSetAttribute", driver.cuFuncSetAttribute(function, attribute, dynamic_shared_bytes))
    _loaded_functions[key] = function
    return function


def _current_raw_stream(device_index: int) -> int:
    """The handle of torch's current stream on `device_index`, without building a torch.cuda.Stream object
    (torch's own launchers read it the same way; the public route is the fallback)."""
    if _RAW_STREAM is None:
        return torch.cuda.current_stream(device_index).cuda_stream
    return _RAW_STREAM(device_index)


def launch(function, grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared_bytes: int,
           arguments: list[ctypes._SimpleCData | ctypes.Structure | ctypes.Array], device_index: int) -> None:
    """Enqueues `function` on torch's current stream of `device_index`; each argument is a ctypes object
    laid out exactly as the kernel parameter. Returns once enqueued (the kernel runs asynchronously)."""
    driver = cuda_driver()
    pointers = (ctypes.c_void_p * len(arguments))(*[ctypes.addressof(argument) for argument in arguments])
    stream = _current_raw_stream(device_index)
    on_device = torch.cuda.current_device() == device_index  # switching costs two driver calls per launch
    with contextlib.nullcontext() if on_device else torch.cuda.device(device_index):
        result = driver.cuLaunchKernel(function, *grid, *block, dynamic_shared_bytes, stream,
                                       ctypes.addressof(pointers), 0)
    check("cuLaunchKernel", result)
