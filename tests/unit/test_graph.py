"""CoordinateGraph: tags, queries, copies, topological order and multi-edge walks."""

import itertools

import pytest
import sympy

from ctgraph import CoordinateGraph
from ctgraph.dimensions import ForLoop, Linear, MacroTileNumber, Workgroup
from ctgraph.edges import Flatten, PassThrough, Split, Sunder, Tile
from ctgraph.expr import FloorDiv, Mod, index


def tile_graph():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(96, name="a"))
    q = g.add_dimension(Linear(6, name="q"))
    r = g.add_dimension(Linear(16, name="r"))
    e = g.add_edge(Tile(), inputs=[a], outputs=[q, r])
    return g, a, q, r, e


def chain_graph():
    """User(48) -Split-> (s0: 6, s1: 8); s1 -Tile-> (n: 2, i: 4); n -PassThrough-> l (2)."""
    g = CoordinateGraph()
    u = g.add_dimension(Linear(48, name="u"))
    s0, s1 = g.add_dimension(Linear(6, name="s0")), g.add_dimension(Linear(8, name="s1"))
    g.add_edge(Split(), inputs=[u], outputs=[s0, s1])
    n, i = g.add_dimension(Linear(2, name="n")), g.add_dimension(Linear(4, name="i"))
    g.add_edge(Tile(), inputs=[s1], outputs=[n, i])
    l = g.add_dimension(Linear(2, name="l"))
    g.add_edge(PassThrough(), inputs=[n], outputs=[l])
    return g, u, s0, s1, n, i, l


def test_tags_shared_by_dimensions_and_edges():
    g, a, q, r, e = tile_graph()
    assert (a, q, r, e) == (0, 1, 2, 3)
    assert g.add_dimension(Linear(1)) == 4
    assert list(g) == [0, 1, 2, 3, 4] and len(g) == 5
    assert g.is_dimension(a) and not g.is_edge(a)
    assert g.is_edge(e) and not g.is_dimension(e)
    assert g.dimensions() == [0, 1, 2, 4] and g.edges() == [3]
    assert isinstance(g[e], Tile) and g[a] == Linear(96, name="a")
    with pytest.raises(KeyError):
        g[99]
    with pytest.raises(ValueError):
        g.dimension(e)
    with pytest.raises(ValueError):
        g.edge(a)


def test_add_dimension_rejects_non_dimension():
    with pytest.raises(TypeError):
        CoordinateGraph().add_dimension(Tile())


def test_inputs_outputs_keep_port_order():
    g = CoordinateGraph()
    x = [g.add_dimension(Linear(s)) for s in (2, 3, 4)]
    f = g.add_dimension(Linear(24))
    e = g.add_edge(Flatten(), inputs=[x[2], x[0], x[1]], outputs=[f])
    assert g.inputs(e) == [x[2], x[0], x[1]]
    assert g.outputs(e) == [f]
    # the order decides the algebra: x[2] is the most significant coordinate
    assert g.forward({x[2]: 1, x[0]: 0, x[1]: 0}, targets=[f]) == {f: 6}
    t = g.add_dimension(Linear(24))
    hi, lo = g.add_dimension(Linear(6)), g.add_dimension(Linear(4))
    e2 = g.add_edge(Tile(), inputs=[t], outputs=[lo, hi])  # |lo| = 4 is the tile number here
    assert g.outputs(e2) == [lo, hi]
    assert g.reverse({lo: 1, hi: 2}, targets=[t]) == {t: 1 * 6 + 2}


def test_dimensions_by_kind_and_attrs():
    g = CoordinateGraph()
    l0 = g.add_dimension(Linear(4, name="x"))
    w = g.add_dimension(Workgroup(8, section="SK"))
    l1 = g.add_dimension(Linear(4, name="y"))
    w2 = g.add_dimension(Workgroup(8, section="DP"))
    f = g.add_dimension(ForLoop(3, name="K"))
    assert g.dimensions(Linear) == [l0, l1]
    assert g.dimensions(Linear, name="y") == [l1]
    assert g.dimensions(Workgroup) == [w, w2]
    assert g.dimensions(Workgroup, section="DP") == [w2]
    assert g.dimensions(size=4) == [l0, l1]
    assert g.dimensions(ForLoop, name="Tile") == []
    assert g.dimensions(MacroTileNumber) == []
    assert g.find(ForLoop, name="K") == f
    assert g.find(Workgroup, section="SK") == w


