"""The few CUDA driver calls pycuda does not expose, through ctypes on libcuda.

pycuda compiles (nvcc, with its disk cache) and manages memory; this module loads the cubin to get a
``CUfunction`` handle, because the occupancy API and launches on foreign streams (torch's) need it.
Everything runs in the current context, which is the device's primary context (shared with torch).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Sequence

__all__ = ["CudaError", "Function", "device_attribute", "load_function", "stream_synchronize"]

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16


class CudaError(RuntimeError):
    pass


@functools.cache
def _lib() -> ctypes.CDLL:
    name = ctypes.util.find_library("cuda") or "libcuda.so.1"
    return ctypes.CDLL(name)


def _check(result: int, what: str) -> None:
    if result:
        msg = ctypes.c_char_p()
        _lib().cuGetErrorString(result, ctypes.byref(msg))
        raise CudaError(f"{what} failed: CUDA error {result} ({(msg.value or b'?').decode()})")


def stream_synchronize(stream: int) -> None:
    """Wait for the work queued on ``stream`` (0: the legacy default stream)."""
    _check(_lib().cuStreamSynchronize(ctypes.c_void_p(stream)), "cuStreamSynchronize")


def device_attribute(attribute: int) -> int:
    dev, value = ctypes.c_int(), ctypes.c_int()
    _check(_lib().cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(value), attribute, dev), "cuDeviceGetAttribute")
    return value.value


class Function:
    """A kernel loaded from a cubin: occupancy query and launch on any stream handle."""

    def __init__(self, cubin: bytes, name: str, threads: int, smem_bytes: int) -> None:
        self._image = ctypes.create_string_buffer(cubin, len(cubin))
        self.module, self.handle = ctypes.c_void_p(), ctypes.c_void_p()
        _check(_lib().cuModuleLoadData(ctypes.byref(self.module), self._image), "cuModuleLoadData")
        _check(_lib().cuModuleGetFunction(ctypes.byref(self.handle), self.module, name.encode()), "cuModuleGetFunction")
        _check(
            _lib().cuFuncSetAttribute(self.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem_bytes),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
        self.threads, self.smem_bytes = threads, smem_bytes

    def resident_ctas(self) -> int:
        """How many CTAs of this kernel can be resident at once on the device (occupancy x SMs)."""
        per_sm = ctypes.c_int()
        _check(
            _lib().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(per_sm), self.handle, self.threads, ctypes.c_size_t(self.smem_bytes)
            ),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        return per_sm.value * device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    def launch(self, grid: int, args: Sequence[ctypes._SimpleCData], stream: int = 0) -> None:
        ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        _check(
            _lib().cuLaunchKernel(
                self.handle, grid, 1, 1, self.threads, 1, 1, self.smem_bytes, ctypes.c_void_p(stream), ptrs, None
            ),
            "cuLaunchKernel",
        )


def load_function(cubin: bytes, name: str, threads: int, smem_bytes: int) -> Function:
    return Function(cubin, name, threads, smem_bytes)
