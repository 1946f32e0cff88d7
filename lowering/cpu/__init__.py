"""The CPU backend: control graph -> LLVM IR -> host machine code (llvmlite MCJIT), run workgroup by workgroup.

Workgroups run one after another in an order where every producer of a partial tile runs before the
owner that waits for it (:func:`ctgraph.lower.fixup_dependencies`); a wait that finds its flag unset
is reported as an error, never spun on. Each program owns its workspace and flags.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import networkx as nx
import numpy as np

from ctgraph.config import Layout
from ctgraph.lower import fixup_dependencies, launch_grids, lower_to_control, partial_slots
from ctgraph.operands import check_host_operands, check_scalars
from ctgraph.params import bindings
from ctgraph.target import CPU, Target

from .codegen import generate
from .jit import cache_info, compile_ir

__all__ = [
    "TILE_BYTES",
    "CpuProgram",
    "build",
    "cache_info",
    "check_tile",
    "layout_of",
    "options_from",
    "run_order",
    "supports",
    "target",
    "tile_bytes",
]


def target() -> Target:
    """The CPU as selection sees it: one path, workgroups run one after another."""
    return CPU


def options_from(options: dict[str, Any]) -> dict[str, Any]:
    """The CPU backend has no options of its own: it ignores the rest (``compile`` checks them against the CUDA
    backend's on every built-in target, so that one call serves ``target="auto"``)."""
    return {}


def layout_of(macro_tile: tuple[int, int, int], dtype: str, options: dict[str, Any]) -> Layout:
    """Every tile runs on one "CTA" here."""
    return Layout()


TILE_BYTES = 4 << 20  # the tiles of A, B and the accumulator (fp32) live on the calling thread's stack (8 MiB)


def tile_bytes(macro_tile: tuple[int, int, int]) -> int:
    """The stack a workgroup's fp32 tiles take: ``4 (BM BK + BK BN + BM BN)`` bytes."""
    bm, bn, bk = macro_tile
    return 4 * (bm * bk + bk * bn + bm * bn)


def check_tile(macro_tile: tuple[int, int, int]) -> None:
    """A ``ValueError`` naming ``macro_tile`` where its tiles outgrow :data:`TILE_BYTES` (the call would overflow
    the stack and kill the process)."""
    if tile_bytes(macro_tile) > TILE_BYTES:
        raise ValueError(
            f"macro_tile {macro_tile} needs {tile_bytes(macro_tile) / 2**20:.1f} MiB of fp32 tiles, which the cpu "
            f"backend keeps on the calling thread's stack: at most {TILE_BYTES >> 20} MiB, BM*BN + BK*(BM + BN) <= "
            f"{TILE_BYTES // 4} elements; use a smaller macro_tile"
        )


def supports(macro_tile: tuple[int, int, int], dtype: str, layout: Layout, path: str) -> bool:
    """A tile runs on the CPU path (partial tiles are masked) where its tiles fit the stack (:func:`check_tile`);
    clusters do not exist here."""
    return layout == Layout() and tile_bytes(macro_tile) <= TILE_BYTES


def run_order(schedule: list[list[tuple[int, int, int]]]) -> list[int]:
    """Workgroups in an order where producers of partials run before their owners (ties: lowest id)."""
    dag = nx.DiGraph()
    dag.add_nodes_from(range(len(schedule)))
    dag.add_edges_from(fixup_dependencies(schedule))
    try:
        return list(nx.lexicographical_topological_sort(dag))
    except nx.NetworkXUnfeasible:
        cycle = nx.find_cycle(dag)
        raise RuntimeError(f"workgroups wait on each other in a cycle {cycle}: this schedule would deadlock") from None


class CpuProgram:
    """The compiled kernel plus its own workspace and flags. Called as ``program(A, B, C, alpha=, beta=)``."""

    def __init__(self, kernel: Any) -> None:
        check_tile(kernel.problem.macro_tile)  # NOTE: before any work: a tile too large would overflow the stack
        self.kernel = kernel
        self.control = lower_to_control(kernel.graph)
        self.source = generate(self.control)
        first = self.control[self.control.kernels[0]]
        values = bindings(kernel.graph)
        self.params = np.array([values[p] for p in first.params], dtype=np.int64)
        self.grids = launch_grids(self.control, kernel.graph, kernel.workgroups)
        bm, bn, _ = kernel.problem.macro_tile
        slots = partial_slots(kernel.graph)
        self.workspace = np.zeros(max(slots, 1) * bm * bn, dtype=np.float32)
        self.flags = np.zeros(max(slots, 1), dtype=np.int32)
        self._lock = threading.Lock()

    @functools.cached_property
    def order(self) -> list[int]:
        """The first kernel's workgroups in run order (the others need none: no waits). Computed on the first
        call, from the schedule: reading ``source`` or ``control`` stays cheap for any GEMM size."""
        return run_order(self.kernel._schedule)

    @property
    def compiled(self) -> Any:
        return compile_ir(self.source)

    def __call__(
        self,
        A: np.ndarray,
        B: np.ndarray,
        C: np.ndarray | None = None,
        *,
        alpha: float = 1.0,
        beta: float = 0.0,
        out: np.ndarray | None = None,
        stream: None = None,
    ) -> np.ndarray:
        p = self.kernel.problem
        if stream is not None:  # NOTE: accepted as None so that one call serves target="auto" on either backend
            raise TypeError(f"stream is for the cuda target; the cpu backend runs on the calling thread: {stream!r}")
        alpha, beta = check_scalars(alpha, beta)
        check_host_operands(p, A, B, C, beta, out)
        D = np.empty((p.m, p.n), dtype=p.dtype) if out is None else out
        compiled = self.compiled
        c_ptr = C.ctypes.data if C is not None else None
        ptrs = (A.ctypes.data, B.ctypes.data, c_ptr, D.ctypes.data)
        with self._lock:
            for i, (name, grid) in enumerate(self.grids):
                self._launch(compiled.function(name), self.order if i == 0 else range(grid), ptrs, alpha, beta)
        return D

    def _launch(self, fn: Any, workgroups: Any, ptrs: tuple, alpha: float, beta: float) -> None:
        """Run ``fn`` for each workgroup in turn; a wait that finds its flag unset is an error."""
        for wg in workgroups:
            rc = fn(wg, *ptrs, alpha, beta, self.workspace.ctypes.data, self.flags.ctypes.data, self.params.ctypes.data)
            if rc:
                self.flags[:] = 0
                raise RuntimeError(
                    f"workgroup {wg} waited for the partial tile of flag {rc - 1}, which no "
                    "earlier workgroup signalled: the schedule cannot be run without deadlock"
                )


def build(kernel: Any) -> CpuProgram:
    return CpuProgram(kernel)
