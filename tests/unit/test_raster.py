"""Tile rasterization (``raster=G``): the output tiles walked G rows at a time, read off the graph."""

from __future__ import annotations

from collections import Counter

import pytest

import ctgraph
from ctgraph.dimensions import Linear
from ctgraph.edges import Tile
from ctgraph.passes import PIPELINES, TAKES_SPLIT, split_sk_dp
from ctgraph.passes.common import raster_group
from ctgraph.select import H100_SXM, Config, Layout, Selection
from ctgraph.select.candidates import RASTER, order_group, ragged_rows, schedules
from ctgraph.summary import summarize

PERSISTENT = [t for t in PIPELINES if t not in TAKES_SPLIT]


def grouped(mt, nt, group):
    """The reference walk (Triton's): groups of ``group`` tile rows, the last one ragged, each column by column."""
    out = []
    for first in range(0, mt, group):
        rows = min(mt - first, group)  # Triton's group_size_m
        out += [(first + r, n) for n in range(nt) for r in range(rows)]
    return out


def compile_cpu(shape, transform, raster, workgroups=1, tile=(16, 16, 8)):
    g = ctgraph.gemm(*shape, macro_tile=tile, dtype="float32")
    return ctgraph.compile(g, transform, workgroups=workgroups, target="cpu", raster=raster)


@pytest.mark.parametrize(
    ("rows", "raster", "want"),
    [(16, 8, 8), (12, 8, 8), (7, 8, 7), (11, 8, 8), (3, 8, 3), (1, 4, 1), (9, 1, 1), (10, 4, 4), (13, 2, 2)],
)
def test_group_is_the_raster_capped_at_the_tile_rows(rows, raster, want):
    assert raster_group(rows, raster) == want


@pytest.mark.parametrize("transform", PERSISTENT)
@pytest.mark.parametrize(
    ("shape", "raster"), [((96, 80, 24), 3), ((130, 33, 17), 8), ((64, 64, 8), 4), ((176, 40, 16), 4)]
)
def test_one_workgroup_walks_the_grouped_order(shape, transform, raster):
    """With one workgroup the schedule is the whole walk: output tiles in grouped order, K innermost."""
    kern = compile_cpu(shape, transform, raster)
    mt, nt, kt = kern.problem.tiles
    assert kern.raster == raster_group(mt, raster) > 1
    (work,) = kern.schedule()
    assert work == [(m, n, k) for m, n in grouped(mt, nt, kern.raster) for k in range(kt)]


@pytest.mark.parametrize("workgroups", [1, 3, 7, 40])
@pytest.mark.parametrize("transform", PERSISTENT)
@pytest.mark.parametrize("shape", [(96, 80, 24), (130, 33, 17), (1, 5, 3), (160, 192, 200)])
def test_every_iteration_exactly_once(shape, transform, workgroups):
    kern = compile_cpu(shape, transform, 4, workgroups)
    mt, nt, kt = kern.problem.tiles
    seen = Counter(it for work in kern.schedule() for it in work)
    assert seen == Counter((m, n, k) for m in range(mt) for n in range(nt) for k in range(kt))


@pytest.mark.parametrize("workgroups", [3, 7, 20])
@pytest.mark.parametrize(
    ("transform", "batches"), [("streamk2tile", None), ("streamk_hybrid", 1), ("streamk_hybrid", 3)]
)
def test_data_parallel_tiles_run_in_rounds_of_neighbours(transform, batches, workgroups):
    """Under a raster, the whole tiles after a schedule's Stream-K part go out in rounds (as in the
    data-parallel transform): the i-th of every workgroup's are the next ``workgroups`` tiles of the walk."""
    g = ctgraph.gemm(160, 192, 80, macro_tile=(16, 16, 8), dtype="float32")
    kern = ctgraph.compile(g, transform, workgroups=workgroups, target="cpu", raster=4, sk_batches=batches)
    mt, nt, kt = kern.problem.tiles
    walk = grouped(mt, nt, kern.raster)
    _, n_dp = split_sk_dp(mt * nt, kt, workgroups, batches or 2)
    rounds = n_dp // kt // workgroups
    assert rounds >= 1
    for wg, work in enumerate(kern.schedule()):
        tail = work[len(work) - rounds * kt :]
        for i in range(rounds):
            m, n = walk[len(walk) - rounds * workgroups + i * workgroups + wg]
            assert tail[i * kt : (i + 1) * kt] == [(m, n, k) for k in range(kt)]


def test_graph_carries_the_group_as_a_tile_edge():
    kern = compile_cpu((128, 64, 32), "streamk", 4)
    g = kern.graph
    (groups,) = g.dimensions(Linear, name="raster groups")
    (rows,) = g.dimensions(Linear, name="rows of a raster group")
    (edge,) = g.edges_in(groups)
    assert isinstance(g.edge(edge), Tile) and g.outputs(edge) == [groups, rows]
    assert (g.size(groups), g.size(rows)) == (2, 4)
    assert "numRasterGroups" in kern.source
    assert "tile order: groups of 4 tile rows" in summarize(kern)


