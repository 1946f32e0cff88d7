"""The few CUDA driver calls pycuda does not expose, through ctypes on libcuda.

pycuda compiles (nvcc, with its disk cache) and manages memory; this module loads the cubin to get a
``CUfunction`` handle, because the occupancy API and launches on foreign streams (torch's) need it.
Everything runs in the current context, which is the device's primary context (shared with torch).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "CudaError",
    "Function",
    "Launch",
    "LaunchConfig",
    "bounded_wait",
    "device_attribute",
    "load_function",
    "replace_address",
    "stream_synchronize",
    "tensor_map",
]

CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38  # bytes
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6


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


CU_EVENT_DISABLE_TIMING = 2
CUDA_ERROR_NOT_READY = 600


@contextlib.contextmanager
def bounded_wait(stream: int, limit_s: float, what: str) -> Iterator[None]:
    """Launch on ``stream`` inside the block; on leaving it, wait for those launches, polling an event recorded
    after them every 50 us to 2 ms, and raise once it has not completed ``limit_s`` seconds after an event recorded
    before them was seen complete (the launches started: work queued earlier is not theirs to bound). The Hopper
    kernels' CTAs trap after their watchdog's limit, but with several processes trapping at once some blocked in
    their stream's synchronize for good (H100, 2026-11-26, docs/benchmarks.md); this wait raised in those 10.6 s
    after the start instead (their events never completed, and the processes then blocked on exit in the driver).
    A launch that fails inside the block leaves no events behind."""
    events = [ctypes.c_void_p(), ctypes.c_void_p()]
    try:
        for e in events:
            _check(_lib().cuEventCreate(ctypes.byref(e), CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        _check(_lib().cuEventRecord(events[0], ctypes.c_void_p(stream)), "cuEventRecord")
        yield
        _check(_lib().cuEventRecord(events[1], ctypes.c_void_p(stream)), "cuEventRecord")
        started, pause = None, 50e-6
        while not _completed(events[1]):
            now = time.monotonic()
            if started is None and _completed(events[0]):
                started = now
            if started is not None and now - started > limit_s:
                raise CudaError(
                    f"{what} had not finished {limit_s:.1f} s after it started: its CTAs trap after their "
                    "watchdog's limit, so it hangs or its trap's error was lost; its CUDA context may not recover"
                )
            time.sleep(pause)
            pause = min(2 * pause, 2e-3)
    finally:
        for e in events:
            if e.value:
                _lib().cuEventDestroy_v2(e)


def _completed(event: ctypes.c_void_p) -> bool:
    result = _lib().cuEventQuery(event)
    if result != CUDA_ERROR_NOT_READY:
        _check(result, "cuEventQuery")
    return result != CUDA_ERROR_NOT_READY


def device_attribute(attribute: int) -> int:
    dev, value = ctypes.c_int(), ctypes.c_int()
    _check(_lib().cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice")
    _check(_lib().cuDeviceGetAttribute(ctypes.byref(value), attribute, dev), "cuDeviceGetAttribute")
    return value.value


class _AttributeValue(ctypes.Union):
    _fields_ = [("int", ctypes.c_int), ("_size", ctypes.c_uint64 * 8)]  # 64 bytes, 8-byte aligned, as in cuda.h


class LaunchAttribute(ctypes.Structure):
    """``CUlaunchAttribute``: an id and its value (the attributes used here take one int)."""

    _fields_ = [("id", ctypes.c_int), ("value", _AttributeValue)]


class LaunchConfig(ctypes.Structure):
    """``CUlaunchConfig``: a kernel's cluster shape comes from ``__cluster_dims__``; the one attribute used is
    programmatic dependent launch (:attr:`Launch.pdl`)."""

    _fields_ = [
        *((f"{what}Dim{axis}", ctypes.c_uint) for what in ("grid", "block") for axis in "XYZ"),
        ("sharedMemBytes", ctypes.c_uint),
        ("hStream", ctypes.c_void_p),
        ("attrs", ctypes.c_void_p),
        ("numAttrs", ctypes.c_uint),
    ]


@dataclass(frozen=True)
class Launch:
    """How an entry point launches: ``threads`` per CTA, dynamic shared memory, the ``cluster`` size its source
    declares (``__cluster_dims__``) and ``ctas`` per workgroup (default: the cluster; more where one workgroup's
    work is spread over several CTAs, as split-K's reduction does)."""

    threads: int
    smem_bytes: int
    cluster: int = 1
    ctas: int | None = None
    pdl: bool = False  # programmatic dependent launch: the source waits (griddepcontrol.wait) before global memory

    @property
    def ctas_per_workgroup(self) -> int:
        return self.cluster if self.ctas is None else self.ctas


class Function:
    """A kernel loaded from a cubin: occupancy query and launch on any stream handle (see :class:`Launch`)."""

    def __init__(self, cubin: bytes, name: str, launch: Launch) -> None:
        self._image = ctypes.create_string_buffer(cubin, len(cubin))
        self.module, self.handle, self.context = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_void_p()
        _check(_lib().cuCtxGetCurrent(ctypes.byref(self.context)), "cuCtxGetCurrent")
        _check(_lib().cuModuleLoadData(ctypes.byref(self.module), self._image), "cuModuleLoadData")
        _check(_lib().cuModuleGetFunction(ctypes.byref(self.handle), self.module, name.encode()), "cuModuleGetFunction")
        _check(
            _lib().cuFuncSetAttribute(self.handle, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, launch.smem_bytes),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )
        self.spec = launch
        # the launch's attributes, built once: programmatic stream serialization where the launch asks for PDL
        pdl = LaunchAttribute(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, _AttributeValue(int=1))
        self._attrs = (LaunchAttribute * 1)(pdl) if launch.pdl else (LaunchAttribute * 0)()

    def __del__(self) -> None:
        """Unload the module in the context it was loaded in (its code and constants leave the device)."""
        module = getattr(self, "module", None)
        if module is None or not module.value or not self.context.value:
            return
        self.module = ctypes.c_void_p()
        try:
            lib = _lib()
            if lib.cuCtxPushCurrent_v2(self.context) == 0:
                lib.cuModuleUnload(module)
                lib.cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))
        except Exception:  # NOTE: at interpreter exit the driver may be gone first; the module goes with it
            pass

    @contextlib.contextmanager
    def _current(self) -> Iterator[None]:
        """The context this function was loaded in, current inside the block (pushed and popped)."""
        _check(_lib().cuCtxPushCurrent_v2(self.context), "cuCtxPushCurrent")
        try:
            yield
        finally:
            _lib().cuCtxPopCurrent_v2(ctypes.byref(ctypes.c_void_p()))

    def resident_ctas(self) -> int:
        """How many CTAs of this kernel can be resident at once on its device (occupancy x SMs)."""
        with self._current():
            return self._resident_ctas()

    def _resident_ctas(self) -> int:
        per_sm = ctypes.c_int()
        _check(
            _lib().cuOccupancyMaxActiveBlocksPerMultiprocessor(
                ctypes.byref(per_sm), self.handle, self.spec.threads, ctypes.c_size_t(self.spec.smem_bytes)
            ),
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )
        return per_sm.value * device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)

    def resident_workgroups(self) -> int:
        """How many workgroups can be resident at once: CTAs, or whole clusters (``cuOccupancyMaxActiveClusters``,
        which knows how clusters pack into the GPCs)."""
        c = self.spec
        if c.cluster == 1:
            return self.resident_ctas() // c.ctas_per_workgroup
        with self._current():
            return self._resident_clusters()

    def _resident_clusters(self) -> int:
        c = self.spec
        config = LaunchConfig(c.cluster, 1, 1, c.threads, 1, 1, c.smem_bytes, None, None, 0)
        clusters = ctypes.c_int()
        _check(
            _lib().cuOccupancyMaxActiveClusters(ctypes.byref(clusters), self.handle, ctypes.byref(config)),
            "cuOccupancyMaxActiveClusters",
        )
        return clusters.value

    def config(self, grid: int, stream: int = 0) -> LaunchConfig:
        """The launch configuration of ``grid`` workgroups (``grid * ctas_per_workgroup`` CTAs) on ``stream``; its
        attributes live as long as this function."""
        c, n = self.spec, len(self._attrs)
        attrs = ctypes.addressof(self._attrs) if n else None
        return LaunchConfig(grid * c.ctas_per_workgroup, 1, 1, c.threads, 1, 1, c.smem_bytes, stream, attrs, n)

    def launch(self, grid: int, args: Sequence[ctypes._SimpleCData], stream: int = 0) -> None:
        """Launch ``grid`` workgroups with ``args`` (one ctypes value per kernel parameter)."""
        ptrs = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        _check(
            _lib().cuLaunchKernelEx(ctypes.byref(self.config(grid, stream)), self.handle, ptrs, None),
            "cuLaunchKernelEx",
        )


