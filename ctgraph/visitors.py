"""Edge visitors: apply one edge of a graph, forward (inputs -> outputs) or in reverse.

These are the single-edge views of :meth:`CoordinateGraph.walk`; the algebra of each edge lives on
the edge class (:mod:`ctgraph.edges`), and the visitors supply it with the sizes of the edge's
dimensions. Numeric coordinates give sympy ``Integer`` results, so ``int(...)`` works; they must be
integers inside their dimension (``0 <= c < |X|``), else a ``TypeError``/``ValueError`` names it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

from .graph import CoordinateGraph, check_coordinate

__all__ = ["ForwardEdgeVisitor", "ReverseEdgeVisitor"]


class ForwardEdgeVisitor:
    """``ForwardEdgeVisitor(g).visit(edge, coords)``: output coordinates from input coordinates."""

    direction = "forward"

    def __init__(self, graph: CoordinateGraph) -> None:
        self.graph = graph

    def visit(self, edge: int, coords: Sequence[int | sympy.Expr]) -> list[sympy.Expr]:
        """Apply ``edge`` to ``coords`` (its inputs forward, its outputs in reverse). Numbers must be integers
        in ``[0, |X|)`` of their dimension X (``TypeError``/``ValueError`` naming it); sympy expressions pass."""
        g = self.graph
        given = g.inputs(edge) if self.direction == "forward" else g.outputs(edge)
        if len(coords) == len(given):  # NOTE: a wrong count is apply's error, which names the edge
            coords = [check_coordinate(g, t, c, in_range=False) for t, c in zip(given, coords, strict=True)]
            free: set[int] = set()
            if self.direction == "reverse":
                free = g.edge(edge).unchecked_in_reverse(len(given), dict(enumerate(map(sympy.sympify, coords))))
            for port, (t, c) in enumerate(zip(given, coords, strict=True)):
                if port not in free:
                    check_coordinate(g, t, c)
        return g.apply(edge, coords, self.direction)


class ReverseEdgeVisitor(ForwardEdgeVisitor):
    """``ReverseEdgeVisitor(g).visit(edge, coords)``: input coordinates from output coordinates."""

    direction = "reverse"
