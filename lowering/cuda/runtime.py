"""The CUDA backend's runtime: a kernel's control graph -> :class:`CudaProgram`, which generates its sources
(:mod:`lowering.cuda.emit`), compiles them (:mod:`lowering.cuda.nvcc`), loads them on each device that calls them
(:mod:`lowering.cuda.driver`) and launches them (:mod:`lowering.cuda.launch`) with their workspaces
(:mod:`lowering.cuda.workspace`).

A call, in order: ``alpha``/``beta`` and every operand checked (shape, dtype, layout, device, ``out`` overlapping
an input) before anything runs; the device's primary context bound on the calling thread (:mod:`.contexts`); the
stream (default: torch's current stream on the operands' device with torch tensors, the legacy stream otherwise);
then the prepared launch. torch tensors take a fast path that reads each tensor's facts once; other operands
(numpy arrays, copied on the launch stream; pycuda GPUArrays and any ``__cuda_array_interface__``) the general one.

**Devices.** A program runs on any device: it is loaded on a device the first time a call's operands are there, and
the grid is checked against what that device holds at once. Operands on different devices raise before launch.
The grid must not exceed the workgroups that can be resident at once (the occupancy API): the fixup spin-waits
would deadlock on a CTA that is not running.

**CUDA graphs.** A launch made while its stream captures keeps its kernels loaded for the life of the process (a
graph may replay them after the program is dropped), and its workspace is the capture's own
(:mod:`.workspace`). A shape's first ``ctgraph.matmul`` call compiles; make it before a capture.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import sys
import threading
import warnings
import weakref
from typing import Any

import numpy as np

from ctgraph.cache import LRU
from ctgraph.control import Wait
from ctgraph.lower import launch_grids, lower_to_control, partial_slots
from ctgraph.operands import check_no_overlap, check_scalars, expected_shapes, host_range
from ctgraph.params import bindings

from . import contexts, memory
from .divisors import Divisor, fast_divisors
from .driver import CudaError, bounded_wait, stream_synchronize
from .emit import generate
from .emit import hopper as emit_hopper
from .emit.base import loads_tiles
from .launch import OPERAND_A, OPERAND_B, OPERAND_D, MapSpec, Prepared
from .nvcc import ptx
from .operands import Operand, classify, is_torch_cuda
from .options import CudaOptions, options_from
from .plan.hopper import d_tail_box, hopper_layout, reduction_launch, swizzle_bytes
from .plan.mma import layout
from .workspace import Workspaces

__all__ = ["CudaProgram", "resolve_mainloop"]

MODULES = 256  # loaded functions kept for reuse (a program keeps its own alive)
_MODULES: LRU[Any] = LRU(MODULES)  # (device, source, arch, entry point, launch) -> loaded function
_SOURCES: LRU[str] = LRU(MODULES)  # (control graph's structure, options) -> generated CUDA C++
_LOCK = threading.Lock()
INT32_MAX = 2**31 - 1
_CAPTURED: dict[int, Prepared] = {}  # launches made during a CUDA graph capture: their modules stay loaded


def _load(device: int, source: str, name: str, opts: CudaOptions, launch: Any) -> Any:
    """Compile once per (source, arch), load once per device and entry point: a new shape reuses the binary. Loads
    into ``device``'s primary context, which the caller has made current."""
    from .driver import load_function
    from .nvcc import cubin

    key = (device, source, opts.arch, name, launch)
    with _LOCK:
        loaded = _MODULES.get(key)
        if loaded is None:
            loaded = _MODULES.put(key, load_function(cubin(source, opts.arch), name, launch))
        return loaded


def _generated(control: Any, opts: CudaOptions) -> str:
    """:func:`generate`, once per control-graph structure and options: it is a function of those two alone, and a
    new shape of a config seen before has the same structure (sizes are parameters), so its source is the one
    printed before (printing it again was the largest part of such a shape's first call on the host)."""
    return _SOURCES.made((control.structure(), opts), lambda: generate(control, opts))