def load_function(cubin: bytes, name: str, launch: Launch) -> Function:
    return Function(cubin, name, launch)


# cuTensorMapEncodeTiled enums (cuda.h)
CU_TENSOR_MAP_DATA_TYPE_FLOAT16 = 6
CU_TENSOR_MAP_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes (0: none)
CU_TENSOR_MAP_L2_PROMOTION_128B = 2
# Every descriptor promotes an L2 miss to one 128-byte line, whatever the row pitch. Where rows start off the lines
# (2 cols % 128 != 0), a 128-byte box row straddles two lines and 256-byte promotion can bring up to 512 bytes into
# the L2 for its 128: 128 bytes was faster on an H100 (184 x 5944 x 11848: 93.6 -> 78.5 us; 48 x 5224 x 3880: 22.9
# -> 20.2 us; docs/results/l2-promotion-h100.csv). Where rows start on the lines, 256 bytes bought nothing: 40 fresh
# draws ran 0.973x cuBLAS at 256 bytes and 0.975x at 128, the anchors 1.039x and 1.048x
# (docs/results/l2-promotion-aligned-h100.csv).
L2_PROMOTION = CU_TENSOR_MAP_L2_PROMOTION_128B
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class TensorMap(ctypes.Structure):
    """A ``CUtensorMap``: 128 opaque bytes, passed to the kernel by value. The driver wants it 64-byte
    aligned, which ctypes cannot promise: :func:`tensor_map` places it inside a larger buffer."""

    _fields_ = [("opaque", ctypes.c_uint64 * 16)]


