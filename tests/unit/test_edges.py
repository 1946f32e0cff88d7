"""Every edge type: forward/reverse algebra as round trips over whole (small) index spaces."""

import itertools
import math

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from ctgraph import CoordinateGraph
from ctgraph.dimensions import Linear
from ctgraph.edges import Flatten, Join, PassThrough, Split, Sunder, Tile
from ctgraph.expr import index
from ctgraph.visitors import ForwardEdgeVisitor, ReverseEdgeVisitor

FAST = settings(max_examples=50, deadline=None)


def build(edge, in_sizes, out_sizes):
    """A graph holding one edge between fresh Linear dimensions; returns (graph, edge tag)."""
    g = CoordinateGraph()
    ins = [g.add_dimension(Linear(s)) for s in in_sizes]
    outs = [g.add_dimension(Linear(s)) for s in out_sizes]
    return g, g.add_edge(edge, inputs=ins, outputs=outs)


def ints(values):
    assert all(isinstance(v, sympy.Integer) for v in values), values
    return tuple(int(v) for v in values)


def space(sizes):
    return itertools.product(*(range(s) for s in sizes))


def check_bijection(edge, in_sizes, out_sizes):
    """forward∘reverse and reverse∘forward are identities over the whole input and output spaces."""
    g, e = build(edge, in_sizes, out_sizes)
    fwd, rev = ForwardEdgeVisitor(g), ReverseEdgeVisitor(g)
    images = set()
    for xs in space(in_sizes):
        ys = ints(fwd.visit(e, list(xs)))
        assert all(0 <= y < s for y, s in zip(ys, out_sizes, strict=True)), (xs, ys)
        assert ints(rev.visit(e, list(ys))) == xs
        images.add(ys)
    for ys in space(out_sizes):
        xs = ints(rev.visit(e, list(ys)))
        assert ints(fwd.visit(e, list(xs))) == ys
    assert len(images) == math.prod(in_sizes)


# --- the DESIGN.md example ------------------------------------------------------------------------


def test_design_example():
    g = CoordinateGraph()
    a = g.add_dimension(Linear(size=96))
    q = g.add_dimension(Linear(size=6))
    r = g.add_dimension(Linear(size=16))
    e = g.add_edge(Tile(), inputs=[a], outputs=[q, r])
    rev = ReverseEdgeVisitor(g).visit(e, [3, 5])
    fwd = ForwardEdgeVisitor(g).visit(e, [53])
    assert rev == [53] and ints(rev) == (53,)
    assert fwd == [3, 5] and ints(fwd) == (3, 5)
    assert g.reverse({q: 3, r: 5}, targets=[a]) == {a: 53}
    assert g.forward({a: 53}, targets=[q, r]) == {q: 3, r: 5}


# --- exact round trips, one per edge type ---------------------------------------------------------


