"""Options of the CUDA backend: a frozen record, part of the kernel's cache key."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CLUSTERS", "MAINLOOPS", "MULTICASTS", "CudaOptions"]

MAINLOOPS = ("auto", "wgmma", "mma")
CLUSTERS = (0, 1, 2, 4)  # CTAs per workgroup on the wgmma path (0: the fewest that fit)
MULTICASTS = ("b", "a")  # the operand a cluster's CTAs share: "b" splits the macro tile's rows, "a" its columns


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
    its own pipeline from shared memory.

    ``cluster`` (wgmma path): CTAs per workgroup, launched as one thread-block cluster. CTA ``r`` of a
    cluster computes rows ``[r*BM/cluster, (r+1)*BM/cluster)`` of the workgroup's macro tile, and each
    CTA loads ``1/cluster`` of the B tile and multicasts it to the others: one L2 read of B feeds the
    cluster, so a 256 x 256 macro tile on two CTAs moves a third less data per flop than 128 x 256 on
    one, and 512 x 256 on four half as much. ``0`` (the default) takes the fewest CTAs the macro tile
    fits on: 1 up to 128 x 256, 2 for 256 x 256 or 256 x 192, 4 for 512 x 256. Clusters of 4 pack less
    well into the GPCs (30 resident on a 132-SM H100, against 66 of 2). The mma path ignores it (one
    CTA per workgroup).

    ``multicast`` (wgmma path, clusters of 2 or 4): the operand the CTAs of a cluster share. ``"b"`` (the
    default) as above; ``"a"``: CTA ``r`` computes columns ``[r*BN/cluster, (r+1)*BN/cluster)`` of the
    macro tile, loads ``BM/cluster`` of its rows of A and multicasts them to the others (cuBLAS's 1 x 2
    clusters), and loads its own columns of B."""

    warps: int = 4  # 2 CTAs per SM on the H100: measured faster than 8 warps (docs/benchmarks.md)
    stages: int = 3
    vector: bool = True
    arch: str = "sm_90a"
    ctas_per_sm: int = 1  # __launch_bounds__ hint: CTAs that should fit on one SM (caps registers)
    fetch_step: int = 1  # k16 mma steps before the next stage's loads start (measured best, docs/benchmarks.md)
    mainloop: str = "auto"
    cluster: int = 0
    multicast: str = "b"

    def __post_init__(self) -> None:
        if self.warps not in (1, 2, 4, 8, 16):
            raise ValueError(f"warps must be 1, 2, 4, 8 or 16, got {self.warps!r}")
        if not isinstance(self.stages, int) or not 2 <= self.stages <= 8:
            raise ValueError(f"stages must be an integer in [2, 8], got {self.stages!r}")
        if self.mainloop not in MAINLOOPS:
            raise ValueError(f"mainloop must be one of {MAINLOOPS}, got {self.mainloop!r}")
        if not isinstance(self.fetch_step, int) or self.fetch_step < 0:
            raise ValueError(f"fetch_step must be a nonnegative integer, got {self.fetch_step!r}")
        if isinstance(self.cluster, bool) or self.cluster not in CLUSTERS:
            raise ValueError(f"cluster must be 0 (the fewest CTAs that fit), 1, 2 or 4, got {self.cluster!r}")
        if self.multicast not in MULTICASTS:
            raise ValueError(f"multicast must be one of {MULTICASTS}, got {self.multicast!r}")
        if not isinstance(self.ctas_per_sm, int) or not 1 <= self.ctas_per_sm <= 8:
            raise ValueError(f"ctas_per_sm must be an integer in [1, 8], got {self.ctas_per_sm!r}")

    @property
    def threads(self) -> int:
        return 32 * self.warps
