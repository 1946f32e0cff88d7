"""``ctgraph.evaluate`` and ``ctgraph.lambdify``: index expressions read off a graph as numbers, scalar and
vectorised; and the coordinate checks of visitors and walks."""

from __future__ import annotations

import numpy as np
import pytest
import sympy

import ctgraph
from ctgraph import CoordinateGraph
from ctgraph.dimensions import Linear
from ctgraph.edges import Sunder, Tile
from ctgraph.expr import FloorDiv, Mod, index
from ctgraph.schedule import section_walk, sections, tile_coords
from ctgraph.visitors import ForwardEdgeVisitor, ReverseEdgeVisitor

x, y = index("x"), index("y")
MIXED = (
    FloorDiv(x + 3 * y, 4)
    + Mod(x, 5)
    + sympy.Min(x, y)
    + sympy.Max(x, 2)
    + sympy.Piecewise((x, sympy.Lt(y, 3)), (y + 100, True))
)


def mixed(a: int, b: int) -> int:
    return (a + 3 * b) // 4 + a % 5 + min(a, b) + max(a, 2) + (a if b < 3 else b + 100)


def test_scalar_values_are_exact_python_ints():
    for a in range(12):
        for b in range(6):
            got = ctgraph.evaluate(MIXED, x=a, y=b)
            assert type(got) is int and got == mixed(a, b)
    big = 5 * 2**70
    assert ctgraph.evaluate(FloorDiv(x, 3) + Mod(x, 7), x=big) == big // 3 + big % 7
    assert ctgraph.evaluate(sympy.Integer(7)) == 7
    assert ctgraph.evaluate(sympy.And(sympy.Lt(x, 3), sympy.Eq(y, 2)), x=1, y=2) is True
    assert ctgraph.evaluate(MIXED, {x: 4, "y": 1}) == mixed(4, 1)
    assert ctgraph.evaluate(x + 1, x=1, y=2, wg=3) == 2  # coordinates it does not use are allowed


def test_vectorised_matches_scalar():
    xs, ys = np.arange(40).reshape(-1, 1), np.arange(7)
    got = ctgraph.evaluate(MIXED, x=xs, y=ys)
    assert got.shape == (40, 7) and got.dtype == np.int64
    assert got.tolist() == [[mixed(a, b) for b in range(7)] for a in range(40)]
    f = ctgraph.lambdify([MIXED, sympy.Lt(x, y)])
    assert f.names == ("x", "y")
    vals, conds = f(np.arange(5), 3)
    assert vals.tolist() == [mixed(a, 3) for a in range(5)] and conds.tolist() == [a < 3 for a in range(5)]
    assert ctgraph.lambdify(x + 1)(x=[1, 2]).tolist() == [2, 3]


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        ({"x": 1}, ValueError, "needs a value for y"),
        ({"x": 1, "y": 2, "z": -3}, ValueError, "z must be nonnegative"),
        ({"x": -1, "y": 2}, ValueError, "x must be nonnegative"),
        ({"x": 1.5, "y": 2}, TypeError, "x must be an integer"),
        ({"x": "3", "y": 2}, TypeError, "x must be an integer"),
        ({"x": True, "y": 2}, TypeError, "x must be an integer"),
        ({"x": np.array([1.0]), "y": 2}, TypeError, "x must be integers"),
        ({"x": np.array([-1, 2]), "y": 2}, ValueError, "x must be nonnegative"),
    ],
)
def test_bad_coordinates(kw, exc, match):
    with pytest.raises(exc, match=match):
        ctgraph.evaluate(MIXED, **kw)


