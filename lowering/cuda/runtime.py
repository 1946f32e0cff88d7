"""The CUDA backend's runtime: a kernel's control graph -> :class:`CudaProgram`, which generates its sources
(:mod:`lowering.cuda.emit`), compiles and loads them on first call (:mod:`lowering.cuda.nvcc`,
:mod:`lowering.cuda.driver`), and launches them with their workspaces, flags and tensor maps.

The grid is ``kernel.workgroups`` and must not exceed the number of CTAs that can be resident at once (the occupancy
API): the fixup spin-waits would deadlock on a CTA that is not running. Workspace and flags belong to the program,
one set per stream, and the flags reset themselves.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading
from typing import Any

import numpy as np

from ctgraph.cache import LRU
from ctgraph.control import Wait
from ctgraph.lower import launch_grids, lower_to_control, partial_slots
from ctgraph.operands import check_no_overlap, check_scalars, expected_shapes, host_range
from ctgraph.params import bindings

from .divisors import Divisor, fast_divisors
from .emit import generate
from .emit import hopper as emit_hopper
from .emit.base import loads_tiles
from .nvcc import ptx
from .operands import Operand, classify
from .options import CudaOptions, options_from
from .plan.hopper import d_tail_box, hopper_layout, reduction_launch, swizzle_bytes
from .plan.mma import layout

__all__ = ["CudaProgram", "resolve_mainloop"]

MODULES = 256  # loaded functions kept for reuse (a program keeps its own alive)
_MODULES: LRU[Any] = LRU(MODULES)  # (source, arch, entry point, launch) -> loaded function
_LOCK = threading.Lock()
INT32_MAX = 2**31 - 1


def _context() -> None:
    import pycuda.autoprimaryctx  # noqa: F401 -- the device's primary context, shared with torch


def _load(source: str, name: str, opts: CudaOptions, launch: Any) -> Any:
    """Compile and load once per (source, arch, entry point, launch): a new shape reuses the same binary."""
    from .driver import load_function
    from .nvcc import cubin

    key = (source, opts.arch, name, launch)
    with _LOCK:
        loaded = _MODULES.get(key)
        if loaded is None:
            _context()
            loaded = _MODULES.put(key, load_function(cubin(source, opts.arch), name, launch))
        return loaded


def resolve_mainloop(opts: CudaOptions, dtype: str, macro_tile: tuple[int, int, int]) -> str:
    """``opts.mainloop`` made concrete: ``"auto"`` takes wgmma for sm_90a on a GPU of compute capability
    9.0 when the macro tile fits it (:func:`hopper_layout`), mma.sync otherwise."""
    if opts.mainloop == "mma":
        return "mma"
    fits = True
    try:
        hopper_layout(macro_tile, dtype, opts)
    except ValueError:
        if opts.mainloop == "wgmma":
            raise
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
        self._functions: dict[tuple[str, str], Any] = {}
        self.source = self.source_of(self.variant)
        self.layout = self.layout_of(self.variant)
        values = bindings(kernel.graph)
        too_big = {s.name: v for s, v in values.items() if v > INT32_MAX}
        if too_big:
            raise ValueError(f"sizes {too_big} exceed 32-bit index math; split the GEMM")
        fast = fast_divisors(self.control)
        self.params = [Divisor.of(values[s]) if s in fast else ctypes.c_int(values[s]) for s in self.root.params]
        self.slots = max(partial_slots(kernel.graph), 1)
        self._workspaces: dict[int, tuple[Any, Any]] = {}
        self._ptx: dict[str, str] = {}
        self._resident: dict[str, int] = {}

    def _options_of(self, variant: str) -> CudaOptions:
        if variant == "wgmma":
            return dataclasses.replace(self.options, mainloop="wgmma")
        return dataclasses.replace(self.options, mainloop="mma", vector=variant == "vector")

    def source_of(self, variant: str) -> str:
        """The CUDA C++ of ``variant`` (generated once; the fallbacks only when a call needs them)."""
        if variant not in self._sources:
            self._sources[variant] = generate(self.control, self._options_of(variant))
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

    def function(self, variant: str | None = None, name: str | None = None) -> Any:
        """The loaded entry point ``name`` (default: the first kernel) of ``variant`` (default: the primary)."""
        key = (variant or self.variant, name or self.root.name)
        if key not in self._functions:
            from .driver import Launch

            lay, hopper = self.layout_of(key[0]), key[0] == "wgmma"
            shape: tuple[int, int, int, int | None] = (lay["BLOCK"], lay["SMEM_BYTES"], lay.get("CLUSTER", 1), None)
            if hopper and key[1] in self.reductions:
                shape = reduction_launch(lay)
            launch = Launch(*shape, pdl=hopper and self.options.pdl)  # the Hopper source waits for the kernel before
            self._functions[key] = _load(self.source_of(key[0]), key[1], self.options, launch)
        return self._functions[key]

    def build(self, variant: str | None = None) -> CudaProgram:
        """Compile and load ``variant``; refuse a grid larger than what can be resident (checked once each)."""
        v = variant or self.variant
        if v in self._resident:
            return self
        limit = self._resident[v] = self.function(v).resident_workgroups()
        if self.spins and self.kernel.workgroups > limit:
            del self._resident[v]
            raise ValueError(
                f"workgroups={self.kernel.workgroups} exceeds the {limit} workgroups of this kernel that can be "
                "resident at once on this GPU; Stream-K's fixup waits would deadlock. Use workgroups<="
                f"{limit} (or leave it None)"
            )
        return self

    def _workspace(self, stream: int) -> tuple[Any, Any]:
        if stream not in self._workspaces:
            import pycuda.gpuarray as ga

            bm, bn, cluster = self.layout["BM"], self.layout["BN"], self.layout.get("CLUSTER", 1)
            self._workspaces[stream] = (
                ga.zeros(self.slots * bm * bn, np.float32),
                ga.zeros(self.slots * cluster, np.uint32),  # a flag per slot and CTA of a cluster
            )
        return self._workspaces[stream]

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
        p = self.kernel.problem
        alpha, beta = check_scalars(alpha, beta)
        if C is None and beta != 0:
            raise ValueError("C is required when beta != 0 (pass C, or beta=0.0)")
        ops = {n: classify(p, n, x) for n, x in (("A", A), ("B", B), ("C", C), ("out", out)) if x is not None}
        check_out(p, ops)  # before any copy or launch
        handle = _stream_handle(stream)
        self.build()
        import pycuda.gpuarray as ga

        dev: dict[str, Any] = {}
        for n, op in ops.items():
            if op.host:
                dev[n] = ga.to_gpu(op.obj) if n != "out" else ga.empty(op.obj.shape, op.obj.dtype)
                op.ptr = int(dev[n].gpudata)
        if "out" not in ops:
            D, ptr_d = _allocate_like(ops["A"], (p.m, p.n), p.dtype)
            ops["out"] = Operand("out", D, host=False, ptr=ptr_d)
        variant = self.variant
        if variant != "scalar" and any(ops[n].ptr % 16 for n in ("A", "B")):
            variant = "scalar"  # NOTE: TMA and 16-byte vectors need aligned rows; element loads take any pointer
        if variant == "wgmma" and ops["out"].ptr % 16:
            variant = "vector"  # NOTE: the TMA store of D needs an aligned D too
        try:
            self.build(variant)
        except ValueError as e:
            if variant == self.variant:
                raise
            raise ValueError(
                f"A, B or D at an address that is not 16-byte aligned needs the {variant} path, which cannot run "
                f"macro_tile {p.macro_tile} ({e}); pass 16-byte aligned operands (torch's allocations are) or "
                "compile with a tile the mma path runs"
            ) from None
        ws, flags = self._workspace(handle)
        c_ptr = ops["C"].ptr if "C" in ops else 0
        args = [
            ctypes.c_void_p(ops["A"].ptr),
            ctypes.c_void_p(ops["B"].ptr),
            ctypes.c_void_p(c_ptr),
            ctypes.c_void_p(ops["out"].ptr),
            ctypes.c_float(alpha),
            ctypes.c_float(beta),
            ctypes.c_void_p(int(ws.gpudata)),
            ctypes.c_void_p(int(flags.gpudata)),
            *self.params,
        ]
        if variant == "wgmma":
            args += self._tensor_maps(ops["A"].ptr, ops["B"].ptr, ops["out"].ptr)
        from .driver import bounded_wait, stream_synchronize

        wait = "out" in dev or ops["A"].host  # a numpy result: wait for the kernel, then copy back
        bounded = wait and variant == "wgmma"  # no CTA runs past its watchdog's limit: twice that is an error
        what = f"the {p.m}x{p.n}x{p.k} GEMM's wgmma kernel"
        with (
            bounded_wait(handle, 2 * emit_hopper.WATCHDOG_NS / 1e9 + 10, what) if bounded else contextlib.nullcontext()
        ):
            for name, grid in self.grids:  # in order, on one stream: a reduction kernel starts after the first
                self.function(variant, name).launch(grid, args, handle)
        if wait and not bounded:
            stream_synchronize(handle)
        if wait:
            if "out" in dev:
                dev["out"].get(ops["out"].obj)
                return ops["out"].obj
            return ops["out"].obj.get()
        return ops["out"].obj

    def _tensor_maps(self, a: int, b: int, d: int) -> list[Any]:
        """TMA descriptors of A (boxes of A_SHARE rows x BK: a CTA's share of the rows its cluster's grid row
        needs), B (boxes of BK/CLUSTER_M k-rows x 64 columns, one 128-byte swizzle span: a CTA's share of the
        k-rows its grid column needs) and D (boxes of D_ROWS rows x 64 columns, stored from shared memory, and
        where a CTA's rows end in a shorter box, of D_TAIL rows; where its columns do, unswizzled boxes of D_ROWS
        rows x D_TAIL columns)."""
        from .driver import tensor_map

        p, lay = self.kernel.problem, self.layout_of("wgmma")
        bk = lay["BK"]
        a_rows, b_rows = lay["A_SHARE"], bk // lay["CLUSTER_M"]  # a CTA's shares, multicast
        return [
            tensor_map(a, p.m, p.k, a_rows, bk, swizzle_bytes(bk)),
            tensor_map(b, p.k, p.n, b_rows, 64, 128),
            tensor_map(d, p.m, p.n, lay["D_ROWS"], 64, 128),
            *([tensor_map(d, p.m, p.n, *d_tail_box(lay))] if lay["D_TAIL"] else []),
        ]


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


def _stream_handle(stream: Any) -> int:
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "handle"):  # torch.cuda.Stream, pycuda.driver.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"stream must be None, an int handle, a torch or pycuda stream, got {type(stream).__name__}")


def _allocate_like(a: Operand, shape: tuple[int, int], dtype: str) -> tuple[Any, int]:
    """The output: a torch tensor when A is one, else a pycuda GPUArray."""
    if not a.host and type(a.obj).__module__.startswith("torch"):
        import torch

        t = torch.empty(shape, dtype=getattr(torch, dtype), device=a.obj.device)
        return t, t.data_ptr()
    import pycuda.gpuarray as ga

    g = ga.empty(shape, dtype)
    return g, int(g.gpudata)
