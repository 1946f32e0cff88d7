"""``python -m ctgraph tune shapes.csv``: measure every policy on every shape and build the tuning table.

For each shape (fp16, the given macro tile, recorded per row) each policy of
:data:`ctgraph.policy.POLICIES` is timed (kernel time, as the benchmark; in the tile order ``auto`` gives
the shape, :func:`~ctgraph.policy.raster_for`); the fastest one's Bloom filter gets the shape. The
table goes to the cache directory (``CTGRAPH_CACHE_DIR/tuning/``), where ``transform="auto"`` finds it,
and to ``--out`` when given (the shipped table is made that way). ``--update TABLE`` keeps the rows of
``TABLE`` that still apply (the same tile as ``macro_tile="auto"`` picks now) and times only the other
shapes, and the policies a kept row has no time for: after a change of the tile model, only the shapes
whose tile changed are re-timed. Both are written after each shape, whole files only: a tune stopped midway (a
Ctrl-C, a time limit) keeps the shapes it finished, and ``--update`` on its table times the rest. Needs torch and
a GPU.

**Tile search** (``--tiles N``, with ``macro_tile="auto"``): the tile model ranks its candidate tiles
(:func:`ctgraph.tiles.ranked_tiles`) and the first ``N`` are timed under :data:`TILE_POLICIES`, the
policies that win most shapes; the row records each tile's best time (``"tiles"``) and takes the fastest
tile (:func:`pick_tile`), on which the other policies are then timed. ``macro_tile="auto"`` then gives that
shape the measured tile (:func:`ctgraph.policy.auto_tile`); a row with ``"tiles"`` is never re-searched by
``--update``.

**Layout search** (``--layouts``, with ``macro_tile="auto"``): then the swapped tiles fitted to whole waves on
cuBLAS's cluster layouts (:func:`ctgraph.tiles.wave_layouts`, which the tile model does not price) and, where the
row's tile makes few tiles (a grid that splits K), pairs of its CTAs that share an operand (:func:`pair_layouts`) are
timed under :func:`layout_policies`; the row records each one's best time (``"layouts"``) and, where the fastest
beats the row's tile by :data:`TILE_MARGIN`, takes its tile and its layout (``"layout"``,
:class:`ctgraph.tiles.Layout`), on which the other policies are then timed. The wgmma path runs a row's tile on the
row's layout where the caller leaves the layout open (:func:`ctgraph.policy.auto_layout`). ``--update --layouts``
searches a row with ``"layouts"`` again only for the layouts it has no time for (:func:`untried_layouts`: those
added to the search since), against the row's tile and layout.

**Recheck** (``--recheck R``, after a change of the kernels): a searched row's tile, and every tile and layout it
searched whose best time was within ``R`` times the row's best, are timed again (:func:`recheck`); the row keeps
the fastest where it beats the row's own by :data:`TILE_MARGIN`, and every policy is timed again on what it keeps;
where that is the row's own tile and layout, the row keeps its policy unless another beats it by
:data:`POLICY_MARGIN` (:func:`pick_policy`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from .cache import write_whole
from .policy import (
    BY_NAME,
    POLICIES,
    Policy,
    TuningTable,
    load_table,
    parse_tile,
    raster_for,
    select,
    tile_name,
    user_table_path,
)
from .tiles import Layout, choose_tile, output_tiles, ranked_tiles, resident_clusters, tile_layout, wave_layouts

__all__ = [
    "LAYOUT_POLICIES",
    "TILE_MARGIN",
    "TILE_POLICIES",
    "block_layouts",
    "layout_key",
    "layout_policies",
    "near_candidates",
    "pair_layouts",
    "parse_layout_key",
    "pick_policy",
    "pick_tile",
    "recheck",
    "time_policy",
    "tune",
    "untried_layouts",
]

# the policies every candidate tile is timed under: in the H100 table before tile search (9468c49) the best of
# them was within 3% of the best of all ten policies on 118 of its 128 shapes (the fastest outright on 74)
TILE_POLICIES = ("dataparallel/resident", "streamk/model", "streamk2tile/model", "splitk_reduce/model")
# NOTE: the least of N x 4 timings is biased low by their noise (1-2% a timing on the H100): another tile
# replaces the model's only when its best is at least 3% faster.
TILE_MARGIN = 0.97
# NOTE: the same for a recheck's policies on the row's own tile and layout: in the H100 recheck of the 26 rows of 20 us
# or more (2026-11-26), 18 rows changed only their policy, 15 of them to one within 2% of the old, and the corpus ran
# them 0.998x as fast as before (docs/benchmarks.md). A row keeps its policy unless another is 2% faster.
POLICY_MARGIN = 0.98
# the policies every wave layout is timed under: its tiles fill whole waves, so split-K has nothing to fill
LAYOUT_POLICIES = ("dataparallel/resident", "streamk/model", "streamk2tile/model")
# a layout whose tiles are at most this many is timed under split-K's policies too (:func:`layout_policies`)
SPLIT_TILES = 33
# a row's own tile (one CTA) is paired on 2-CTA clusters (:func:`pair_layouts`) where it makes at most this many tiles
PAIR_TILES = 66
# the columns of the two-block CTAs of :func:`block_layouts`: what two consumer warpgroups of 2 x 64 rows hold
BLOCK_COLUMNS = (144, 160)


def time_policy(
    g: Any, policy: Policy, A: Any, B: Any, D: Any, options: dict[str, Any] | None = None
) -> tuple[float, int] | None:
    """``(kernel seconds, workgroups)`` of GEMM graph ``g`` under ``policy`` on this GPU, with torch operands
    ``A``, ``B`` and output ``D`` (timed as the benchmark does) and the backend's ``options`` (a layout's); None
    where the policy cannot run the shape (split-K with more tiles than workgroups)."""
    import torch

    import ctgraph
    from lowering.cuda import l2_bytes, model_workgroups

    from .bench import _kernel_time

    options = options or {}
    p = g.attrs["gemm"]
    try:
        wg = model_workgroups(g, policy.transform, options, policy.sk_batches) if policy.grid == "model" else None
        raster = raster_for(policy.transform, p.m, p.n, p.k, p.dtype, l2_bytes())
        kern = ctgraph.compile(
            g, policy.transform, workgroups=wg, target="cuda", sk_batches=policy.sk_batches, raster=raster, **options
        )
    except ValueError:
        return None

    def run() -> Any:
        return kern(A, B, out=D, stream=torch.cuda.current_stream())

    return _kernel_time(run, reps=10), kern.workgroups


def _row(
    m: int,
    n: int,
    k: int,
    tile: str,
    seconds: dict[str, float],
    tiles: dict[str, float] | None,
    layout: Layout | None,
    layouts: dict[str, float] | None,
    keep: str | None = None,
) -> dict[str, Any]:
    """A table row: the shape's tile, each policy's seconds and the best (:func:`pick_policy`), and what a search
    recorded."""
    row = {"m": m, "n": n, "k": k, "dtype": "float16", "tile": tile, "best": pick_policy(seconds, keep)}
    row |= {"seconds": seconds} | ({"tiles": tiles} if tiles is not None else {})
    return row | ({"layout": layout.name} if layout else {}) | ({"layouts": layouts} if layouts is not None else {})


def pick_policy(seconds: dict[str, float], keep: str | None = None) -> str:
    """The policy a row takes from each policy's seconds: the fastest, or where the row had ``keep`` before (a
    recheck on the same tile and layout), that one unless the fastest beats it by :data:`POLICY_MARGIN`."""
    fastest = min(seconds, key=seconds.__getitem__)
    if keep is None or keep not in seconds:
        return fastest
    return fastest if seconds[fastest] <= POLICY_MARGIN * seconds[keep] else keep


def pick_tile(model_tile: str, best: dict[str, float]) -> str:
    """The tile a search keeps, from each tried tile's best seconds: the fastest, where it beats the model's
    own tile (``model_tile``) by :data:`TILE_MARGIN`, else the model's."""
    fastest = min(best, key=best.__getitem__)
    return fastest if best[fastest] <= TILE_MARGIN * best.get(model_tile, math.inf) else model_tile


