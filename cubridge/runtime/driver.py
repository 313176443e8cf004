"""Load cubins and launch kernels through cuda-python's driver API on torch's current stream; launch plans
(fixed launches whose parameters change in place) and the tile counters of dynamic schedules.

cuda.bindings is imported on first use, so importing cubridge.runtime needs neither a GPU nor cuda-python.
"""

from __future__ import annotations

import ctypes
import functools
import threading
from typing import Any

import torch

from cubridge.runtime.compiler import CompiledKernel
from cubridge.runtime.errors import CudaUnavailableError, DriverError

CUDA_PYTHON_REQUIREMENT = "cuda-python>=12.8"
_DEFAULT_SHARED_LIMIT = 48 * 1024
_loaded_functions: dict[tuple[str, str, int], Any] = {}
_primary_contexts: dict[int, int] = {}
LAUNCH_LOCK = threading.Lock()  # held while a plan's parameters are written and launched
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


def primary_context(device_index: int) -> int:
    """The handle of torch's (primary) context on `device_index`, made current for the query."""
    if device_index not in _primary_contexts:
        with torch.cuda.device(device_index):
            torch.cuda.current_stream()  # makes torch's primary context current on this thread
            _primary_contexts[device_index] = int(check("cuCtxGetCurrent", cuda_driver().cuCtxGetCurrent()))
    return _primary_contexts[device_index]


def current_stream(device_index: int) -> int:
    """The handle of torch's current stream on `device_index`, without building a torch.cuda.Stream object
    (torch's own launchers read it the same way; the public route is the fallback)."""
    if _RAW_STREAM is None:
        return torch.cuda.current_stream(device_index).cuda_stream
    return _RAW_STREAM(device_index)


def stream_capturing(stream: int) -> bool:
    """Whether `stream` is being captured into a CUDA graph."""
    driver = cuda_driver()
    result = driver.cuStreamIsCapturing(stream)
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        check("cuStreamIsCapturing", result)
    return result[1] != driver.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


def pointer_fields(structure: ctypes.Structure, names) -> tuple[ctypes.c_void_p, ...]:
    """c_void_p views of `structure`'s pointer fields `names`: setting a view's `.value` writes the field."""
    return tuple(ctypes.c_void_p.from_buffer(structure, getattr(type(structure), name).offset) for name in names)


class LaunchPlan:
    """A launch of `function` whose grid, block, shared memory and parameter objects are fixed: the array of
    pointers to the parameters is built once, and a call writes new values into the parameter objects (holding
    LAUNCH_LOCK, so that two threads do not interleave) before `launch` enqueues it. The driver copies the
    parameters at the launch, so they may change right after it.

    The launch goes through cuda-python's cuLaunchKernel: its Cython binding costs about 0.5 us per call on the
    host, no more than a ctypes prototype of libcuda's (0.4-1.4 us, measured with a stub driver); what a launch
    cost before plans was the pointer array built per call, the device query and the result's unpacking."""

    def __init__(self, function, grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared_bytes: int,
                 parameters: list[ctypes._SimpleCData | ctypes.Structure | ctypes.Array], device_index: int):
        self.function = function
        self.grid, self.block, self.dynamic_shared_bytes = grid, block, dynamic_shared_bytes
        self.parameters = tuple(parameters)  # kept alive: the pointer array holds their addresses
        self._pointers = (ctypes.c_void_p * len(parameters))(*[ctypes.addressof(p) for p in parameters])
        self._pointer_array = ctypes.addressof(self._pointers)
        self.device_index = device_index
        self._context = primary_context(device_index)
        self._driver = cuda_driver()
        self._success = self._driver.CUresult.CUDA_SUCCESS

    def launch(self, stream: int) -> None:
        """Enqueues the kernel on `stream` (a handle of the plan's device) with the parameters' current values,
        in torch's context of the plan's device (made current for the call when another one is)."""
        if int(self._driver.cuCtxGetCurrent()[1]) == self._context:  # switching costs two driver calls
            self._enqueue(stream)
            return
        with torch.cuda.device(self.device_index):
            self._enqueue(stream)

    def _enqueue(self, stream: int) -> None:
        result = self._driver.cuLaunchKernel(self.function, *self.grid, *self.block, self.dynamic_shared_bytes,
                                             stream, self._pointer_array, 0)
        if result[0] != self._success:
            check("cuLaunchKernel", result)


def max_active_clusters(function, block: tuple[int, int, int], dynamic_shared_bytes: int, cluster_ctas: int) -> int:
    """How many clusters of `cluster_ctas` CTAs of `function` (a kernel with those __cluster_dims__ along x) the
    device runs at once (cuOccupancyMaxActiveClusters): the SMs of a GPC that no whole cluster fills stay idle."""
    driver = cuda_driver()
    attribute = driver.CUlaunchAttribute()
    attribute.id = driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attribute.value.clusterDim.x, attribute.value.clusterDim.y, attribute.value.clusterDim.z = cluster_ctas, 1, 1
    config = driver.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = cluster_ctas, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = dynamic_shared_bytes
    config.attrs = [attribute]
    config.numAttrs = 1
    return check("cuOccupancyMaxActiveClusters", driver.cuOccupancyMaxActiveClusters(function, config))


def launch(function, grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_shared_bytes: int,
           arguments: list[ctypes._SimpleCData | ctypes.Structure | ctypes.Array], device_index: int) -> None:
    """Enqueues `function` once on torch's current stream of `device_index`; each argument is a ctypes object
    laid out exactly as the kernel parameter. Returns once enqueued (the kernel runs asynchronously)."""
    plan = LaunchPlan(function, grid, block, dynamic_shared_bytes, arguments, device_index)
    plan.launch(current_stream(device_index))


# Tile counters of kernels with a dynamic schedule (CTAs claim work tiles with an atomic add on a zeroed int32),
# by (device, stream): a slab of COUNTER_SLOTS counters, each used by one launch, zeroed again on that stream
# when all were used. Launches on one stream run one after the other, so a counter's kernel has finished
# before the zeroing that precedes its next use, which comes before that next launch; a slab is never shared
# by two streams. Taking a counter and launching with it happen under LAUNCH_LOCK.
COUNTER_SLOTS = 1024
_counter_slabs: dict[tuple[int, int], list] = {}


def tile_counter(device: torch.device, device_index: int, stream: int, capturing: bool) -> tuple[int, object]:
    """(address, owner) of a zeroed int32 tile counter for one launch on `stream`, torch's current stream of
    `device` (index `device_index`); the caller keeps `owner` until the launch is enqueued. While a CUDA graph
    is captured the counter is a fresh tensor zeroed inside the graph, which owns it (each replay zeroes it
    again)."""
    if capturing:
        counter = torch.zeros(1, dtype=torch.int32, device=device)
        return counter.data_ptr(), counter
    slab = _counter_slabs.get((device_index, stream))
    if slab is None:
        slab = _counter_slabs[device_index, stream] = [torch.zeros(COUNTER_SLOTS, dtype=torch.int32, device=device), 0]
    counters, used = slab
    if used == COUNTER_SLOTS:
        counters.zero_()  # on torch's current stream of `device`: `stream`
        used = 0
    slab[1] = used + 1
    return counters.data_ptr() + 4 * used, counters