@pytest.mark.parametrize(("n", "t"), [(12, 4), (6, 1), (5, 5), (1, 1)])
def test_tile(n, t):
    check_bijection(Tile(), [n], [n // t, t])


def test_tile_values():
    g, e = build(Tile(), [12], [3, 4])
    assert ints(ForwardEdgeVisitor(g).visit(e, [7])) == (1, 3)
    assert ints(ReverseEdgeVisitor(g).visit(e, [2, 1])) == (9,)


@pytest.mark.parametrize("sizes", [(3, 4), (4, 3), (2, 3, 4), (1, 5, 1)])
def test_flatten(sizes):
    check_bijection(Flatten(), list(sizes), [math.prod(sizes)])


def test_flatten_is_row_major():
    g, e = build(Flatten(), [2, 3, 4], [24])
    assert ints(ForwardEdgeVisitor(g).visit(e, [1, 2, 3])) == (1 * 12 + 2 * 4 + 3,)
    assert ints(ReverseEdgeVisitor(g).visit(e, [23])) == (1, 2, 3)


@pytest.mark.parametrize("sizes", [(3, 4), (2, 3, 4)])
def test_split_default_strides(sizes):
    check_bijection(Split(), [math.prod(sizes)], list(sizes))


@pytest.mark.parametrize(("sizes", "strides"), [((3, 4), (4, 1)), ((2, 3, 4), (12, 4, 1)), ((3, 4), (1, 3))])
def test_split_explicit_strides(sizes, strides):
    check_bijection(Split(strides=strides), [math.prod(sizes)], list(sizes))


def test_split_explicit_row_major_equals_default():
    x0, x1 = index("x0"), index("x1")
    g1, e1 = build(Split(), [12], [3, 4])
    g2, e2 = build(Split(strides=(4, 1)), [12], [3, 4])
    assert ReverseEdgeVisitor(g1).visit(e1, [x0, x1]) == ReverseEdgeVisitor(g2).visit(e2, [x0, x1])


def test_split_column_major_values():
    g, e = build(Split(strides=(1, 3)), [12], [3, 4])
    assert ints(ForwardEdgeVisitor(g).visit(e, [7])) == (1, 2)
    assert ints(ReverseEdgeVisitor(g).visit(e, [1, 2])) == (7,)


def test_split_strides_1_1_reverse_is_a_sum():
    g, e = build(Split(strides=(1, 1)), [10], [10, 10])
    ft, fk = index("forTile"), index("forK")
    assert ReverseEdgeVisitor(g).visit(e, [ft, fk]) == [ft + fk]
    assert ints(ReverseEdgeVisitor(g).visit(e, [3, 4])) == (7,)


def test_split_wrong_number_of_strides():
    g, e = build(Split(strides=(4, 2, 1)), [12], [3, 4])
    with pytest.raises(ValueError, match="strides"):
        ReverseEdgeVisitor(g).visit(e, [1, 1])


@pytest.mark.parametrize("sizes", [(3, 4), (2, 3, 4)])
def test_join_default_strides(sizes):
    check_bijection(Join(), list(sizes), [math.prod(sizes)])


@pytest.mark.parametrize(("sizes", "strides"), [((3, 4), (4, 1)), ((3, 4), (1, 3)), ((2, 3, 4), (1, 2, 6))])
def test_join_explicit_strides(sizes, strides):
    check_bijection(Join(strides=strides), list(sizes), [math.prod(sizes)])


def test_join_values():
    g, e = build(Join(strides=(1, 3)), [3, 4], [12])
    assert ints(ForwardEdgeVisitor(g).visit(e, [2, 1])) == (5,)
    assert ints(ReverseEdgeVisitor(g).visit(e, [5])) == (2, 1)


def test_passthrough():
    check_bijection(PassThrough(), [7], [7])
    g, e = build(PassThrough(), [7], [7])
    z = index("z")
    assert ForwardEdgeVisitor(g).visit(e, [z]) == [z]
    assert ReverseEdgeVisitor(g).visit(e, [z]) == [z]


# --- Sunder ---------------------------------------------------------------------------------------


def check_sunder(parts):
    n = sum(parts)
    out_sizes = [*parts, len(parts)]
    g, e = build(Sunder(), [n], out_sizes)
    fwd, rev = ForwardEdgeVisitor(g), ReverseEdgeVisitor(g)
    offsets = [sum(parts[:j]) for j in range(len(parts))]
    for i in range(n):
        ys = ints(fwd.visit(e, [i]))
        s = ys[-1]
        assert 0 <= s < len(parts) and parts[s] > 0
        assert offsets[s] <= i < offsets[s] + parts[s]
        assert ys[s] == i - offsets[s]
        assert ints(rev.visit(e, list(ys))) == (i,)
    for s, size in enumerate(parts):
        for p in range(size):
            for other in (0, 5):  # the partitions not selected may hold anything
                ys = [other] * len(parts) + [s]
                ys[s] = p
                (i,) = ints(rev.visit(e, ys))
                assert i == offsets[s] + p
                back = ints(fwd.visit(e, [i]))
                assert (back[s], back[-1]) == (p, s)


@pytest.mark.parametrize("parts", [(3, 4), (4, 3), (1, 1), (2, 3, 4), (3, 0, 4), (0, 5), (5, 0), (2, 0, 0, 3)])
def test_sunder(parts):
    check_sunder(parts)


def test_sunder_reverse_adds_all_partitions_before_the_selected_one():
    # DESIGN.md §2: offset = sum_{j<s} |P_j| (not j < s-1 as in the seed's pseudo-code)
    g, e = build(Sunder(), [9], [2, 3, 4, 3])
    assert ints(ReverseEdgeVisitor(g).visit(e, [0, 0, 1, 2])) == (2 + 3 + 1,)
    assert ints(ReverseEdgeVisitor(g).visit(e, [0, 2, 0, 1])) == (2 + 2,)
    assert ints(ReverseEdgeVisitor(g).visit(e, [1, 0, 0, 0])) == (1,)


def test_sunder_symbolic_selector_is_piecewise():
    g, e = build(Sunder(), [9], [2, 3, 4, 3])
    p0, p1, p2, s = (index(n) for n in ("p0", "p1", "p2", "s"))
    (expr,) = ReverseEdgeVisitor(g).visit(e, [p0, p1, p2, s])
    assert isinstance(expr, sympy.Piecewise)
    for sv, want in [(0, 1), (1, 2 + 1), (2, 5 + 1)]:
        got = expr.subs({s: sv, p0: 1, p1: 1, p2: 1})
        assert isinstance(got, sympy.Integer) and int(got) == want


def test_sunder_numeric_selector_reads_only_selected_partition():
    g, e = build(Sunder(), [9], [2, 3, 4, 3])
    p0, p2 = index("p0"), index("p2")
    assert ReverseEdgeVisitor(g).visit(e, [p0, 1, p2, 1]) == [3]


def test_sunder_selector_out_of_range():
    g, e = build(Sunder(), [5], [2, 3, 2])
    with pytest.raises(ValueError, match="selector"):
        ReverseEdgeVisitor(g).visit(e, [0, 0, 2])


def test_sunder_graph_walk_with_numeric_selector():
    g = CoordinateGraph()
    i = g.add_dimension(Linear(7))
    sk, dp, sel = g.add_dimension(Linear(3)), g.add_dimension(Linear(4)), g.add_dimension(Linear(2))
    g.add_edge(Sunder(), inputs=[i], outputs=[sk, dp, sel])
    # the SK partition's coordinate is never given: a numeric selector makes it unnecessary
    assert g.reverse({dp: 2, sel: 1}, targets=[i]) == {i: 5}
    assert g.reverse({sk: 2, sel: 0}, targets=[i]) == {i: 2}


# --- arity and graph-building errors ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("edge", "n_in", "n_out"),
    [
        (Tile(), 1, 3),
        (Tile(), 1, 1),
        (Tile(), 2, 2),
        (Flatten(), 2, 2),
        (Flatten(), 0, 1),
        (Join(), 2, 0),
        (Split(), 1, 0),
        (Split(), 2, 2),
        (PassThrough(), 1, 2),
        (PassThrough(), 2, 1),
        (Sunder(), 1, 1),
        (Sunder(), 2, 3),
    ],
)
def test_arity_errors(edge, n_in, n_out):
    g = CoordinateGraph()
    dims = [g.add_dimension(Linear(4)) for _ in range(n_in + n_out)]
    with pytest.raises(ValueError, match=edge.name):
        g.add_edge(edge, inputs=dims[:n_in], outputs=dims[n_in:])
    assert g.edges() == []


def test_add_edge_rejects_non_dimension_tags():
    g = CoordinateGraph()
    a, b, c = (g.add_dimension(Linear(4)) for _ in range(3))
    e = g.add_edge(PassThrough(), inputs=[a], outputs=[b])
    with pytest.raises(ValueError, match="not a dimension"):
        g.add_edge(PassThrough(), inputs=[e], outputs=[c])  # an edge tag
    with pytest.raises(ValueError, match="not a dimension"):
        g.add_edge(PassThrough(), inputs=[a], outputs=[99])  # no such tag
    with pytest.raises(TypeError):
        g.add_edge("Tile", inputs=[a], outputs=[c])  # not an Edge
    assert g.edges() == [e]


def test_add_edge_rejects_repeated_dimension():
    g = CoordinateGraph()
    a, b = g.add_dimension(Linear(4)), g.add_dimension(Linear(2))
    with pytest.raises(ValueError):
        g.add_edge(Tile(), inputs=[a], outputs=[b, b])


def test_visitor_wrong_coordinate_count():
    g, e = build(Tile(), [12], [3, 4])
    with pytest.raises(ValueError):
        ReverseEdgeVisitor(g).visit(e, [1])
    with pytest.raises(ValueError):
        ForwardEdgeVisitor(g).visit(e, [1, 2])


# --- hypothesis: random small sizes -----------------------------------------------------------------

small = st.integers(1, 5)


@FAST
@given(small, small)
def test_tile_random(b, t):
    check_bijection(Tile(), [b * t], [b, t])


@FAST
@given(st.lists(small, min_size=1, max_size=3))
def test_flatten_random(sizes):
    check_bijection(Flatten(), sizes, [math.prod(sizes)])


@FAST
@given(st.lists(small, min_size=1, max_size=3), st.booleans())
def test_split_random(sizes, explicit):
    strides = tuple(math.prod(sizes[j + 1 :]) for j in range(len(sizes))) if explicit else None
    check_bijection(Split(strides=strides), [math.prod(sizes)], sizes)


@FAST
@given(st.lists(small, min_size=1, max_size=3), st.booleans())
def test_join_random(sizes, column_major):
    strides = tuple(math.prod(sizes[:j]) for j in range(len(sizes))) if column_major else None
    check_bijection(Join(strides=strides), sizes, [math.prod(sizes)])


@FAST
@given(st.integers(1, 9))
def test_passthrough_random(n):
    check_bijection(PassThrough(), [n], [n])


@FAST
@given(st.lists(st.integers(0, 4), min_size=2, max_size=4).filter(lambda p: sum(p) > 0))
def test_sunder_random(parts):
    check_sunder(parts)
