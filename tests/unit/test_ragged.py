"""Ragged tile-order groups (:mod:`ctgraph.passes.raster`): G tile rows at a time, the last group ``Mt % G`` rows.

The walk is Triton's (``group_size_m = min(num_pid_m - first_pid_m, GROUP_SIZE_M)``), read off the graph for every
transform that takes a raster, for prime and composite tile-row counts, ``Mt < G`` and ``Mt % G == 0`` included.
"""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

import ctgraph
from ctgraph.dimensions import Linear
from ctgraph.edges import Sunder, Tile
from ctgraph.evaluate import evaluate
from ctgraph.expr import index
from ctgraph.params import bindings, parametrize
from ctgraph.passes import PIPELINES, TAKES_SPLIT
from ctgraph.passes.common import output_tile_numbers
from ctgraph.schedule import sections
from tests.unit.test_cpu_backend import check_close, operands

PERSISTENT = [t for t in PIPELINES if t not in TAKES_SPLIT]
TILE = (16, 16, 8)
ROWS = [1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 16, 17, 24]  # primes, composites, below and at multiples of G
GROUPS = [2, 4, 8]


def walk(mt: int, nt: int, group: int) -> list[tuple[int, int]]:
    """Triton's grouped order: groups of ``group`` tile rows, the last ragged, each group column by column."""
    out = []
    for first in range(0, mt, group):
        rows = min(mt - first, group)
        out += [(first + r, n) for n in range(nt) for r in range(rows)]
    return out


def kernel(transform, mt, nt, kt, raster, workgroups=1, target="cpu", build=True, batches=None, dtype="float32"):
    """A kernel whose output has ``mt x nt`` tiles (the last row and column partial) and ``kt`` K iterations."""
    bm, bn, bk = TILE
    g = ctgraph.gemm(mt * bm - 3 * (mt > 1), nt * bn - 5 * (nt > 1), kt * bk - 1, macro_tile=TILE, dtype=dtype)
    assert g.attrs["gemm"].tiles == (mt, nt, kt)
    extra = {"sk_batches": batches} if transform == "streamk_hybrid" else {}
    return ctgraph.compile(g, transform, workgroups=workgroups, target=target, raster=raster, build=build, **extra)


def test_reference_walk_is_a_permutation():
    for mt in ROWS:
        for group in GROUPS:
            assert sorted(walk(mt, 3, group)) == [(m, n) for m in range(mt) for n in range(3)]


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("mt", ROWS)
@pytest.mark.parametrize("transform", PERSISTENT)
def test_one_workgroup_walks_the_ragged_order(transform, mt, group):
    """One workgroup runs the whole walk: ``kern.schedule()`` (read off the graph) is Triton's order, K innermost."""
    kern = kernel(transform, mt, 3, 2, group, build=False)
    assert kern.raster == min(group, mt)
    (work,) = kern.schedule()
    assert work == [(m, n, k) for m, n in walk(mt, 3, kern.raster) for k in range(2)]


@settings(max_examples=80, deadline=None)
@given(
    transform=st.sampled_from(PERSISTENT),
    mt=st.integers(1, 30),
    nt=st.integers(1, 6),
    kt=st.integers(1, 4),
    group=st.sampled_from(GROUPS),
    workgroups=st.integers(1, 40),
    batches=st.integers(1, 6),
)
def test_every_iteration_exactly_once(transform, mt, nt, kt, group, workgroups, batches):
    """Any grid: every (m, n, k) exactly once, and each workgroup's whole tiles in the order of the walk."""
    kern = kernel(transform, mt, nt, kt, group, workgroups, build=False, batches=batches)
    sched = kern.schedule()
    seen = Counter(it for work in sched for it in work)
    assert seen == Counter((m, n, k) for m in range(mt) for n in range(nt) for k in range(kt))
    position = {t: i for i, t in enumerate(walk(mt, nt, kern.raster))}
    for work in sched:
        assert all(isinstance(v, int) for it in work for v in it)
        tiles = list(dict.fromkeys((m, n) for m, n, _ in work))
        if transform == "streamk" and tiles:  # a contiguous range of the walk
            assert [position[t] for t in tiles] == list(range(position[tiles[0]], position[tiles[0]] + len(tiles)))


