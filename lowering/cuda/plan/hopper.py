"""The Hopper (wgmma) kernel's resource plan: macro tile and options -> :class:`HopperPlan`, a frozen record computed
once in named steps and printed by :mod:`lowering.cuda.emit.hopper` (its fields, upper-cased, are the ``constexpr``
constants of the source; :func:`hopper_layout` gives them as a dict, the form the runtime reads).

Steps (:func:`hopper_plan`): the cluster grid and CTA tile (:func:`cta_tile`), wgmma's orientation
(:func:`orientation`), the consumer warpgroups and their 64-row blocks (:func:`math_warpgroups`), the fit
(:func:`check_fit`), the register split and deferred D (:func:`registers`), the ring's stages and shared memory
(:func:`ring`), the fixup's chunks through the ring (:func:`fixup_chunks`) and the epilogue's D boxes
(:func:`epilogue_boxes`). The design these numbers serve is in docs/hopper.md.
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from ctgraph.config import cluster_grid

from ..options import CLUSTERS, CudaOptions
from ..ptx import WGMMA_N, WGMMA_SWAP_N

__all__ = [
    "A_STAGE_MIN_BYTES",
    "MULTICAST_ORDER",
    "SMEM_LIMIT",
    "SPARE_REGS",
    "HopperPlan",
    "accumulator_budget",
    "accumulators_fit",
    "d_tail_box",
    "hopper_layout",
    "hopper_plan",
    "launch_registers",
    "reduction_launch",
    "register_split",
    "row_blocks",
    "swizzle_bytes",
]

SMEM_LIMIT = 227 * 1024  # opt-in shared memory per CTA on sm_90
# NOTE: up to 16 stages (9 to 13 for thin CTAs) ran no faster: 96 fresh shapes whose config would get more, 0.994x the
# 8-stage ring (H200, docs/results/stages-probe-h200.csv, docs/selection.md)
MAX_STAGES = 8
D_BUFFERS = 2  # staged D boxes per consumer warpgroup: one is filled while TMA stores the other
REGISTERS = 64 * 1024  # 32-bit registers per SM: the producer and consumer warpgroups share them
SPARE_REGS = 32  # registers a consumer thread needs besides its BN/2 accumulators (descriptors, indices)
# NOTE: the same where each of two consumer warpgroups holds two 64-row blocks (row_blocks), within the launch's share
# of the registers: CTAs of 256 x 160 (160 accumulators in 168 registers) compiled without spills in every transform;
# 256 x 192 spilled 4-36 bytes in two-tile Stream-K (ptxas, sm_90a, CUDA 13). A sweep of 87 sources with ptxas -v
# (2026-12-05) found 6 at the 168-register cap spilling 8-36 bytes: two-tile Stream-K and split-K of 128 x 256 CTAs on
# clusters (2a) or in a ragged tile order, and swapped CTAs of 256 x 128 and 224 x 128 (8 bytes, stored once after
# the mainloop: the default path's 437x6448x104). Not timed. CTAs of 384 rows (three warpgroups) compiled, but
# failed on the H100, most likely because a CTA's A rows are one TMA box, of at most 256 rows.
SPARE_REGS_BLOCKS = 8
# ``multicast=None``: the operands a cluster shares, tried in this order (the first layout the tile fits on)
MULTICAST_ORDER = ("b", "ab", "ba", "a")
# NOTE: from this many consumer warpgroups, each releases a stage as soon as its own wgmma group retires (no group in
# flight across K steps, so one more stage of the ring is loading): the others' groups keep the tensor cores busy.
# 256 x 128 CTAs (four warpgroups) ran 2048x2048x8192 in 90.8 us instead of 103.4 and 3912x936x336 in 9.57 instead
# of 10.16; with two warpgroups it moved 128 x 128 CTAs by -2.5% to +0.7% (H100, docs/benchmarks.md).
EARLY_RELEASE_CONSUMERS = 4
# NOTE: a ring stage's A region takes at least this many bytes. Swapped CTAs of 16 to 56 rows (A regions of 2-7 KB)
# ran a K step in 185-192 ns, with the TMA loads or without them, against 111-129 ns for 64 to 112 rows; the same
# 40-row CTA with its A regions 8 KB apart ran in 111 ns without loads and 160x512x4096 in 12.4 us instead of
# 15.4 (H100, docs/benchmarks.md). What sets it is the stride between the stages, not the bytes wgmma reads.
A_STAGE_MIN_BYTES = 8192


def reduction_launch(layout: dict[str, int]) -> tuple[int, int, int, int]:
    """Threads, shared memory, cluster size and CTAs per workgroup of a kernel that loads no tiles
    (:meth:`~lowering.cuda.emit.hopper.HopperEmitter._reduction_kernel`)."""
    return 128, 0, 1, layout["CLUSTER"] * layout["R_PIECES"]


def d_tail_box(layout: dict[str, int]) -> tuple[int, int, int]:
    """``(rows, columns, swizzle bytes)`` of the D boxes that end a CTA's tile where it is not whole 64 x 64
    boxes (``D_TAIL``): swapped, ``D_TAIL`` rows of 64 columns in the 128-byte swizzle; else ``D_ROWS`` rows of
    ``D_TAIL`` columns, unswizzled (a row of fewer than 64 halves is no swizzle span)."""
    if layout["SWAP"]:
        return layout["D_TAIL"], 64, 128
    return layout["D_ROWS"], layout["D_TAIL"], 0


def swizzle_bytes(bk: int) -> int:
    """The TMA / wgmma swizzle span of A's K-major rows: one row of ``BK`` halves."""
    return 2 * bk