def resolve_mainloop(opts: CudaOptions, dtype: str, macro_tile: tuple[int, int, int]) -> str:
    """``opts.mainloop`` made concrete: ``"auto"`` takes wgmma for sm_90a on a GPU of compute capability
    9.0 when the macro tile fits it (:func:`hopper_layout`), mma.sync otherwise. A tile that does not fit the
    wgmma path with ``pingpong=True`` raises: ping-pong is the wgmma path's, and mma.sync in its place ran 1.8x to
    130x longer than the same config without it (10 of 30 configs, H200, 2026-11-29,
    ``docs/results/pingpong-tail-h200.csv``). Where the caller asked for a cluster layout (``cluster`` above 1,
    ``multicast`` other than ``"b"``, or ``swap=True``) that the wgmma path refuses, the fallback warns: mma.sync runs
    one CTA a workgroup, unswapped."""
    if opts.mainloop == "mma":
        return "mma"
    fits = True
    try:
        hopper_layout(macro_tile, dtype, opts)
    except ValueError as e:
        if opts.mainloop == "wgmma" or opts.pingpong:
            raise
        if opts.cluster > 1 or opts.multicast not in (None, "b") or opts.swap:
            warnings.warn(
                f"{e}; mainloop='auto' runs macro_tile {macro_tile} on the mma.sync path instead, which ignores "
                f"cluster={opts.cluster}, multicast={opts.multicast!r} and swap={opts.swap} (mainloop='wgmma' makes "
                "this an error)",
                stacklevel=2,
            )
        fits = False
    if opts.mainloop == "wgmma":
        if opts.arch != "sm_90a":
            raise ValueError(f"mainloop='wgmma' needs arch='sm_90a', got arch={opts.arch!r}")
        return "wgmma"
    from .driver import compute_capability

    return "wgmma" if fits and opts.arch == "sm_90a" and compute_capability() == (9, 0) else "mma"