@pytest.mark.parametrize("transform", PERSISTENT)
def test_raster_one_is_the_seed_order(transform):
    """raster=1 (and a group capped to 1 by a single tile row) adds nothing: the graph and source are the default's."""
    for shape, raster in (((176, 64, 32), 1), ((16, 64, 32), 8)):
        default = compile_cpu(shape, transform, None, 3)
        kern = compile_cpu(shape, transform, raster, 3)
        assert kern.raster == 1
        assert kern.source == default.source and kern.schedule() == default.schedule()


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "8"])
def test_bad_raster(bad):
    with pytest.raises(ValueError, match="raster must be a positive integer"):
        compile_cpu((16, 16, 16), "streamk", bad)


@pytest.mark.parametrize("transform", sorted(TAKES_SPLIT))
def test_raster_is_refused_for_split_k(transform):
    with pytest.raises(ValueError, match="raster applies to"):
        compile_cpu((16, 16, 16), transform, 4)


def test_cuda_source_with_raster_is_deterministic_and_differs():
    g = ctgraph.gemm(8192, 8192, 8192, macro_tile=(128, 128, 64))
    src = [ctgraph.compile(g, "streamk2tile", 132, target="cuda", build=False, raster=r).source for r in (8, 8, 1)]
    assert src[0] == src[1] != src[2]
    assert "numRasterGroups" in src[0] and "numRasterGroups" not in src[2]


def test_every_persistent_schedule_gets_a_tile_order_where_the_operands_outgrow_the_l2():
    """Where A and B outgrow the L2, each persistent schedule comes row-major and in groups of up to RASTER tile rows
    (Stream-K included: 4096x28672x4096 in two-tile Stream-K re-read B 16 times row-major); where they fit, row-major
    only; split-K never (one workgroup per chunk)."""
    tile, layout = (256, 256, 64), Layout(2, "b", False)
    big = schedules(4096, 28672, 4096, "float16", tile, layout, H100_SXM)
    for transform in ("dataparallel", "streamk2tile", "streamk_hybrid"):
        assert {c.raster for c in big if c.transform == transform} == {1, RASTER}, transform
    small = schedules(512, 512, 512, "float16", (128, 128, 64), Layout(), H100_SXM)
    assert {c.raster for c in small} == {1}
    assert all(
        c.raster == 1
        for c in schedules(256, 256, 65536, "float16", (64, 64, 64), Layout(), H100_SXM)
        if c.transform == "splitk_reduce"
    )


def test_raster_group_keeps_the_group_asked_for():
    """No divisor any more: 13 tile rows under 8 walk a group of 8 rows, then a ragged one of 5."""
    assert raster_group(16, 8) == 8 and raster_group(12, 8) == 8 and raster_group(13, 8) == 8
    assert raster_group(5, 8) == 5 and raster_group(1, 8) == 1


@pytest.mark.parametrize(
    ("rows", "want", "ragged"),
    [(64, 8, 8), (12, 6, 6), (9, 3, 3), (22, 2, 2), (5, 5, 5), (1, 1, 1), (11, 1, 8), (13, 1, 8), (121, 1, 8)],
)
def test_candidates_offer_whole_groups_and_ragged_ones_on_a_wide_b(rows, want, ragged):
    """Selection offers the largest divisor of the tile rows up to RASTER; a count whose only such divisor is 1 walks
    row-major, or in ragged groups of RASTER where B outgrows twice the L2 and a row-major wave spans fewer than
    RASTER tile rows (candidates.ragged_rows; measured on fresh shapes, docs/selection.md)."""
    assert order_group(rows) == want and order_group(rows, ragged=True) == ragged
    tile, layout = (128, 256, 64), Layout(1, "b", False)
    for n, k, group in ((28672, 4096, ragged), (4096, 8192, want)):  # B: 235 MB (over twice the L2), 67 MB
        tiles = schedules(128 * rows, n, k, "float16", tile, layout, H100_SXM)
        assert {c.raster for c in tiles if c.transform == "dataparallel"} == ({1, group} if group > 1 else {1})


