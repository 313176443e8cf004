"""TMA tensor maps (cuTensorMapEncodeTiled) for torch tensors, as 128-byte kernel parameters."""

from __future__ import annotations

import ctypes

import torch

from cubridge.runtime.driver import check, cuda_driver
from cubridge.runtime.errors import InvalidInputError

TENSOR_MAP_BYTES = 128


class TensorMapParam(ctypes.Structure):
    """A CUtensorMap passed by value (`const __grid_constant__ CUtensorMap`)."""

    _fields_ = [("opaque", ctypes.c_uint64 * (TENSOR_MAP_BYTES // 8))]


def encode_tiled(tensor: torch.Tensor, box: tuple[int, ...], swizzle_128b: bool) -> TensorMapParam:
    """Tiled tensor map over `tensor` (CUDA, last dim contiguous) whose box is `box` (outermost first, like
    tensor.shape); with `swizzle_128b` the box's inner extent must be 128 bytes (CU_TENSOR_MAP_SWIZZLE_128B).
    Out-of-range box elements read as zero and are not written on store."""
    driver = cuda_driver()
    data_types = {
        torch.bfloat16: driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        torch.float16: driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        torch.float32: driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
    }
    if tensor.dtype not in data_types:
        raise InvalidInputError(f"tensor maps support bf16, fp16 and fp32, not {tensor.dtype}")
    if tensor.stride(-1) != 1:
        raise InvalidInputError(f"tensor maps need a contiguous last dim; strides are {tensor.stride()}")
    if len(box) != tensor.dim():
        raise InvalidInputError(f"box {box} has {len(box)} dims, tensor has {tensor.dim()}")
    element_bytes = tensor.element_size()
    if swizzle_128b and box[-1] * element_bytes != 128:
        raise InvalidInputError(f"SWIZZLE_128B needs a 128-byte inner box; got {box[-1] * element_bytes}")
    rank = tensor.dim()
    sizes = [driver.cuuint64_t(size) for size in reversed(tensor.shape)]
    strides = [driver.cuuint64_t(stride * element_bytes) for stride in reversed(tensor.stride()[:-1])]
    box_dims = [driver.cuuint32_t(extent) for extent in reversed(box)]
    element_strides = [driver.cuuint32_t(1)] * rank
    swizzle = (driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B if swizzle_128b
               else driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE)
    tensor_map = check(
        "cuTensorMapEncodeTiled",
        driver.cuTensorMapEncodeTiled(
            data_types[tensor.dtype], rank, tensor.data_ptr(), sizes, strides, box_dims, element_strides,
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
            driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ),
    )
    return TensorMapParam.from_buffer_copy(ctypes.string_at(tensor_map.getPtr(), TENSOR_MAP_BYTES))


class TensorMapSlots:
    """Tensor-map kernel parameters encoded once for fixed dims, strides and boxes, moved to new tensor addresses
    in place: cuTensorMapReplaceAddress rewrites only a map's global address, so a moved map is the one
    encoding the new address would give (a host call of well under a microsecond, where encoding costs tens)."""

    def __init__(self, tensors: list[torch.Tensor], boxes: list[tuple[int, ...]]):
        self.maps = [encode_tiled(tensor, box, swizzle_128b=True) for tensor, box in zip(tensors, boxes)]
        driver = cuda_driver()
        self._views = [driver.CUtensorMap(_ptr=ctypes.addressof(tensor_map)) for tensor_map in self.maps]
        self._addresses = [tensor.data_ptr() for tensor in tensors]
        self._replace = driver.cuTensorMapReplaceAddress
        self._success = driver.CUresult.CUDA_SUCCESS

    def point_at(self, addresses: tuple[int, ...]) -> None:
        """Makes map i address `addresses[i]` (same alignment as the tensor it was encoded for)."""
        for index, address in enumerate(addresses):
            if address != self._addresses[index]:
                result = self._replace(self._views[index], address)
                if result[0] != self._success:
                    check("cuTensorMapReplaceAddress", result)
                self._addresses[index] = address