class CudaProgram:
    """One GEMM's kernels in up to three variants of the same control graph, chosen per call:
    ``"wgmma"`` (Hopper; TMA needs rows of A and B that are multiples of 8 halves and 16-byte aligned
    pointers), ``"vector"`` (mma.sync, 16-byte cp.async, same needs) and ``"scalar"`` (mma.sync or FMA,
    element loads: any shape and alignment)."""

    def __init__(self, kernel: Any) -> None:
        self.kernel = kernel
        p = kernel.problem
        self.options = options_from(kernel.options)
        self.control = lower_to_control(kernel.graph)
        self.mainloop = resolve_mainloop(self.options, p.dtype, p.macro_tile)
        self.root = self.control[self.control.kernels[0]]
        # kernels that load no tiles, only partials: split-K's reduction
        self.reductions = {self.control[t].name for t in self.control.kernels if not loads_tiles(self.control, t)}
        self.grids = launch_grids(self.control, kernel.graph, kernel.workgroups)
        # NOTE: only a program that spin-waits needs all its workgroups resident at once.
        self.spins = any(isinstance(self.control[t], Wait) for t in self.control.nx)
        # NOTE: TMA boxes and 16-byte vector loads need rows of A (k) and B (n) that are whole vectors.
        rows_ok = p.dtype == "float16" and p.k % 8 == 0 and p.n % 8 == 0
        if self.mainloop == "wgmma" and rows_ok:
            self.variant = "wgmma"
        else:
            self.variant = "vector" if self.options.vector and rows_ok else "scalar"
        self._sources: dict[str, str] = {}
        self._layouts: dict[str, dict[str, int]] = {}
        self._functions: dict[tuple[int, str, str], Any] = {}
        self.source = self.source_of(self.variant)
        self.layout = self.layout_of(self.variant)
        values = bindings(kernel.graph)
        too_big = {s.name: v for s, v in values.items() if v > INT32_MAX}
        if too_big:
            raise ValueError(f"sizes {too_big} exceed 32-bit index math; split the GEMM")
        fast = fast_divisors(self.control)
        self.params = [Divisor.of(values[s]) if s in fast else ctypes.c_int(values[s]) for s in self.root.params]
        self.slots = partial_slots(kernel.graph)
        # NOTE: a workspace tile per slot in the largest layout a call may take, a flag per slot and CTA of a cluster
        bm, bn, cluster = self.layout["BM"], self.layout["BN"], self.layout.get("CLUSTER", 1)
        self.workspaces = Workspaces(4 * self.slots * bm * bn, self.slots * cluster) if self.slots else None
        if self.workspaces is not None:
            weakref.finalize(self, self.workspaces.release)
        self._ptx: dict[str, str] = {}
        self._resident: dict[tuple[int, str], int] = {}
        self._prepared: dict[tuple[int, str], Prepared] = {}
        self._torch = _TorchFacts(p) if "torch" in sys.modules else None

    def _options_of(self, variant: str) -> CudaOptions:
        if variant == "wgmma":
            return dataclasses.replace(self.options, mainloop="wgmma")
        return dataclasses.replace(self.options, mainloop="mma", vector=variant == "vector")

    def source_of(self, variant: str) -> str:
        """The CUDA C++ of ``variant`` (generated once; the fallbacks only when a call needs them)."""
        if variant not in self._sources:
            self._sources[variant] = _generated(self.control, self._options_of(variant))
        return self._sources[variant]

    def layout_of(self, variant: str) -> dict[str, int]:
        if variant not in self._layouts:  # NOTE: memoised: every call asks for it
            p, opts = self.kernel.problem, self._options_of(variant)
            make = hopper_layout if variant == "wgmma" else layout
            self._layouts[variant] = make(p.macro_tile, p.dtype, opts)
        return self._layouts[variant]

    @property
    def ptx(self) -> str:
        if self.variant not in self._ptx:
            self._ptx[self.variant] = ptx(self.source, self.options.arch)
        return self._ptx[self.variant]

    def cubin(self) -> bytes:
        """The primary variant's binary, compiled (or read from the on-disk cache) without a GPU context: what
        ``python -m ctgraph tune`` compiles ahead of timing, on every core."""
        from .nvcc import cubin

        return cubin(self.source, self.options.arch)

    def function(self, variant: str | None = None, name: str | None = None, device: int | None = None) -> Any:
        """The loaded entry point ``name`` (default: the first kernel) of ``variant`` (default: the primary) on
        ``device`` (default: the calling thread's current device)."""
        dev = contexts.current_device() if device is None else device
        key = (dev, variant or self.variant, name or self.root.name)
        if key not in self._functions:
            from .driver import Launch

            lay, hopper = self.layout_of(key[1]), key[1] == "wgmma"
            shape: tuple[int, int, int, int | None] = (lay["BLOCK"], lay["SMEM_BYTES"], lay.get("CLUSTER", 1), None)
            if hopper and key[2] in self.reductions:
                shape = reduction_launch(lay)
            launch = Launch(*shape, pdl=hopper and self.options.pdl)  # the Hopper source waits for the kernel before
            with contexts.bound(dev):
                self._functions[key] = _load(dev, self.source_of(key[1]), key[2], self.options, launch)
        return self._functions[key]

    def build(self, variant: str | None = None, device: int | None = None) -> CudaProgram:
        """Compile and load ``variant`` on ``device`` (default: the current one); refuse a grid larger than what
        can be resident there (checked once each)."""
        v, dev = variant or self.variant, contexts.current_device() if device is None else device
        if (dev, v) in self._resident:
            return self
        with contexts.bound(dev):
            limit = self.function(v, device=dev).resident_workgroups()
        if self.spins and self.kernel.workgroups > limit:
            raise ValueError(
                f"workgroups={self.kernel.workgroups} exceeds the {limit} workgroups of this kernel that can be "
                f"resident at once on device {dev}; Stream-K's fixup waits would deadlock. Use workgroups<="
                f"{limit} (or leave it None)"
            )
        self._resident[(dev, v)] = limit
        return self

    def __call__(
        self,
        A: Any,
        B: Any,
        C: Any = None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        out: Any = None,
        stream: Any = None,
    ) -> Any:
        alpha, beta = check_scalars(alpha, beta)
        if C is None and beta != 0:
            raise ValueError("C is required when beta != 0 (pass C, or beta=0.0)")
        facts = self._torch
        if facts is None and "torch" in sys.modules:
            facts = self._torch = _TorchFacts(self.kernel.problem)
        if facts is not None:
            done = facts.call(self, A, B, C, out, alpha, beta, stream)
            if done is not None:
                return done
        return self._call(A, B, C, out, alpha, beta, stream)

    def _variant(self, a: int, b: int, d: int) -> str:
        variant = self.variant
        if variant != "scalar" and (a % 16 or b % 16):
            variant = "scalar"  # NOTE: TMA and 16-byte vectors need aligned rows; element loads take any pointer
        if variant == "wgmma" and d % 16:
            variant = "vector"  # NOTE: the TMA store of D needs an aligned D too
        return variant

    def launch(
        self,
        device: int,
        stream: int,
        pointers: tuple[int, int, int, int],
        alpha: float,
        beta: float,
        torch_alloc: bool,
        capturing: bool | None = None,
    ) -> None:
        """Launch on ``stream`` of ``device`` with checked operand ``pointers`` (A, B, C or 0, D); ``capturing``:
        whether ``stream`` captures a CUDA graph, where the caller knows (None: ask the driver)."""
        variant = self._variant(pointers[0], pointers[1], pointers[3])
        pushed = contexts.enter(device)
        try:
            prepared = self._prepared.get((device, variant))
            if prepared is None:
                prepared = self._prepare(device, variant, pointers)
            ws = flags = 0
            capture = memory.capture_id(stream) if capturing is None or capturing else None
            if capture is not None:
                _CAPTURED.setdefault(id(prepared), prepared)  # NOTE: a graph may replay its kernels after we go
            if self.workspaces is not None:
                ws, flags = self.workspaces.get(device, stream, torch_alloc, capture)
            prepared(pointers, alpha, beta, ws, flags, stream)
        finally:
            if pushed:
                contexts.leave()

    def _prepare(self, device: int, variant: str, pointers: tuple[int, int, int, int]) -> Prepared:
        p = self.kernel.problem
        try:
            self.build(variant, device)
        except ValueError as e:
            if variant == self.variant:
                raise
            raise ValueError(
                f"A, B or D at an address that is not 16-byte aligned needs the {variant} path, which cannot run "
                f"macro_tile {p.macro_tile} ({e}); pass 16-byte aligned operands (torch's allocations are) or "
                "compile with a tile the mma path runs"
            ) from None
        kernels = [(self.function(variant, name, device), grid) for name, grid in self.grids]
        maps = self._tensor_maps() if variant == "wgmma" else []
        prepared = Prepared(kernels, self.params, maps, pointers)
        return self._prepared.setdefault((device, variant), prepared)

    def _tensor_maps(self) -> list[MapSpec]:
        """TMA descriptors of A (boxes of A_SHARE rows x BK: a CTA's share of the rows its cluster's grid row
        needs), B (boxes of BK/CLUSTER_M k-rows x 64 columns, one 128-byte swizzle span: a CTA's share of the
        k-rows its grid column needs) and D (boxes of D_ROWS rows x 64 columns, stored from shared memory, and
        where a CTA's rows end in a shorter box, of D_TAIL rows; where its columns do, unswizzled boxes of D_ROWS
        rows x D_TAIL columns)."""
        p, lay = self.kernel.problem, self.layout_of("wgmma")
        bk = lay["BK"]
        a_rows, b_rows = lay["A_SHARE"], bk // lay["CLUSTER_M"]  # a CTA's shares, multicast
        return [
            MapSpec(OPERAND_A, p.m, p.k, a_rows, bk, swizzle_bytes(bk)),
            MapSpec(OPERAND_B, p.k, p.n, b_rows, 64, 128),
            MapSpec(OPERAND_D, p.m, p.n, lay["D_ROWS"], 64, 128),
            *([MapSpec(OPERAND_D, p.m, p.n, *d_tail_box(lay))] if lay["D_TAIL"] else []),
        ]

    def _call(self, A: Any, B: Any, C: Any, out: Any, alpha: float, beta: float, stream: Any) -> Any:
        """The general path: numpy arrays (copied on the launch stream), GPUArrays, ``__cuda_array_interface__``."""
        p = self.kernel.problem
        ops = {n: classify(p, n, x) for n, x in (("A", A), ("B", B), ("C", C), ("out", out)) if x is not None}
        check_out(p, ops)  # before any copy or launch
        device = _device_of(ops)
        torch_op = next((op for op in ops.values() if is_torch_cuda(op.obj)), None)
        default = _torch_stream(device) if torch_op is not None else 0  # no torch: the legacy stream, as pycuda's
        handle = default if stream is None else _stream_handle(stream, device)
        host = [n for n, op in ops.items() if op.host]
        if "out" not in ops and not ops["A"].host and not is_torch_cuda(ops["A"].obj):  # D will be a GPUArray
            _pycuda_context()  # NOTE: before our push: pycuda pushes its own context on first import
        pushed = contexts.enter(device)
        try:
            if host and memory.capture_id(handle) is not None:
                raise ValueError(
                    f"{', '.join(host)} {'is a numpy array' if len(host) == 1 else 'are numpy arrays'}: a call "
                    "being captured into a CUDA graph takes device operands only (torch tensors)"
                )
            self._run_general(p, ops, device, handle, host, alpha, beta, torch_op is not None)
        finally:
            if pushed:
                contexts.leave()
        return ops["out"].obj

    def _run_general(
        self,
        p: Any,
        ops: dict[str, Operand],
        device: int,
        handle: int,
        host: list[str],
        alpha: float,
        beta: float,
        torch_alloc: bool,
    ) -> None:
        """Copy numpy operands in, allocate D where none was given, launch, copy D out; in the bound context."""
        buffers: list[int] = []
        hung = False
        try:
            for n in host:
                op = ops[n]
                op.ptr = memory.alloc(op.obj.nbytes)
                buffers.append(op.ptr)
                if n != "out":
                    memory.copy_to_device(op.ptr, op.obj.ctypes.data, op.obj.nbytes, handle)
            if "out" not in ops:
                D, ptr_d = _allocate_like(ops["A"], (p.m, p.n), p.dtype, device, handle)
                ops["out"] = Operand("out", D, host=ops["A"].host, ptr=ptr_d)
                if ops["out"].host:
                    ops["out"].ptr = memory.alloc(D.nbytes)
                    buffers.append(ops["out"].ptr)
            pointers = (ops["A"].ptr, ops["B"].ptr, ops["C"].ptr if "C" in ops else 0, ops["out"].ptr)
            bounded = bool(host) and self._variant(pointers[0], pointers[1], pointers[3]) == "wgmma"
            what = f"the {p.m}x{p.n}x{p.k} GEMM's wgmma kernel"
            # NOTE: no CTA runs past its watchdog's limit: twice that is an error
            limit = 2 * emit_hopper.WATCHDOG_NS / 1e9 + 10
            try:
                with bounded_wait(handle, limit, what) if bounded else contextlib.nullcontext():
                    self.launch(device, handle, pointers, alpha, beta, torch_alloc)
                    if ops["out"].host:
                        d = ops["out"].obj
                        memory.copy_from_device(d.ctypes.data, ops["out"].ptr, d.nbytes, handle)
            except CudaError:
                hung = bounded  # NOTE: the stream may never finish: no synchronize, the buffers are left to it
                raise
        finally:
            if buffers and not hung:
                stream_synchronize(handle)  # a numpy result is complete; an error leaves no copy queued on a buffer
                for ptr in buffers:
                    memory.free(ptr)


