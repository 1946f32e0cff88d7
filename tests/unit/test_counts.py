"""The schedule arithmetic of :mod:`ctgraph.select.counts` against the graph's own schedule, for every transform."""

from __future__ import annotations

import pytest

import ctgraph
from ctgraph.select.counts import k_iterations, output_tiles, split_sk_dp, step_grids, tile_counts, waves

SHAPES = [(100, 37, 200), (64, 64, 64), (300, 200, 500), (17, 130, 96), (256, 96, 1000)]
TILE = (32, 32, 16)


def per_workgroup(kern) -> list[int]:
    return [len(work) for work in kern.schedule()]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("g", [1, 3, 7, 16, 40])
def test_counts_match_the_graphs_schedule(shape, g):
    m, n, k = shape
    tiles, kt = output_tiles(m, n, TILE), k_iterations(k, TILE)
    graph = ctgraph.gemm(m, n, k, macro_tile=TILE, dtype="float32")
    assert (*tile_counts(m, n, TILE), kt) == graph.attrs["gemm"].tiles
    dp = ctgraph.compile(graph, "dataparallel", g, target="cpu", build=False)
    w, last = waves(tiles, g)
    counts = per_workgroup(dp)
    assert max(counts) == w * kt and counts.count(w * kt) == (last if w > 1 or last < g else g)
    sk = ctgraph.compile(graph, "streamk", g, target="cpu", build=False)
    assert max(per_workgroup(sk)) == -(-tiles * kt // g) and sum(per_workgroup(sk)) == tiles * kt
    for transform, batches in (("streamk2tile", None), ("streamk_hybrid", 1), ("streamk_hybrid", 3)):
        kern = ctgraph.compile(graph, transform, g, target="cpu", build=False, sk_batches=batches)
        n_sk, n_dp = split_sk_dp(tiles, kt, g, 2 if batches is None else batches)
        assert n_sk + n_dp == tiles * kt == sum(per_workgroup(kern))
        assert max(per_workgroup(kern)) == -(-n_sk // g) + n_dp // g


@pytest.mark.parametrize(("tiles", "kt", "most"), [(10, 64, 132), (60, 128, 132), (7, 13, 50), (33, 8, 132)])
def test_step_grids_cut_every_tile_in_parts(tiles, kt, most):
    for g in step_grids(tiles, kt, most):
        assert g % tiles == 0 and 2 * tiles <= g <= most
        graph = ctgraph.gemm(tiles * 32, 32, kt * 16, macro_tile=TILE, dtype="float32")
        kern = ctgraph.compile(graph, "streamk", g, target="cpu", build=False)
        per = -(-kt // (g // tiles))
        assert max(per_workgroup(kern)) == -(-tiles * kt // g) <= per