def _time_policies(
    g: Any, policies: list[Policy], A: Any, B: Any, D: Any, options: dict[str, Any] | None = None
) -> dict[str, float]:
    """Seconds of each policy on graph ``g`` (infinity where it cannot run the shape)."""
    out = {}
    for p in policies:
        timed = time_policy(g, p, A, B, D, options)
        out[p.name] = timed[0] if timed else math.inf
    return out


def _search(
    m: int, n: int, k: int, count: int, A: Any, B: Any, D: Any
) -> tuple[str, dict[str, float], dict[str, float]]:
    """Time the tile model's first ``count`` tiles under :data:`TILE_POLICIES`: ``(kept tile, its policies'
    seconds, each tile's best seconds)``."""
    import ctgraph

    ranked = ranked_tiles(m, n, k)  # the first is the model's own (choose_tile)
    seconds = {}
    for tile in ranked[:count]:
        g = ctgraph.gemm(m, n, k, macro_tile=tile)
        seconds[tile_name(tile)] = _time_policies(g, [BY_NAME[p] for p in TILE_POLICIES], A, B, D)
    best = {t: min(s.values()) for t, s in seconds.items()}
    kept = pick_tile(tile_name(ranked[0]), best)
    return kept, seconds[kept], best


def layout_key(tile: str, layout: Layout) -> str:
    """A searched layout's key in a row's ``"layouts"``: ``"160x256x64 2a/swap"`` (:func:`parse_layout_key`)."""
    return f"{tile} {layout.name}"