class _TorchFacts:
    """The fast path of a call whose operands are all CUDA torch tensors of the right dtype, shape and layout on
    one device: each fact read once, then the launch. Anything else (or a check that fails) returns None and the
    general path takes the call and says what is wrong."""

    def __init__(self, p: Any) -> None:
        import torch

        self.torch = torch
        self.tensor = torch.Tensor
        self.dtype = getattr(torch, p.dtype)
        shapes = expected_shapes(p)
        self.a, self.b, self.d = (torch.Size(shapes[n]) for n in ("A", "B", "out"))
        item = np.dtype(p.dtype).itemsize
        self.a_bytes, self.b_bytes, self.out_bytes = p.m * p.k * item, p.k * p.n * item, p.m * p.n * item
        self.stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # NOTE: absent from CPU builds
        self.capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
        self.device = getattr(torch._C, "_cuda_getDevice", None)

    def _ok(self, x: Any, shape: Any, device: int) -> bool:
        return (
            type(x) is self.tensor
            and x.dtype is self.dtype
            and x.shape == shape
            and x.get_device() == device
            and x.is_contiguous()
        )

    def call(self, prog: CudaProgram, A: Any, B: Any, C: Any, out: Any, alpha: float, beta: float, stream: Any) -> Any:
        t, dt = self.tensor, self.dtype
        if type(A) is not t or type(B) is not t or self.stream is None:
            return None
        if A.dtype is not dt or B.dtype is not dt or A.shape != self.a or B.shape != self.b:
            return None
        dev = A.get_device()
        if dev < 0 or B.get_device() != dev or not A.is_contiguous() or not B.is_contiguous():
            return None
        if C is not None and not self._ok(C, self.d, dev):
            return None
        a, b, c = A.data_ptr(), B.data_ptr(), C.data_ptr() if C is not None else 0
        capturing: bool | None = None
        if stream is None:  # torch's current stream, which torch knows whether it captures (on its current device)
            handle = self.stream(dev)
            if self.capturing is not None and self.device is not None and self.device() == dev:
                capturing = bool(self.capturing())
        else:
            handle = _stream_handle(stream, dev)
        fresh = out is None
        if fresh:  # NOTE: A's dtype and device, on the launch stream (new_empty: the current one, no parsing)
            current = stream is None or handle == self.stream(dev)
            out = A.new_empty(self.d) if current else _empty_on(A, self.d, handle)
        elif not self._ok(out, self.d, dev):
            return None
        d = out.data_ptr()
        if not fresh:  # NOTE: operands.overlapping spelt out: a dict of spans and a call cost ~1 us a call
            e = d + self.out_bytes
            if (
                (a < e and d < a + self.a_bytes)
                or (b < e and d < b + self.b_bytes)
                or (c and c < e and d < c + self.out_bytes)
            ):
                return None  # the general path raises, naming the operand
        prog.launch(dev, handle, (a, b, c, d), alpha, beta, True, capturing)
        return out


