"""The Hopper (sm_90a) lowering of the control graph: TMA + mbarrier pipeline, ``wgmma``, warp specialization.

The same control graph as the ``mma.sync`` path (:mod:`lowering.cuda.codegen`), printed twice into one
kernel, once per role:

- **producer** (warpgroup 0, one thread, ``setmaxnreg.dec``): runs the workgroup's loops and, for each K
  iteration, waits until ring stage ``s`` is free, arms ``full[s]`` with the stage's byte count and
  issues the TMA box copies of the A and B tiles. Of the fixup it runs only the receiving side: it waits on
  another workgroup's flag and bulk-copies that partial into the next ring stages. It skips the epilogue,
  so it runs ahead into the next tile while the consumers finish the last one. A K loop the control graph
  shows to run at least once (:meth:`ctgraph.control.ControlGraph.enters`) gets its first boxes before its
  trip count.
- **consumers** (``CONSUMERS`` warpgroups, ``setmaxnreg.inc``): run the same loops; for each K iteration
  they wait on ``full[s]``, issue ``BK/16`` ``wgmma.m64nBNk16`` (warpgroup ``c`` owns rows
  ``64c .. 64c+63`` of the tile; with ``BLOCKS = 2``, rows ``128c .. 128c+127`` and a wgmma per 64-row block,
  :func:`row_blocks`), and release the stage of the *previous* iteration on ``empty[s]``
  once its wgmma group has retired (one group stays in flight); four warpgroups (``EARLY_RELEASE``) wait for
  their own group and release its stage at once, since the others' groups keep the tensor cores busy. The
  fixup is the control graph's, with a named barrier over the consumer threads instead of ``__syncthreads``,
  and partials to add read from the ring stages the producer filled (:meth:`HopperCodegen._consume_partial`);
  the epilogue stages D in shared memory and stores it with TMA (:meth:`HopperCodegen._epilogue_tma`), so the
  store of one tile runs on under the next tile's mainloop. Where ``NACC/2`` more registers fit (``DEFER_D``)
  the epilogue only packs D to fp16 registers, and the next tile's K loop stages and stores one box per K step
  under that step's wgmma group (:meth:`HopperCodegen._epilogue_deferred`).
- **watchdog** (warp 1's first thread; :meth:`HopperCodegen._watchdog`): the mbarrier waits are bare ``try_wait``
  loops, unbounded; this thread sleeps on ``done_``, which the producer and every math thread arrive on as they
  finish, and traps if the CTA has not finished ``WATCHDOG_NS`` after it began, so a phase that never completes is
  an error, not a hang. The other threads of warpgroup 0 leave at once.

Both roles step one ring position ``ring_`` (iteration ``it``, its stage ``it % STAGES`` and that stage's phase
``(it / STAGES) & 1``, kept by increments) through the same sequence of iterations, so they agree without any other
communication. The producer is one thread whose index math per K iteration is serial; with small tiles it, not the
tensor cores, sets the pace, so its loop carries the stage and phase, and ``k`` as ``k0_`` plus the loop counter
(:func:`k_start`), instead of dividing again each iteration.

A kernel that loads no tiles (split-K's reduction) has no ring and no roles: each CTA of a workgroup is spread
over ``R_PIECES`` CTAs of 128 threads, each adding one float4 of every partial and storing its four elements of D
(:meth:`HopperCodegen._reduction_kernel`).

Every entry point waits for the previous kernel in the stream (``griddepcontrol.wait``) before it touches global
memory, so it may be launched with programmatic dependent launch and set up under that kernel's tail
(:meth:`HopperCodegen._dependent_launch`, ``CudaOptions.pdl``).

**Clusters** (``CLUSTER`` = 2, 4 or 8): a workgroup is a cluster of CTAs that run the same program (``wg = blockIdx.x
/ CLUSTER``), laid out as a ``CLUSTER_M x CLUSTER_N`` grid: CTA ``r`` is ``(i, j) = (r % CLUSTER_M, r / CLUSTER_M)``
and computes rows ``i*CTA_M ..`` and columns ``j*CTA_N ..`` of the macro tile. ``multicast="b"`` is a column of CTAs
(``CLUSTER x 1``), ``"a"`` a row (``1 x CLUSTER``), ``"ab"`` a ``2 x CLUSTER/2`` grid, ``"ba"`` a ``CLUSTER/2 x 2``
one. The CTAs of a grid row need the same rows of A, those of a grid column the same columns of B: each producer
loads ``A_SHARE`` of its row's A rows and ``BK/CLUSTER_M`` k-rows of every B chunk of its column, multicast into the
same stage of the CTAs that share them, so ``full[s]`` of each CTA still receives ``STAGE_BYTES``. A stage is then
written by several producers of the cluster, so ``empty[s]`` counts the consumer warpgroups of the whole cluster and
each consumer arrives on the ``empty[s]`` of every CTA. Each CTA keeps its own slice of a workspace slot and its own
flags, so the fixup needs no traffic between the CTAs. A cluster barrier after the mbarriers are initialised makes
them ready for the whole cluster; before exit, each producer waits until the consumers of the whole cluster have
released the ring's last ``STAGES`` fills (the *producer tail*): then no CTA still reads what it multicast nor arrives
on its barriers, and its shared memory may go (a second cluster barrier there cost ~0.6 us). Per K iteration a CTA reads
``A_SHARE`` rows of A and ``BK/CLUSTER_M`` of B's k-rows from the L2, not ``CTA_M`` and ``BK``: that matters most
when A's or B's rows do not start on 128-byte lines, where each row costs two L2 lines and the L2, not the tensor
cores, bounds the CTAs (:mod:`ctgraph.select`).

**Ping-pong** (``PINGPONG``, ``opts.pingpong``; CTA tiles of one consumer warpgroup): two consumer warpgroups take the
work units in turn, unit ``u`` (an iteration of a loop of the kernel's body: a tile, or a piece of one with its
fixup) on warpgroup ``u % 2``, each with a whole CTA tile in its accumulators (``tid_`` is the thread's place in its
warpgroup, ``wg_`` the warpgroup). The producer is unchanged. The warpgroup whose turn it is not prints the unit as
the producer sees it (:meth:`HopperCodegen._unit`): it finds the K loop's trip count and steps its ring position
over the unit's stages without waiting on them. An mbarrier per warpgroup (``turn_``) orders the units: a warpgroup
starts on the ring only once the unit before has read its last stage and handed over (before its epilogue or its
partial store), so one warpgroup's epilogue runs under the other's mainloop, and a stage's parity is never waited
on more than one lap ahead of the producer (where it could not tell the laps apart).

Shared memory per stage: A as ``CTA_M`` rows of ``BK`` halves (K-major; ``2*BK``-byte swizzle, so a row is one
swizzle span) and B as ``ceil(CTA_N/64)`` column chunks of ``BK`` rows x 64 halves (MN-major, 128-byte swizzle;
wgmma's N = ``CTA_N``, any multiple of 16, reads part of the last chunk where it is not a multiple of 64, and the
epilogue ends the CTA's columns in a box of ``D_TAIL = CTA_N % 64``).
Descriptors: A ``SBO = 8 rows x 2*BK`` bytes, k16 step = +32 bytes; B ``LBO = chunk = 128*BK`` bytes,
``SBO = 1024`` (8 k-rows), k16 step = +16 rows = 2048 bytes. TMA zero-fills boxes outside the tensor, so
partial tiles and ``k % BK != 0`` need no masks. The accumulator of thread ``t`` (warp ``w = t/32``) holds
element ``e`` at row ``16w + lane/4 + 8*[e&2]`` and column ``8*(e/4) + 2*(lane%4) + (e&1)``: the
``mma.sync`` fragment order with a ``(BM/16) x 1`` warp grid, so partials and epilogue are shared.

**Swapped** (``SWAP``: ``opts.swap``, by default when ``CTA_M`` is not a multiple of 64), the kernel computes
``D^T = B^T A^T`` from the same ring: warpgroup ``c`` takes B's chunk ``c`` (64 columns) as wgmma's A operand,
MN-major (``imm-trans-a = 1``), and all ``CTA_M`` rows of the A stage as its B operand, K-major, so wgmma's N
side is ``CTA_M``, any multiple of 8 up to 256 (cuBLAS's layout for row-major operands). Warp ``w`` of the
consumers then holds columns ``16w + lane/4 (+8)`` and element pairs ``(e, e+1)`` two adjacent rows
``8*(e/4) + 2*(lane%4)``: the epilogue writes them transposed with ``stmatrix .trans`` into boxes of
64 rows x 64 columns and, where ``CTA_M`` is not a multiple of 64, a last box of its ``D_TAIL = CTA_M % 64``
rows (a second tensor map, ``tmDt``; boxes of the largest row count dividing ``CTA_M`` made 29 boxes of 8 rows
of a 232-row CTA, whose epilogue then took ~4 us more, H100). The A stage is padded to 1024 bytes so that B's
swizzle atoms stay aligned, and to at least :data:`A_STAGE_MIN_BYTES` (a swapped CTA of fewer than 64 rows, or
``BK = 32``); ``STAGE_BYTES`` counts only the boxes.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import sympy

from ctgraph import control as C
from ctgraph.expr import Mod
from ctgraph.select.config import cluster_grid

from .codegen import _Codegen
from .options import CLUSTERS, CudaOptions
from .ptx import WGMMA_N, WGMMA_SWAP_N, render

__all__ = [
    "HopperCodegen",
    "accumulator_budget",
    "accumulators_fit",
    "hopper_layout",
    "launch_registers",
    "loads_tiles",
    "reduction_launch",
    "register_split",
    "row_blocks",
    "swizzle_bytes",
]

SMEM_LIMIT = 227 * 1024  # opt-in shared memory per CTA on sm_90
WATCHDOG_NS = 20 * 10**9  # a CTA that has not finished after this long traps: its mbarrier waits are bare loops
MAX_STAGES = 8
D_BUFFERS = 2  # staged D boxes per consumer warpgroup: one is filled while TMA stores the other
R_UNROLL = 8  # the reduction kernel's loop over the partials, unrolled: loads in flight per thread
REGISTERS = 64 * 1024  # 32-bit registers per SM: the producer and consumer warpgroups share them
SPARE_REGS = 32  # registers a consumer thread needs besides its BN/2 accumulators (descriptors, indices)
# NOTE: the same where each of two consumer warpgroups holds two 64-row blocks (row_blocks), within the launch's share
# of the registers: CTAs of 256 x 160 (160 accumulators in 168 registers) compile without spills in every transform;
# 256 x 192 spilled 4-36 bytes in two-tile Stream-K (ptxas, sm_90a, CUDA 13). CTAs of 384 rows (three warpgroups)
# compiled, but failed on the H100, most likely because a CTA's A rows are one TMA box, of at most 256 rows.
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


def loads_tiles(cg: C.ControlGraph, tag: int) -> bool:
    """Does node ``tag`` (a kernel: else it only adds partials, split-K's reduction) load tiles below it?"""
    return any(isinstance(cg[t], C.LoadTile) for t, _ in cg.walk(tag))


def k_start(value: sympy.Expr, counter: sympy.Symbol) -> sympy.Expr | None:
    """The K iteration a K loop's assignment ``value`` gives at ``counter = 0``, where ``value`` advances by one per
    iteration (``value = start + counter``); None where it may not.

    Two forms do: ``X + counter`` (split-K's chunks), and ``(X + counter) mod N`` (the Stream-K and data-parallel
    iteration spaces, ``N`` the K iterations of a tile). For the second, a K loop runs while its tile is the same
    (the trip count is where the tile changes, :meth:`_Codegen._trip_count`), and the tile is a function of
    ``floor((X + counter) / N)``, so that floor is fixed and ``(X + counter) mod N = (X mod N) + counter``."""
    if counter not in value.free_symbols:
        return None
    if isinstance(value, Mod) and counter not in (value.args[0] - counter).free_symbols:
        return Mod(value.args[0] - counter, value.args[1])
    rest = sympy.expand(value - counter)
    return rest if counter not in rest.free_symbols else None


def reduction_launch(layout: dict[str, int]) -> tuple[int, int, int, int]:
    """Threads, shared memory, cluster size and CTAs per workgroup of a kernel that loads no tiles
    (:meth:`HopperCodegen._reduction_kernel`)."""
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
    on corpus shapes where it leads us most (docs/bench/cublas-kernels.txt). On the H100, 960x5168x6224 in 512 x 160
    tiles on pairs of such CTAs that share B ran 0.93x cuBLAS, against 0.88x on the tuning table's layout; 8192^3,
    4096^3 and three other corpus shapes ran slower on them than on their own (docs/benchmarks.md). The tile model
    does not price them; ``tune --layouts`` times them where their tiles make about one wave
    (:func:`ctgraph.tune.block_layouts`), or a caller asks for them (``macro_tile=(512, 160, 64), cluster=2``)."""
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


def hopper_layout(
    macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions, most_blocks: int = 2
) -> dict[str, int]:
    """Tile constants of the wgmma kernel; ``ValueError`` when the macro tile does not fit it.

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
                return hopper_layout(
                    macro_tile, dtype, dataclasses.replace(opts, cluster=cluster, multicast=multicast), most
                )
            except ValueError as e:
                errors[most, cluster, multicast] = e
        first = next(iter(errors.values()))
        raise errors.get((most_blocks, clusters[0], multicasts[0]), first)
    bm, bn, bk = macro_tile
    cluster = opts.cluster
    cm, cn = cluster_grid(cluster, opts.multicast)  # CLUSTER_M x CLUSTER_N CTAs
    cta_m, cta_n = bm // cm, bn // cn
    swap = cta_m % 64 != 0 if opts.swap is None else opts.swap
    # wgmma's 64-row side (a warpgroup each) and its N side: (m, n), or (n, m) when swapped
    side_m, side_n = (cta_n, cta_m) if swap else (cta_m, cta_n)
    blocks = row_blocks(side_m, side_n, swap, opts.pingpong, most_blocks)
    consumers = side_m // (64 * blocks)
    if opts.pingpong and consumers > 1:
        raise ValueError(
            f"pingpong runs CTA tiles of one consumer warpgroup: 64 rows ({64 * cm} x N macro tiles on this cluster "
            f"grid), or swapped 64 columns; got macro_tile {macro_tile} with {consumers} warpgroups a CTA tile"
        )
    warpgroups = 2 * consumers if opts.pingpong else consumers  # the CTA's math warpgroups
    fits = dtype == "float16" and side_m % 64 == 0 and 1 <= consumers <= 4 and bk in (32, 64) and cm * cn == cluster
    fits = fits and side_n in (WGMMA_SWAP_N if swap else WGMMA_N) and bm % cm == 0 and bn % cn == 0
    fits = fits and bk // cm % 8 == 0  # each CTA's share of B's k-rows: whole swizzle atoms
    fits = fits and accumulators_fit(blocks, warpgroups, side_n)
    if not fits:
        raise ValueError(_misfit(macro_tile, dtype, (cm, cn), opts.multicast, swap))
    producer_regs, consumer_regs = register_split(warpgroups)
    # the D of a tile, packed to fp16 (NACC/2 registers), is stored under the next tile's mainloop where those
    # registers fit beside the accumulators; ping-pong overlaps its epilogues with the other warpgroup instead.
    # NOTE: the budget is the consumers' setmaxnreg share: ptxas allocates past the launch's share in the branch
    # after setmaxnreg.inc (a 128 x 256 CTA's consumers use registers up to R210 of 232, no spills; sm_90a, CUDA 13)
    nacc = blocks * side_n // 2  # accumulators per consumer thread
    defer = not opts.pingpong and blocks == 1 and nacc * 3 // 2 + SPARE_REGS <= consumer_regs
    # a CTA loads A_SHARE of its grid row's CTA_M rows of A (whole swizzle atoms; the last share overlaps the one
    # before where CLUSTER_N does not divide CTA_M into them, so a stage receives CLUSTER_N * A_SHARE rows)
    a_share = -(-cta_m // (8 * cn)) * 8
    # B arrives in whole 64-column chunks: where CTA_N % 64 != 0 (not swapped) the last chunk's columns past
    # CTA_N are loaded (the next tile's, or zeros past n) and not read
    b_cols = -(-cta_n // 64) * 64
    stage = (cn * a_share * bk + bk * b_cols) * 2  # the bytes each CTA's stage receives
    # A's region: rounded up to 1024 bytes (B's swizzle atoms stay aligned), and at least A_STAGE_MIN_BYTES
    a_stage = max(-(-cta_m * bk // 512) * 512, A_STAGE_MIN_BYTES // 2)
    # full and empty per stage, ping-pong's two turns, and the watchdog's
    barriers = 16 * MAX_STAGES + 16 * opts.pingpong + 8
    staging = warpgroups * D_BUFFERS * 64 * 64 * 2  # the epilogue's D boxes: two per consumer warpgroup
    stride = a_stage * 2 + bk * b_cols * 2  # one ring stage's bytes of shared memory
    stages = min(MAX_STAGES, (SMEM_LIMIT - 1024 - barriers - staging) // stride)
    # accumulators per consumer thread that one stage's A and B regions hold, in whole float4s of the workspace
    fix_a, fix_b = (x * 2 // (4 * 128 * consumers) // 4 * 4 for x in (cta_m * bk, bk * cta_n))
    return {
        "BM": bm,
        "BN": bn,
        "BK": bk,
        "CLUSTER": cluster,
        "CTA_M": cta_m,
        "CTA_N": cta_n,
        "CLUSTER_M": cm,
        "CLUSTER_N": cn,
        "SWAP": int(swap),
        "CONSUMERS": consumers,
        "THREADS": 128 * consumers,  # one CTA tile's math threads: fixup, epilogue, the partials' layout
        "PINGPONG": int(opts.pingpong),  # two warpgroups of THREADS take the work units in turn
        "WARPGROUPS": warpgroups,  # the CTA's math warpgroups: CONSUMERS, twice that with PINGPONG
        "BLOCK": 128 * (warpgroups + 1),  # + the producer warpgroup
        # the cluster's warp grid: warp w of CTA (i, j) is warp 4*c*i + w along m, and warp column j
        "WM": bm // 16,
        "WN": cn,
        "NI": cta_n // 8,
        "NACC": nacc,
        "BLOCKS": blocks,  # 64-row blocks of the CTA tile per consumer warpgroup (row_blocks), NACC / BLOCKS each
        "STAGES": stages,
        "EARLY_RELEASE": int(consumers >= EARLY_RELEASE_CONSUMERS),
        "A_STAGE": a_stage,
        "B_STAGE": bk * b_cols,
        "STAGE_BYTES": stage,
        "A_SHARE": a_share,
        "SWIZZLE": swizzle_bytes(bk),
        "PRODUCER_REGS": producer_regs,
        "CONSUMER_REGS": consumer_regs,
        # a partial tile through the ring: each stage's A and B regions hold FIX_EA and FIX_EB (multiples of 4) of
        # every consumer thread's accumulators (laid out as in the workspace), FIX_CHUNKS stages the whole partial
        "FIX_EA": fix_a,
        "FIX_EB": fix_b,
        "FIX_CHUNKS": -(-nacc // (fix_a + fix_b)),
        # a staged D box: 64 columns x D_ROWS rows; a CTA's rows (swapped) or columns that are not a multiple of
        # 64 end in a box of D_TAIL rows or columns, stored through a second tensor map (tmDt, d_tail_box)
        "D_ROWS": min(64, cta_m),
        "D_TAIL": cta_m % min(64, cta_m) if swap else cta_n % 64,
        "D_STAGE": 64 * 64,  # halves of one staging buffer
        "D_BUFFERS": D_BUFFERS,
        "DEFER_D": int(defer),  # D boxes stored one per K step of the next tile (HopperCodegen._epilogue_deferred)
        "R_PIECES": consumers * nacc // 4,  # CTAs of the reduction kernel per CTA of a workgroup
        "SMEM_BYTES": 1024 + stages * stride + staging + barriers,  # + slack to align the ring to 1024 bytes
    }


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


class HopperCodegen(_Codegen):
    sync = "bar_sync(1, THREADS);"  # the math threads of one CTA tile (ping-pong: this warpgroup's, _kernel)
    role = "consumer"  # whose program is being printed: _role_body sets it per role
    reduction = False  # a kernel without tile loads: split-K's reduction (:meth:`_reduction_kernel`)
    defer = False  # D's boxes are stored under the next tile's K loop (``DEFER_D``, :meth:`_epilogue_deferred`)
    fresh = False  # the next K loop starts a tile with scale-d = 0 (:meth:`_ZeroAccumulator`, :meth:`_consume`)

    def layout(self) -> dict[str, int]:
        return hopper_layout(self.kernel.macro_tile, self.dtype, self.opts)

    def prelude(self, bodies: str) -> str:
        templates = render(self.templates)
        check = 'static_assert(BLOCK == 128 * (WARPGROUPS + 1), "one producer warpgroup, then the math warpgroups");'
        consts = self.constants(bodies + templates + check)
        return (
            "// Generated by ctgraph: do not edit. One CTA runs one workgroup of the control graph:\n"
            "// a TMA producer warpgroup and wgmma consumer warpgroups (see lowering/cuda/hopper.py).\n"
            f"// kernel {self.kernel.name}: macro tile {self.kernel.macro_tile}, {self.dtype}, {self.opts}\n"
            "#include <cuda_fp16.h>\n\n"
            "namespace ctg {\n"
            f"{consts}\n"
            f"{self._divisor_prelude()}"
            "// a CUtensorMap (cuTensorMapEncodeTiled), passed by value as a __grid_constant__ parameter\n"
            "struct alignas(64) TensorMap { unsigned long long opaque[16]; };\n"
            f"{check}\n"
            f"{templates}\n"
            "}  // namespace ctg\n\n"
        )

    def _signature(self, bounds: str) -> None:
        """The entry point's head: every kernel of the unit takes the same arguments."""
        w = self.w
        w(f'extern "C" __global__ void {bounds} {self.kernel.name}(')
        w("    const half* __restrict__ A, const half* __restrict__ B, const half* C, half* D,")
        w("    const float alpha, const float beta, float* __restrict__ workspace, unsigned* __restrict__ flags,")
        w(f"    {self._params()},")
        w("    const __grid_constant__ ctg::TensorMap tmA, const __grid_constant__ ctg::TensorMap tmB,")
        tail = ", const __grid_constant__ ctg::TensorMap tmDt" if self.L["D_TAIL"] else ""
        w(f"    const __grid_constant__ ctg::TensorMap tmD{tail})")
        w("{")
        w.depth += 1
        w("using namespace ctg;")

    def _kernel(self) -> str:
        self.reduction = not loads_tiles(self.cg, self.tag)
        self.defer = False
        self.fresh = False
        if self.L["PINGPONG"]:
            self.sync = "bar_sync(2 + wg_, THREADS);"
        if self.reduction:
            return self._reduction_kernel()
        w, k = self.w, self.kernel
        self.templates |= {"smem_addr", "bar_sync", "setmaxnreg_dec", "setmaxnreg_inc", "mbar_init", "fence_mbar_init"}
        self.templates.add("mbar_arrive")  # each role's arrival on done_ as it finishes
        self.templates.add("ring")  # both roles step a Ring through the stages
        stores = any(isinstance(self.cg[t], C.Epilogue) for t, _ in self.cg.walk(self.tag))
        clustered = self.L["CLUSTER"] > 1
        if clustered:
            self.templates |= {"cluster_rank", "cluster_sync"}
        dims = " __cluster_dims__(ctg::CLUSTER, 1, 1)" if clustered else ""
        self._signature(f"__launch_bounds__(ctg::BLOCK, 1){dims}")
        w(f"const int {k.workgroup.name} = blockIdx.x / CLUSTER;  // a workgroup is a cluster of CTAs")
        w(f"[[maybe_unused]] const unsigned cta_ = {'cluster_rank()' if clustered else '0'};  // rank in the cluster")
        w("// this CTA's row and column in the cluster's grid of CTAs")
        w("[[maybe_unused]] const unsigned cta_m_ = cta_ % CLUSTER_M, cta_n_ = cta_ / CLUSTER_M;")
        w("extern __shared__ __align__(1024) unsigned char smem_[];")
        w("// the ring: STAGES x (A tile, B tile), 1024-byte aligned (swizzle atoms), the staged D boxes,")
        w("// then full/empty mbarriers")
        w("const unsigned sA_ = (smem_addr(smem_) + 1023u) & ~1023u;")
        w("const unsigned sB_ = sA_ + STAGES * A_STAGE * 2;")
        w("[[maybe_unused]] const unsigned sD_ = sB_ + STAGES * B_STAGE * 2;")
        w("const unsigned full_ = sD_ + WARPGROUPS * D_BUFFERS * D_STAGE * 2, empty_ = full_ + STAGES * 8;")
        if self.L["PINGPONG"]:
            w("const unsigned turn_ = empty_ + STAGES * 8;")
        w("const unsigned done_ = empty_ + STAGES * 8 + 16 * PINGPONG;  // the roles' arrivals as they finish")
        self.templates.add("prefetch_tensormap")
        w.open("if (threadIdx.x == 0)")
        maps = ("tmA", "tmB", "tmD", "tmDt")[: (3 + bool(self.L["D_TAIL"])) if stores else 2]
        w(" ".join(f"prefetch_tensormap(&{m});" for m in maps) + "  // fetched while the barriers are set up")
        w.open("for (int s_ = 0; s_ < STAGES; ++s_)")
        w("mbar_init(full_ + 8 * s_, 1);  // the producer's expect_tx arrival (+ the TMA bytes)")
        w("mbar_init(empty_ + 8 * s_, CONSUMERS * CLUSTER);  // one arrival per consumer warpgroup of the cluster")
        w.close()
        if self.L["PINGPONG"]:
            w("mbar_init(turn_, 1), mbar_init(turn_ + 8, 1);  // warpgroup w's turn: the other has handed over")
        w("mbar_init(done_, 1 + 128 * WARPGROUPS);  // the producer and every math thread")
        w("fence_mbar_init();")
        w.close()
        self._dependent_launch()
        w("cluster_sync();  // all barriers of the cluster are ready" if clustered else "__syncthreads();")
        w("// warpgroup 0 produces (TMA), the others consume (wgmma, fixup, epilogue)")
        w.open("if (threadIdx.x < 128)")
        w("setmaxnreg_dec<PRODUCER_REGS>();")
        self._watchdog()
        w("if (threadIdx.x != 0) exit_thread();  // the producer is thread 0 alone")
        w("Ring ring_;  // ring position: the producer's and consumers' iterations match one for one")
        self._role_body("producer")
        if clustered:
            self._producer_tail()
        w("mbar_arrive(done_);  // finished")
        w.close()
        w.open("else")
        w("setmaxnreg_inc<CONSUMER_REGS>();")
        w("[[maybe_unused]] const int wg_ = (threadIdx.x - 128) >> 7;  // this math warpgroup")
        if self.L["PINGPONG"]:
            w("const int tid_ = (threadIdx.x - 128) & 127;  // the thread in its warpgroup's CTA tile")
            w("unsigned unit_ = 0;  // work units so far: warpgroup unit_ % 2 runs the next, the other skips it")
            w("unsigned turns_ = 0;  // turns this warpgroup has waited for: the parity of the next")
            w("bool handed_ = false;  // this warpgroup's unit has handed the ring over to the other")
        else:
            w("const int tid_ = threadIdx.x - 128;")
        self._warp_coords()
        w("Ring ring_;")
        self.defer = stores and bool(self.L["DEFER_D"])
        if stores:
            w("unsigned box_ = 0;  // D boxes staged so far: box_ % D_BUFFERS is the next staging buffer")
        if self.defer:
            w("unsigned pk_[NACC / 2];  // the last tile's D, alpha*acc + beta*C in fp16 pairs, until its boxes go")
            w("int pend_ = 0, di_ = 0, dj_ = 0;  // its boxes left to store and its origin (i0_, j0_)")
        w("float acc[NACC];")
        self._role_body("consumer")
        if self.defer:
            self._flush_boxes()
        if stores:
            # NOTE: .read suffices: shared memory must outlive the stores' reads of it; their global writes
            # complete before the grid does (visible to the next kernel, as after any store).
            w("if ((tid_ & 127) == 0) bulk_wait_read<0>();  // the last D boxes are read before shared memory goes")
        w("mbar_arrive(done_);  // finished")
        w.close()
        w.depth -= 1
        w("}")
        return "\n".join(w.lines) + "\n"

    def _watchdog(self) -> None:
        """Warp 1's first thread watches the CTA (:data:`WATCHDOG_NS`); the rest of warpgroup 0 but the producer
        leaves. Only exits part the producer from the others: a branch taken by some threads of warp 0 would leave
        the producer on a divergent path, where ptxas keeps its loop's values in vector registers and moves them to
        uniform ones for each TMA and barrier (48 ``R2UR`` against 26 at 4096^3; it undid what the bare waits gained,
        docs/benchmarks.md). So warp 1's branch is on a warp index ptxas sees to be warp-uniform, and the threads
        that do not produce ``exit`` instead of branching past the producer."""
        self.templates |= {"watchdog", "warp_index", "exit_thread"}
        self.w.open("if (warp_index() == 1)")
        self.w(f"if (threadIdx.x == 32) watchdog(done_, {WATCHDOG_NS}ull);  // traps if this CTA never finishes")
        self.w("exit_thread();")
        self.w.close()

    def _producer_tail(self) -> None:
        """Before a clustered CTA exits: wait as for STAGES more fills, i.e. until the consumers of every CTA have
        released each stage's last fill (``empty[s]`` counts them all). The other CTAs' multicasts into this one and
        their consumers' arrivals on its barriers have then landed, and they have read all it multicast to them."""
        w = self.w
        w("// the producer tail: every stage's last fill released by the whole cluster, so shared memory may go")
        w.open("for (int t_ = 0; t_ < STAGES; ++t_, ring_.next())")
        self._wait_released("ring_.stage")
        w.close()

    def _wait_released(self, stage: str) -> None:
        """The producer, at ring position ``ring_`` (stage ``stage``): wait until the consumers have released the
        stage's previous fill (none in the ring's first lap)."""
        self.templates.add("mbar_wait")
        wait = f"mbar_wait(empty_ + 8 * {stage}, ring_.phase ^ 1);"
        self.w(f"if (ring_.it >= STAGES) {wait}  // the consumers released this stage")

    # NOTE: the reduction kernel was one 384-thread CTA per cluster CTA, like the main kernel: with few tiles a
    # handful of SMs read every partial (256x256x65536, 4 tiles of 128 x 128 in 33 chunks: 24 us for 8.6 MB).

    def _reduction_kernel(self) -> str:
        """A kernel that only adds finished partials and stores D (split-K's reduction): no ring, no roles.

        The work of each CTA of a workgroup is spread over ``R_PIECES = CONSUMERS * NACC / 4`` CTAs of 128
        threads, so that even a few tiles keep every SM reading. Piece ``p`` stands for the threads of consumer
        warpgroup ``c = p % CONSUMERS``, and adds only their accumulators ``4q .. 4q+3`` (``q = p / CONSUMERS``):
        float4 ``q*THREADS + tid`` of every partial, so consecutive pieces read consecutive 2 KB of a partial."""
        w, k = self.w, self.kernel
        if any(isinstance(self.cg[t], C.Wait | C.Signal) for t, _ in self.cg.walk(self.tag)):
            raise NotImplementedError("a kernel without tile loads adds finished partials: it cannot wait on flags")
        self.nacc, self.first_acc = "4", "e0_"
        self._signature("__launch_bounds__(128)")
        self._dependent_launch()
        w(f"const int {k.workgroup.name} = blockIdx.x / (CLUSTER * R_PIECES);")
        w("const int piece_ = blockIdx.x % R_PIECES;")
        w("// the cluster CTA whose partials' slice this is: its row and column in the cluster's grid of CTAs")
        w("[[maybe_unused]] const unsigned cta_ = blockIdx.x / R_PIECES % CLUSTER;")
        w("[[maybe_unused]] const unsigned cta_m_ = cta_ % CLUSTER_M, cta_n_ = cta_ / CLUSTER_M;")
        w("const int tid_ = piece_ % CONSUMERS * 128 + threadIdx.x;  // the consumer thread ...")
        w("const int e0_ = piece_ / CONSUMERS * 4;  // ... and which of its accumulators: acc[e_] is its e0_ + e_")
        self._warp_coords()
        w(f"float acc[{self.nacc}];")
        self._role_body("consumer")
        w.depth -= 1
        w("}")
        return "\n".join(w.lines) + "\n"

    def _dependent_launch(self) -> None:
        """Programmatic dependent launch (``CudaOptions.pdl``): wait for the previous kernel in the stream to finish.
        Everything above touches no global memory (the tensor maps are parameters)."""
        # NOTE: no griddepcontrol.launch_dependents: the next kernel launches once this one's CTAs have exited.
        # Triggered at the start, its CTAs took the SMs this grid left idle and waited there, and kernels with idle
        # SMs and long K ran 0.81-0.94x (1416x280x1136, 240x1488x2312, 256x256x65536), where waiting alone runs
        # 1.01-1.03x; tiny kernels gained 1.2x with the trigger and 1.1x without (H100, docs/bench/pdl-probes.txt).
        self.templates.add("griddep_wait")
        self.w("griddep_wait();  // the previous kernel has finished and its writes are visible")

    def _warp_coords(self) -> None:
        """Consumer thread ``tid_``'s lane and warp in the cluster's warp grid: what its accumulators' rows and
        columns (:meth:`_acc_coords`) are read from."""
        self.w("[[maybe_unused]] const int lane_ = tid_ & 31;")
        self.w("[[maybe_unused]] const int warp_m_ = cta_m_ * 4 * CONSUMERS + (tid_ >> 5), warp_n_ = cta_n_;")

    def _role_body(self, role: str) -> None:
        """The control graph's program for one role, after declarations of the variables it uses."""
        self.role, w = role, self.w
        start = len(w.lines)
        self._body(self.tag)
        used = set(re.findall(r"\w+", "\n".join(w.lines[start:])))
        decls = [f"{'    ' * w.depth}int {s.name} = 0;" for s in sorted(self._variables(), key=lambda s: s.name)]
        w.lines[start:start] = [d for d in decls if d.split()[1] in used]

    # --- the producer prints only what leads to the ring: tile loads and partials to add ---------------

    def _feeds_ring(self, tag: int) -> bool:
        return any(isinstance(self.cg[t], C.LoadTile | C.AccumulatePartial) for t, _ in self.cg.walk(tag))

    def _skeleton(self) -> bool:
        """Is only the ring's side of the program being printed: the producer's, or a skipped unit's (ping-pong)?"""
        return self.role in ("producer", "skip")

    def _ForLoop(self, tag: int, node: C.ForLoop) -> None:
        if self._skeleton() and not self._feeds_ring(tag):
            return
        if self.reduction:  # the loop over the partials: several loads in flight per thread
            self.w(f"#pragma unroll {R_UNROLL}")
        super()._ForLoop(tag, node)

    def _loop_body(self, tag: int) -> None:
        if self.role == "consumer" and self.L["PINGPONG"] and not self.reduction and self.cg.parent(tag) == self.tag:
            self._unit(tag)
        else:
            super()._loop_body(tag)

    def _unit(self, tag: int) -> None:
        """Ping-pong: each iteration of a loop of the kernel's body is a work unit (a tile, or a piece of one with its
        fixup). The two consumer warpgroups take them in turn; the one whose turn it is not steps its ring position
        over the unit's stages (the producer's view of the unit, :meth:`_skeleton`) and goes on to the next."""
        w = self.w
        self.templates |= {"mbar_wait", "mbar_arrive"}
        w.open("if (unit_++ % 2 == wg_)")
        w("if (unit_ > 1) mbar_wait(turn_ + 8 * wg_, turns_++ & 1);  // the unit before has read all its stages")
        w("handed_ = false;")
        self._body(tag)
        self._hand_over()
        w.close()
        w.open("else")
        self.role = "skip"
        self._body(tag)
        self.role = "consumer"
        w.close()

    def _hand_over(self) -> None:
        """Ping-pong: the unit has waited for the last of its ring stages (its K iterations and partials to add), so
        the other warpgroup may start on the next unit's: before this unit's epilogue or partial store, or at its end.
        One warpgroup at a time waits on the ring, and never more than one lap ahead of the producer, which the
        stages' parities could not tell apart."""
        if self.role == "consumer" and self.L["PINGPONG"]:
            self.w("if (!handed_ && tid_ == 0) mbar_arrive(turn_ + 8 * (wg_ ^ 1));  // the other warpgroup's turn")
            self.w("handed_ = true;")

    def _If(self, tag: int, node: C.If) -> None:
        if self._skeleton() and not self._feeds_ring(tag):
            return
        super()._If(tag, node)

    def _Assign(self, tag: int, node: C.Assign) -> None:
        if self._skeleton() and node.target not in self._producer_needs():
            return
        super()._Assign(tag, node)

    def _producer_needs(self) -> set[sympy.Symbol]:
        """Symbols the producer's loops, box origins and partials' slots and flags depend on (transitively
        through assignments)."""
        if not hasattr(self, "_needs"):
            nodes = [self.cg[t] for t, _ in self.cg.walk(self.tag)]
            needs: set[sympy.Symbol] = set()
            for t, _ in self.cg.walk(self.tag):
                node = self.cg[t]
                if isinstance(node, C.LoadTile):
                    needs |= set().union(*(sympy.sympify(e).free_symbols for e in node.origin))
                elif isinstance(node, C.AccumulatePartial):
                    needs |= sympy.sympify(node.slot).free_symbols
                elif isinstance(node, C.Wait | C.Signal):
                    needs |= sympy.sympify(node.flag).free_symbols
                elif isinstance(node, C.ForLoop | C.If) and self._feeds_ring(t):
                    exprs = [node.condition] if isinstance(node, C.If) else [node.init, node.condition, node.increment]
                    needs |= set().union(*(sympy.sympify(e).free_symbols for e in exprs))
            assigns = [n for n in nodes if isinstance(n, C.Assign)]
            while True:
                more = set().union(*(n.value.free_symbols for n in assigns if n.target in needs)) - needs
                if not more:
                    break
                needs |= more
            self._needs = needs
        return self._needs

    def _slot(self, slot: sympy.Expr) -> str:
        """CTA ``r`` of a cluster keeps its ``THREADS x NACC`` accumulators at offset ``r*THREADS*NACC``."""
        return f"{super()._slot(slot)} + cta_ * (THREADS * NACC)"

    def _flag(self, flag: sympy.Expr) -> str:
        """Flags interleaved by CTA rank: flag ``f`` of CTA ``r`` is ``flags[f*CLUSTER + r]``."""
        return f"flags + ({self.cxx(flag)}) * CLUSTER + cta_"

    def _consumer_only(self, tag: int, node: C.Node) -> None:
        if self.role == "consumer":
            getattr(super(), f"_{type(node).__name__}")(tag, node)

    def _ZeroAccumulator(self, tag: int, node: C.ZeroAccumulator) -> None:
        """Zeroing ``NACC`` registers sits between a tile's epilogue and its first wgmma. Where the K loop that comes
        next runs at least once (:meth:`ctgraph.control.ControlGraph.enters`: every K loop of the transforms), its
        first wgmma takes scale-d = 0 instead (``fresh``, :meth:`_consume`) and nothing is zeroed, as CUTLASS's
        mainloops do. (At 4096^3 the two ran level within the noise, 0.998x cuBLAS each, H100.)"""
        if self.role != "consumer":
            return
        parent = self.cg.parent(tag)
        body = self.cg.body(parent) if parent is not None else [tag]
        after = body[body.index(tag) + 1] if body[-1] != tag else None
        if after is not None and self._is_mainloop(after) and self.cg.enters(after):
            self.fresh = True
            self.w("// acc: the K loop below runs at least once, and its first wgmma ignores acc (scale-d = 0)")
            return
        super()._ZeroAccumulator(tag, node)

    # NOTE: the workspace holds a partial as float4s, thread-major: accumulators 4q .. 4q+3 of consumer thread t at
    # float4 q*THREADS + t, so one 16-byte store moves four accumulators (issuing a 64 x 128 CTA's 32 KB partial: 581
    # -> 262 clocks; publishing it still waits ~2400 for the stores to land: .gpu/fix2.py, H100). Accumulators
    # [e0, e0 + 4j) of every thread stay one contiguous run, which is what the ring's bulk copies take.

    def _StorePartial(self, tag: int, node: C.StorePartial) -> None:
        if self.role != "consumer":
            return
        self._hand_over()
        self.w.open("")
        self.w(f"float4* ws_ = reinterpret_cast<float4*>({self._slot(node.slot)});")
        self.w("#pragma unroll")
        self.w("for (int q_ = 0; q_ < NACC / 4; ++q_)")
        self.w("    ws_[q_ * THREADS + tid_] = make_float4(acc[4*q_], acc[4*q_ + 1], acc[4*q_ + 2], acc[4*q_ + 3]);")
        self.w.close()

    def _add_partial_from_registers(self, node: C.AccumulatePartial) -> None:
        """``acc += partial`` straight from the workspace, one float4 (:meth:`_reduction_kernel`)."""
        self.w(f"const float4 v_ = reinterpret_cast<const float4*>({self._slot(node.slot)})[e0_ / 4 * THREADS + tid_];")
        self.w("acc[0] += v_.x; acc[1] += v_.y; acc[2] += v_.z; acc[3] += v_.w;")

    # --- the fixup: another workgroup's partial comes to the consumers through the ring ----------------
    #
    # NOTE: ``acc += workspace`` from registers is bound by latency: the accumulators leave a thread ~30 free
    # registers, so a 128 x 256 CTA had ~30 KB in flight and took ~9 us per 128 KB partial on the H100
    # (.gpu probe, 4096^3). The producer instead copies the partial into FIX_CHUNKS ring stages with bulk
    # copies (no registers hold them), right after the tile's last K boxes, so it lands under the mainloop.

    def _Wait(self, tag: int, node: C.Wait) -> None:
        if self.role == "producer":
            self.templates.add("fence_proxy_async_global")
            self.w.open("")
            self._spin(node)
            self.w.close()
            self.w("fence_proxy_async_global();  // the partial it released is read by the bulk copies")
        # the consumers wait for the partial's stages to land

    def _Signal(self, tag: int, node: C.Signal) -> None:
        if node.value:
            self._consumer_only(tag, node)
        elif self.role == "producer":  # the reset: the flag has been seen by the one who waits on it
            self.templates.add("st_relaxed")
            self.w(f"st_relaxed({self._flag(node.flag)}, 0u);  // reset for the next launch")

    def _AccumulatePartial(self, tag: int, node: C.AccumulatePartial) -> None:
        if self.reduction:
            self._add_partial_from_registers(node)
        elif self.role == "skip":
            self.w("ring_.advance(FIX_CHUNKS);  // another warpgroup's partial")
        elif self.role == "producer":
            self._produce_partial(node)
        else:
            self._consume_partial(node)

    def _produce_partial(self, node: C.AccumulatePartial) -> None:
        """Copy the partial, ``THREADS x NACC`` floats as float4s thread-major, into the next FIX_CHUNKS ring stages:
        accumulators ``[c*(FIX_EA+FIX_EB), +FIX_EA)`` into stage ``c``'s A region, the next FIX_EB into B's."""
        w = self.w
        self.templates |= {"mbar_wait", "mbar_expect_tx", "bulk_load"}
        w.open("")
        w(f"const float* ws_ = {self._slot(node.slot)};")
        w("#pragma unroll 1")
        w.open("for (int c_ = 0; c_ < FIX_CHUNKS; ++c_, ring_.next())")
        w("const unsigned s_ = ring_.stage;")
        self._wait_released("s_")
        w("const int e0_ = c_ * (FIX_EA + FIX_EB), ea_ = min(FIX_EA, NACC - e0_);")
        w("const int eb_ = max(0, min(FIX_EB, NACC - e0_ - FIX_EA));")
        w("mbar_expect_tx(full_ + 8 * s_, (ea_ + eb_) * THREADS * 4);")
        if self.L["FIX_EA"]:
            w("bulk_load(sA_ + s_ * A_STAGE * 2, ws_ + e0_ * THREADS, ea_ * THREADS * 4, full_ + 8 * s_);")
        w.open("if (eb_ > 0)")
        w("bulk_load(sB_ + s_ * B_STAGE * 2, ws_ + (e0_ + FIX_EA) * THREADS, eb_ * THREADS * 4, full_ + 8 * s_);")
        w.close()
        w.close()
        w.close()

    def _consume_partial(self, node: C.AccumulatePartial) -> None:
        """``acc += partial`` from the FIX_CHUNKS ring stages the producer fills; each warpgroup releases a
        stage once all its threads have read it."""
        w = self.w
        self.templates |= {"mbar_wait", "ld_shared_v4_f32"}
        w.open("")
        w("#pragma unroll")
        w.open("for (int c_ = 0; c_ < FIX_CHUNKS; ++c_, ring_.next())")
        w("const unsigned s_ = ring_.stage;")
        w("mbar_wait(full_ + 8 * s_, ring_.phase);  // the partial's bytes have landed")
        w("#pragma unroll")
        w.open("for (int e_ = 0; e_ < FIX_EA + FIX_EB && c_ * (FIX_EA + FIX_EB) + e_ < NACC; e_ += 4)")
        w("const unsigned at_ = e_ < FIX_EA ? sA_ + s_ * A_STAGE * 2 + (e_ * THREADS + 4 * tid_) * 4")
        w("                                 : sB_ + s_ * B_STAGE * 2 + ((e_ - FIX_EA) * THREADS + 4 * tid_) * 4;")
        w("const float4 v_ = ld_shared_v4_f32(at_);")
        w("const int q_ = c_ * (FIX_EA + FIX_EB) + e_;")
        w("acc[q_] += v_.x; acc[q_ + 1] += v_.y; acc[q_ + 2] += v_.z; acc[q_ + 3] += v_.w;")
        w.close()
        w("bar_sync(2 + wg_, 128);  // the warpgroup has read the stage")
        w(self._release("empty_ + 8 * s_"))
        w.close()
        w.close()

    def _Epilogue(self, tag: int, node: C.Epilogue) -> None:
        if self.role != "consumer":
            return
        if self.reduction:  # a kernel without a ring stores from registers
            if self.L["SWAP"]:  # element pairs (e, e+1) lie along a column: no half2 stores
                self._epilogue_scalar(node, *self._acc_coords())
            else:
                super()._Epilogue(tag, node)
            return
        self._hand_over()
        self._epilogue_tma(node)

    def _acc_coords(self) -> tuple[str, str]:
        """Tile row and column of accumulator element ``e_``; swapped, the fragment is D^T's: warp ``w`` of the
        consumers holds columns ``16w + lane/4`` (``+8`` for ``e & 2``) and elements ``(e, e+1)`` two adjacent
        rows ``8*(e/4) + 2*(lane%4)``."""
        e = self._acc_element()
        if not self.L["SWAP"] and self.L["BLOCKS"] > 1:  # block e / (NACC / BLOCKS) of the warpgroup's rows
            row = (
                f"cta_m_ * CTA_M + ((tid_ >> 7) * BLOCKS + {e} / (NACC / BLOCKS)) * 64 + ((tid_ >> 5) & 3) * 16"
                f" + (lane_ >> 2) + (({e} & 2) ? 8 : 0)"
            )
            return row, f"cta_n_ * CTA_N + ({e} % (NACC / BLOCKS) / 4) * 8 + (lane_ & 3) * 2 + ({e} & 1)"
        if not self.L["SWAP"]:
            return super()._acc_coords()
        row = f"cta_m_ * CTA_M + ({e} / 4) * 8 + (lane_ & 3) * 2 + ({e} & 1)"
        col = f"cta_n_ * CTA_N + (tid_ >> 5) * 16 + (lane_ >> 2) + (({e} & 2) ? 8 : 0)"
        return row, col

    def _epilogue_tma(self, node: C.Epilogue) -> None:
        """``D = alpha*acc + beta*C`` through shared memory: each consumer warpgroup writes its 64 rows (swapped:
        its 64 columns, :meth:`_stage_box_swapped`) as fp16 into 64 x 64 (swapped: D_ROWS x 64) boxes laid out
        as TMA's 128-byte swizzle (16-byte unit ``u`` of row ``r`` at unit ``u ^ (r % 8)``: a warp's 8 rows hit
        distinct banks), and one thread stores each box with TMA, which clips it at D's edges, so partial tiles
        need no masks. The store runs on while the warpgroup goes on to the next box (two buffers) and the
        next tile's mainloop; with ``DEFER_D`` even the boxes' staging does (:meth:`_epilogue_deferred`)."""
        w = self.w
        self.templates |= {"bulk_wait_read", "bulk_commit", "tma_store_2d", "fence_proxy_async"}
        if len(node.origin) != 2:
            raise NotImplementedError("the TMA epilogue needs the box origin of the D tile")
        row0, col0 = node.origin
        w.open("")
        di, dj = " + cta_m_ * CTA_M", " + cta_n_ * CTA_N"  # the CTA's offset in the macro tile
        if self.L["SWAP"]:  # this warpgroup's 64 columns, in boxes of D_ROWS rows (the last: D_TAIL)
            w(f"const int i0_ = {self.cxx(row0)}{di}, j0_ = {self.cxx(col0)}{dj} + 64 * (tid_ >> 7);")
        else:  # this warpgroup's 64 rows (BLOCKS x 64), in boxes of 64 columns (the last: D_TAIL)
            rows = self._warpgroup_rows()
            w(f"const int i0_ = {self.cxx(row0)}{di} + {rows} * (tid_ >> 7), j0_ = {self.cxx(col0)}{dj};")
        if self.defer:
            self._epilogue_deferred(node)
        else:
            blocks = self.L["BLOCKS"] > 1
            if blocks:  # block b_'s boxes: its 64 rows, accumulators from b_ * (NACC / BLOCKS)
                w("#pragma unroll")
                w.open("for (int b_ = 0; b_ < BLOCKS; ++b_)")
            w("#pragma unroll")
            w.open(f"for (int c_ = 0; c_ < {self._boxes()}; ++c_)")
            self._store_box(node, "i0_ + 64 * b_" if blocks else "i0_", "j0_")
            w.close()
            if blocks:
                w.close()
        w.close()

    def _warpgroup_rows(self) -> str:
        """The rows of the CTA tile a consumer warpgroup owns (not swapped): its ``BLOCKS`` 64-row blocks."""
        return "BLOCKS * 64" if self.L["BLOCKS"] > 1 else "64"

    def _boxes(self) -> str:
        """The D boxes of a warpgroup's part of the CTA tile: 64-column chunks (:meth:`_column_chunks`), or swapped
        ``D_ROWS``-row ones; a last, narrower box where ``D_TAIL`` is set."""
        if self.L["SWAP"]:
            return "CTA_M / D_ROWS + 1" if self.L["D_TAIL"] else "CTA_M / D_ROWS"
        return self._column_chunks()

    def _store_box(self, node: C.Epilogue | None, i0: str, j0: str) -> None:
        """Stage box ``c_`` of a warpgroup's part of the tile at ``(i0, j0)`` in the next staging buffer and store
        it with TMA. ``node`` gives C for ``beta != 0``; None stages the packed ``pk_`` (``DEFER_D``)."""
        w, swap = self.w, self.L["SWAP"]
        if swap:
            origin, tmap = f"{j0}, {i0} + D_ROWS * c_", "c_ < CTA_M / D_ROWS ? &tmD : &tmDt"
        else:
            origin, tmap = f"{j0} + 64 * c_, {i0}", "c_ < CTA_N / 64 ? &tmD : &tmDt"
        w("const unsigned buf_ = sD_ + (wg_ * D_BUFFERS + box_++ % D_BUFFERS) * D_STAGE * 2;")
        w("if ((tid_ & 127) == 0) bulk_wait_read<D_BUFFERS - 1>();  // this buffer's last store has read it")
        w("bar_sync(2 + wg_, 128);  // this warpgroup's named barrier")
        stage = self._stage_box_swapped if swap else self._stage_box
        row, col = self._acc_coords()
        if node is None:
            stage(None, row, col, packed=True)
        else:
            # NOTE: two copies of the box loop, so that beta == 0 (the common case) runs none of C's index math
            w.open("if (beta != 0.f)")
            stage(node, row, col)
            w.close()
            w.open("else")
            stage(None, row, col)
            w.close()
        w("fence_proxy_async();  // the box is visible to TMA")
        w("bar_sync(2 + wg_, 128);")
        w.open("if ((tid_ & 127) == 0)")
        w(f"tma_store_2d({tmap if self.L['D_TAIL'] else '&tmD'}, buf_, {origin});")
        w("bulk_commit();")
        w.close()

    def _epilogue_deferred(self, node: C.Epilogue) -> None:
        """``DEFER_D``: pack ``alpha*acc + beta*C`` into fp16 pairs ``pk_[e/2] = (D(e), D(e+1))`` and leave the
        boxes to the next K loop, which stages and stores one per K step while that step's wgmma group runs
        (:meth:`_store_pending_box`); what it leaves is stored at the next epilogue or when the work runs out
        (:meth:`_flush_boxes`). The tensor cores then wait at a tile's end only for the pack, not for the staging:
        4096^3 in 256 x 256 tiles ran 0.7% faster (H100, docs/benchmarks.md). Kernels of one tile a workgroup and a
        few microseconds ran up to 7% slower (0.2-0.3 us): the boxes of a workgroup's last tile wait for its tile
        loop's condition, whose index math runs first (128 x 128 x 32 tiles; on the tiles ``auto`` picks, finding
        "last tile" under the first K step's wgmma group and storing its boxes at once moved nothing, H100)."""
        w = self.w
        self._flush_boxes()  # the last tile's boxes its next K loop had no steps left for
        row, col = self._acc_coords()
        # NOTE: a copy per case, so that beta == 0 runs none of C's index math, and alpha == 1 (the common case;
        # bit-identical) no multiplies between the tile's last wgmma and the next tile's first
        w.open("if (beta != 0.f)")
        self._pack(node, row, col)
        w.close()
        w.open("else if (alpha == 1.f)")
        self._pack(None, row, col, scaled=False)
        w.close()
        w.open("else")
        self._pack(None, row, col)
        w.close()
        w(f"pend_ = {self._boxes()}, di_ = i0_, dj_ = j0_;")

    def _pack(self, node: C.Epilogue | None, row: str, col: str, scaled: bool = True) -> None:
        """``pk_[q] = fp16x2(alpha*acc[2q] + beta*C, alpha*acc[2q+1] + beta*C)``, C where ``node`` gives it
        (``scaled=False``: ``acc`` as it is, for ``alpha == 1``)."""
        w = self.w
        w("#pragma unroll")
        w.open("for (int q_ = 0; q_ < NACC / 2; ++q_)")
        self._pair(node, row, col, "2 * q_", scaled)
        w("pk_[q_] = *reinterpret_cast<const unsigned*>(&h2_);")
        w.close()

    def _pair(self, node: C.Epilogue | None, row: str, col: str, first: str, scaled: bool = True) -> None:
        """``h2_ = fp16x2(v(first), v(first + 1))``: accumulators ``first`` and ``first + 1`` as :meth:`_element`
        gives them, rounded to a pair of halves."""
        w = self.w
        w("float v_[2];")
        w("#pragma unroll")
        w.open("for (int x_ = 0; x_ < 2; ++x_)")
        w(f"const int e_ = {first} + x_;")
        self._element(node, row, col, scaled)
        w.close()
        w("const __half2 h2_ = __floats2half2_rn(v_[0], v_[1]);")

    def _element(self, node: C.Epilogue | None, row: str, col: str, scaled: bool = True) -> None:
        """``v_[x_] = alpha*acc[e_]`` (``scaled=False``: ``acc[e_]``), ``+ beta*C`` at accumulator ``e_``'s row
        and column where ``node`` gives C's address and mask."""
        w = self.w
        w(f"v_[x_] = {'alpha * ' if scaled else ''}acc[e_];")
        if node is not None:
            i, j = node.row, node.col
            w(f"const int {i.name} = {row}, {j.name} = {col};")
            w(f"if ({self.cxx(node.mask)}) v_[x_] += beta * __half2float(C[{self.cxx(node.address)}]);")

    def _store_pending_box(self) -> None:
        """In the K loop, after a step's wgmma group is issued: stage and store the next of the last tile's boxes
        (``DEFER_D``). The loop over the boxes is unrolled so that ``pk_`` is indexed by constants (registers)."""
        self.w("// one box of the last tile's D, staged and stored under this step's wgmma group")
        self._pending_boxes("==", "--pend_;")

    def _flush_boxes(self) -> None:
        """Stage and store the last tile's boxes left (``DEFER_D``)."""
        self.w("// the last tile's boxes left")
        self._pending_boxes(">=", "pend_ = 0;")

    def _pending_boxes(self, which: str, then: str) -> None:
        """The last tile's boxes ``c_`` with ``c_ {which} boxes - pend_`` (its next, or all it has left), staged and
        stored from ``pk_``; then ``then`` (what ``pend_`` becomes)."""
        w, boxes = self.w, self._boxes()
        w.open("if (pend_ > 0)")
        w("#pragma unroll")
        w.open(f"for (int c_ = 0; c_ < {boxes}; ++c_)")
        w.open(f"if (c_ {which} ({boxes}) - pend_)")
        self._store_box(None, "di_", "dj_")
        w.close()
        w.close()
        w(then)
        w.close()

    def _stage_box(self, node: C.Epilogue | None, row: str, col: str, packed: bool = False) -> None:
        """Write box ``c_`` of this thread's accumulators, ``alpha*acc`` (``+ beta*C`` where ``node`` gives C's
        address and mask; ``packed``: the pairs :meth:`_pack` left in ``pk_``), as fp16 into staging buffer ``buf_``
        in TMA's 128-byte swizzle. Each ``stmatrix.x4``
        stores two 8-column groups ``g, g+1`` of the warp's 16 rows as four 8 x 8 matrices (rows 0-7 and 8-15 of
        ``g``, then of ``g+1``: accumulators ``4g .. 4g+7`` in pairs); thread ``8i + j`` addresses row ``j`` of
        matrix ``i``: row ``16w + 8*(i%2) + j``, 16-byte unit ``g%8 + i/2`` of its 128-byte row. The last box of a
        CTA whose columns are not a multiple of 64 holds ``D_TAIL`` of them, unswizzled (:func:`d_tail_box`): row
        ``r`` at ``2*D_TAIL*r`` bytes, ``D_TAIL/16`` stmatrix groups."""
        w, tail = self.w, self.L["D_TAIL"]
        self.templates.add("stmatrix_x4")
        w("#pragma unroll")
        w.open(f"for (int p_ = 0; p_ < {'(c_ < CTA_N / 64 ? 4 : D_TAIL / 16)' if tail else '4'}; ++p_)")
        w("unsigned h_[4];")
        w("#pragma unroll")
        w.open("for (int y_ = 0; y_ < 4; ++y_)")
        block = "b_ * (NACC / BLOCKS) + " if self.L["BLOCKS"] > 1 else ""
        if packed:
            w("h_[y_] = pk_[16 * c_ + 4 * p_ + y_];")
        else:
            self._pair(node, row, col, f"{block}32 * c_ + 8 * p_ + 2 * y_")
            w("h_[y_] = *reinterpret_cast<const unsigned*>(&h2_);")
        w.close()
        w("const int r_ = (tid_ & 127) / 32 * 16 + ((lane_ >> 3) & 1) * 8 + (lane_ & 7), u_ = 2 * p_ + (lane_ >> 4);")
        at = "buf_ + r_ * 128 + ((u_ ^ (r_ & 7)) << 4)"
        if tail:  # the tail box: rows of D_TAIL columns, unswizzled (d_tail_box)
            at = f"c_ < CTA_N / 64 ? {at} : buf_ + r_ * (D_TAIL * 2) + (u_ << 4)"
        w(f"stmatrix_x4({at}, h_[0], h_[1], h_[2], h_[3]);")
        w.close()

    def _stage_box_swapped(self, node: C.Epilogue | None, row: str, col: str, packed: bool = False) -> None:
        """The swapped layout's box ``c_``: rows ``D_ROWS*c_ ..`` of this warpgroup's 64 columns (``D_ROWS`` of
        them, ``D_TAIL`` in the last box of a CTA whose rows are not a multiple of 64). Each 8-row
        block is two 8 x 8 matrices of the D^T fragment (accumulators ``4q .. 4q+3``: columns ``16w ..`` and
        ``16w + 8 ..``), stored transposed by one ``stmatrix``: thread ``8i + j`` addresses row ``j`` of
        matrix ``i``, 16-byte unit ``2w + i`` of its 128-byte row, swizzled as in :meth:`_stage_box`."""
        w = self.w
        self.templates.add("stmatrix_x2_trans")
        w("#pragma unroll")
        rows = "(c_ < CTA_M / D_ROWS ? D_ROWS : D_TAIL)" if self.L["D_TAIL"] else "D_ROWS"
        w.open(f"for (int q_ = 0; q_ < {rows} / 8; ++q_)")
        w("const int r_ = 8 * q_ + (lane_ & 7), u_ = 2 * ((tid_ & 127) >> 5) + ((lane_ >> 3) & 1);")
        w("const unsigned at_ = buf_ + r_ * 128 + ((u_ ^ (r_ & 7)) << 4);")
        if packed:  # accumulators 4b .. 4b+3 of block b = c_*(D_ROWS/8) + q_: pairs pk_[2b], pk_[2b + 1]
            w("const int e_ = 4 * (c_ * (D_ROWS / 8) + q_);")
            w("stmatrix_x2_trans(at_, pk_[e_ / 2], pk_[e_ / 2 + 1]);")
            w.close()
            return
        w("float v_[4];")
        w("#pragma unroll")
        w.open("for (int x_ = 0; x_ < 4; ++x_)")
        w("const int e_ = 4 * (c_ * (D_ROWS / 8) + q_) + x_;")
        self._element(node, row, col)
        w.close()
        w("const __half2 h0_ = __floats2half2_rn(v_[0], v_[1]), h1_ = __floats2half2_rn(v_[2], v_[3]);")
        w("stmatrix_x2_trans(at_, *reinterpret_cast<const unsigned*>(&h0_), *reinterpret_cast<const unsigned*>(&h1_));")
        w.close()

    # --- the K loop ----------------------------------------------------------------------------------

    def _mainloop(self, tag: int, node: C.ForLoop) -> None:
        w = self.w
        assign, load_a, load_b, _ = (self.cg[c] for c in self.cg.body(tag))
        w.open("")
        if self.role == "producer":
            self._produce(tag, node, assign, load_a, load_b)
        elif self.role == "skip":
            self._trip_count(node)
            w(f"{node.counter.name} = count_;")
            w("ring_.advance(count_);  // another warpgroup's K iterations")
        else:
            self._trip_count(node)
            self._consume(node.counter)
        w.close()

    def _produce(self, tag: int, node: C.ForLoop, assign: C.Assign, load_a: C.LoadTile, load_b: C.LoadTile) -> None:
        """The producer's K loop. Where the control graph shows that the loop runs at least once wherever it is
        reached (:meth:`ctgraph.control.ControlGraph.enters`: every K loop of the transforms), iteration 0's
        boxes go out before the trip count is found: its serial index math (~0.3 us on the H100) then runs
        under the first load's latency instead of before it."""
        w, fk = self.w, node.counter.name
        self.templates |= {"mbar_wait", "mbar_expect_tx", "tma_load_2d"}
        for load in (load_a, load_b):
            if len(load.origin) != 2:
                raise NotImplementedError(f"the wgmma mainloop needs the box origin of the {load.tensor} tile")
        k0 = k_start(assign.value, node.counter)
        if k0 is not None:
            w(f"const int k0_ = {self.cxx(k0)};  // {assign.target.name} at {fk} = 0: it then advances with {fk}")
        first = 0
        if self.cg.enters(tag):
            first = 1
            w(f"{fk} = 0;  // the loop runs at least once here: iteration 0 goes out before the trip count")
            w.open("")
            self._produce_stage(assign, load_a, load_b, node.counter, k0)
            w.close()
            w("ring_.next();")
        self._trip_count(node)
        w("#pragma unroll 1")
        w.open(f"for ({fk} = {first}; {fk} < count_; ++{fk}, ring_.next())")
        self._produce_stage(assign, load_a, load_b, node.counter, k0)
        w.close()

    def _produce_stage(
        self, assign: C.Assign, load_a: C.LoadTile, load_b: C.LoadTile, counter: sympy.Symbol, k0: sympy.Expr | None
    ) -> None:
        """Ring stage ``ring_``: wait until it is free, arm ``full[s]`` and issue the K iteration's boxes; the K
        iteration is ``k0_ + counter`` where :func:`k_start` found its start."""
        w = self.w
        w("const unsigned s_ = ring_.stage;")
        self._wait_released("s_")
        w("mbar_expect_tx(full_ + 8 * s_, STAGE_BYTES);")
        value = assign.value if k0 is None else sympy.Symbol("k0_", integer=True) + counter
        w(f"const int {assign.target.name} = {self.cxx(value)};")
        self._load_stage(load_a.origin, load_b.origin)

    def _load_stage(self, a: tuple[sympy.Expr, ...], b: tuple[sympy.Expr, ...]) -> None:
        """One stage's boxes for CTA ``(i, j)`` of the cluster's grid: ``A_SHARE`` of its rows of A (share ``j``,
        the last one ending at ``CTA_M``), multicast to the CTAs of grid row ``i``, and ``BK/CLUSTER_M`` k-rows
        (share ``i``) of each 64-column chunk of its columns of B, multicast to the CTAs of grid column ``j``. So
        every CTA receives its rows of A and its columns of B whole from the ``CLUSTER_N + CLUSTER_M - 1`` CTAs
        it shares with; overlapping shares write the same bytes twice, and ``STAGE_BYTES`` counts both."""
        w, L, (ar, ac), (br, bc) = self.w, self.L, a, b
        cm, cn = L["CLUSTER_M"], L["CLUSTER_N"]
        a_dst, a_row = "sA_ + s_ * A_STAGE * 2", self.cxx(ar)
        if cm > 1:
            a_row += " + cta_m_ * CTA_M"
        if cn > 1:
            w("const unsigned rowsA_ = min(cta_n_ * A_SHARE, CTA_M - A_SHARE);  // this CTA's share of A's rows")
            a_dst, a_row = a_dst + " + rowsA_ * BK * 2", a_row + " + rowsA_"
            self.templates.add("tma_load_2d_multicast")
            row = sum(1 << (cm * j) for j in range(cn))  # the CTAs of grid row 0
            w(f"tma_load_2d_multicast({a_dst}, &tmA, full_ + 8 * s_, {self.cxx(ac)}, {a_row}, {row:#x}u << cta_m_);")
        else:
            w(f"tma_load_2d({a_dst}, &tmA, full_ + 8 * s_, {self.cxx(ac)}, {a_row});")
        w("#pragma unroll")
        w("// B in 64-column chunks (one 128-byte swizzle span each); this CTA loads k-rows cta_m_*BK/CLUSTER_M ..")
        w.open(f"for (int c_ = 0; c_ < {self._column_chunks()}; ++c_)")
        b_dst, b_col, b_row = "sB_ + s_ * B_STAGE * 2 + c_ * BK * 128", self.cxx(bc), self.cxx(br)
        if cn > 1:
            b_col += " + cta_n_ * CTA_N"
        b_col += " + 64 * c_"
        if cm > 1:
            b_dst, b_row = b_dst + " + cta_m_ * (BK / CLUSTER_M) * 128", b_row + " + cta_m_ * (BK / CLUSTER_M)"
            self.templates.add("tma_load_2d_multicast")
            column = "((1u << CLUSTER_M) - 1) << (cta_n_ * CLUSTER_M)"  # the CTAs of this grid column
            w(f"tma_load_2d_multicast({b_dst}, &tmB, full_ + 8 * s_, {b_col}, {b_row}, {column});")
        else:
            w(f"tma_load_2d({b_dst}, &tmB, full_ + 8 * s_, {b_col}, {b_row});")
        w.close()

    def _column_chunks(self) -> str:
        """The CTA's 64-column chunks (B's per stage, D's boxes per warpgroup): ``CTA_N / 64``, and a last one
        partly used where ``D_TAIL`` columns end the CTA's tile (not swapped)."""
        return "CTA_N / 64 + 1" if self.L["D_TAIL"] and not self.L["SWAP"] else "CTA_N / 64"

    def _release(self, bar: str) -> str:
        """One thread per consumer warpgroup arrives on stage barrier ``bar``; in a cluster every producer writes
        the stage, so it is released in every CTA."""
        if self.L["CLUSTER"] == 1:
            self.templates.add("mbar_arrive")
            return f"if ((tid_ & 127) == 0) mbar_arrive({bar});"
        self.templates.add("mbar_arrive_cluster")
        return f"if ((tid_ & 127) == 0) for (unsigned q_ = 0; q_ < CLUSTER; ++q_) mbar_arrive_cluster({bar}, q_);"

    def _consume(self, fk: sympy.Symbol) -> None:
        """The consumers' K loop. Where the accumulators were not zeroed (:meth:`_ZeroAccumulator`), each tile's
        first wgmma takes scale-d = 0: ``D = A*B`` instead of ``D = A*B + D``."""
        w, swap = self.w, self.L["SWAP"]
        wgmma = f"wgmma_swap_n{self.L['CTA_M']}" if swap else f"wgmma_n{self.L['CTA_N']}"
        self.templates |= {"mbar_wait", "smem_desc", "wgmma_fence", "wgmma_commit", "wgmma_wait", wgmma}
        # a warpgroup takes 64 rows of the A stage (BLOCKS x 64), or (swapped) one 64-column chunk of the B stage
        rows = self._warpgroup_rows()
        a_off, b_off = ("", "(tid_ >> 7) * BK * 128 + ") if swap else (f"(tid_ >> 7) * {rows} * BK * 2 + ", "")
        early = self.L["EARLY_RELEASE"]
        release = self._release(f"empty_ + 8 * {'s_' if early else 'ring_.previous()'}")
        scale_d, self.fresh = (f"{fk.name} > 0 || ks_ > 0" if self.fresh else "1"), False
        w("#pragma unroll 1")
        w.open(f"for ({fk.name} = 0; {fk.name} < count_; ++{fk.name}, ring_.next())")
        w("const unsigned s_ = ring_.stage;")
        w("mbar_wait(full_ + 8 * s_, ring_.phase);  // the stage's TMA bytes have landed")
        w("wgmma_fence();")
        w("#pragma unroll")
        w.open("for (int ks_ = 0; ks_ < BK / 16; ++ks_)")
        w(f"const unsigned a_ = sA_ + s_ * A_STAGE * 2 + {a_off}ks_ * 32;")
        w(f"const unsigned b_ = sB_ + s_ * B_STAGE * 2 + {b_off}ks_ * 2048;")
        w("// A: K-major, 8-row groups 8*SWIZZLE bytes apart; B: MN-major, 64-column chunks BK*128 bytes apart")
        w("const unsigned long long da_ = smem_desc(a_, 16, 8 * SWIZZLE, SWIZZLE);")
        w("const unsigned long long db_ = smem_desc(b_, BK * 128, 1024, 128);")
        w(f"{wgmma}(acc, db_, da_, {scale_d});  // D^T = B^T A^T" if swap else f"{wgmma}(acc, da_, db_, {scale_d});")
        for b in range(1, self.L["BLOCKS"]):  # the next 64 rows of A, into the next NACC / BLOCKS accumulators
            da = f"smem_desc(a_ + {b} * 64 * BK * 2, 16, 8 * SWIZZLE, SWIZZLE)"
            w(f"{wgmma}(acc + {b} * (NACC / BLOCKS), {da}, db_, {scale_d});")
        w.close()
        w("wgmma_commit();")
        if self.defer:
            self._store_pending_box()
        if early:
            w("wgmma_wait<0>();  // this iteration's group has retired: its stage is free")
            w(release)
            w.close()
            return
        w("wgmma_wait<1>();  // the previous iteration's group has retired: its stage is free")
        w(f"if ({fk.name} > 0) {release}")
        w.close()
        w("wgmma_wait<0>();")
        w(f"if (count_ > 0) {release}")