def parse_layout_key(key: str) -> tuple[str, Layout]:
    """``(tile, layout)`` of a key :func:`layout_key` wrote."""
    tile, name = key.split()
    return tile, Layout.parse(name)


def pair_layouts(m: int, n: int, tile: str) -> list[tuple[str, Layout]]:
    """Where ``tile`` runs on one CTA and makes at most :data:`PAIR_TILES` tiles of ``m x n`` (a grid that splits K):
    two of its CTAs on a cluster that share B (``2*BM x BN``, ``"2b"``) and two that share A (``BM x 2*BN``,
    ``"2a"``), swapped as the tile is. Each CTA then reads half of the shared operand from the L2 for the same work;
    on the H100 256x256x65536 ran split-K in 128 x 128 tiles on 66 clusters of 2 CTAs that share B in 32.4 us,
    against 35.9 in 64 x 64 tiles on 132 CTAs (docs/benchmarks.md). The wave layouts only fit whole waves of tiles."""
    bm, bn, bk = parse_tile(tile)
    if bm > 256 or bn > 256 or tile_layout((bm, bn, bk)) is not None or output_tiles(m, n, (bm, bn, bk)) > PAIR_TILES:
        return []
    swap = bm % 64 != 0
    return [(tile_name((2 * bm, bn, bk)), Layout(2, "b", swap)), (tile_name((bm, 2 * bn, bk)), Layout(2, "a", swap))]


def block_layouts(m: int, n: int, sms: int = 132) -> list[tuple[str, Layout]]:
    """Pairs of CTAs of 256 rows that share B (``512 x BN``, ``"2b"``), each on two consumer warpgroups of two 64-row
    blocks (:func:`lowering.cuda.hopper.row_blocks`) and :data:`BLOCK_COLUMNS` columns, where the tiles make three
    quarters of a wave to one wave of the clusters of 2 the GPU holds: cuBLAS's CTAs on 960x5168x6224 (nvjet 160x256
    1x2). On the H100 that shape took 512 x 160 tiles so (92.0 us against 98.9, 0.95x cuBLAS against 0.88x); on
    shapes of several waves (4096^3, 8192^3) these CTAs ran slower than the table's (docs/benchmarks.md)."""
    resident = resident_clusters(sms)[2]
    tiles = [(512, bn, 64) for bn in BLOCK_COLUMNS if bn <= n]
    return [
        (tile_name(t), Layout(2, "b", False))
        for t in tiles
        if 3 * resident <= 4 * output_tiles(m, n, t) <= 4 * resident
    ]