@pytest.mark.parametrize("transform", ["dataparallel", "streamk", "streamk2tile", "streamk_hybrid", "splitk"])
def test_schedule_from_the_graph_with_lambdify(transform):
    """Walk from a transformed graph to the (m, n, k) of an iteration, evaluate it for every workgroup at once,
    and get back kern.schedule()."""
    kern = ctgraph.compile(ctgraph.gemm(70, 50, 90, macro_tile=(16, 16, 8)), transform=transform, target="cpu")
    g, tc = kern.graph, tile_coords(kern.graph)
    wg, it = index("wg"), index("it")
    sched = kern.schedule()
    got: list[list[tuple[int, int, int]]] = [[] for _ in sched]
    for sec in sections(g):
        per_wg = int(g.size(sec.for_tile))
        w = section_walk(g, sec, wg, it, sympy.Integer(0), [tc.m, tc.n, tc.k])
        f = ctgraph.lambdify([w[tc.m], w[tc.n], w[tc.k], sympy.And(*w.in_bounds([tc.m, tc.n, tc.k]))], ["wg", "it"])
        m, n, k, ok = f(np.arange(len(sched))[:, None], np.arange(per_wg))
        run = np.logical_and.accumulate(ok, axis=1)
        for i in range(len(sched)):
            got[i] += list(zip(m[i][run[i]].tolist(), n[i][run[i]].tolist(), k[i][run[i]].tolist(), strict=True))
            for j in np.flatnonzero(run[i])[:3]:  # the scalar form agrees
                one = ctgraph.evaluate(w[tc.k], wg=i, it=int(j))
                assert one == k[i][j]
    assert got == sched


def test_sunder_piecewise_evaluates():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(9))
    p0, p1, s = (g.add_dimension(Linear(n)) for n in (4, 5, 2))
    e = g.add_edge(Sunder(), inputs=[a], outputs=[p0, p1, s])
    q0, q1, sel = index("q0"), index("q1"), index("sel")
    (expr,) = ReverseEdgeVisitor(g).visit(e, [q0, q1, sel])
    assert isinstance(expr, sympy.Piecewise)
    assert ctgraph.evaluate(expr, q0=3, q1=0, sel=0) == 3 and ctgraph.evaluate(expr, q0=0, q1=2, sel=1) == 6
    assert ctgraph.evaluate(expr, q0=1, q1=np.arange(5), sel=1).tolist() == [4, 5, 6, 7, 8]


# --- visitors and walks check their coordinates -----------------------------------------------------


@pytest.fixture
def tiled():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(96))
    q, r = g.add_dimension(Linear(6)), g.add_dimension(Linear(16))
    e = g.add_edge(Tile(), inputs=[a], outputs=[q, r])
    return g, a, q, r, e


@pytest.mark.parametrize(
    ("coords", "exc", "match"),
    [
        ([-1, 5], ValueError, r"Linear size=6 \[1\].*got -1"),
        ([3, 16], ValueError, r"Linear size=16 \[2\].*0 <= value < 16"),
        ([3.0, 5], TypeError, r"Linear size=6 \[1\]"),
        (["3", 5], TypeError, r"Linear size=6 \[1\]"),
        ([3, True], TypeError, r"Linear size=16 \[2\]"),
        ([sympy.Float(1.5), 5], TypeError, r"Linear size=6"),
    ],
)
def test_reverse_visitor_checks_coordinates(tiled, coords, exc, match):
    g, *_, e = tiled
    with pytest.raises(exc, match=match):
        ReverseEdgeVisitor(g).visit(e, coords)


def test_forward_visitor_and_walks_check_coordinates(tiled):
    g, a, q, r, e = tiled
    for bad, exc in ((96, ValueError), (-3, ValueError), (2.5, TypeError), ("1", TypeError)):
        with pytest.raises(exc, match=r"Linear size=96 \[0\]"):
            ForwardEdgeVisitor(g).visit(e, [bad])
        with pytest.raises(exc, match=r"Linear size=96 \[0\]"):
            g.forward({a: bad}, [q, r])
    with pytest.raises(ValueError, match=r"Linear size=6 \[1\]"):
        g.reverse({q: 6, r: 0}, [a])
    with pytest.raises(ValueError, match="got -1"):
        g.walk({q: -1, r: 0}, [a])  # a walk may go past a size (in_bounds), never below 0
    assert int(g.reverse({q: np.int64(3), r: sympy.Integer(5)}, [a])[a]) == 53  # numpy and sympy ints
    t = index("t")
    assert ReverseEdgeVisitor(g).visit(e, [t, 5]) == [16 * t + 5]  # expressions pass