def launch_registers(block: int) -> int:
    """Registers per thread a CTA of ``block`` threads gets at launch (``__launch_bounds__(block, 1)``): its
    share of the register file in multiples of 8, at most 255."""
    return min(255, REGISTERS // block // 8 * 8)


def register_split(consumers: int) -> tuple[int, int]:
    """``setmaxnreg`` targets ``(producer, consumer)`` for one producer and ``consumers`` math warpgroups.

    ``setmaxnreg.inc`` only takes registers that the CTA's own warps gave back, so the split must fit the
    CTA's launch allocation: ``128*P + 128*c*R <= BLOCK * launch_registers(BLOCK)`` with ``P, R`` multiples
    of 8 in ``[24, 256]`` (else the consumers wait for registers forever). The producer keeps 40 (its one
    thread runs the index math) unless the consumers need those registers, then 24. One consumer gets
    ``(40, 256)``, two ``(40, 232)``, three ``(24, 160)``, four ``(24, 112)``.
    """
    block = 128 * (consumers + 1)
    pool = block * launch_registers(block) // 128  # registers per thread of a warpgroup, summed over warpgroups
    for producer in (40, 24):
        consumer = min(256, (pool - producer) // consumers // 8 * 8)
        if consumer >= 160 or producer == 24:
            return producer, consumer
    raise AssertionError("unreachable")


def accumulator_budget(consumers: int) -> int:
    """Registers a consumer thread may spend: ptxas compiles the whole kernel under the launch's share of
    the register file (:func:`launch_registers`); ``setmaxnreg`` moves registers at run time, not at
    compile time."""
    return min(register_split(consumers)[1], launch_registers(128 * (consumers + 1)))


def row_blocks(side_m: int, side_n: int, swap: bool, pingpong: bool, most: int = 2) -> int:
    """64-row blocks of the CTA tile per consumer warpgroup: 1, or 2 where one block per warpgroup does not fit the
    registers and two do (at most ``most``; not swapped, not ping-pong; ``side_m`` a multiple of 128).

    With one block, ``c = side_m/64`` warpgroups each hold ``side_n/2`` accumulators a thread; a 256 x 160 CTA needs
    four warpgroups of 80 and 32 spare registers, over the 96 a thread of a 640-thread CTA is launched with. Two
    warpgroups of two blocks hold 160 accumulators within the 168 of a 384-thread CTA: each issues one wgmma per
    block and K step from the same B descriptor. cuBLAS runs CTAs of 256 x 160 and 256 x 192 (in our orientation)
    on corpus shapes where it leads us most (git show 688fa90:docs/bench/cublas-kernels.txt). On the H100,
    960x5168x6224 in 512 x 160 tiles on pairs of such CTAs that share B ran 0.93x cuBLAS, against 0.88x on the
    layout measured before; 8192^3, 4096^3 and three other corpus shapes ran slower on them than on their own
    (docs/benchmarks.md). Selection offers them (one CTA of 256 x 144 or 256 x 160, or clusters of them) past a
    short K (``ctgraph.select.candidates.tall_wide``); a caller may ask for them (``macro_tile=(512, 160, 64),
    cluster=2``)."""
    if most == 1 or swap or pingpong or side_m % 128 or accumulators_fit(1, side_m // 64, side_n):
        return 1
    return 2 if accumulators_fit(2, side_m // 128, side_n) else 1


def accumulators_fit(blocks: int, consumers: int, side_n: int) -> bool:
    """Whether ``consumers`` warpgroups of ``blocks`` 64-row blocks of ``side_n`` columns hold their accumulators
    in a thread's registers: one block (1 to 4 warpgroups) with :data:`SPARE_REGS` within
    :func:`accumulator_budget`, two (1 or 2 warpgroups) with :data:`SPARE_REGS_BLOCKS` within the launch's share."""
    if not 1 <= consumers <= (4 if blocks == 1 else 2):  # CTAs of at most 256 rows: one TMA box of A
        return False
    if blocks == 1:
        return side_n // 2 + SPARE_REGS <= accumulator_budget(consumers)
    return blocks * side_n // 2 + SPARE_REGS_BLOCKS <= launch_registers(128 * (consumers + 1))


@dataclass(frozen=True)
class HopperPlan:
    """Tile constants of the wgmma kernel; each field, upper-cased, is a ``constexpr int`` of the source (booleans as
    0 or 1), in this order (:meth:`constants`)."""

    bm: int
    bn: int
    bk: int
    cluster: int
    cta_m: int
    cta_n: int
    cluster_m: int
    cluster_n: int
    swap: bool
    consumers: int
    threads: int  # one CTA tile's math threads: fixup, epilogue, the partials' layout
    pingpong: bool  # two warpgroups of THREADS take the work units in turn
    warpgroups: int  # the CTA's math warpgroups: CONSUMERS, twice that with PINGPONG
    block: int  # + the producer warpgroup
    # the cluster's warp grid: warp w of CTA (i, j) is warp 4*c*i + w along m, and warp column j
    wm: int
    wn: int
    ni: int
    nacc: int
    blocks: int  # 64-row blocks of the CTA tile per consumer warpgroup (row_blocks), NACC / BLOCKS each
    stages: int
    early_release: bool
    a_stage: int
    b_stage: int
    stage_bytes: int
    a_share: int
    swizzle: int
    producer_regs: int
    consumer_regs: int
    # a partial tile through the ring: each stage's A and B regions hold FIX_EA and FIX_EB (multiples of 4) of
    # every consumer thread's accumulators (laid out as in the workspace), FIX_CHUNKS stages the whole partial
    fix_ea: int
    fix_eb: int
    fix_chunks: int
    # a staged D box: 64 columns x D_ROWS rows; a CTA's rows (swapped) or columns that are not a multiple of
    # 64 end in a box of D_TAIL rows or columns, stored through a second tensor map (tmDt, d_tail_box)
    d_rows: int
    d_tail: int
    d_stage: int  # halves of one staging buffer
    d_buffers: int
    defer_d: bool  # D boxes stored one per K step of the next tile (HopperEmitter._epilogue_deferred)
    r_pieces: int  # CTAs of the reduction kernel per CTA of a workgroup
    smem_bytes: int  # + slack to align the ring to 1024 bytes

    def constants(self) -> dict[str, int]:
        """``{"BM": ..., "SMEM_BYTES": ...}``: the fields as the source's constants and the runtime's layout."""
        return {f.name.upper(): int(getattr(self, f.name)) for f in dataclasses.fields(self)}


@dataclass(frozen=True)
class CtaTile:
    """A workgroup's ``cluster_m x cluster_n`` grid of CTAs, each owning ``cta_m x cta_n`` of the macro tile."""

    cluster_m: int
    cluster_n: int
    cta_m: int
    cta_n: int


def cta_tile(macro_tile: tuple[int, int, int], cluster: int, multicast: str) -> CtaTile:
    """Cluster grid -> CTA tile: ``CLUSTER_M x CLUSTER_N = cluster_grid(CLUSTER, multicast)``,
    ``CTA_M = BM / CLUSTER_M``, ``CTA_N = BN / CLUSTER_N`` (floored; :func:`check_fit` asks for exact)."""
    cm, cn = cluster_grid(cluster, multicast)
    return CtaTile(cm, cn, macro_tile[0] // cm, macro_tile[1] // cn)


def orientation(cta: CtaTile, swap: bool | None) -> tuple[bool, int, int]:
    """``(swap, side_m, side_n)``: wgmma's 64-row side (a warpgroup each) and its N side, ``(CTA_M, CTA_N)``, or
    ``(CTA_N, CTA_M)`` when swapped (``D^T = B^T A^T``); ``swap=None`` swaps exactly when ``CTA_M % 64 != 0``."""
    swap = cta.cta_m % 64 != 0 if swap is None else swap
    return (swap, cta.cta_n, cta.cta_m) if swap else (swap, cta.cta_m, cta.cta_n)


def math_warpgroups(
    macro_tile: tuple[int, int, int], side_m: int, side_n: int, swap: bool, pingpong: bool, cm: int, most: int
) -> tuple[int, int, int]:
    """``(blocks, consumers, warpgroups)``: ``BLOCKS = row_blocks(...)`` 64-row blocks per consumer warpgroup,
    ``CONSUMERS = side_m / (64 * BLOCKS)`` warpgroups per CTA tile, ``WARPGROUPS = CONSUMERS`` (ping-pong: twice
    that, and ``CONSUMERS = 1``, else ``ValueError``)."""
    blocks = row_blocks(side_m, side_n, swap, pingpong, most)
    consumers = side_m // (64 * blocks)
    if pingpong and consumers > 1:
        raise ValueError(
            f"pingpong runs CTA tiles of one consumer warpgroup: 64 rows ({64 * cm} x N macro tiles on this cluster "
            f"grid), or swapped 64 columns; got macro_tile {macro_tile} with {consumers} warpgroups a CTA tile"
        )
    return blocks, consumers, 2 * consumers if pingpong else consumers


def check_fit(
    macro_tile: tuple[int, int, int],
    dtype: str,
    opts: CudaOptions,
    cta: CtaTile,
    sides: tuple[bool, int, int],
    warps: tuple[int, int, int],
) -> None:
    """``ValueError`` (:func:`_misfit`) unless: float16; ``side_m % 64 == 0``; 1 to 4 consumers; ``BK`` in (32, 64);
    ``CLUSTER_M * CLUSTER_N = CLUSTER`` dividing the macro tile; ``side_n`` a wgmma N; ``(BK / CLUSTER_M) % 8 == 0``
    (each CTA's share of B's k-rows: whole swizzle atoms); accumulators that fit the registers."""
    bm, bn, bk = macro_tile
    cm, cn = cta.cluster_m, cta.cluster_n
    swap, side_m, side_n = sides
    blocks, consumers, warpgroups = warps
    fits = dtype == "float16" and side_m % 64 == 0 and 1 <= consumers <= 4 and bk in (32, 64)
    fits = fits and cm * cn == opts.cluster
    fits = fits and side_n in (WGMMA_SWAP_N if swap else WGMMA_N) and bm % cm == 0 and bn % cn == 0
    fits = fits and bk // cm % 8 == 0
    fits = fits and accumulators_fit(blocks, warpgroups, side_n)
    if not fits:
        raise ValueError(_misfit(macro_tile, dtype, (cm, cn), opts.multicast or "", swap))


def registers(warpgroups: int, blocks: int, side_n: int, pingpong: bool) -> tuple[int, int, int, bool]:
    """``(PRODUCER_REGS, CONSUMER_REGS, NACC, DEFER_D)``: the ``setmaxnreg`` split (:func:`register_split`),
    ``NACC = BLOCKS * side_n / 2`` accumulators per consumer thread, and whether the D of a tile, packed to fp16
    (``NACC/2`` registers), is stored under the next tile's mainloop: ``3*NACC/2 + SPARE_REGS <= CONSUMER_REGS``,
    one block, not ping-pong (which overlaps its epilogues with the other warpgroup instead).

    NOTE: the budget is the consumers' setmaxnreg share: ptxas allocates past the launch's share in the branch
    after setmaxnreg.inc (a 128 x 256 CTA's consumers use registers up to R210 of 232, no spills; sm_90a, CUDA 13;
    its two-tile Stream-K in a ragged tile order spills 32 bytes, above)."""
    producer_regs, consumer_regs = register_split(warpgroups)
    nacc = blocks * side_n // 2
    defer = not pingpong and blocks == 1 and nacc * 3 // 2 + SPARE_REGS <= consumer_regs
    return producer_regs, consumer_regs, nacc, defer


@dataclass(frozen=True)
class Ring:
    """The ring's shared memory: ``stages`` of ``a_stage + b_stage`` halves, each receiving ``stage_bytes``; the
    staged D boxes (``staging`` bytes) and the mbarriers (``barriers`` bytes)."""

    a_share: int
    a_stage: int
    b_stage: int
    stage_bytes: int
    stages: int
    staging: int
    barriers: int
    stride: int

    @property
    def smem_bytes(self) -> int:
        """``1024 + STAGES * stride + staging + barriers``: the 1024 is slack to align the ring to 1024 bytes."""
        return 1024 + self.stages * self.stride + self.staging + self.barriers


def ring(bk: int, cta: CtaTile, warpgroups: int, pingpong: bool) -> Ring:
    """Pipeline stages -> shared memory.

    A CTA loads ``A_SHARE = ceil(CTA_M / (8*CLUSTER_N)) * 8`` of its grid row's ``CTA_M`` rows of A (whole swizzle
    atoms; the last share overlaps the one before where CLUSTER_N does not divide CTA_M into them, so a stage
    receives ``CLUSTER_N * A_SHARE`` rows). B arrives in whole 64-column chunks, ``b_cols = ceil(CTA_N/64) * 64``
    (where ``CTA_N % 64 != 0``, not swapped, the last chunk's columns past CTA_N are loaded and not read), so
    ``STAGE_BYTES = 2 * (CLUSTER_N * A_SHARE * BK + BK * b_cols)``. A's region is rounded up to 1024 bytes (B's
    swizzle atoms stay aligned) and at least :data:`A_STAGE_MIN_BYTES`. Barriers: full and empty per stage,
    ping-pong's two turns and the watchdog's, ``16*MAX_STAGES + 16*PINGPONG + 8``; staging: ``D_BUFFERS`` 64 x 64
    boxes of halves per math warpgroup; ``STAGES = min(MAX_STAGES, (SMEM_LIMIT - 1024 - barriers - staging) /
    stride)`` with ``stride = 2 * (A_STAGE + B_STAGE)``."""
    cta_m, cta_n, cn = cta.cta_m, cta.cta_n, cta.cluster_n
    a_share = -(-cta_m // (8 * cn)) * 8
    b_cols = -(-cta_n // 64) * 64
    stage = (cn * a_share * bk + bk * b_cols) * 2
    a_stage = max(-(-cta_m * bk // 512) * 512, A_STAGE_MIN_BYTES // 2)
    barriers = 16 * MAX_STAGES + 16 * pingpong + 8
    staging = warpgroups * D_BUFFERS * 64 * 64 * 2
    stride = a_stage * 2 + bk * b_cols * 2
    stages = min(MAX_STAGES, (SMEM_LIMIT - 1024 - barriers - staging) // stride)
    return Ring(a_share, a_stage, bk * b_cols, stage, stages, staging, barriers, stride)


def fixup_chunks(bk: int, cta: CtaTile, consumers: int, nacc: int) -> tuple[int, int, int]:
    """``(FIX_EA, FIX_EB, FIX_CHUNKS)``: the accumulators per consumer thread that one stage's A and B regions hold
    (``2 * CTA_M * BK`` and ``2 * BK * CTA_N`` bytes over ``4 * 128 * CONSUMERS``, in whole float4s of the
    workspace), and the stages a whole partial takes, ``ceil(NACC / (FIX_EA + FIX_EB))``."""
    fix_a, fix_b = (x * 2 // (4 * 128 * consumers) // 4 * 4 for x in (cta.cta_m * bk, bk * cta.cta_n))
    return fix_a, fix_b, -(-nacc // (fix_a + fix_b))


def epilogue_boxes(cta: CtaTile, swap: bool) -> tuple[int, int]:
    """``(D_ROWS, D_TAIL)``: staged D boxes of 64 columns x ``D_ROWS = min(64, CTA_M)`` rows; the box that ends a
    CTA's rows (swapped: ``CTA_M % D_ROWS``) or columns (``CTA_N % 64``) where they are not whole boxes."""
    d_rows = min(64, cta.cta_m)
    return d_rows, cta.cta_m % d_rows if swap else cta.cta_n % 64


def hopper_plan(macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions, most_blocks: int = 2) -> HopperPlan:
    """The wgmma kernel's plan; ``ValueError`` when the macro tile does not fit it.

    A workgroup runs on ``CLUSTER = opts.cluster`` CTAs (``0``: the fewest that fit; with ``multicast=None``
    the first of :data:`MULTICAST_ORDER` that fits: B shared, else a 2-D grid, else A shared), a
    ``CLUSTER_M x CLUSTER_N`` grid of CTAs that each own ``CTA_M x CTA_N`` of the macro tile, split over ``c =
    CTA_M/64`` consumer warpgroups (1 to 4; swapped, ``CTA_N/64``). Every consumer thread holds ``CTA_N/2``
    (swapped: ``CTA_M/2``) fp32 accumulators, which must fit its share of registers (:func:`accumulator_budget`):
    ``CTA_N <= 256`` for ``CTA_M <= 128``, ``CTA_N <= 192`` for ``CTA_M = 192``, ``CTA_N <= 128`` for ``CTA_M = 256``.
    Where one 64-row block per warpgroup does not fit and two do (:func:`row_blocks`, at most ``most_blocks``),
    ``c = CTA_M/128`` warpgroups hold ``CTA_N`` accumulators each: ``CTA_N <= 160`` for ``CTA_M = 256``
    (:data:`SPARE_REGS_BLOCKS`). ``cluster=0`` takes the fewest CTAs on which the tile fits one block a
    warpgroup, and only where none does, two.
    """
    if opts.multicast is None or opts.cluster == 0:  # the fewest CTAs, then the first of MULTICAST_ORDER, that fit
        clusters = CLUSTERS[1:] if opts.cluster == 0 else (opts.cluster,)
        multicasts = MULTICAST_ORDER if opts.multicast is None else (opts.multicast,)
        errors = {}
        for most, cluster, multicast in itertools.product((1, most_blocks), clusters, multicasts):
            if multicast in ("ab", "ba") and cluster < 4:
                continue  # 2 x cluster/2 grids need 4 CTAs at least
            try:
                return hopper_plan(
                    macro_tile, dtype, dataclasses.replace(opts, cluster=cluster, multicast=multicast), most
                )
            except ValueError as e:
                errors[most, cluster, multicast] = e
        first = next(iter(errors.values()))
        raise errors.get((most_blocks, clusters[0], multicasts[0]), first)
    bm, bn, bk = macro_tile
    cta = cta_tile(macro_tile, opts.cluster, opts.multicast)
    swap, side_m, side_n = sides = orientation(cta, opts.swap)
    blocks, consumers, warpgroups = warps = math_warpgroups(
        macro_tile, side_m, side_n, swap, opts.pingpong, cta.cluster_m, most_blocks
    )
    check_fit(macro_tile, dtype, opts, cta, sides, warps)
    producer_regs, consumer_regs, nacc, defer = registers(warpgroups, blocks, side_n, opts.pingpong)
    r = ring(bk, cta, warpgroups, opts.pingpong)
    fix_ea, fix_eb, fix_chunks = fixup_chunks(bk, cta, consumers, nacc)
    d_rows, d_tail = epilogue_boxes(cta, swap)
    return HopperPlan(
        bm=bm,
        bn=bn,
        bk=bk,
        cluster=opts.cluster,
        cta_m=cta.cta_m,
        cta_n=cta.cta_n,
        cluster_m=cta.cluster_m,
        cluster_n=cta.cluster_n,
        swap=swap,
        consumers=consumers,
        threads=128 * consumers,
        pingpong=opts.pingpong,
        warpgroups=warpgroups,
        block=128 * (warpgroups + 1),
        wm=bm // 16,
        wn=cta.cluster_n,
        ni=cta.cta_n // 8,
        nacc=nacc,
        blocks=blocks,
        stages=r.stages,
        early_release=consumers >= EARLY_RELEASE_CONSUMERS,
        a_stage=r.a_stage,
        b_stage=r.b_stage,
        stage_bytes=r.stage_bytes,
        a_share=r.a_share,
        swizzle=swizzle_bytes(bk),
        producer_regs=producer_regs,
        consumer_regs=consumer_regs,
        fix_ea=fix_ea,
        fix_eb=fix_eb,
        fix_chunks=fix_chunks,
        d_rows=d_rows,
        d_tail=d_tail,
        d_stage=64 * 64,
        d_buffers=D_BUFFERS,
        defer_d=defer,
        r_pieces=consumers * nacc // 4,
        smem_bytes=r.smem_bytes,
    )


def hopper_layout(
    macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions, most_blocks: int = 2
) -> dict[str, int]:
    """Tile constants of the wgmma kernel (:func:`hopper_plan` as a dict); ``ValueError`` when the macro tile does
    not fit it."""
    return hopper_plan(macro_tile, dtype, opts, most_blocks).constants()


def _widest(ns: tuple[int, ...], side_m: int, swap: bool) -> int:
    """The widest wgmma N side of ``ns`` whose accumulators fit a CTA whose wgmma M side is ``side_m``."""
    blocks = (1, 2) if not swap and side_m % 128 == 0 else (1,)
    return max(n for n in ns if any(accumulators_fit(b, side_m // (64 * b), n) for b in blocks))


def _misfit(macro_tile: tuple[int, int, int], dtype: str, grid: tuple[int, int], multicast: str, swap: bool) -> str:
    """Why ``macro_tile`` does not fit the wgmma kernel: the tiles it takes on these options."""
    m_of, n_of = grid
    cluster = m_of * n_of
    if swap:  # BN: 64 columns per consumer warpgroup; BM: wgmma's N side
        rows = f"BM a multiple of {8 * m_of}"
        cols = f"BN in {tuple(64 * c * n_of for c in range(1, 5))}"
        sizes = [(f"BN={64 * c * n_of}", "BM", m_of, WGMMA_SWAP_N, 64 * c) for c in range(1, 5)]
    else:  # one or two 64-row blocks per consumer warpgroup (row_blocks): 64 to 256 rows
        heights = [64, 128, 192, 256]
        rows = f"BM in {tuple(h * m_of for h in heights)}"
        cols = f"BN a multiple of {16 * n_of} up to {256 * n_of}"
        sizes = [(f"BM={h * m_of}", "BN", n_of, WGMMA_N, h) for h in heights]
    fit = ", ".join(f"{tile}: {side}<={scale * _widest(ns, h, swap)}" for tile, side, scale, ns, h in sizes)
    return (
        f"the wgmma mainloop takes float16 with {rows} (cluster={cluster}, multicast={multicast!r}, swap={swap}), "
        f"{cols} and BK in (32, 64), with accumulators that fit the registers ({fit}); got macro_tile "
        f"{macro_tile}, {dtype}"
    )
