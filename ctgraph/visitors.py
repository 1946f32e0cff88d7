"""Edge visitors: apply one edge of a graph, forward (inputs -> outputs) or in reverse.

These are the single-edge views of :meth:`CoordinateGraph.walk`; the algebra of each edge lives on
the edge class (:mod:`ctgraph.edges`), and the visitors supply it with the sizes of the edge's
dimensions. Numeric coordinates give sympy ``Integer`` results, so ``int(...)`` works.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from .graph import CoordinateGraph

__all__ = ["ForwardEdgeVisitor", "ReverseEdgeVisitor"]


class ForwardEdgeVisitor:
    """``ForwardEdgeVisitor(g).visit(edge, coords)``: output coordinates from input coordinates."""

    direction = "forward"

    def __init__(self, graph: CoordinateGraph) -> None:
        self.graph = graph

    def visit(self, edge: int, coords: Sequence[int | sympy.Expr]) -> list[sympy.Expr]:
        return self.graph.apply(edge, coords, self.direction)


class ReverseEdgeVisitor(ForwardEdgeVisitor):
    """``ReverseEdgeVisitor(g).visit(edge, coords)``: input coordinates from output coordinates."""

    direction = "reverse"