def _torch_stream(device: int) -> int:
    import torch

    return int(torch._C._cuda_getCurrentRawStream(device))


def _empty_on(like: Any, shape: Any, handle: int) -> Any:
    """A tensor of ``like``'s dtype and device from torch's allocator on stream ``handle``: the stream the kernel
    writes it on, so the allocator orders its reuse after that kernel (as torch allocates an op's output on the
    stream the op runs on)."""
    import torch

    with torch.cuda.stream(torch.cuda.ExternalStream(handle, device=like.device)):
        return like.new_empty(shape)


def _pycuda_context() -> None:
    import pycuda.autoprimaryctx  # noqa: F401 -- pycuda's own context stack, which a GPUArray result needs


def _device_of(ops: dict[str, Operand]) -> int:
    """The one device of the device operands (numpy arrays go to it; with none, the current device), or a
    ``ValueError`` naming the operands on different devices."""
    where = {}
    for n, op in ops.items():
        if op.host:
            continue
        if is_torch_cuda(op.obj):
            where[n] = op.obj.get_device()
        else:
            from .contexts import pointer_device

            where[n] = pointer_device(op.ptr)
    devices = set(where.values())
    if len(devices) > 1:
        said = ", ".join(f"{n} on cuda:{d}" for n, d in where.items())
        raise ValueError(f"operands on different devices ({said}): put A, B, C and out on one device")
    return devices.pop() if devices else contexts.current_device()