def layout_policies(m: int, n: int, tile: str) -> tuple[str, ...]:
    """What a layout of ``tile`` is timed under: :data:`LAYOUT_POLICIES`, and split-K's where its tiles of ``m x n``
    are at most :data:`SPLIT_TILES` (few enough that the grid splits K)."""
    few = output_tiles(m, n, parse_tile(tile)) <= SPLIT_TILES
    return LAYOUT_POLICIES + (("splitk_reduce/model", "splitk_reduce/resident") if few else ())


def untried_layouts(
    m: int, n: int, tried: dict[str, float] | None, tiles: tuple[str, ...] = ()
) -> list[tuple[str, Layout]]:
    """The wave layouts (:func:`ctgraph.tiles.wave_layouts`) of ``m x n``, the pairs of CTAs of each of ``tiles``
    (:func:`pair_layouts`) and the two-block CTAs (:func:`block_layouts`) that a row's ``"layouts"`` has no time for:
    all of them for a row never searched, the new ones for a row searched before they were added."""
    fitted = [(tile_name(t), layout) for t, layout in wave_layouts(m, n)]
    fitted += [pair for tile in tiles for pair in pair_layouts(m, n, tile)]
    fitted += block_layouts(m, n)
    return [(t, layout) for t, layout in dict.fromkeys(fitted) if layout_key(t, layout) not in (tried or {})]


def _search_layouts(
    m: int, n: int, k: int, best: float, A: Any, B: Any, D: Any, candidates: list[tuple[str, Layout]]
) -> tuple[tuple[str, Layout, dict[str, float]] | None, dict[str, float]]:
    """Time ``candidates`` (:func:`untried_layouts`) under :func:`layout_policies`: ``(kept, times)``, where ``kept``
    is the fastest as ``(tile, layout, its policies' seconds)`` where it beats ``best`` (the row's tile and layout) by
    :data:`TILE_MARGIN`, else None, and ``times`` each one's best seconds by its ``"tile layout"`` key."""
    import ctgraph

    timed = {}
    for tile, layout in candidates:
        g = ctgraph.gemm(m, n, k, macro_tile=parse_tile(tile))
        seconds = _time_policies(g, [BY_NAME[p] for p in layout_policies(m, n, tile)], A, B, D, layout.options())
        timed[layout_key(tile, layout)] = (tile, layout, seconds)
    times = {name: min(s.values()) for name, (_, _, s) in timed.items()}
    fastest = min(times, key=times.__getitem__, default=None)
    return (timed[fastest] if fastest is not None and times[fastest] <= TILE_MARGIN * best else None), times


def _paired(row: dict[str, Any] | None, tile: str) -> tuple[str, ...]:
    """The tiles whose CTAs a layout search pairs (:func:`pair_layouts`): the row's own and the fastest other tile
    its tile search timed."""
    timed: dict[str, float] = (row or {}).get("tiles", {})
    others = sorted((t for t in timed if t != tile), key=timed.__getitem__)
    return (tile, *others[:1])


def _own(row: dict[str, Any]) -> tuple[str, Layout | None]:
    """A table row's tile and the layout it runs on (None: the tile's own)."""
    return row["tile"], Layout.parse(row["layout"]) if "layout" in row else None


def near_candidates(row: dict[str, Any], ratio: float) -> list[tuple[str, Layout | None]]:
    """A searched row's own ``(tile, layout)`` and each tile (layout None) and layout it searched whose best time was
    within ``ratio`` times the row's best, in a fixed order: what :func:`recheck` times."""
    best = min(row["seconds"].values())
    near: set[tuple[str, Layout | None]] = {_own(row)}
    near |= {(t, None) for t, secs in row.get("tiles", {}).items() if secs <= ratio * best}
    near |= {parse_layout_key(key) for key, secs in row.get("layouts", {}).items() if secs <= ratio * best}
    return sorted(near, key=lambda c: (c[0], c[1].name if c[1] else ""))