def test_queries_see_every_change_after_them():
    """The elements kept in tag order for the queries are read again after each change of the graph."""
    g = CoordinateGraph()
    x = g.add_dimension(Linear(4, name="x"))
    assert g.dimensions(Linear) == [x] and g.edges() == []
    y = g.add_dimension(Linear(4, name="y"))
    assert g.dimensions(Linear) == [x, y] and g.find(Linear, name="y") == y
    e = g.add_edge(PassThrough(), inputs=[x], outputs=[y])
    assert g.edges(PassThrough) == [e] and g.dimensions() == [x, y]
    g.replace_dimension(y, Workgroup(4))
    assert g.dimensions(Linear) == [x] and g.dimensions(Workgroup) == [y]
    h = g.copy()
    z = h.add_dimension(Linear(2, name="z"))
    assert h.dimensions(Linear) == [x, z] and g.dimensions(Linear) == [x]


def test_find_none_or_several_raises():
    g = CoordinateGraph()
    g.add_dimension(Linear(4, name="x"))
    g.add_dimension(Linear(4, name="x"))
    with pytest.raises(ValueError, match="found 2"):
        g.find(Linear, name="x")
    with pytest.raises(ValueError, match="found 0"):
        g.find(Linear, name="nope")


def test_edges_in_out_sources_sinks():
    g, u, s0, s1, n, i, l = chain_graph()
    split, tile, pt = g.edges()
    assert g.edges_out(u) == [split] and g.edges_in(u) == []
    assert g.edges_in(s1) == [split] and g.edges_out(s1) == [tile]
    assert g.edges_in(n) == [tile] and g.edges_out(n) == [pt]
    assert g.edges_in(l) == [pt] and g.edges_out(l) == []
    assert g.sources() == [u]
    assert g.sinks() == [s0, i, l]
    assert g.edges(Tile) == [tile] and g.edges(Sunder) == []
    with pytest.raises(ValueError):
        g.edges_in(split)


def test_copy_is_independent():
    g, a, q, _r, _e = tile_graph()
    g.attrs["gemm"] = "problem"
    before = g.structure()
    h = g.copy()
    assert h.structure() == before and h is not g
    x = h.add_dimension(Linear(2))
    h.add_edge(PassThrough(), inputs=[q], outputs=[x])
    h.replace_dimension(a, Linear(97, name="a"))
    h.attrs["extra"] = 1
    assert g.structure() == before
    assert x not in g and "extra" not in g.attrs and g.size(a) == 96
    assert g.edges_out(q) == []
    # the original keeps its own tag counter
    assert g.add_dimension(Linear(1)) == x
    assert h.attrs["gemm"] == "problem"


def test_replace_dimension_keeps_connections():
    g, a, q, r, e = tile_graph()
    g.replace_dimension(r, Linear(8, name="r"))
    assert g.outputs(e) == [q, r]
    assert g.reverse({q: 3, r: 5}, targets=[a]) == {a: 29}
    with pytest.raises(ValueError):
        g.replace_dimension(e, Linear(1))


def test_topological_order_is_deterministic():
    g, u, s0, s1, n, i, l = chain_graph()
    order = g.topological_order()
    assert sorted(order) == list(g)
    pos = {t: k for k, t in enumerate(order)}
    for e in g.edges():
        assert all(pos[d] < pos[e] for d in g.inputs(e))
        assert all(pos[e] < pos[d] for d in g.outputs(e))
    assert order == chain_graph()[0].topological_order() == g.copy().topological_order()
    # ties broken by tag: u, Split, then s0 before s1
    assert order == [u, 3, s0, s1, 6, n, i, 8, l]


def test_topological_order_ties_by_tag_for_independent_parts():
    g = CoordinateGraph()
    b = g.add_dimension(Linear(2))
    a = g.add_dimension(Linear(2))
    e = g.add_edge(PassThrough(), inputs=[a], outputs=[b])  # a (tag 1) feeds b (tag 0)
    c = g.add_dimension(Linear(3))
    assert g.topological_order() == [a, e, b, c]