def byte_range(p: Any, op: Operand) -> tuple[int, int]:
    """The bytes ``[start, end)`` of a contiguous operand: a numpy array's, or a device buffer's from its pointer."""
    if op.host:
        return host_range(op.obj)
    rows, cols = expected_shapes(p)[op.name]
    return op.ptr, op.ptr + rows * cols * np.dtype(p.dtype).itemsize


def check_out(p: Any, ops: dict[str, Operand]) -> None:
    """``ValueError`` where ``out`` shares bytes with A, B or C in its memory space (host arrays and device buffers
    never do): tiles of D would be written while other tiles still read them."""
    out = ops.get("out")
    if out is not None:
        same: dict[str, tuple[int, int] | None] = {
            n: byte_range(p, ops[n]) for n in ("A", "B", "C") if n in ops and ops[n].host == out.host
        }
        check_no_overlap(byte_range(p, out), same)


def _stream_handle(stream: Any, device: int) -> int:
    """The raw handle of ``stream`` (an int handle, a torch or pycuda stream); a torch stream of another device than
    the operands' is a ``ValueError`` (the driver would refuse the launch with a less clear error)."""
    if isinstance(stream, int):
        return stream
    where = getattr(stream, "device", None)
    index = getattr(where, "index", None)
    if isinstance(index, int) and index != device:
        raise ValueError(
            f"stream is on cuda:{index} but the operands are on cuda:{device}: use a stream of their device"
        )
    for attr in ("cuda_stream", "handle"):  # torch.cuda.Stream, pycuda.driver.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"stream must be None, an int handle, a torch or pycuda stream, got {type(stream).__name__}")


def _allocate_like(a: Operand, shape: tuple[int, int], dtype: str, device: int, stream: int) -> tuple[Any, int]:
    """The output: a torch tensor when A is one (torch's allocator, on the launch stream), a numpy array when A is
    one (the kernel writes a device buffer copied into it), else a pycuda GPUArray whose memory is allocated on
    ``device`` (in the bound context, not pycuda's)."""
    if is_torch_cuda(a.obj):
        t = _empty_on(a.obj, shape, stream)
        return t, t.data_ptr()
    if a.host:
        return np.empty(shape, dtype), 0
    import pycuda.gpuarray as ga

    g = ga.GPUArray(shape, dtype, allocator=lambda nbytes: memory.Buffer(nbytes, device))
    return g, int(g.gpudata)