def recheck(old: dict[str, Any], ratio: float, A: Any, B: Any, D: Any) -> dict[str, Any]:
    """A searched table row (``"tiles"`` or ``"layouts"``) timed again: its tile and layout, and each tile (under
    :data:`TILE_POLICIES`) and layout (under :func:`layout_policies`) it searched whose best was within ``ratio``
    times the row's best (:func:`near_candidates`; a tile equal to the row's own runs on the row's layout, as
    ``macro_tile="auto"`` runs it, :func:`lowering.cuda.with_tuned_layout`). Their new bests replace the old in
    ``"tiles"`` and ``"layouts"``; the row keeps the fastest where it beats its own tile and layout by
    :data:`TILE_MARGIN`, with every policy timed on it, and on its own its policy unless another beats that one by
    :data:`POLICY_MARGIN`."""
    import ctgraph

    m, n, k = old["m"], old["n"], old["k"]
    own = _own(old)
    timed = {}
    for tile, layout in near_candidates(old, ratio):
        g = ctgraph.gemm(m, n, k, macro_tile=parse_tile(tile))
        policies = [BY_NAME[p] for p in (layout_policies(m, n, tile) if layout else TILE_POLICIES)]
        timed[tile, layout] = min(_time_policies(g, policies, A, B, D, layout.options() if layout else None).values())
    fastest = min(timed, key=timed.__getitem__)
    tile, layout = fastest if timed[fastest] <= TILE_MARGIN * timed[own] else own
    g = ctgraph.gemm(m, n, k, macro_tile=parse_tile(tile))
    seconds = _time_policies(g, list(POLICIES), A, B, D, layout.options() if layout else None)
    tiles = old["tiles"] | {t: secs for (t, lay), secs in timed.items() if lay is None} if "tiles" in old else None
    layouts = (
        old["layouts"] | {layout_key(t, lay): s for (t, lay), s in timed.items() if lay} if "layouts" in old else None
    )
    return _row(m, n, k, tile, seconds, tiles, layout, layouts, old["best"] if (tile, layout) == own else None)