def test_reverse_walk_through_three_edges():
    g, u, s0, _s1, _n, i, l = chain_graph()
    for a, b, c in itertools.product(range(6), range(2), range(4)):
        got = g.reverse({s0: a, l: b, i: c}, targets=[u])
        assert isinstance(got[u], sympy.Integer)
        assert int(got[u]) == a * 8 + b * 4 + c
    x0, x1, x2 = index("x0"), index("x1"), index("x2")
    assert sympy.expand(g.reverse({s0: x0, l: x1, i: x2}, targets=[u])[u] - (8 * x0 + 4 * x1 + x2)) == 0


def test_forward_walk_through_three_edges():
    g, u, s0, _s1, _n, i, l = chain_graph()
    for v in range(48):
        got = g.forward({u: v}, targets=[s0, l, i])
        assert {t: int(x) for t, x in got.items()} == {s0: v // 8, l: (v % 8) // 4, i: v % 4}
        assert g.reverse(got, targets=[u]) == {u: v}


def test_walk_intermediate_values_and_depends():
    g, u, s0, s1, n, i, l = chain_graph()
    w = g.walk({s0: 1, l: 1, i: 2}, [u])
    assert w[s1] == 6 and w[n] == 1 and w[u] == 14
    assert w.depends([s1]) == sorted([s1, n, l, i])
    assert w.depends([u]) == sorted([u, s0, s1, n, i, l])


def test_unreachable_target_names_it():
    g, a, q, r, _e = tile_graph()
    with pytest.raises(ValueError) as info:
        g.reverse({q: 3}, targets=[a])
    msg = str(info.value)
    assert g.label(a) in msg and "Linear(a) size=96" in msg
    assert g.label(r) in msg  # the coordinate that would have helped


def test_unreachable_disconnected_dimension():
    g, a, q, r, _e = tile_graph()
    lone = g.add_dimension(Linear(5, name="lonely"))
    with pytest.raises(ValueError, match=r"Linear\(lonely\) size=5"):
        g.reverse({q: 1, r: 1}, targets=[lone])
    with pytest.raises(ValueError, match=r"Linear\(lonely\) size=5"):
        g.forward({a: 1}, targets=[lone])


def test_walk_rejects_bad_direction_and_tags():
    g, a, q, r, e = tile_graph()
    with pytest.raises(ValueError):
        g.walk({q: 1, r: 1}, [a], direction="sideways")
    with pytest.raises(ValueError):
        g.reverse({q: 1, r: 1}, targets=[e])


def test_in_bounds():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(90))  # 6 tiles of 16 overhang 90 by 6
    q, r = g.add_dimension(Linear(6)), g.add_dimension(Linear(16))
    g.add_edge(Tile(), inputs=[a], outputs=[q, r])
    assert g.walk({q: 5, r: 9}, [a]).in_bounds([a]) == []
    assert sympy.false in g.walk({q: 5, r: 12}, [a]).in_bounds([a])  # 92 >= 90
    assert sympy.false in g.walk({q: 6, r: 0}, [a]).in_bounds([a])  # 96 >= 90
    qs, rs = index("qs"), index("rs")
    conds = g.walk({q: qs, r: rs}, [a]).in_bounds([a])
    # the derived coordinate's bound is always stated; bounds of the given ones may be left to the caller
    assert sympy.Lt(16 * qs + rs, 90) in conds
    assert set(conds) <= {sympy.Lt(16 * qs + rs, 90), sympy.Lt(qs, 6), sympy.Lt(rs, 16)}


def test_in_bounds_forward_walk():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(96))
    q, r = g.add_dimension(Linear(6)), g.add_dimension(Linear(16))
    g.add_edge(Tile(), inputs=[a], outputs=[q, r])
    av = index("av")
    w = g.walk({a: av}, [q, r], direction="forward")
    assert w[q] == FloorDiv(av, 16) and w[r] == Mod(av, 16)
    conds = w.in_bounds([q, r])
    assert sympy.Lt(FloorDiv(av, 16), 6) in conds
    assert sympy.true not in conds
    assert g.walk({a: 95}, [q, r], direction="forward").in_bounds([q, r]) == []


def test_structure_reflects_changes():
    g, _a, _q, _r, _e = tile_graph()
    s = g.structure()
    hash(s)
    assert tile_graph()[0].structure() == s
    g.add_dimension(Linear(1))
    assert g.structure() != s
