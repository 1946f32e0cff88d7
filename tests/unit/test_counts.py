"""The schedule arithmetic of :mod:`ctgraph.counts` against the graph's own counts, for every transform.

Each formula is checked twice: against the sizes the passes gave the transformed graph's dimensions (tile numbers,
the flattened space, the Sunder parts, each workgroup's range, split-K's chunks and grid), and against the schedule
read back from the graph's index expressions (how many iterations each workgroup runs).
"""

from __future__ import annotations

import importlib

import numpy as np
import pytest
import sympy

import ctgraph
from ctgraph import counts
from ctgraph.counts import (
    ceil_div,
    k_iterations,
    output_tiles,
    per_workgroup,
    problem_tiles,
    sk_dp_iterations,
    split_chunks,
    split_for_budget,
    split_sk_dp,
    splitk_workgroups,
    step_grids,
    tile_counts,
    waves,
)
from ctgraph.dimensions import Linear, MacroTileNumber, Workgroup
from ctgraph.passes.splitk import REDUCE

SHAPES = [(100, 37, 200), (64, 64, 64), (300, 200, 500), (17, 130, 96), (256, 96, 1000)]
TILE = (32, 32, 16)
GRIDS = [1, 3, 7, 16, 40]
HYBRID_BATCHES = [1, 2, 3, 4, 6]


def per_workgroup_run(kern) -> list[int]:
    """Iterations each workgroup runs, from the schedule the graph's index expressions give."""
    return [len(work) for work in kern.schedule()]


def size(graph, kind=Linear, **attrs) -> int:
    (tag,) = graph.dimensions(kind, **attrs)
    return int(graph.size(tag))


def compile_(shape, transform, g, **kw):
    return ctgraph.compile(
        ctgraph.gemm(*shape, macro_tile=TILE, dtype="float32"), transform, g, target="cpu", build=False, **kw
    )


def test_old_import_paths_re_export_the_one_home():
    from ctgraph import passes

    splitk = importlib.import_module("ctgraph.passes.splitk")  # the modules; `from ctgraph.passes` gives the passes
    streamk2tile = importlib.import_module("ctgraph.passes.streamk2tile")

    assert passes.split_sk_dp is streamk2tile.split_sk_dp is counts.split_sk_dp
    assert passes.split_chunks is splitk.split_chunks is counts.split_chunks
    assert passes.split_for_budget is splitk.split_for_budget is counts.split_for_budget


def test_ceil_div_serves_numbers_arrays_and_sympy_sizes():
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    assert ceil_div(7, 2) == 4 and ceil_div(8, 2) == 4 and ceil_div(0, 3) == 0
    assert list(ceil_div(10, np.array([1, 3, 4, 10, 11]))) == [10, 4, 3, 1, 1]
    assert ceil_div(sympy.Integer(10), 3) == 4  # folds where both are numbers
    assert all(ceil_div(x, 3).subs(x, v) == ceil_div(v, 3) for v in range(20))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_tile_counts_are_the_precondition_graphs(shape):
    m, n, k = shape
    graph = ctgraph.gemm(m, n, k, macro_tile=TILE, dtype="float32")
    tm, tn = tile_counts(m, n, TILE)
    kt = k_iterations(k, TILE)
    assert problem_tiles(m, n, k, TILE) == (tm, tn, kt) == graph.attrs["gemm"].tiles
    assert output_tiles(m, n, TILE) == tm * tn
    assert size(graph, MacroTileNumber, tensor="A", dim=0) == tm == size(graph, MacroTileNumber, tensor="D", dim=0)
    assert size(graph, MacroTileNumber, tensor="B", dim=1) == tn == size(graph, MacroTileNumber, tensor="D", dim=1)
    assert size(graph, MacroTileNumber, tensor="A", dim=1) == kt == size(graph, MacroTileNumber, tensor="B", dim=0)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("g", GRIDS)
def test_dataparallel(shape, g):
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    kern = compile_(shape, "dataparallel", g)
    w, last = waves(tiles, g)
    assert size(kern.graph, name="tile round") == w
    assert size(kern.graph, name="tiles of this WG") == w * kt
    run = per_workgroup_run(kern)
    assert sum(run) == tiles * kt == sum(sk_dp_iterations("dataparallel", tiles, kt, g))
    assert max(run) == w * kt and run.count(w * kt) == (last if w > 1 or last < g else g)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("g", GRIDS)