def tune(
    shapes: list[tuple[int, int, int]],
    macro_tile: tuple[int, int, int] | str = "auto",
    out: Path | None = None,
    progress: bool = True,
    update: TuningTable | None = None,
    tiles: int = 0,
    layouts: bool = False,
    recheck_within: float = 0.0,
) -> TuningTable:
    """Time the policies (and with ``tiles``, the first ``tiles`` candidate tiles; with ``layouts``, the wave
    layouts; with ``recheck_within``, a searched row's near candidates again, :func:`recheck`) on each shape; see
    the module."""
    if isinstance(tiles, bool) or not isinstance(tiles, int) or tiles < 0:
        raise ValueError(f"tiles must be a count of candidate tiles to time (0: the model's tile only), got {tiles!r}")
    if not isinstance(layouts, bool):
        raise ValueError(f"layouts must be True (search the wave layouts) or False, got {layouts!r}")
    if (
        isinstance(recheck_within, bool)
        or not isinstance(recheck_within, (int, float))
        or not (recheck_within == 0 or 1 <= recheck_within <= 2)
    ):
        want = "a ratio to the row's best time, 1 to 2 (e.g. 1.1), or 0 (no recheck)"
        raise ValueError(f"recheck_within must be {want}, got {recheck_within!r}")
    for name, given in (("tiles", tiles), ("layouts", layouts), ("recheck_within", recheck_within)):
        if given and macro_tile != "auto":
            raise ValueError(f"{name}: a tile search needs macro_tile='auto', got {macro_tile!r}")
    import torch

    import ctgraph

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rows: list[dict[str, Any]] = []
    if update is not None and update.macro_tile != tile_name(macro_tile):
        raise ValueError(f"update: the table was tuned with macro_tile {update.macro_tile}, not {macro_tile}")
    gpu = torch.cuda.get_device_name()
    if update is not None and update.device != gpu:
        raise ValueError(f"update: the table is of a {update.device}, this GPU is a {gpu}")
    paths = [path for path in (user_table_path(gpu), out) if path is not None]

    def save(rows: list[dict[str, Any]]) -> TuningTable:
        """The table of the rows timed so far (and ``update``'s others), written to ``paths``."""
        table = update.updated(rows) if update is not None else TuningTable.build(gpu, rows, macro_tile=macro_tile)
        for path in paths:
            write_whole(path, table.to_json())  # a stopped tune leaves the last whole table
        return table

    for m, n, k in shapes:
        old = update.row(m, n, k, "float16") if update is not None else None
        if old is not None and ("tiles" in old or "layouts" in old):  # a searched row keeps its tile
            tile = old["tile"]
        else:
            tile = tile_name(choose_tile(m, n, k) if macro_tile == "auto" else macro_tile)
        seconds = dict(old["seconds"]) if old is not None and old.get("tile", tile) == tile else {}
        layout = Layout.parse(old["layout"]) if old is not None and "layout" in old and old["tile"] == tile else None
        missing = [p for p in POLICIES if p.name not in seconds]
        tried = old.get("layouts") if old is not None else None
        untried = untried_layouts(m, n, tried, _paired(old, tile) if layout is None else ()) if layouts else []
        searched_all = old is not None and (not tiles or "tiles" in old) and not untried
        rechecked = old if recheck_within and old is not None and ("tiles" in old or "layouts" in old) else None
        if old is not None and seconds and not missing and searched_all and rechecked is None:
            continue
        A = torch.randn(m, k, device="cuda", dtype=torch.float16)
        B = torch.randn(k, n, device="cuda", dtype=torch.float16)
        D = torch.empty(m, n, device="cuda", dtype=torch.float16)
        if rechecked is not None:
            rows.append(row := recheck(rechecked, recheck_within, A, B, D))
            save(rows)  # an interrupted tune keeps the shapes it finished
            if progress:
                on = f" on {row['layout']}" if "layout" in row else ""
                same = (row["tile"], row.get("layout")) == (tile, rechecked.get("layout"))
                was = "" if same else f" (was {tile}{' on ' + rechecked['layout'] if 'layout' in rechecked else ''})"
                print(f"{m}x{n}x{k}: rechecked, {row['tile']}{on}{was} {row['best']}", flush=True)
            continue
        searched = old.get("tiles") if old is not None else None
        if tiles and searched is None:
            tile, seconds, searched = _search(m, n, k, tiles, A, B, D)
            layout = None
        if untried:
            if not seconds:  # the row's tile before the layouts: under the policies they are timed under
                g = ctgraph.gemm(m, n, k, macro_tile=parse_tile(tile))
                seconds = _time_policies(g, [BY_NAME[p] for p in TILE_POLICIES], A, B, D)
            kept, times = _search_layouts(m, n, k, min(seconds.values()), A, B, D, untried)
            tried = (tried or {}) | times
            if kept is not None:
                tile, layout, seconds = kept
        missing = [p for p in POLICIES if p.name not in seconds]
        g = ctgraph.gemm(m, n, k, macro_tile=parse_tile(tile))
        seconds |= _time_policies(g, missing, A, B, D, layout.options() if layout else None)
        rows.append(row := _row(m, n, k, tile, seconds, searched, layout, tried))
        save(rows)
        if progress:
            on, best = f" on {layout.name}" if layout else "", row["best"]
            print(f"{m}x{n}x{k}: {tile}{on} {best} ({2 * m * n * k / seconds[best] / 1e12:.0f} TF)", flush=True)
    table = save(rows)
    if progress:
        if update is not None:
            print(f"re-timed {len(rows)} shapes, kept {len(table.rows) - len(rows)} rows of the table", flush=True)
        for path in paths:
            print(f"wrote {path}")
    load_table.cache_clear()  # the new table takes effect in this process too
    select.cache_clear()
    return table
