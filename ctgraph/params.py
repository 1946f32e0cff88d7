"""Kernel parameters: turn a graph's shape-dependent sizes into symbols bound at call time.

Every dimension whose size carries a ``param`` name (``numTilesK``, ``tilesPerWG`` ...) gets the size
symbol of that name; unnamed sizes (the macro tile) stay constants. The index expressions read off the
parametrized graph are then valid for every GEMM shape, so one compiled kernel serves them all: the
call binds each symbol to the size the same pipeline gives for the concrete shape (:func:`bindings`).
"""

from __future__ import annotations

import sympy

from .expr import size as size_symbol
from .graph import CoordinateGraph

__all__ = ["bindings", "parametrize"]


def bindings(g: CoordinateGraph) -> dict[sympy.Symbol, int]:
    """``{symbol: value}`` for every named size of ``g``; a name used with two values is an error."""
    out: dict[sympy.Symbol, int] = {}
    for t in g.dimensions():
        d = g.dimension(t)
        if not d.param:
            continue
        sym, value = size_symbol(d.param), sympy.sympify(d.size)
        if not value.is_Integer:
            raise ValueError(f"{g.label(t)}: size is not a number, cannot bind {d.param}")
        if out.setdefault(sym, int(value)) != int(value):
            raise ValueError(f"size parameter {d.param} has two values: {out[sym]} and {value}")
    return out


def parametrize(g: CoordinateGraph) -> CoordinateGraph:
    """A copy of ``g`` whose named sizes are symbols (``MacroTileNumber(A; 0) size=numTilesM``)."""
    bindings(g)  # checks the names are consistent
    h = g.copy()
    for t in h.dimensions():
        d = h.dimension(t)
        if d.param:
            h.replace_dimension(t, d.with_size(size_symbol(d.param)))
    return h