def tensor_map(ptr: int, rows: int, cols: int, box_rows: int, box_cols: int, swizzle: int) -> TensorMap:
    """The TMA descriptor of a row-major fp16 ``rows x cols`` matrix at ``ptr``, copied in boxes of
    ``box_rows x box_cols`` with a ``swizzle``-byte swizzle; elements outside the matrix read as zero
    (loads) and are not written (stores). :func:`replace_address` points it at another matrix of the same shape.
    An L2 miss is promoted to one 128-byte line (:data:`L2_PROMOTION`)."""
    buf = ctypes.create_string_buffer(ctypes.sizeof(TensorMap) + 64)
    tm = TensorMap.from_address(-(-ctypes.addressof(buf) // 64) * 64)
    tm._buffer = buf  # type: ignore[attr-defined]  # keeps the memory alive with the map
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(cols * 2)
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    unit = (ctypes.c_uint32 * 2)(1, 1)
    _check(
        _lib().cuTensorMapEncodeTiled(
            ctypes.byref(tm),
            CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
            2,
            ctypes.c_void_p(ptr),
            dims,
            strides,
            box,
            unit,
            0,
            CU_TENSOR_MAP_SWIZZLE[swizzle],
            L2_PROMOTION,
            0,
        ),
        "cuTensorMapEncodeTiled",
    )
    return tm


def replace_address(tm: TensorMap, ptr: int) -> None:
    """Point ``tm`` at the matrix at ``ptr`` (16-byte aligned), its shape and boxes unchanged, in place."""
    _check(_lib().cuTensorMapReplaceAddress(ctypes.byref(tm), ctypes.c_void_p(ptr)), "cuTensorMapReplaceAddress")


@functools.cache
def compute_capability() -> tuple[int, int] | None:
    """The compute capability of device 0, or None without a usable CUDA driver and device."""
    try:
        lib = _lib()
        if lib.cuInit(0):
            return None
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        if lib.cuDeviceGet(ctypes.byref(dev), 0):
            return None
        lib.cuDeviceGetAttribute(ctypes.byref(major), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(minor), CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
        return major.value, minor.value
    except OSError:
        return None