def test_ragged_rows_needs_a_wide_b_and_a_wave_of_few_rows():
    l2 = H100_SXM.l2_bytes
    n = 8192
    k_over = 2 * l2 // (2 * n) + 64  # n k 2 just over twice the L2
    assert ragged_rows(n, k_over, "float16", 17, 132, H100_SXM)
    assert not ragged_rows(n, k_over - 128, "float16", 17, 132, H100_SXM)  # B under twice the L2
    assert not ragged_rows(n, k_over, "float16", 16, 128, H100_SXM)  # a row-major wave spans 8 tile rows already
    assert ragged_rows(n, k_over // 2 + 32, "float32", 16, 66, H100_SXM)  # the element's bytes count


def test_auto_keeps_a_given_raster_and_split_k_drops_it(monkeypatch):
    from ctgraph.select import resolve

    g = ctgraph.gemm(128, 64, 32, macro_tile=(16, 16, 8), dtype="float32")
    for transform, given, want in [("dataparallel", 4, 4), ("dataparallel", None, 2), ("splitk_reduce", 4, 1)]:
        split = 2 if transform == "splitk_reduce" else None
        chosen = Selection(Config((16, 16, 8), Layout(), transform, 64, 2, None, split), "test")
        monkeypatch.setattr(resolve, "choose", lambda *a, chosen=chosen: chosen)
        kern = ctgraph.compile(g, "auto", target="cpu", raster=given)
        assert (kern.transform, kern.raster) == (transform, want)


def test_raster_auto_is_the_rankers_tile_order():
    """``raster="auto"`` with a named transform: the order the ranker puts first for that transform and tile (groups
    of RASTER rows where A and B outgrow the L2); row-major on the CPU and for split-K (one workgroup a chunk)."""
    from ctgraph.select import select_schedule

    g = ctgraph.gemm(4096, 28672, 4096, macro_tile=(128, 256, 64))
    kern = ctgraph.compile(g, "streamk2tile", target="cuda", build=False, raster="auto")
    want = select_schedule(4096, 28672, 4096, "float16", (128, 256, 64), Layout(), H100_SXM, "streamk2tile")
    assert kern.raster == want.config.raster == RASTER
    assert ctgraph.compile(g, "dataparallel", target="cuda", build=False, raster="auto", workgroups="auto").raster > 1
    assert ctgraph.compile(g, "splitk_reduce", 6000, target="cuda", build=False, raster="auto").raster == 1
    cpu = ctgraph.compile(ctgraph.gemm(64, 64, 64, macro_tile=(16, 16, 8)), "streamk", target="cpu", raster="auto")
    assert cpu.raster == 1
    with pytest.raises(ValueError, match='None or "auto"'):
        ctgraph.compile(g, "streamk", target="cuda", build=False, raster="eight")


def test_layout_auto_is_the_rankers_layout_for_the_tile():
    """``cluster`` / ``multicast`` / ``swap="auto"``: with a named transform, the layout of the candidate the ranker
    puts first among those of the graph's tile and transform that agree with the layout options given; the backend's
    default where selection offers no config of the tile; with ``transform="auto"`` on an auto tile, the selection's."""
    from ctgraph.backends import backend
    from ctgraph.select import candidates, rank

    m, n, k, tile = 4096, 4096, 4096, (128, 256, 64)
    g = ctgraph.gemm(m, n, k, macro_tile=tile)
    pool = [
        c
        for c in candidates(m, n, k, "float16", H100_SXM, "wgmma", backend("cuda").supports)
        if c.tile == tile and c.transform == "dataparallel"
    ]
    best = rank(m, n, k, "float16", H100_SXM, "wgmma", backend("cuda").supports, pool)[0][0].layout
    kern = ctgraph.compile(g, "dataparallel", target="cuda", build=False, cluster="auto")
    assert {o: kern.options[o] for o in ("cluster", "multicast", "swap")} == best.options()
    fixed = ctgraph.compile(g, "dataparallel", target="cuda", build=False, cluster="auto", multicast="b")
    assert fixed.options["multicast"] == "b" and fixed.options["cluster"] in (1, 2, 4, 8)
    odd = ctgraph.compile(
        ctgraph.gemm(m, n, k, macro_tile=(16, 16, 16)), "streamk", target="cuda", build=False, swap="auto"
    )
    assert odd.options.get("swap") is None and odd.options.get("cluster") is None
    auto = ctgraph.gemm(m, n, k, macro_tile="auto")
    picked = ctgraph.compile(auto, "auto", target="cuda", build=False, cluster="auto", swap="auto")
    assert picked.selection == ctgraph.compile(auto, "auto", target="cuda", build=False).selection


def test_auto_walks_ragged_groups_where_the_rule_holds():
    """1359 x 14336 x 4096 on an H100 (a neighbour of 1285 x 14336 x 4096, a fresh shape of the rule's probe: 0.76x
    row-major, 0.89x in ragged groups; that one now takes 192-row wave tiles, 7 tile rows in one group): 11 tile rows
    of 128, B of 117 MB; the selection walks groups of 8 rows, then one of 3."""
    from ctgraph.backends import backend
    from ctgraph.select import select

    chosen = select(1359, 14336, 4096, "float16", H100_SXM, "wgmma", backend("cuda").supports).config
    rows = -(-1359 // chosen.tile[0])
    assert order_group(rows) == 1 and chosen.raster == RASTER
    kern = ctgraph.compile(ctgraph.gemm(1359, 14336, 4096, macro_tile="auto"), "auto", target="cuda", build=False)
    assert kern.raster == kern.selection.config.raster  # the ragged group reaches the kernel as chosen
