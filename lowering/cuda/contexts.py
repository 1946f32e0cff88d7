"""Which device a call runs on, and its primary context made current on the calling thread for the call.

Every thread of a process shares each device's **primary context** with torch (``cudaSetDevice`` makes it current).
A call binds the primary context of its operands' device around its driver calls (:func:`bound`): nothing to do
where that context is already current (a thread that ran torch on that device), else it is pushed and popped again,
so the thread's current context, and with it torch's current device, is what it was. A thread that never touched
CUDA works too: nothing is current there, and the push binds the context for the call only.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from .driver import _check, _lib

__all__ = [
    "CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL",
    "bound",
    "current_device",
    "enter",
    "leave",
    "pointer_device",
    "primary_context",
]

CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9
_PRIMARY: dict[int, int] = {}  # device ordinal -> its primary context (retained once, for the process)
_LOCK = threading.Lock()


def primary_context(device: int) -> int:
    """The primary context of ``device`` (``cuDevicePrimaryCtxRetain``: torch's context on that device)."""
    ctx = _PRIMARY.get(device)
    if ctx is None:
        with _LOCK:
            if device not in _PRIMARY:
                lib, dev, handle = _lib(), ctypes.c_int(), ctypes.c_void_p()
                _check(lib.cuInit(0), "cuInit")
                _check(lib.cuDeviceGet(ctypes.byref(dev), device), f"cuDeviceGet({device})")
                _check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev), "cuDevicePrimaryCtxRetain")
                _PRIMARY[device] = int(handle.value or 0)
            ctx = _PRIMARY[device]
    return ctx


_SLOT = threading.local()  # per thread: the handle cuCtxGetCurrent writes, and its byref, made once (~0.7 us a call)


def _current() -> int:
    try:
        handle, ref = _SLOT.handle
    except AttributeError:  # this thread's first call
        handle = ctypes.c_void_p()
        ref = ctypes.byref(handle)
        _SLOT.handle = (handle, ref)
    result = _lib().cuCtxGetCurrent(ref)
    if result:
        _check(result, "cuCtxGetCurrent")
    return int(handle.value or 0)


def current_device() -> int:
    """The device of the calling thread's current context; 0 where none is current (the runtime's default) or the
    driver is not initialized yet."""
    lib, handle, dev = _lib(), ctypes.c_void_p(), ctypes.c_int()
    if lib.cuCtxGetCurrent(ctypes.byref(handle)) or not handle.value:
        return 0
    return dev.value if lib.cuCtxGetDevice(ctypes.byref(dev)) == 0 else 0


def enter(device: int) -> bool:
    """Make ``device``'s primary context current on this thread; True where it was pushed (then :func:`leave`)."""
    ctx = _PRIMARY.get(device) or primary_context(device)
    if _current() == ctx:
        return False
    _check(_lib().cuCtxPushCurrent_v2(ctypes.c_void_p(ctx)), "cuCtxPushCurrent")
    return True


def leave() -> None:
    """Pop the context :func:`enter` pushed: the thread's own is current again."""
    _check(_lib().cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p())), "cuCtxPopCurrent")


@contextmanager
def bound(device: int) -> Iterator[None]:
    """``device``'s primary context current on this thread inside the block; the thread's own afterwards."""
    pushed = enter(device)
    try:
        yield
    finally:
        if pushed:
            leave()


def pointer_device(ptr: int) -> int:
    """The device ordinal a device pointer belongs to (``ValueError`` for a pointer CUDA does not know). Asked in
    device 0's primary context where the thread has none current (the query needs one)."""
    ordinal = ctypes.c_int()

    def query() -> int:
        return int(
            _lib().cuPointerGetAttribute(
                ctypes.byref(ordinal), CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ctypes.c_uint64(ptr)
            )
        )

    if _current():
        result = query()
    else:
        with bound(0):
            result = query()
    if result:
        raise ValueError(f"address {ptr:#x} is not device memory CUDA knows (CUDA error {result})")
    return ordinal.value
