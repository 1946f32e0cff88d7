"""``macro_tile="auto"``: the macro tile per GEMM shape, from a per-tile cost model of the GPU.

A big tile does more math per byte loaded but makes fewer tiles, so small GEMMs leave SMs idle and
every GEMM pays a last, partly empty wave; a small tile fills the GPU but runs slower per FLOP. Each
candidate tile has measured costs on a loaded GPU: ``launch`` per kernel, ``t0`` per output tile
(pipeline fill, epilogue) and ``c`` per ``BM x BN x BK`` iteration, and runs ``g`` workgroups at once:
``SMs / cluster``, or fewer where clusters do not pack into the GPCs (30 clusters of 4 on the H100, not
33). ``c`` has two values: rows of A and B that start on 128-byte lines (``K`` and ``N`` multiples of 64
fp16 elements), and rows that do not (``c_u``), where each 128-byte TMA box row straddles two lines. A
CTA's L2 reads then nearly double, and with all ``g`` workgroups running a tile whose CTA reads
``CTA_M + BN/cluster`` rows per iteration becomes bound by the L2: single-CTA tiles run up to 1.9x slower
per iteration, clusters of 2 that multicast B 1.2-1.35x, clusters of 4 (a quarter of B per CTA)
1.05-1.2x. With ``a < g`` workgroups running the L2 has bandwidth to spare, and the penalty shrinks as
the square root of the load::

    c(a) = c + (c_u - c) * sqrt(a / g)            (c(a) = c for aligned rows)

For ``T`` tiles of ``kt`` iterations, ``W = ceil(T / g)`` waves with ``a = T - (W - 1) * g`` tiles in the
last, the cheapest of these schedules is predicted::

    data-parallel:      launch + W * t0 + kt * ((W - 1) * c(g) + c(a))
    Stream-K, T >= g:   launch + (T * kt / g) * c(g) + (T / g) * t0 + fixup
    Stream-K, T < g:    launch + ceil(kt / s) * c(s * T) + t0 + (1 + ceil(log2(s))) * fixup
    fixup             = FIXUP_LEVEL + (BM / cluster) * BN * 4 / FIXUP_BANDWIDTH

With at least as many tiles as workgroups (the two-tile schedule) the iterations are shared out evenly and
a tile has one partial to add. With fewer, the grid-size model runs Stream-K on ``g = s * T`` workgroups,
each tile cut into ``s`` parts whose workgroups read K in step (:func:`parts_in_step`,
:func:`ctgraph.model.k_aligned`); the ``s`` parts add their fp32 partials up a tree ``log2(s)`` deep and
the tile's owner adds the last one: each level is a serial store, flag and load of one CTA's partial tile.
The fixup tree now has radix 4 (:data:`ctgraph.lower.FIXUP_RADIX`), ``ceil(log4(s))`` levels of up to
three partials each; the model keeps the binary tree's ``log2(s)`` levels that its constants were fitted
with (a re-fit with ``calibrate --tiles`` is what would change them). ``FIXUP_LEVEL`` and
``FIXUP_BANDWIDTH`` (and the square root above) were fitted to a sweep of every
candidate tile on 38 corpus shapes and checked on 40 held-out shapes. Pricing Stream-K as parts in step
(the sweeps' Stream-K re-timed on those grids) took the model's tile from 0.768x to 0.818x cuBLAS on 12
long-K shapes, for 0.754x -> 0.747x on the 38 and 0.803x -> 0.800x on the held-out (docs/benchmarks.md).

Besides the measured tiles, the candidates (:func:`candidates`) include **swapped** tiles, which the wgmma
path runs as ``D^T = B^T A^T`` so that a CTA's rows may be any multiple of 8: on one CTA, BM fits m in one to four
rows of tiles; on a 2 x 2 or 2 x 4 grid of CTAs that share A and B (``multicast="ab"``), in any number of rows, so
that the tiles fill the SMs (:func:`swapped_heights`). Each is priced from the measured tiles of its layout as the
kernel it transposes (:func:`swapped_cost`; the 2-D grids' measured tiles are references only, :data:`REFERENCES`).
On 51 corpus shapes whose tile changed so, auto went 1.058x faster (docs/benchmarks.md). The layout a tile was
priced on is the one it runs on (:func:`tile_layout`).

:func:`choose_tile` returns the candidate with the least prediction (ties: the earlier, larger tile), and
:func:`ranked_tiles` all of them in that order: ``python -m ctgraph tune --tiles N`` times the first ``N`` and
``macro_tile="auto"`` then takes the tuning table's measured tile for those shapes
(:func:`ctgraph.policy.auto_tile`).
For a shape the tuning table does not know, ``transform="auto"`` asks :func:`preferred_schedule` first:
whether to split K at all, and whether as the two-tile schedule (:func:`ctgraph.policy.select`).
``python -m ctgraph calibrate --tiles`` measures the per-tile costs on the GPU at hand
(:func:`ctgraph.calibrate.calibrate_tiles`); :data:`H100` holds the H100 SXM figures. float32 GEMMs
(mma.sync / FMA paths) keep the default tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import k_aligned

__all__ = [
    "CANDIDATES",
    "FIXUP_BANDWIDTH",
    "FIXUP_LEVEL",
    "H100",
    "LAYOUTS",
    "REFERENCES",
    "SWAP_2D_MIN_ITERATIONS",
    "SWAP_2D_MIN_ROWS",
    "SWAP_MIN_ITERATIONS",
    "WAVE_GRIDS",
    "WAVE_QUARTERS",
    "Layout",
    "TileCost",
    "candidates",
    "choose_tile",
    "cluster_grid",
    "k_iterations",
    "output_tiles",
    "parts_in_step",
    "predict",
    "preferred_schedule",
    "ranked_tiles",
    "resident_clusters",
    "schedules",
    "swapped_cost",
    "swapped_heights",
    "tile_cost",
    "tile_layout",
    "wave_layouts",
]

DEFAULT_TILE = (128, 128, 32)
LINE = 128  # bytes: the L2 line a TMA box row should start on
FIXUP_LEVEL = 2.0e-6  # seconds per level of the Stream-K fixup tree (flag round trip, pipeline restart)
FIXUP_BANDWIDTH = 20e9  # bytes per second one CTA moves its fp32 partial tile through a fixup level
CANDIDATES: tuple[tuple[int, int, int], ...] = (
    (512, 256, 64),
    (512, 192, 64),
    (256, 256, 64),
    (256, 192, 64),
    (256, 128, 64),
    (128, 256, 64),
    (128, 192, 64),
    (128, 128, 64),
    (64, 128, 64),
    (64, 64, 64),
)
# measured tiles whose cluster is not the fewest CTAs that share B: (CTAs, the operands they share)
LAYOUTS: dict[tuple[int, int, int], tuple[int, str]] = {(256, 512, 64): (8, "ab"), (256, 384, 64): (4, "ab")}


@dataclass(frozen=True)
class TileCost:
    """Measured costs of one macro tile on a loaded GPU, in seconds: ``launch`` per kernel, ``t0`` per output
    tile of a workgroup (pipeline fill, epilogue), ``c`` per K iteration with 128-byte aligned rows and
    ``c_unaligned`` without (default ``c``); the SMs a workgroup occupies, ``resident``: how many
    workgroups the calibrated GPU held at once (default: one per ``sms_per_workgroup`` SMs), and the operands
    its cluster's CTAs share (``multicast``, :class:`lowering.cuda.options.CudaOptions`)."""

    tile: tuple[int, int, int]
    launch: float
    t0: float
    c: float
    sms_per_workgroup: int = 1
    c_unaligned: float | None = None
    resident: int | None = None
    multicast: str = "b"

    def workgroups(self, sms: int) -> int:
        """Workgroups at once on ``sms`` SMs: one per ``sms_per_workgroup``, at most ``resident``."""
        g = max(1, sms // self.sms_per_workgroup)
        return min(g, self.resident) if self.resident else g

    def line(self) -> str:
        """This cost as a line of a table like :data:`H100` (microseconds written as ``e-6``)."""
        us = [f"{x * 1e6:.{d}f}e-6" for x, d in ((self.launch, 2), (self.t0, 2), (self.c, 3))]
        tail = [str(self.sms_per_workgroup)]
        if self.c_unaligned is not None or self.resident is not None:
            tail.append("None" if self.c_unaligned is None else f"{self.c_unaligned * 1e6:.3f}e-6")
        if self.resident is not None or self.multicast != "b":
            tail.append(str(self.resident))
        if self.multicast != "b":
            tail.append(repr(self.multicast))
        return f"TileCost({self.tile}, {', '.join(us + tail)}),"

    def per_iteration(self, n: int, k: int, itemsize: int = 2, load: float = 1.0) -> float:
        """``c`` for B's and A's rows of ``n`` and ``k`` elements with a fraction ``load`` of the workgroups
        running: ``c`` when both are whole 128-byte lines, else ``c + (c_unaligned - c) * sqrt(load)``."""
        aligned = (n * itemsize) % LINE == 0 and (k * itemsize) % LINE == 0
        if aligned or self.c_unaligned is None:
            return self.c
        return self.c + (self.c_unaligned - self.c) * math.sqrt(load)

    def fixup(self) -> float:
        """Seconds of one level of the Stream-K fixup tree: one CTA's fp32 partial tile stored and loaded."""
        bm, bn, _ = self.tile
        return FIXUP_LEVEL + bm // self.sms_per_workgroup * bn * 4 / FIXUP_BANDWIDTH


# NOTE: fitted by `python -m ctgraph calibrate --tiles` on an H100 SXM (132 SMs), 2026-11-23: wgmma path
# with the TMA-store epilogue (docs/benchmarks.md). Rows that straddle 128-byte lines cost single-CTA tiles
# about 1.9x per iteration, clusters of 2 (B multicast) 1.2-1.35x, clusters of 4 1.05-1.2x. The 256 x 128 row's
# ``c`` is its fitted 0.857e-6 times 0.878, what four consumer warpgroups releasing each stage early gained on
# 2048x2048x8192 (103.4 -> 90.8 us; a re-fit of every tile on 2026-11-25 gave 0.722e-6, docs/benchmarks.md).
H100: tuple[TileCost, ...] = (
    TileCost((512, 256, 64), 4.08e-6, 2.97e-6, 0.652e-6, 4, 0.686e-6, 30),
    TileCost((512, 192, 64), 4.44e-6, 1.37e-6, 0.523e-6, 4, 0.629e-6, 30),
    TileCost((256, 256, 64), 3.86e-6, 2.13e-6, 0.714e-6, 2, 0.865e-6, 66),
    TileCost((256, 192, 64), 4.13e-6, 1.18e-6, 0.567e-6, 2, 0.754e-6, 66),
    TileCost((256, 128, 64), 1.05e-6, 2.02e-6, 0.753e-6, 1, 1.295e-6, 132),
    TileCost((128, 256, 64), 0.00e-6, 3.29e-6, 0.750e-6, 1, 1.339e-6, 132),
    TileCost((128, 192, 64), 0.00e-6, 2.53e-6, 0.580e-6, 1, 1.105e-6, 132),
    TileCost((128, 128, 64), 0.74e-6, 1.27e-6, 0.492e-6, 1, 0.897e-6, 132),
    TileCost((64, 128, 64), 0.29e-6, 1.53e-6, 0.352e-6, 1, 0.677e-6, 132),
    TileCost((64, 64, 64), 1.94e-6, 0.73e-6, 0.299e-6, 1, 0.424e-6, 132),
)

# NOTE: measured tiles that only price swapped tiles (:func:`swapped_cost`), fitted the same way: 8 CTAs as a 2 x 4
# grid that shares A along its rows and B along its columns (multicast="ab"), 2026-11-24, and 4 CTAs as a 2 x 2 grid,
# 2026-11-25. As a candidate itself the 2 x 4 grid's tile lost on 11 of the 18 corpus shapes the model took it on
# (docs/benchmarks.md).
REFERENCES: tuple[TileCost, ...] = (
    TileCost((256, 512, 64), 3.19e-6, 1.21e-6, 0.389e-6, 8, 0.402e-6, 15, "ab"),
    TileCost((256, 384, 64), 3.04e-6, 1.77e-6, 0.512e-6, 4, 0.535e-6, 30, "ab"),
)


def output_tiles(m: int, n: int, tile: tuple[int, int, int]) -> int:
    """The macro tiles ``tile = (BM, BN, BK)`` cuts an ``m x n`` output into, partial ones included:
    ``ceil(m / BM) * ceil(n / BN)``."""
    return -(-m // tile[0]) * -(-n // tile[1])


def k_iterations(k: int, tile: tuple[int, int, int]) -> int:
    """The K iterations of one output tile, the last partial where ``BK`` does not divide ``k``: ``ceil(k / BK)``."""
    return -(-k // tile[2])


def parts_in_step(tiles: int, kt: int, g: int) -> list[int]:
    """The ways ``s >= 2`` to cut each of ``tiles < g`` tiles into ``s`` parts whose workgroups read K in step
    (:func:`ctgraph.model.k_aligned`): the grids ``s * tiles`` the grid-size model takes."""
    grids = np.arange(2 * tiles, g + 1, tiles)
    return [int(x) // tiles for x in grids[k_aligned("streamk", tiles, kt, grids)]]


def schedules(cost: TileCost, m: int, n: int, k: int, g: int) -> dict[str, float]:
    """Predicted seconds, launch excluded, of each schedule the model prices for ``m x n x k`` with ``cost``'s
    tile on ``g`` workgroups at once: ``"dataparallel"``, ``"streamk2tile"`` (at least as many tiles as
    workgroups) and ``"streamk/s"`` (each of fewer tiles than workgroups in ``s`` parts, in step)."""
    tiles, kt = output_tiles(m, n, cost.tile), k_iterations(k, cost.tile)
    waves = math.ceil(tiles / g)
    last = tiles - (waves - 1) * g
    full, tail = cost.per_iteration(n, k), cost.per_iteration(n, k, load=last / g)
    out = {"dataparallel": waves * cost.t0 + kt * ((waves - 1) * full + tail)}
    if tiles >= g:  # two-tile Stream-K: the iterations shared out evenly, one partial per tile to add
        out["streamk2tile"] = tiles * kt / g * full + tiles / g * cost.t0 + cost.fixup()
    for s in parts_in_step(tiles, kt, g):  # fewer tiles than workgroups: each tile in s parts
        c = cost.per_iteration(n, k, load=s * tiles / g)
        out[f"streamk/{s}"] = math.ceil(kt / s) * c + cost.t0 + (1 + math.ceil(math.log2(s))) * cost.fixup()
    return out


def predict(cost: TileCost, m: int, n: int, k: int, sms: int = 132) -> float:
    """Predicted seconds of the fastest of :func:`schedules` for ``m x n x k`` with ``cost``'s tile."""
    return cost.launch + min(schedules(cost, m, n, k, cost.workgroups(sms)).values())


def preferred_schedule(cost: TileCost, m: int, n: int, k: int, g: int) -> str | None:
    """What the model says of splitting K for this shape on ``g`` workgroups at once: ``"dataparallel"`` when
    data-parallel is predicted faster than every Stream-K schedule it prices, ``"streamk2tile"`` when the
    two-tile schedule is the fastest, else None (it prices no Stream-K schedule, or prefers parts of
    tiles, whose grid the grid-size model knows better)."""
    times = schedules(cost, m, n, k, g)
    if len(times) == 1:
        return None
    best = min(times, key=times.__getitem__)
    return best if best in ("dataparallel", "streamk2tile") else None


def tile_cost(
    macro_tile: tuple[int, int, int], cluster: int = 1, costs: tuple[TileCost, ...] = H100 + REFERENCES
) -> TileCost | None:
    """The measured costs of ``macro_tile`` run on clusters of ``cluster`` CTAs, if ``costs`` has them, or of a
    swapped tile (:func:`swapped_cost`)."""
    bm, bn, bk = macro_tile
    measured = next((c for c in costs if c.tile == (bm, bn, bk) and c.sms_per_workgroup == cluster), None)
    derived = measured or swapped_cost((bm, bn, bk), costs, tile_layout((bm, bn, bk), costs) or (1, "b"))
    return derived if derived is not None and derived.sms_per_workgroup == cluster else None


# NOTE: swapped tiles are priced from their bytes per K iteration; with few iterations the fixed costs the
# prices extrapolate decide. On the H100 corpus (2026-11-24) they lost 1-12% on 9 of 10 shapes of 2-5 iterations
# and gained up to 1.5x on shapes of 10 or more.
SWAP_MIN_ITERATIONS = 6
# NOTE: on 2-D clusters, swapped tiles fitted to m lost on 11 of 12 corpus and held-out shapes of fewer than 16 K
# iterations (to 0.81x) and gained 1.054x (geomean) on the 67 of 16 or more (H100, 2026-11-25).
SWAP_2D_MIN_ITERATIONS = 16
# NOTE: on 2-D clusters, swapped CTAs of 24-72 rows lost on 12 of 14 corpus shapes (up to 2.2x slower), those of
# 80-248 rows gained on 13 of 18 (up to 1.49x: 232x7304x5176 0.61x -> 0.90x cuBLAS), H100, 2026-11-24.
SWAP_2D_MIN_ROWS = 80


def _swap_grid(cluster: int) -> tuple[int, int]:
    """The CTA grid, rows x columns, of a layout swapped tiles run on: one CTA, or ``2 x cluster/2`` (``"ab"``)."""
    return (1, 1) if cluster == 1 else (2, cluster // 2)


def swapped_cost(
    macro_tile: tuple[int, int, int],
    costs: tuple[TileCost, ...] = H100 + REFERENCES,
    ref_layout: tuple[int, str] = (1, "b"),
) -> TileCost | None:
    """Costs of a tile whose CTAs' rows are a multiple of 8 but not of 64: the wgmma path runs it swapped
    (``D^T = B^T A^T``, :mod:`lowering.cuda.hopper`), with one consumer warpgroup per 64 columns. It runs on the
    cluster layout ``ref_layout`` (one CTA, or a ``2 x c/2`` grid, ``(c, "ab")``) and is priced from the measured
    tiles of that layout and BK. A swapped CTA of ``M`` rows and ``N`` columns runs ``N/64`` consumer warpgroups
    whose ``wgmma`` N side is ``M``, and receives ``(M + N) * BK`` halves per K iteration: it is a measured CTA of
    ``N`` rows and ``M`` columns, transposed. Between two measured CTAs of ``N`` rows, ``c``, ``c_unaligned`` and
    ``t0`` are interpolated linearly in the columns. Beyond them, or where no measured CTA has ``N`` rows (then the
    one of ``N`` columns and the least rows above ``M``, else the most), they are scaled from the nearest measured
    CTA of ``R x C``: a K iteration is bound by the bytes a CTA receives, or by its math where that grows faster,
    and the epilogue by the elements it stores::

        c  = ref.c  * max((M + N) / (R + C), M * N / (R * C))        (likewise c_unaligned)
        t0 = ref.t0 * M / (R or C, whichever runs along M)

    Against tiles measured swapped on the H100 (2026-11-25), the interpolation prices 232 x 128 at 0.686 us per K
    iteration (measured 0.647) where the 256 x 128 scaled, a kernel of four consumer warpgroups, priced 0.803.

    None where no such tile is measured, where the accumulators outgrow a consumer thread's registers (192 or 256
    columns, three or four warpgroups, hold 128 rows at most), or where a 2-D cluster's CTAs would hold fewer than
    :data:`SWAP_2D_MIN_ROWS` rows."""
    bm, bn, bk = macro_tile
    cluster, multicast = ref_layout
    if multicast not in ("b", "ab") or (multicast == "b") != (cluster == 1):
        return None
    grid_m, grid_n = _swap_grid(cluster)
    rows, cols = bm // grid_m, bn // grid_n
    if bm % grid_m or bn % grid_n or rows % 8 or rows % 64 == 0 or not 8 <= rows <= 256 or cols % 64 or cols > 256:
        return None
    if (cols > 128 and rows > 128) or (cluster > 1 and rows < SWAP_2D_MIN_ROWS):
        return None
    layout = [c for c in costs if (c.sms_per_workgroup, c.multicast) == ref_layout and c.tile[2] == bk]
    cta = {c: (c.tile[0] // grid_m, c.tile[1] // grid_n) for c in layout}  # each measured tile's CTA rows, columns
    transposed = sorted((c for c in layout if cta[c][0] == cols), key=lambda c: cta[c][1])
    below = [c for c in transposed if cta[c][1] <= rows]
    above = [c for c in transposed if cta[c][1] >= rows]
    if below and above:  # between two measured CTAs of `cols` rows: linear in the columns
        lo, hi = below[-1], above[0]
        w = 0.0 if lo is hi else (rows - cta[lo][1]) / (cta[hi][1] - cta[lo][1])

        def mix(a: float, b: float) -> float:
            return a + (b - a) * w

        unaligned = None if lo.c_unaligned is None or hi.c_unaligned is None else mix(lo.c_unaligned, hi.c_unaligned)
        return TileCost(
            macro_tile, lo.launch, mix(lo.t0, hi.t0), mix(lo.c, hi.c), cluster, unaligned, lo.resident, multicast
        )
    ref: TileCost | None
    if transposed:  # beyond them: scaled from the nearest
        ref, along_m = (above or below)[0 if above else -1], 1
    else:  # no measured CTA of `cols` rows: the one of `cols` columns and the least rows above (else the most)
        refs = sorted((c for c in layout if cta[c][1] == cols), key=lambda c: cta[c][0])
        ref, along_m = next((c for c in refs if cta[c][0] > rows), refs[-1] if refs else None), 0
    if ref is None:
        return None
    # bound by the bytes a CTA receives, or by its math where that grows faster (a larger tile than the reference)
    scale = max((rows + cols) / sum(cta[ref]), rows * cols / (cta[ref][0] * cta[ref][1]))
    unaligned = None if ref.c_unaligned is None else ref.c_unaligned * scale
    return TileCost(
        macro_tile,
        ref.launch,
        ref.t0 * rows / cta[ref][along_m],
        ref.c * scale,
        cluster,
        unaligned,
        ref.resident,
        multicast,
    )


def swapped_heights(m: int, grid_m: int = 1) -> list[int]:
    """BM for ``m`` rows in ``t`` rows of tiles whose ``grid_m`` CTAs each take a multiple of 8 rows up to 256, not a
    multiple of 64 (those the measured tiles cover): ``grid_m * 8 * ceil(m / (8 * grid_m * t))``, the least BM that
    covers ``m`` in ``t`` rows. One CTA (``grid_m = 1``) takes ``t = 1 .. 4``; a 2-D grid every ``t``, so its tiles
    can be fitted to fill the SMs."""
    counts = range(1, 5) if grid_m == 1 else {-(-m // (grid_m * r)) for r in range(8, 257, 8)}
    heights = (grid_m * 8 * -(-m // (8 * grid_m * t)) for t in counts)
    return sorted({h for h in heights if h // grid_m <= 256 and h // grid_m % 64}, reverse=True)


def candidates(
    m: int, k: int, costs: tuple[TileCost, ...] = H100, references: tuple[TileCost, ...] = REFERENCES
) -> list[TileCost]:
    """The tiles :func:`choose_tile` weighs for ``m`` rows and depth ``k``: ``costs``' and, where a tile has at
    least :data:`SWAP_MIN_ITERATIONS` K iterations, the swapped tiles that fit ``m`` (:func:`swapped_heights`) on
    the one-CTA and 2-D cluster layouts of ``costs`` and ``references``, as wide as a measured tile of that layout
    or as its CTAs' rows times the grid's columns (the transposed kernel, :func:`swapped_cost`)."""
    measured = costs + references
    widths = set()  # (BN, BK, cluster, multicast) of the layouts swapped_cost takes
    for c in measured:
        grid_m, grid_n = _swap_grid(c.sms_per_workgroup)
        if c.multicast == "ab" or c.sms_per_workgroup == 1:
            widths |= {
                (bn, c.tile[2], c.sms_per_workgroup, c.multicast) for bn in (c.tile[1], c.tile[0] // grid_m * grid_n)
            }
    swapped = [
        swapped_cost((bm, bn, bk), measured, (cluster, multicast))
        for bn, bk, cluster, multicast in sorted(widths, reverse=True)
        if k >= (SWAP_MIN_ITERATIONS if cluster == 1 else SWAP_2D_MIN_ITERATIONS) * bk
        for bm in swapped_heights(m, 1 if cluster == 1 else 2)
    ]
    return [*costs, *(c for c in swapped if c is not None)]


def tile_layout(
    macro_tile: tuple[int, int, int], costs: tuple[TileCost, ...] = H100 + REFERENCES
) -> tuple[int, str] | None:
    """``(cluster, multicast)`` that ``macro_tile`` was measured or priced on where that is not the fewest CTAs
    that share B (:data:`LAYOUTS`, or a swapped tile on a 2-D cluster); None otherwise."""
    bm, bn, bk = macro_tile
    if (bm, bn, bk) in LAYOUTS:
        return LAYOUTS[bm, bn, bk]
    layouts = sorted({(c.sms_per_workgroup, c.multicast) for c in costs if c.multicast == "ab"})
    return next((lay for lay in layouts if swapped_cost((bm, bn, bk), costs, lay) is not None), None)


def cluster_grid(cluster: int, multicast: str) -> tuple[int, int]:
    """A cluster's CTAs as a ``grid_m x grid_n`` grid: CTAs of a grid row share A's rows, those of a grid column
    B's columns (``"b"``: a column of ``cluster``, ``"a"``: a row, ``"ab"``: ``2 x cluster/2``, ``"ba"``:
    ``cluster/2 x 2``)."""
    return {"b": (cluster, 1), "a": (1, cluster), "ab": (2, cluster // 2), "ba": (cluster // 2, 2)}[multicast]


@dataclass(frozen=True)
class Layout:
    """How a workgroup's CTAs share its macro tile on the wgmma path: ``cluster`` CTAs that share ``multicast``
    (``"a"``, ``"b"``, ``"ab"`` or ``"ba"``), computing ``D^T = B^T A^T`` where ``swap`` (the options of the same names,
    :class:`lowering.cuda.options.CudaOptions`). A tuning-table row records the one its tile was timed on."""

    cluster: int
    multicast: str
    swap: bool

    @property
    def name(self) -> str:
        """``"2a"``, ``"8ab/swap"``: the form a tuning table stores (:meth:`parse` reads it back)."""
        return f"{self.cluster}{self.multicast}" + ("/swap" if self.swap else "")

    @classmethod
    def parse(cls, name: str) -> Layout:
        head, _, tail = name.partition("/")
        shared = head.lstrip("0123456789")
        if not head[:1].isdigit() or shared not in ("a", "b", "ab", "ba") or tail not in ("", "swap"):
            want = "CTAs, the operands they share and an optional '/swap' (e.g. '2a/swap')"
            raise ValueError(f"a layout is {want}, got {name!r}")
        return cls(int(head.rstrip("ab")), shared, tail == "swap")

    def options(self) -> dict[str, object]:
        """The compile options that run it: ``ctgraph.compile(..., **layout.options())``."""
        return {"cluster": self.cluster, "multicast": self.multicast, "swap": self.swap}


# cuBLAS's cluster layouts for mid-size GEMMs (docs/bench/cublas-kernels.txt, in our orientation): 2 or 4 CTAs along n
# that share A, 2 or 4 along m that share B, 2 x 4 and 4 x 2 grids that share both. NOTE: where A's and B's rows
# are off the 128-byte lines the 4 x 2 grid ("8ba") halves the L2 requests of A's rows: 1408x1560x7000 ran 52.6 us
# on it in CTAs of 176 x 128, against 63.4 on the 2 x 2 grid of the same CTAs and 48.1 for cuBLAS (H100, 2026-11-26)
WAVE_GRIDS: tuple[tuple[int, str], ...] = ((2, "a"), (2, "b"), (4, "a"), (4, "b"), (8, "ab"), (8, "ba"))
# a CTA's columns: one or two swapped consumer warpgroups of 64. NOTE: cuBLAS runs CTAs of 64 columns (nvjet 64xN)
# on 26 of the 36 corpus shapes of m under 600, and on 12 of the 27 of n under 600; on the H100 (2026-11-25) they
# took 176x4080x3376 from 0.86x to 1.04x cuBLAS and 136x3768x5696 from 0.77x to 0.86x, and 4 CTAs that share A
# 144x2680x1640 from 0.74x to 0.90x (docs/bench/wave64-probes.txt).
WAVE_CTA_COLUMNS: tuple[int, ...] = (64, 128)
# the waves the tiles make, in quarters of a wave: half, three quarters, one and two. NOTE: cuBLAS leaves SMs idle
# on 30 of the 120 corpus shapes (at most 100 CTAs, no split-K: 240x1488x2312 in 72 CTAs of 80 x 64 on clusters of
# 4 that share A, 0.55 of a wave); fewer, larger tiles read fewer bytes per FLOP, and with fewer SMs loading, rows
# off the 128-byte lines cost less (docs/bench/cublas-kernels.txt).
WAVE_QUARTERS: tuple[int, ...] = (2, 3, 4, 8)


def resident_clusters(sms: int = 132, costs: tuple[TileCost, ...] = H100 + REFERENCES) -> dict[int, int]:
    """The workgroups of each cluster size (CTAs) the GPU holds at once, from the measured tiles ``costs``: on the H100
    66 clusters of 2, 30 of 4 (not 33: they do not pack into the GPCs) and 15 of 8."""
    return {c.sms_per_workgroup: c.workgroups(sms) for c in costs}


def wave_layouts(
    m: int,
    n: int,
    quarters: tuple[int, ...] = WAVE_QUARTERS,
    sms: int = 132,
    costs: tuple[TileCost, ...] = H100 + REFERENCES,
) -> list[tuple[tuple[int, int, int], Layout]]:
    """Swapped tiles of CTAs of ``c`` columns (each of :data:`WAVE_CTA_COLUMNS`) on each of :data:`WAVE_GRIDS`
    (``grid_m x grid_n`` CTAs), their rows fitted to ``m`` so that the tiles make at most ``q / 4`` waves of the
    clusters the GPU holds at once (``R``, from ``costs``), for each ``q`` of ``quarters``::

        tiles along n:   t_n = ceil(n / (c * grid_n))
        rows of tiles:   t_m = max(1, floor(q * R / (4 * t_n)))
        BM             = grid_m * 8 * ceil(m / (8 * grid_m * t_m))      (CTAs of a multiple of 8 rows, <= 256)

    and at least 32 rows a CTA: a small ``m`` cannot fill the waves, and thinner CTAs only add L2 traffic.

    These are cuBLAS's layouts on most mid-size shapes (``python -m ctgraph tune --layouts`` times them): on the
    H100, 1408x1664x8192 ran 59.2 us in 160 x 256 tiles on 2 CTAs that share A, against 62.3 on the tile model's
    352 x 256 (docs/benchmarks.md). The tile model does not price them; they are measured or not taken."""
    resident = resident_clusters(sms, costs)
    out: dict[tuple[tuple[int, int, int], Layout], None] = {}
    for cluster, multicast in WAVE_GRIDS:
        if cluster not in resident:
            continue
        grid_m, grid_n = cluster_grid(cluster, multicast)
        for bn in (columns * grid_n for columns in WAVE_CTA_COLUMNS):
            t_n = -(-n // bn)
            for q in quarters:
                t_m = max(1, q * resident[cluster] // (4 * t_n))
                bm = max(grid_m * 8 * -(-m // (8 * grid_m * t_m)), grid_m * 32)
                if bm // grid_m <= 256:
                    out[(bm, bn, 64), Layout(cluster, multicast, True)] = None
    return list(out)


def ranked_tiles(
    m: int, n: int, k: int, dtype: str = "float16", sms: int = 132, costs: tuple[TileCost, ...] = H100
) -> list[tuple[int, int, int]]:
    """:func:`candidates`' tiles for an ``m x n x k`` GEMM on ``sms`` SMs, the least predicted time first (ties:
    the earlier, larger tile), each once; ``python -m ctgraph tune --tiles N`` times the first ``N``."""
    if dtype != "float16":
        return [DEFAULT_TILE]
    ranked = sorted(candidates(m, k, costs), key=lambda c: predict(c, m, n, k, sms))  # sorted() is stable
    return list(dict.fromkeys(c.tile for c in ranked))


def choose_tile(
    m: int, n: int, k: int, dtype: str = "float16", sms: int = 132, costs: tuple[TileCost, ...] = H100
) -> tuple[int, int, int]:
    """The macro tile with the least predicted time for an ``m x n x k`` GEMM on ``sms`` SMs, of
    :func:`candidates` (the first of :func:`ranked_tiles`)."""
    return ranked_tiles(m, n, k, dtype, sms, costs)[0]
