"""Options of the CUDA backend: a frozen record, part of the kernel's cache key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, replace
from typing import Any

from ctgraph.counts import itemsize

__all__ = ["CLUSTERS", "MAINLOOPS", "MULTICASTS", "CudaOptions", "options_from", "warp_grid"]

MAINLOOPS = ("auto", "wgmma", "mma")
CLUSTERS = (0, 1, 2, 4, 8)  # CTAs per workgroup on the wgmma path (0: the fewest that fit)
# the operands a cluster's CTAs share: "b" splits the macro tile's rows, "a" its columns, "ab" and "ba" both
# (2 x cluster/2 and cluster/2 x 2 grids: the operand named first is shared by the longer side)
MULTICASTS = ("b", "a", "ab", "ba")
# the most dynamic shared memory one CTA may opt into, per nvcc target (sm_86, sm_89 and others: 99 KiB)
SMEM_PER_CTA = {"sm_80": 163 << 10, "sm_87": 163 << 10, "sm_90": 227 << 10, "sm_90a": 227 << 10}
WARP_TILE = 64 * 64  # fp16 mma path: a 64 x 64 warp tile is 128 fp32 accumulators per thread; larger ones spill


def warp_grid(bm: int, bn: int, warps: int) -> tuple[int, int] | None:
    """The ``WM x WN`` grid of ``warps`` warps whose warp tiles divide a ``bm x bn`` macro tile into multiples of
    16 x 16, the squarest such (fewest ``ldmatrix`` per ``mma``); ``None`` when no grid fits."""
    grids = [(wm, warps // wm) for wm in (1, 2, 4, 8, 16) if warps % wm == 0]
    fits = [(a, b) for a, b in grids if bm % (16 * a) == 0 and bn % (16 * b) == 0]
    return min(fits, key=lambda ab: (abs(bm // ab[0] - bn // ab[1]), ab[0]), default=None)


@dataclass(frozen=True)
class CudaOptions:
    """``warps``: warps per CTA; ``stages``: shared-memory pipeline depth; ``vector``: 16-byte ``cp.async``
    loads (needs rows of A and B that are multiples of 8 elements and 16-byte aligned pointers; the
    runtime picks the scalar-load variant otherwise); ``arch``: the nvcc target; ``ctas_per_sm``: the
    occupancy asked of the register allocator.

    ``mainloop``: ``"wgmma"`` (Hopper: TMA, mbarriers, ``wgmma.mma_async``, a producer and consumer
    warpgroups; fp16 on sm_90a, see :mod:`lowering.cuda.hopper`), ``"mma"`` (``mma.sync``, any sm_80+
    GPU) or ``"auto"``: wgmma when a GPU of compute capability 9.0 is present and the macro tile fits it.
    ``warps``, ``stages``, ``ctas_per_sm`` and ``fetch_step`` tune the mma path; the wgmma path sizes
    its own pipeline from shared memory. ``warps`` and ``stages`` left ``None`` are chosen for the macro tile
    (:meth:`for_tile`).

    ``cluster`` (wgmma path): CTAs per workgroup, launched as one thread-block cluster. CTA ``r`` of a
    cluster computes rows ``[r*BM/cluster, (r+1)*BM/cluster)`` of the workgroup's macro tile, and each
    CTA loads ``1/cluster`` of the B tile and multicasts it to the others: one L2 read of B feeds the
    cluster, so a 256 x 256 macro tile on two CTAs moves a third less data per flop than 128 x 256 on
    one, and 512 x 256 on four half as much. ``0`` (the default) takes the fewest CTAs the macro tile
    fits on: 1 up to 128 x 256, 2 for 256 x 256 or 256 x 192, 4 for 512 x 256. Clusters of 4 pack less
    well into the GPCs (30 resident on a 132-SM H100, against 66 of 2). The mma path ignores it (one
    CTA per workgroup).

    ``multicast`` (wgmma path, clusters of 2, 4 or 8): the operands the CTAs of a cluster share. ``"b"`` as
    above; ``"a"``: CTA ``r`` computes columns ``[r*BN/cluster, (r+1)*BN/cluster)`` of the
    macro tile, loads ``BM/cluster`` of its rows of A and multicasts them to the others (cuBLAS's 1 x 2
    clusters), and loads its own columns of B. ``"ab"`` (clusters of 4 or 8) lays the CTAs out as a 2-D grid of
    2 x ``cluster/2``: CTA ``(i, j)`` computes rows ``i*BM/2 ..`` and columns ``j*2*BN/cluster ..``; A's rows are
    shared along a row of the grid and B's columns along a column, as in cuBLAS's 2 x 2 and 4 x 2 clusters, so
    each CTA reads ``1/(cluster/2)`` of its A rows and half of its B columns from the L2. ``"ba"`` is the
    transposed grid, ``cluster/2 x 2``: each CTA reads half of its A rows and ``1/(cluster/2)`` of its B k-rows
    (cuBLAS's 2 x 4 clusters; where A's rows do not start on 128-byte lines, sharing them in pairs halves the L2
    requests they cost). ``None`` (the default): the first of ``"b"``, ``"ab"``, ``"ba"``, ``"a"`` that the macro
    tile fits on (:data:`lowering.cuda.hopper.MULTICAST_ORDER`; e.g. 4 CTAs in a 2 x 2 grid for 240 x 512).

    ``swap`` (wgmma path): compute ``D^T = B^T A^T``, as cuBLAS does with row-major operands. The wgmma
    instruction's 64-row side then runs along n (one consumer warpgroup per 64 columns of a CTA's tile) and
    its N side, any multiple of 8 up to 256, along m: a CTA's rows need not be a multiple of 64, so tiles like
    136 x 128 fit a skinny GEMM's tile count to the SMs. ``None`` (the default) swaps exactly when the macro
    tile needs it (a CTA's rows not a multiple of 64); ``True`` or ``False`` forces one layout.

    ``transform="auto"`` sets all three to the layout it selected (:mod:`ctgraph.select`) where the caller leaves
    them at their defaults.

    ``pdl`` (wgmma path): launch with programmatic dependent launch. A kernel may then launch while the one
    before it in the stream finishes, and sets up its shared memory and barriers before it waits
    (``griddepcontrol.wait``) for that one to complete, so back-to-back kernels overlap launch and prologue with
    the tail of the one before (up to ~0.3 us a kernel on the H100, docs/benchmarks.md). It touches no global
    memory before that wait, so the stream's order of results is kept.

    ``pingpong`` (wgmma path, CTA tiles that one consumer warpgroup computes: 64 rows, or swapped 64 columns): two
    consumer warpgroups take the workgroup's work units (its tiles, or Stream-K's pieces of tiles) in turn, each
    with a whole CTA tile in its own accumulators, as cuBLAS's ping-pong kernels do. The producer fills the ring in
    unit order as before; while one warpgroup runs a unit's epilogue or fixup, the other's wgmma keep the tensor
    cores busy (:mod:`lowering.cuda.hopper`)."""

    warps: int | None = None  # None: for the macro tile (for_tile)
    stages: int | None = None
    vector: bool = True
    arch: str = "sm_90a"
    ctas_per_sm: int = 1  # __launch_bounds__ hint: CTAs that should fit on one SM (caps registers)
    fetch_step: int = 1  # k16 mma steps before the next stage's loads start (measured best, docs/benchmarks.md)
    mainloop: str = "auto"
    cluster: int = 0
    multicast: str | None = None  # None: the first of hopper.MULTICAST_ORDER the macro tile fits on
    swap: bool | None = None  # None: when a CTA's rows are not a multiple of 64
    pdl: bool = True  # wgmma path: programmatic dependent launch
    pingpong: bool = False  # wgmma path: two consumer warpgroups take the work units in turn

    def __post_init__(self) -> None:
        if self.warps is not None and (isinstance(self.warps, bool) or self.warps not in (1, 2, 4, 8, 16)):
            raise ValueError(f"warps must be 1, 2, 4, 8 or 16, got {self.warps!r}")
        if self.stages is not None and (not isinstance(self.stages, int) or not 2 <= self.stages <= 8):
            raise ValueError(f"stages must be an integer in [2, 8], got {self.stages!r}")
        if self.mainloop not in MAINLOOPS:
            raise ValueError(f"mainloop must be one of {MAINLOOPS}, got {self.mainloop!r}")
        if not isinstance(self.fetch_step, int) or self.fetch_step < 0:
            raise ValueError(f"fetch_step must be a nonnegative integer, got {self.fetch_step!r}")
        if isinstance(self.cluster, bool) or self.cluster not in CLUSTERS:
            raise ValueError(f"cluster must be 0 (the fewest CTAs that fit), 1, 2, 4 or 8, got {self.cluster!r}")
        if self.multicast is not None and self.multicast not in MULTICASTS:
            raise ValueError(
                f"multicast must be None (the tile's measured layout) or one of {MULTICASTS}, got {self.multicast!r}"
            )
        if self.multicast in ("ab", "ba") and self.cluster not in (0, 4, 8):
            grid = "2 x cluster/2" if self.multicast == "ab" else "cluster/2 x 2"
            raise ValueError(
                f"multicast={self.multicast!r} lays a cluster out as {grid}: cluster must be 0, 4 or 8, "
                f"got {self.cluster!r}"
            )
        if not (self.swap is None or isinstance(self.swap, bool)):
            raise ValueError(f"swap must be None (when the macro tile needs it), True or False, got {self.swap!r}")
        if not isinstance(self.pdl, bool):
            raise ValueError(f"pdl must be True or False, got {self.pdl!r}")
        if not isinstance(self.pingpong, bool):
            raise ValueError(f"pingpong must be True or False, got {self.pingpong!r}")
        if not isinstance(self.ctas_per_sm, int) or not 1 <= self.ctas_per_sm <= 8:
            raise ValueError(f"ctas_per_sm must be an integer in [1, 8], got {self.ctas_per_sm!r}")

    def for_tile(self, macro_tile: tuple[int, int, int], dtype: str) -> CudaOptions:
        """These options with the mma path's ``warps`` and ``stages`` of :meth:`mma_shape`."""
        warps, stages = self.mma_shape(macro_tile, dtype)
        return replace(self, warps=warps, stages=stages)

    def mma_shape(self, macro_tile: tuple[int, int, int], dtype: str) -> tuple[int, int]:
        """The mma path's ``(warps, stages)`` for ``macro_tile``: these options' where given, else chosen.

        ``warps``: fp16 takes 4 warps up to 128 x 128 (four 64 x 64 warp tiles) and 8 beyond, fewer where no
        warp grid divides the tile (:func:`warp_grid`): 4 for 128 x 128 (two CTAs per SM on the
        H100), 8 for 256 x 128 and 128 x 256 (one CTA per SM; same warp tile, a quarter fewer L2 reads per flop:
        450-480 TFLOP/s at 4096^3 and 8192^3 on the H100, docs/benchmarks.md). fp32 (the FMA path) takes 4.

        ``stages``: a ring of 3 with up to 4 warps, 4 with more, and fewer (at least 2) where the ring of one
        of the CTAs an SM holds (two with up to 4 warps) outgrows the target's shared memory per CTA.
        """
        bm, bn, bk = macro_tile
        warps = self.warps
        if warps is None:
            warps = 4
            if dtype == "float16":
                want = 4 if bm * bn <= 4 * WARP_TILE else 8
                warps = next((w for w in (8, 4, 2, 1) if w <= want and warp_grid(bm, bn, w)), want)
        stages = self.stages
        if stages is None:
            ctas = 2 if warps <= 4 else 1
            ring = (bm * bk + bk * bn) * itemsize(dtype)
            stages = max(2, min(3 if warps <= 4 else 4, SMEM_PER_CTA.get(self.arch, 99 << 10) // ctas // ring))
        return warps, stages


def options_from(options: dict[str, Any]) -> CudaOptions:
    """The :class:`CudaOptions` of ``compile``'s keyword arguments (``build`` aside); ``ValueError`` naming the valid
    ones for any other."""
    names = {f.name for f in dataclasses.fields(CudaOptions)}
    unknown = set(options) - names - {"build"}
    if unknown:
        raise ValueError(f"unknown CUDA options {sorted(unknown)}; valid: {sorted(names | {'build'})}")
    return CudaOptions(**{k: v for k, v in options.items() if k in names})
