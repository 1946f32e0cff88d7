"""Shape- and path-aware candidates: every (tile, cluster layout, schedule, grid, tile order) worth ranking.

Generated from ``(m, n, k)``, the :class:`~ctgraph.target.Target` and the instruction path that will run
(:meth:`Target.paths`), never from a list of shapes. These rules hold for every candidate (tested with hypothesis):

- **valid for its path**: the backend accepts the tile and layout (``backend.supports``);
- **no CTA that computes nothing**: in the last row (column) of tiles, every CTA of a cluster's grid holds at least
  one row (column) of the output, and no grid has more workgroups than work to give; two exceptions, where CTAs past
  the output's edge still load their share of a multicast operand for the others: the thin-n grids of
  :func:`thin_grid` (cuBLAS's own grid on such shapes), and clusters whose empty CTAs are few (:func:`few_empty`);
- **bounded padding**: the multiply-adds spent on padding (:func:`~ctgraph.counts.padding`) stay within
  :data:`PAD_LIMIT`, or within :data:`PAD_SLACK` of the least any candidate tile reaches, or, for a swapped tile,
  hide under the loads (:func:`hidden_padding`);
- **one tile along a skinny side** (:func:`wide_enough`): on a skinny m (thin n) with a wide other side, further
  tile rows (columns) only read B (A) again; on a thin n of at most :data:`THIN` columns, only the clusters that
  share B (:func:`thin_grid`);
- **no tall, wide CTA on a short K** (:func:`tall_wide`): 256 x more than 128 only past :data:`SHORT_K` K iterations.

Tiles on the wgmma path (``BK = 64``):

- ``CTA_M x BN`` on one CTA, ``CTA_M`` 64 or 128 (256 with at most 160 columns), ``BN`` of a menu and fitted to
  ``n`` (``16 ceil(n / 16 t)``, ``t = 1..4``: one to four tile columns with little padding), and the same CTAs on
  clusters of 2 (``"b"``: 256 rows; ``"a"``: twice the columns) and 4 (``"b"``: 512 rows); where the output's
  shorter side is at most :data:`NARROW`, CTAs of 64 rows on clusters of 2 and 4 (``"b"``: 128 and 256 rows) too
  (on a thin n, :func:`thin_grid`, only these);
- swapped tiles (``D^T = B^T A^T``, a CTA's rows any multiple of 8) fitted to ``m`` in one to four tile rows,
  64 to 256 columns, past 128 rows on two or four CTAs sharing A (:func:`swapped_tiles`);
- the wave layouts (:func:`wave_layouts`): swapped CTAs of 64 or 128 columns on cuBLAS's cluster grids, their rows
  fitted so that the tiles make 1/2, 3/4, 1 or 2 waves of the clusters the device holds;
- the wave tiles (:func:`wave_tiles`): CTAs of 128, 192 or 256 rows on one CTA and on clusters of 2, their columns
  fitted so that the tiles make one or two whole waves (CTAs of up to 192 rows: up to eight).

Schedules per tile (``T`` tiles of ``kt`` iterations, ``R`` resident workgroups of its cluster): data-parallel on
``min(T, R)``; two-tile Stream-K and the hybrids (1 and 3 batches) on ``R`` where ``T > R``, only for a transform
the caller names (:data:`NAMED_ONLY`, :func:`offered`); where ``T < R``, Stream-K on ``R`` (where
``T >= 2 R / 3`` only for a named transform: :func:`near_wave`) and on every in-step grid
(:func:`~ctgraph.counts.step_grids`); split-K with a reduction kernel where ``T <= R / 2``, and by call time
(:mod:`.objective`) the same split with its fixup in the kernel too (``"splitk"``: one launch, its grid resident).
Each persistent schedule comes in row-major order and, where A and B together outgrow the L2, in groups of
:data:`RASTER` tile rows (the largest divisor of the tile rows not above it, :func:`order_group`; ragged groups of
:mod:`ctgraph.passes.raster` only for a count of tile rows with no divisor from 2 to :data:`RASTER` on a B that
outgrows the L2 twice over, :func:`ragged_rows`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable

from ..config import Config, Layout, cluster_grid
from ..counts import (
    itemsize,
    k_iterations,
    output_tiles,
    padding,
    split_chunks,
    split_sk_dp,
    splitk_workgroups,
    step_grids,
    tile_counts,
)
from ..target import Target
from .objective import check_objective

__all__ = [
    "NAMED_ONLY",
    "PAD_LIMIT",
    "PAD_SLACK",
    "RASTER",
    "TWIN",
    "candidates",
    "empty_cta",
    "few_empty",
    "hidden_padding",
    "near_wave",
    "offered",
    "order_group",
    "ragged_rows",
    "schedules",
    "swapped_tiles",
    "tall_wide",
    "thin_grid",
    "tiles_for",
    "wave_layouts",
    "wave_tiles",
    "wide_enough",
]

BK = 64
PAD_LIMIT = 0.25  # padding a tile may always have (a quarter more multiply-adds)
PAD_SLACK = 0.10  # beyond PAD_LIMIT: this much more than the least padding of any candidate tile
SKINNY = 128  # the rows (columns) one tile row (column) holds on a skinny output: see wide_enough
THIN = 64  # the columns of a thin n that takes only clusters sharing B: see thin_grid
THIN_GRIDS = (2, 4)  # the CTAs of those clusters
NARROW = 1024  # the shorter side of an output up to which CTAs of 64 rows on those clusters are offered too
EMPTY_SHARE = 1 / 8  # the most of a grid's CTAs that may be empty in its last tile row (column): see few_empty
RASTER = 8  # tile rows walked together once A and B outgrow the L2 (Triton's GROUP_SIZE_M)
BN_MENU = (64, 128, 192, 256)
WAVE_GRIDS: tuple[tuple[int, str], ...] = ((2, "a"), (2, "b"), (4, "a"), (4, "b"), (8, "ab"), (8, "ba"))
WAVE_QUARTERS = (2, 3, 4, 8)
WAVE_HEIGHTS = (128, 192, 256)  # a CTA's rows on the wave tiles: two, three or four 64-row blocks
WAVE_TILE_GRIDS: tuple[tuple[int, str], ...] = ((1, "b"), (2, "b"), (2, "a"))
WAVE_COUNTS = (1, 2)  # the whole waves the wave tiles' columns are fitted to ...
MANY_WAVES = (3, 4, 5, 6, 7, 8)  # ... and these too for CTAs of up to MANY_WAVES_ROWS rows (see wave_tiles)
MANY_WAVES_ROWS = 192
SHORT_K = 10  # the K iterations up to which no CTA is tall and wide: see tall_wide
SPLITK_MAX_TILES_FRACTION = 2  # split-K where T <= R / this
TWIN = "splitk"  # by call time, a split-K's twin with the fixup in the kernel; the kernel objective never offers it
# Schedules (transform, sk_batches) ranked for a named transform only, never for transform="auto": where the ranker
# put them first they ran slower than its next config, on fresh shapes (train seed, never tuned or probed before),
# cuBLAS in the same run, 3 interleaved rounds.
# - Two-tile Stream-K: 24 fresh shapes on an H200, 0.835x cuBLAS against 0.899x for the next config, which won 21
#   (2026-11-27, docs/results/twotile-probe-h200.csv); 12 earlier fresh shapes 0.838x against 0.880x for the best
#   data-parallel config; the fastest config timed on 9 of the tune tables' 335 shapes.
# - The Stream-K hybrid of 3 batches: 20 fresh shapes on an H100, 0.877x against 0.956x, the next config won 19
#   (2026-11-27, docs/results/hybrid-probe-h100.csv).
# - The Stream-K hybrid of 1 batch: 0.932x against 0.933x on 20 fresh shapes (2026-11-27), 0.924x against 0.933x on
#   30 more (2026-11-28, the next config won 17), 0.996x against 1.000x on 28 more after the L2 refit (the next won
#   16; docs/results/hybrid2-probe-h100.csv); in the tune tables the same tile data-parallel ran faster on 222 of
#   the 286 shapes whose last wave the hybrid splits (1.07x at the geomean).
NAMED_ONLY = frozenset({("streamk2tile", None), ("streamk_hybrid", 3), ("streamk_hybrid", 1)})
NEAR_WAVE = (2, 3)  # Stream-K on a grid its tiles fill this far (T >= 2 g / 3) only for a named transform: near_wave

Supports = Callable[[tuple[int, int, int], str, Layout, str], bool]  # tile, dtype, layout, path


def _fitted(extent: int, step: int, most: int, counts: Iterable[int] = range(1, 5)) -> set[int]:
    """``step * ceil(extent / (step t))`` for each ``t`` of ``counts``: the least multiple of ``step`` that covers
    ``extent`` in ``t`` pieces, at most ``most``."""
    return {x for t in counts if (x := step * -(-extent // (step * t))) <= most}


def _empty_ctas(m: int, n: int, tile: tuple[int, int, int], layout: Layout) -> tuple[int, int]:
    """The CTAs of the cluster grid that compute nothing in the last row and in the last column of tiles: with
    ``cm x cn`` CTAs of ``BM/cm x BN/cn``, the last tile row holds ``rows = m - (tm - 1) BM`` rows, so its CTAs of
    index ``i >= ceil(rows / (BM/cm))`` are empty, ``cm - ceil(rows / (BM/cm))`` of them (likewise for columns)."""
    cm, cn = layout.grid
    tm, tn = tile_counts(m, n, tile)
    rows, cols = m - (tm - 1) * tile[0], n - (tn - 1) * tile[1]
    return cm - -(-rows // (tile[0] // cm)), cn - -(-cols // (tile[1] // cn))


def empty_cta(m: int, n: int, tile: tuple[int, int, int], layout: Layout) -> bool:
    """Whether a CTA of the cluster grid computes nothing in the last row or column of tiles (:func:`_empty_ctas`)."""
    return any(_empty_ctas(m, n, tile, layout))


def few_empty(m: int, n: int, tile: tuple[int, int, int], layout: Layout) -> bool:
    """Whether the CTAs :func:`empty_cta` finds are few and harmless: a cluster that shares one operand along the
    side it spans, whose only empty CTAs lie past that side's edge in the last tile row (column), at most
    :data:`EMPTY_SHARE` of the grid's CTAs. With ``c`` CTAs a tile along that side and ``t`` tiles, ``e`` of them
    empty in the last (:func:`_empty_ctas`), that is ``e / (c t) <= EMPTY_SHARE``. Such a CTA still loads its share
    of the shared operand for the others. Two grids, each measured where it is offered:

    - an unswapped cluster along m sharing B (``"b"``, as the thin grids), CTAs past m: keeps the anchors' 256 x 256
      tiles on 2 CTAs for an m with ``m % 256`` in 1..128 (4168 x 7288 x 4168: without it no 256-row tile of 2 CTAs
      at all);
    - a swapped cluster along n sharing A (``"a"``, the wave layouts), CTAs past n: on a skinny m streaming B from
      HBM, every tile column of one CTA reads all of A again from the L2, beside B's one pass (144 x 13352 x 11176 on
      144 x 128 swapped CTAs: 105 x 3.2 MB of A for 298 MB of B, 5.3 TB/s of L2 reads, and no faster with a deeper
      ring), and the L2's reads, not HBM, bound the stream. Multicast over 4 CTAs reads A a quarter as often. On an
      H200 (2026-11-28, cuBLAS in the same run, 3 interleaved rounds, ``docs/results/amc-probe-h200.csv``): 144 x
      13352 x 11176 ran 0.70x cuBLAS on the ranker's first and 1.05x on 144 x 512 swapped on 4 CTAs sharing A (3 of
      its 108 CTAs empty), 96 x 11784 x 7192 0.85x to 1.03x, 184 x 11056 x 12344 0.78x to 0.89x. The rule frozen,
      the 83 of 1000 fresh draws whose first config it changes (every stratum): 0.957x to 1.010x, faster on 66
      (``docs/results/amc-fresh-h200.csv``).

    ``EMPTY_SHARE`` went from 1/16 to 1/8 on an H200 (2026-11-28, cuBLAS in the same run, 2 interleaved rounds): the 58
    of 1493 fresh draws (train seed, draws 2830000-2831500) whose first config it changes ran 0.975x to 1.015x
    cuBLAS, below 0.85x 9 to 1 (``docs/results/empty8-fresh-*-h200.csv``); most gained where m is large and n thin:
    2352 x 200 x 1376 went from 128 x 80 on 2 CTAs to 256 x 112 on 4 (3 of each tile column's 40
    CTAs empty), 0.57x to 0.87x."""
    rows, cols = _empty_ctas(m, n, tile, layout)
    if layout.multicast == "b" and not layout.swap:
        return cols == 0 and rows <= EMPTY_SHARE * layout.grid[0] * tile_counts(m, n, tile)[0]
    if layout.multicast == "a" and layout.swap:
        return rows == 0 and cols <= EMPTY_SHARE * layout.grid[1] * tile_counts(m, n, tile)[1]
    return False


def wave_layouts(m: int, n: int, target: Target) -> list[tuple[tuple[int, int, int], Layout]]:
    """Swapped tiles of CTAs of ``c`` columns (64 or 128) on each cluster grid of :data:`WAVE_GRIDS` (``grid_m x
    grid_n`` CTAs), their rows fitted so the tiles make ``q / 4`` waves of the ``R`` clusters the device holds::

        t_n = ceil(n / (c grid_n));  t_m = max(1, floor(q R / (4 t_n)));  BM = grid_m 8 ceil(m / (8 grid_m t_m))

    with at least 32 rows a CTA (cuBLAS's layouts on mid-size shapes)."""
    out: dict[tuple[tuple[int, int, int], Layout], None] = {}
    for cluster, multicast in WAVE_GRIDS:
        grid_m, grid_n = cluster_grid(cluster, multicast)
        resident = target.resident(cluster)
        for bn in (columns * grid_n for columns in (64, 128)):
            t_n = -(-n // bn)
            for q in WAVE_QUARTERS:
                t_m = max(1, q * resident // (4 * t_n))
                bm = max(grid_m * 8 * -(-m // (8 * grid_m * t_m)), grid_m * 32)
                if bm // grid_m <= 256:
                    out[(bm, bn, BK), Layout(cluster, multicast, True)] = None
    return list(out)


def wave_tiles(m: int, n: int, target: Target) -> list[tuple[tuple[int, int, int], Layout]]:
    """Unswapped tiles of CTAs of ``h`` rows (:data:`WAVE_HEIGHTS`) on each grid of :data:`WAVE_TILE_GRIDS`, their
    columns fitted so that the tiles make whole waves of the ``R`` workgroups the device holds::

        t_m = ceil(m / (h grid_m));  t_n = floor(w R / t_m);  BN = 16 grid_n ceil(n / (16 grid_n t_n))

    for ``w`` = 1, 2 (:data:`WAVE_COUNTS`), and 3 to 8 (:data:`MANY_WAVES`) for CTAs of up to 192 rows (where
    ``t_n >= 1``). Tiles the path does not run (too many columns for the accumulators) are dropped by
    :func:`tiles_for`.

    One or two waves are cuBLAS's own choice on shapes of 1.2 to 1.6 waves of the menu's tiles (H100, 2026-11-28, 46
    fresh shapes, ``docs/results/cublas-kernels-h100.csv``): a data-parallel grid of one wave on such fitted tiles
    (192 x 192 for 4928 x 880, 130 tiles on 130 CTAs; 192 x 176 for 5808 x 672), where the menu's tiles left 1.2 to
    1.6 waves and ran 0.6 to 0.9x its speed. More waves: on 96 fresh shapes whose first config they change (80 with
    m, n >= 2048), 0.993x to 1.010x cuBLAS, below 0.9x 10 to 5 (H200, 2026-11-28, ``docs/selection.md``). Offered for
    CTAs of 256 rows too, the ranker put CTAs of 256 x 144 and 256 x 160 first, and those ran 5-8% slower than the
    config before."""
    out: dict[tuple[tuple[int, int, int], Layout], None] = {}
    for cluster, multicast in WAVE_TILE_GRIDS:
        grid_m, grid_n = cluster_grid(cluster, multicast)
        resident = target.resident(cluster)
        for h in WAVE_HEIGHTS:
            t_m = -(-m // (h * grid_m))
            for w in WAVE_COUNTS + (MANY_WAVES if h <= MANY_WAVES_ROWS else ()):
                t_n = w * resident // t_m
                if t_n >= 1:
                    step = 16 * grid_n
                    out[(h * grid_m, step * -(-n // (step * t_n)), BK), Layout(cluster, multicast, False)] = None
    return list(out)


def _wgmma_tiles(m: int, n: int, target: Target) -> list[tuple[tuple[int, int, int], Layout]]:
    """The wgmma path's tiles and layouts before the filters (module docstring): the menu, the fitted tiles, the
    wave layouts and the wave tiles."""
    bns = sorted(set(BN_MENU) | _fitted(n, 16, 256))
    out: list[tuple[tuple[int, int, int], Layout]] = []
    for bn in bns:
        for cta_m in (64, 128, 256):
            if cta_m == 256 and bn > 160:
                continue
            out.append(((cta_m, bn, BK), Layout(1, "b", False)))
        out += [((256, bn, BK), Layout(2, "b", False)), ((512, bn, BK), Layout(4, "b", False))]
        out.append(((128, 2 * bn, BK), Layout(2, "a", False)))
    if min(m, n) <= NARROW:  # CTAs of 64 rows sharing B (cuBLAS: 64 x 96 CTAs on clusters of 4 for 2272 x 272)
        out += [((64 * c, bn, BK), Layout(c, "b", False)) for bn in bns for c in THIN_GRIDS]
    return out + swapped_tiles(m) + wave_layouts(m, n, target) + wave_tiles(m, n, target)


def swapped_tiles(m: int) -> list[tuple[tuple[int, int, int], Layout]]:
    """Swapped tiles (``D^T = B^T A^T``) whose rows are fitted to ``m`` in one to four tile rows (any multiple of 8 up
    to 256): one CTA of 64 to 256 columns, of at most 128 columns past 128 rows; and past 128 rows, 256 and 512 columns
    on two and four CTAs of 128 sharing A (``"a"``, each CTA's A rows multicast to all of them).

    The pairs and quads give a tile of more than 128 rows the columns that one CTA of those rows is not offered: on the
    long-K shapes where the ranker splits K over few tiles, each tile column reads A again, so wider tiles read less.
    Measured on an H200 (2026-11-28, cuBLAS in the same run, every output matched float64):

    - Probe, 18 fresh long-K shapes (train seed, draws 2920000-2940000; ``k >= 16384``, ``m <= 384``, ``n <= 768``),
      3 interleaved rounds: split-K on the pairs ran 0.69x to 0.91x cuBLAS on 320 x 728 x 60552 where the ranker's
      first ran, 1.12x to 1.22x on 352 x 728 x 56760; one CTA of 192 columns past 128 rows ran slower than the
      ranker's first on 6 of 7 (``docs/results/longk-tiles-probe-h200.csv``).
    - Offered at every row count, on the 105 of 4000 further draws whose first config they changed, 2 rounds: 0.998x
      to 1.039x; past 128 rows (47 shapes) 1.086x, faster by 2% on 40, slower on 2; at most 128 rows (58) 1.005x,
      faster on 32, slower on 18 (``docs/results/swapcluster-probe-{before,after}-h200.csv``). So only past 128 rows.
    - That rule frozen, 80 of the 94 of 8000 new draws whose first config it changes (75 of the 94 long-K), 2 rounds:
      1.008x to 1.062x, faster by 2% on 49, slower on 15; below 0.85x 7 to 2
      (``docs/results/swapcluster-fresh-{before,after}-h200.csv``).
    - Quads past 128 rows (2026-11-29), 2 rounds: on the 47 of 3951 draws (2940000-2944000) whose first config they
      change, 1.077x to 1.122x, faster by 2% on 32, slower on 4; unchanged, on the 95 of 7839 new draws
      (2944000-2952000) whose first config they change (nearly all split-K), 1.050x to 1.087x, faster by 2% on 68,
      slower on 13; below 0.85x 2 to 0 (``docs/results/swapquad-{probe,fresh}-{before,after}-h200.csv``)."""
    out: list[tuple[tuple[int, int, int], Layout]] = []
    for rows in sorted(_fitted(m, 8, 256)):
        out += [((rows, cols, BK), Layout(1, "b", True)) for cols in (64, 128, 192, 256) if rows <= 128 or cols <= 128]
        if rows > 128:
            out += [((rows, 256, BK), Layout(2, "a", True)), ((rows, 512, BK), Layout(4, "a", True))]
    return out


def _mma_tiles() -> list[tuple[tuple[int, int, int], Layout]]:
    """The mma.sync / FMA paths' tiles: a small menu, on one CTA."""
    bk = 32
    return [((bm, bn, bk), Layout()) for bm, bn in ((128, 128), (128, 64), (64, 128), (64, 64), (32, 32))]


def tiles_for(
    m: int, n: int, k: int, dtype: str, target: Target, path: str, supports: Supports
) -> list[tuple[tuple[int, int, int], Layout]]:
    """The tiles and layouts worth ranking on ``path``: generated, then filtered by the module's rules."""
    raw = _wgmma_tiles(m, n, target) if path == "wgmma" else _mma_tiles()
    thin = path == "wgmma" and n <= THIN and wide_enough(n, m, target)
    allowed = [
        (t, lay)
        for t, lay in dict.fromkeys(raw)
        if not empty_cta(m, n, t, lay) or few_empty(m, n, t, lay) or (thin and thin_grid(m, n, t, lay, target))
    ]
    ok = [(t, lay) for t, lay in allowed if supports(t, dtype, lay, path)]
    ok = [(t, lay) for t, lay in ok if not (tall_wide(t, lay) and k_iterations(k, t) <= SHORT_K)] or ok
    if not ok:  # no CTA grid fits without an empty CTA: the smallest one-CTA tile that the path runs
        one = [(t, lay) for t, lay in dict.fromkeys(raw) if lay.cluster == 1 and supports(t, dtype, lay, path)]
        if not one:
            raise ValueError(f"the backend runs none of the {path} path's candidate tiles for {dtype}")
        ok = [min(one, key=lambda c: c[0][0] * c[0][1])]
    if path == "wgmma" and wide_enough(m, n, target):  # a skinny m: one tile row
        ok = [(t, lay) for t, lay in ok if t[0] >= m] or ok
    if path == "wgmma" and wide_enough(n, m, target):  # a thin n: one tile column
        ok = [(t, lay) for t, lay in ok if t[1] >= n] or ok
    least = min(padding(m, n, t) for t, _ in ok)
    bound = max(PAD_LIMIT, least + PAD_SLACK)
    out = [(t, lay) for t, lay in ok if padding(m, n, t) <= bound or hidden_padding(m, n, dtype, t, lay, target)]
    if thin:  # clusters sharing B
        out = [(t, lay) for t, lay in out if thin_grid(m, n, t, lay, target)] or out
    return sorted(out)


def tall_wide(tile: tuple[int, int, int], layout: Layout) -> bool:
    """Whether an unswapped CTA is tall and wide: 256 rows and more than 128 columns (256 x 144 and 256 x 160, which
    the path runs as two consumer warpgroups of two 64-row blocks each, ``lowering.cuda.hopper.row_blocks``). Where
    K is at most :data:`SHORT_K` iterations these are not offered: the ranker, whose tune samples hold few of them
    (28 timings with ``k <= 640``), put them first where CTAs of 128 rows (on clusters of 2 and 4, or swapped) ran
    faster.

    Measured on an H200 (2026-11-28, cuBLAS in the same run, every output checked against torch):

    - 64 fresh shapes (train seed, draws 2860000-2864000) whose first config was such a CTA, against the first
      without them, 2 interleaved rounds: 0.940x to 0.945x cuBLAS over all (faster on 31, slower on 25); on the 27
      with ``k <= 640``, 0.939x to 0.991x (faster on 21, slower on 3); on the 37 with a longer K, 0.941x to 0.913x
      (``docs/results/tallwide-probe-h200.csv``). ``SHORT_K`` was read off this run.
    - The rule frozen, the 44 of 7879 new draws (2866000-2874000) whose first config it changes, 3 rounds: 0.973x
      to 1.014x (faster on 34, slower on 7; ``docs/results/tallwide-fresh-{before,after}-h200.csv``)."""
    grid_m, grid_n = layout.grid
    return not layout.swap and tile[0] // grid_m == 256 and tile[1] // grid_n > 128


def wide_enough(skinny: int, wide: int, target: Target) -> bool:
    """Whether a skinny side of the output (at most :data:`SKINNY` rows, or columns) stays in one tile: where the
    other side makes at least ``SMs / 8`` tiles of 64, those tiles (with split-K and Stream-K) give the SMs their
    work, and each further tile along the skinny side only reads the wide side's operand again (B for a skinny m, A
    for a thin n).

    In the tune samples (2026-11-27, H200 and H100; shapes where tiles of one and of several tiles along the skinny
    side were both timed): for ``m <= 128``, several tile rows beat one on 7 of 50 shapes, all with ``n <= 744`` (by
    3% to 11%), and lost on all 36 with ``n > 960`` (by 0% to 112%, 1.31x at the geomean); for ``n <= 128``, several
    tile columns lost on 15 of the 18 shapes with ``m > 960`` (by up to 179%, 1.51x at the geomean over the 18) and
    won on 3 by 3% to 4%. Probe (H100, cuBLAS in the same run) on the 15 train, validation and fresh shapes whose
    choice this changes: 0.786x before, 0.903x after."""
    return skinny <= SKINNY and -(-wide // 64) >= target.sms // 8


def thin_grid(m: int, n: int, tile: tuple[int, int, int], layout: Layout, target: Target) -> bool:
    """Whether ``tile`` on ``layout`` is a thin-n grid: unswapped CTAs on a cluster of :data:`THIN_GRIDS` CTAs
    stacked along m that share B (``"b"``), whose tile rows fit one wave of the clusters the device holds. On a thin n
    (at most :data:`THIN` columns on a wide m, :func:`wide_enough`) the candidates are only these: every CTA reads
    the same few columns of B, and a cluster multicasts them (cuBLAS: 128 x 32 CTAs on clusters of 4 along m for
    14648 x 32 x 1080, 116 CTAs for 115 tile rows). The last cluster may hold CTAs past ``m``: they load their share
    of B for the others.

    Measured on an H100 (2026-11-28, cuBLAS in the same run, 3 interleaved rounds; ``docs/results/thin-probe-h100
    .csv``): on 30 fresh thin-n shapes (train seed, draws 520000-600000), the ranker's first of these against its
    first of all candidates: 0.943x to 0.969x cuBLAS over n <= 128, 0.943x to 0.983x with the rule at n <= 64 (THIN
    was read off this run; 4344 x 24 x 816 0.49x to 0.80x, 2312 x 24 x 2992 0.71x to 0.99x), losses where n was 104
    to 128 (10488 x 104 x 1160 1.31x to 0.96x). Then, the rule frozen, on 40 new draws (600000-700000) whose choice
    it changes: 0.924x to 0.958x (faster on 21, slower on 12); held out, the 9 test shapes it changes: 0.887x to
    0.978x."""
    tm = tile_counts(m, n, tile)[0]
    return (
        not layout.swap
        and layout.multicast == "b"
        and layout.cluster in THIN_GRIDS
        and tm <= target.resident(layout.cluster)
    )


def hidden_padding(m: int, n: int, dtype: str, tile: tuple[int, int, int], layout: Layout, target: Target) -> bool:
    """Whether a swapped tile's padding hides under the loads: its padded multiply-adds at the tensor rate take no
    longer than reading A and B once from HBM, ``2 (tm BM)(tn BN) k / F <= (m + n) k s / HBM_rate`` (``k`` cancels).

    A swapped CTA's columns are the wgmma's M, 64 at least, so on a thin ``n`` every swapped tile pads, and the
    padding bound left only tiles of 64 to 512 rows and few columns, on as few CTAs as ``m / 64``. On an H100
    (2026-11-27, cuBLAS in the same run), the 69 train, validation and fresh shapes where these tiles changed the
    ranker's choice (the smaller of ``m`` and ``n`` 16 to 272) ran 0.89x cuBLAS before and 0.97x with them (validation
    0.91x to 1.01x)."""
    if not layout.swap:
        return False
    tm, tn = tile_counts(m, n, tile)
    return 2 * tm * tile[0] * tn * tile[1] / target.tensor_flops <= (m + n) * itemsize(dtype) / target.hbm_bandwidth


def order_group(tm: int, ragged: bool = False) -> int:
    """The tile order's group the candidates offer for ``tm`` tile rows: the largest divisor of ``tm`` not above
    :data:`RASTER` (a whole number of groups); where that is 1 (``tm`` above :data:`RASTER` with no divisor from 2 to
    it, a prime say) row-major, or with ``ragged`` (:func:`ragged_rows`) :data:`RASTER` itself: ``tm // RASTER``
    groups, then one of ``tm % RASTER`` rows.

    Ragged groups cost the kernel more index math (a selector and two partial orders), and on 24 fresh shapes of a
    prime count of tile rows they ran 0.851x cuBLAS against 0.869x row-major (H100, 2026-11-27,
    ``docs/results/ragged-probe-h100.csv``). In place of a smaller whole group they gain nothing (16 fresh shapes,
    0.865x against 0.867x): only a count that would walk row-major takes them.
    """
    whole = max(d for d in range(1, min(RASTER, tm) + 1) if tm % d == 0)
    return RASTER if ragged and whole == 1 and tm > RASTER else whole


def ragged_rows(n: int, k: int, dtype: str, tn: int, resident: int, target: Target) -> bool:
    """Whether tile rows that would walk row-major walk in ragged groups (:func:`order_group`): where B outgrows
    twice the L2 (``n k s > 2 L2``: every pass over the tile rows reads it from HBM again) and a row-major wave of
    ``resident`` workgroups spans fewer than :data:`RASTER` tile rows (``tn RASTER > resident``: the wave itself does
    not group them).

    Measured on fresh shapes whose ranker-first config walked row-major on a prime count of tile rows (H100,
    2026-11-27, cuBLAS in the same run, 3 interleaved rounds): where B outgrew twice the L2 (the rule's first part,
    stated before the run), ragged groups took 24 shapes from 0.860x cuBLAS to 0.892x; the second part, read off
    that run, then held on 24 fresh shapes drawn for it: 0.804x to 0.863x, faster on 16
    (``docs/results/ragged-rule-h100.csv``; 1285x14336x4096 0.76x to 0.89x, 7709x28672x4096 0.60x to 0.93x)."""
    return n * k * itemsize(dtype) > 2 * target.l2_bytes and tn * RASTER > resident


def schedules(
    m: int,
    n: int,
    k: int,
    dtype: str,
    tile: tuple[int, int, int],
    layout: Layout,
    target: Target,
    objective: str = "kernel",
) -> list[Config]:
    """Every schedule of one tile and layout (module docstring), each on its grid and tile orders; by call time
    (``objective``) split-K's fixup in the kernel too, after the split-K it mirrors."""
    check_objective(objective)
    tm, tn = tile_counts(m, n, tile)
    tiles, kt = tm * tn, k_iterations(k, tile)
    resident = target.resident(layout.cluster)
    big = (m + n) * k * itemsize(dtype) > target.l2_bytes
    group = order_group(tm, ragged_rows(n, k, dtype, tn, resident, target)) if big else 1
    orders = (group, 1) if group > 1 else (1,)  # grouped first: a tie keeps the order that reuses the L2
    out: list[Config] = []

    def add(transform: str, g: int, batches: int | None = None, split: int | None = None) -> None:
        for r in orders if split is None else (1,):
            out.append(Config(tile, layout, transform, g, r, batches, split))

    add("dataparallel", min(tiles, resident))
    if tiles > resident:
        add("streamk2tile", resident)
        for b in (1, 3):
            if split_sk_dp(tiles, kt, resident, b)[1] > 0:
                add("streamk_hybrid", resident, batches=b)
    if kt > 1:
        for g in dict.fromkeys([*step_grids(tiles, kt, resident), resident] if tiles < resident else []):
            add("streamk", g)
        if tiles * SPLITK_MAX_TILES_FRACTION <= resident:
            split = int(split_chunks(kt, min(kt, resident // tiles))[0])  # the non-empty chunks that split K
            if split > 1:
                add("splitk_reduce", splitk_workgroups(tiles, kt, split), split=split)
                if objective == "call":  # one launch: the chunk that owns a tile adds the others' partials
                    add(TWIN, splitk_workgroups(tiles, kt, split), split=split)
    return out


def candidates(
    m: int,
    n: int,
    k: int,
    dtype: str,
    target: Target,
    path: str,
    supports: Supports,
    named: str | None = None,
    objective: str = "kernel",
) -> list[Config]:
    """Every config worth ranking for an ``m x n x k`` GEMM on ``target``'s ``path``, in a fixed order: those
    :func:`offered` to the transform ``named`` (None: ``transform="auto"``), for ``objective`` (:func:`schedules`;
    one of :data:`~.objective.OBJECTIVES`, else a ``ValueError``)."""
    return _candidates(m, n, k, dtype, target, path, supports, named, check_objective(objective))


@functools.lru_cache(maxsize=1024)
def _candidates(
    m: int,
    n: int,
    k: int,
    dtype: str,
    target: Target,
    path: str,
    supports: Supports,
    named: str | None,
    objective: str,
) -> list[Config]:
    return [
        c
        for t, lay in tiles_for(m, n, k, dtype, target, path, supports)
        for c in schedules(m, n, k, dtype, t, lay, target, objective)
        if offered(c, m, n, named)
    ]


def offered(config: Config, m: int, n: int, named: str | None = None) -> bool:
    """Whether the ranker offers ``config`` on an ``m x n`` output for the transform ``named`` (None:
    ``transform="auto"``): a schedule of :data:`NAMED_ONLY`, and Stream-K on a grid its tiles nearly fill
    (:func:`near_wave`), only where the caller names its transform."""
    if config.transform == named:
        return True
    return (config.transform, config.sk_batches) not in NAMED_ONLY and not near_wave(config, m, n)


def near_wave(config: Config, m: int, n: int) -> bool:
    """Whether ``config`` is Stream-K on a grid that its ``T`` tiles fill to :data:`NEAR_WAVE` or more
    (``3 T >= 2 g``). There Stream-K saves at most a third of one wave's K iterations, and nearly every tile is
    shared by two workgroups (a fixup, a second prologue and epilogue); data-parallel runs the same tiles in one
    wave, each whole.

    Measured on an H200 (2026-11-29, cuBLAS in the same run, 2 rounds): of 80 fresh shapes (train seed, draws
    2952000-2960000) whose ranker-first config was Stream-K, the 24 on such grids ran 1.095x the time of the fastest
    of the ranker's first 8 configs at the geomean, and that was data-parallel on 19; on the 56 less full grids
    1.049x, and Stream-K was the fastest on 29 (``docs/results/nearwave-probe-h200.csv``). In the tune tables the
    next config the ranker offers ran 0.977x the time of such a Stream-K first on 10 train shapes, 0.985x on 8
    validation ones.
    The rule, stated before the run, on the 83 of 7874 fresh draws (2960000-2968000) whose first config it changes:
    0.982x to 1.007x cuBLAS, faster by 2% on 37 and slower on 17; below 0.85x 13 to 4, p10 0.821 to 0.881
    (``docs/results/nearwave-fresh-{before,after}-h200.csv``)."""
    if config.transform != "streamk":
        return False
    return NEAR_WAVE[1] * output_tiles(m, n, config.tile) >= NEAR_WAVE[0] * config.workgroups