@pytest.mark.parametrize(("mt", "group"), [(13, 8), (13, 4), (7, 2), (17, 8), (10, 4)])
def test_graph_cuts_the_rows_with_a_sunder_and_walks_both_ways(mt, group):
    """The ragged order is edges: forward ``(m, n) -> O`` and reverse ``O -> (m, n)`` agree with the walk."""
    nt = 3
    g = kernel("dataparallel", mt, nt, 2, group, build=False).graph
    (order,) = g.dimensions(Linear, name="raster order")
    (sunder,) = g.edges(Sunder)
    full, last, _ = g.outputs(sunder)
    assert (g.size(full), g.size(last)) == ((mt // group) * group * nt, (mt % group) * nt)
    m, n = output_tile_numbers(g)
    for pos, (tm, tn) in enumerate(walk(mt, nt, group)):
        assert g.forward({m: tm, n: tn}, [order]) == {order: pos}
        assert g.reverse({order: pos}, [m, n]) == {m: tm, n: tn}


@pytest.mark.parametrize("transform", PERSISTENT)
def test_a_group_that_divides_keeps_the_one_edge_form(transform):
    """G | Mt (and Mt < G, where G = Mt): ``Tile(m; R, r)`` and no Sunder of the rows, as before ragged groups."""
    for mt, group in ((16, 8), (12, 4), (5, 8)):
        kern = kernel(transform, mt, 3, 2, group, target="cuda", build=False)
        g = kern.graph
        (rows,) = g.dimensions(Linear, name="rows of a raster group")
        (edge,) = g.edges_in(rows)
        assert isinstance(g.edge(edge), Tile) and not g.dimensions(Linear, name="raster order")
        assert "numRasterLastRows" not in kern.source and "numRasterGroups" in kern.source


def test_sections_ignore_the_raster_selector():
    """The ragged order's Sunder has a selector the walk computes: it picks no kernel section."""
    assert [s.name for s in sections(kernel("dataparallel", 13, 3, 2, 8, 4, build=False).graph)] == [""]
    g = kernel("streamk2tile", 13, 3, 2, 8, 5, build=False).graph
    assert len(g.edges(Sunder)) == 2
    secs = sections(g)
    assert [s.name for s in secs] == ["SK", "DP"]
    assert {s.selector[0] for s in secs} == {g.find(Linear, name="SK/DP selector")}


@pytest.mark.parametrize("group", GROUPS)
def test_one_source_serves_every_ragged_shape(group):
    """Sizes stay kernel parameters: the parametrized walk of one ragged kernel, bound to the sizes of another
    shape with the same G and a remainder, is that shape's walk (and the CUDA and CPU sources are the same)."""
    one = kernel("dataparallel", group + 1, 2, 2, group, build=False)
    sym = parametrize(one.graph)
    (order,) = sym.dimensions(Linear, name="raster order")
    m, n = output_tile_numbers(sym)
    o = index("o")
    w = sym.walk({order: o}, [m, n])
    conds = sympy.And(*w.in_bounds([m, n]))
    for mt in [mt for mt in range(group + 1, 4 * group + 2) if mt % group]:
        for nt in (1, 2, 5):
            other = kernel("dataparallel", mt, nt, 2, group, build=False)
            values = {s.name: v for s, v in bindings(other.graph).items()}
            got = [
                (
                    int(evaluate(w[m], o=pos, **values)),
                    int(evaluate(w[n], o=pos, **values)),
                    bool(evaluate(conds, o=pos, **values)),
                )
                for pos in range(mt * nt)
            ]
            assert got == [(tm, tn, True) for tm, tn in walk(mt, nt, group)]
    rows = (group + 1, 3 * group - 1)
    sources = {
        t: {kernel("streamk", mt, 3, 2, group, target=t, build=False).source for mt in rows} for t in ("cpu", "cuda")
    }
    assert all(len(s) == 1 for s in sources.values())


SHAPES = [(203, 37, 29), (13 * 16, 5 * 16 - 3, 24), (115, 70, 40), (51, 16, 9)]


@pytest.mark.parametrize("group", GROUPS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("transform", "batches"), [(t, 3 if t == "streamk_hybrid" else None) for t in PERSISTENT])
def test_cpu_matches_numpy(transform, batches, shape, group):
    """The CPU backend computes alpha*A@B + beta*C with ragged groups, on grids with and without fixup."""
    for workgroups in (1, 5, 11):
        g = ctgraph.gemm(*shape, macro_tile=TILE, dtype="float32")
        extra = {"sk_batches": batches} if batches else {}
        kern = ctgraph.compile(g, transform, workgroups=workgroups, target="cpu", raster=group, **extra)
        A, B, C = operands(shape, "float32", seed=zlib.crc32(repr((transform, shape, group, workgroups)).encode()))
        D = kern(A, B, C, alpha=0.75, beta=-1.25)
        check_close(D, A, B, C, 0.75, -1.25)
        assert not kern.program.flags.any()
    mt = g.attrs["gemm"].tiles[0]
    assert kern.raster == min(group, mt)


def test_cpu_float16_ragged():
    shape = (203, 37, 29)
    kern = ctgraph.compile(ctgraph.gemm(*shape, macro_tile=TILE), "streamk2tile", workgroups=6, target="cpu", raster=8)
    assert kern.graph.dimensions(Linear, name="raster order")
    A, B, C = operands(shape, "float16", seed=3)
    check_close(kern(A, B, C, alpha=1.0, beta=0.5), A, B, C, 1.0, 0.5)
    assert np.isfinite(kern(A, B)).all()