def test_streamk(shape, g):
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    kern = compile_(shape, "streamk", g)
    n_sk, n_dp = sk_dp_iterations("streamk", tiles, kt, g)
    assert (n_sk, n_dp) == (tiles * kt, 0)
    assert size(kern.graph, name="global tiles") == n_sk
    assert size(kern.graph, name="tiles of this WG") == per_workgroup(n_sk, g)
    run = per_workgroup_run(kern)
    assert max(run) == per_workgroup(n_sk, g) and sum(run) == n_sk


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("g", GRIDS)
@pytest.mark.parametrize(
    ("transform", "batches"), [("streamk2tile", None)] + [("streamk_hybrid", b) for b in HYBRID_BATCHES]
)
def test_two_tile_and_hybrids(shape, g, transform, batches):
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    kern = compile_(shape, transform, g, sk_batches=batches)
    n_sk, n_dp = split_sk_dp(tiles, kt, g, 2 if batches is None else batches)
    assert (n_sk, n_dp) == sk_dp_iterations(transform, tiles, kt, g, batches or 2)
    assert n_dp % (g * kt) == 0 and n_sk + n_dp == tiles * kt
    graph = kern.graph
    assert size(graph, name="global tiles") == tiles * kt
    assert size(graph, name="SK tiles") == n_sk and size(graph, name="DP tiles") == n_dp
    assert size(graph, name="SK tiles of this WG") == per_workgroup(n_sk, g)
    assert size(graph, name="DP tiles of this WG") == per_workgroup(n_dp, g) == n_dp // g
    assert size(graph, Workgroup, section="SK") == size(graph, Workgroup, section="DP") == g
    run = per_workgroup_run(kern)
    assert sum(run) == tiles * kt
    assert max(run) == per_workgroup(n_sk, g) + n_dp // g


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("transform", ["splitk", "splitk_reduce"])
@pytest.mark.parametrize("split", [None, 1, 2, 3, 5])
def test_splitk(shape, transform, split):
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    budget = 6 * tiles
    kern = compile_(shape, transform, budget, split=split)
    s = int(split_for_budget(tiles, budget)) if split is None else split
    chunks, per = split_chunks(kt, s)
    assert kern.split == s and kern.workgroups == splitk_workgroups(tiles, kt, s) == tiles * chunks
    graph = kern.graph
    assert size(graph, name="K chunk") == chunks and size(graph, name="k in chunk") == per
    assert size(graph, name="split-K units") == tiles * chunks == size(graph, Workgroup, section="")
    assert (chunks - 1) * per < kt <= chunks * per  # every chunk holds work, the last may be short
    if transform == "splitk_reduce":
        assert size(graph, Workgroup, section=REDUCE) == tiles == size(graph, name="output tiles")
    run = per_workgroup_run(kern)
    assert len(run) == tiles * chunks and sum(run) == tiles * kt and max(run) == per


@pytest.mark.parametrize("shape", SHAPES[:2], ids=str)
@pytest.mark.parametrize("transform", ["streamk2tile", "dataparallel"])
def test_raster_keeps_the_counts(shape, transform):
    """A raster order changes which tiles a workgroup runs, not how many."""
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    plain, rastered = (per_workgroup_run(compile_(shape, transform, 3, raster=r)) for r in (1, 2))
    assert sorted(plain) == sorted(rastered) and sum(plain) == tiles * kt


@pytest.mark.parametrize(("tiles", "kt", "most"), [(10, 64, 132), (60, 128, 132), (7, 13, 50), (33, 8, 132)])
def test_step_grids_cut_every_tile_in_parts(tiles, kt, most):
    for g in step_grids(tiles, kt, most):
        assert g % tiles == 0 and 2 * tiles <= g <= most
        graph = ctgraph.gemm(tiles * 32, 32, kt * 16, macro_tile=TILE, dtype="float32")
        kern = ctgraph.compile(graph, "streamk", g, target="cpu", build=False)
        per = ceil_div(kt, g // tiles)
        assert max(per_workgroup_run(kern)) == per_workgroup(tiles * kt, g) <= per
