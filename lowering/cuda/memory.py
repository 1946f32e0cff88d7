"""Device memory and stream work through the driver, in the current context: allocation, stream-ordered zeroing and
copies, and whether a stream is capturing a CUDA graph.

Nothing here touches the legacy default stream unless handed stream 0: a call's work, workspace zeroing included,
goes on its launch stream (torch's current stream by default), so it is ordered with the caller's work there and
can be captured into a CUDA graph.
"""

from __future__ import annotations

import contextlib
import ctypes

from .driver import _check, _lib

__all__ = ["Buffer", "alloc", "capture_id", "copy_from_device", "copy_to_device", "free", "zero_words"]

CU_STREAM_CAPTURE_STATUS_NONE = 0


def alloc(nbytes: int) -> int:
    """``nbytes`` of device memory in the current context (``cuMemAlloc``; not while a stream captures)."""
    ptr = ctypes.c_uint64()
    _check(_lib().cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(max(nbytes, 1))), f"cuMemAlloc({nbytes} bytes)")
    return ptr.value


def free(ptr: int) -> None:
    _check(_lib().cuMemFree_v2(ctypes.c_uint64(ptr)), "cuMemFree")


class Buffer(int):
    """``nbytes`` of device memory on ``device``, freed with the object: what a pycuda ``GPUArray`` takes as its
    ``gpudata`` from an ``allocator``. An ``int`` (its value the pointer), since pycuda's Boost.Python entry points
    (``memcpy_dtoh`` under ``GPUArray.get``) take a device pointer only as an int or their own allocation."""

    device: int
    ptr: int

    def __new__(cls, nbytes: int, device: int) -> Buffer:
        from .contexts import bound

        with bound(device):
            ptr = alloc(nbytes)
        self = super().__new__(cls, ptr)
        self.device, self.ptr = device, ptr
        return self

    def free(self) -> None:
        ptr, self.ptr = self.ptr, 0
        if ptr:
            from .contexts import bound

            with bound(self.device):
                free(ptr)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # NOTE: at interpreter exit the driver may be gone first
            self.free()


def zero_words(ptr: int, words: int, stream: int) -> None:
    """Zero ``words`` 32-bit words at ``ptr``, in order on ``stream`` (``cuMemsetD32Async``)."""
    _check(
        _lib().cuMemsetD32Async(
            ctypes.c_uint64(ptr), ctypes.c_uint(0), ctypes.c_size_t(words), ctypes.c_void_p(stream)
        ),
        "cuMemsetD32Async",
    )


def copy_to_device(ptr: int, host: int, nbytes: int, stream: int) -> None:
    """``nbytes`` from host address ``host`` to ``ptr``, in order on ``stream``."""
    _check(
        _lib().cuMemcpyHtoDAsync_v2(
            ctypes.c_uint64(ptr), ctypes.c_void_p(host), ctypes.c_size_t(nbytes), ctypes.c_void_p(stream)
        ),
        "cuMemcpyHtoDAsync",
    )


def copy_from_device(host: int, ptr: int, nbytes: int, stream: int) -> None:
    """``nbytes`` from ``ptr`` to host address ``host``, in order on ``stream`` (complete once the stream is)."""
    _check(
        _lib().cuMemcpyDtoHAsync_v2(
            ctypes.c_void_p(host), ctypes.c_uint64(ptr), ctypes.c_size_t(nbytes), ctypes.c_void_p(stream)
        ),
        "cuMemcpyDtoHAsync",
    )


def capture_id(stream: int) -> int | None:
    """The id of the CUDA graph capture ``stream`` takes part in, or None where it is not capturing."""
    lib, status = _lib(), ctypes.c_int()
    _check(lib.cuStreamIsCapturing(ctypes.c_void_p(stream), ctypes.byref(status)), "cuStreamIsCapturing")
    if status.value == CU_STREAM_CAPTURE_STATUS_NONE:
        return None
    ident, null = ctypes.c_uint64(), ctypes.c_void_p()
    for name in ("cuStreamGetCaptureInfo_v2", "cuStreamGetCaptureInfo_v3"):  # the id is the third argument of both
        get = getattr(lib, name, None)
        if get is not None:
            extra = (null, null, null) if name.endswith("v2") else (null, null, null, null)
            _check(get(ctypes.c_void_p(stream), ctypes.byref(status), ctypes.byref(ident), *extra), name)
            return ident.value
    raise RuntimeError("this CUDA driver has no cuStreamGetCaptureInfo")
