"""Sections and schedules: what a transformed GEMM graph asks each workgroup to do.

A transformed graph has one or more **sections** (Stream-K and data-parallel parts of a two-tile
schedule; a single one otherwise). A section is driven by three coordinates a kernel supplies: its
``Workgroup``, and the loop counters ``ForLoop(Tile)`` and ``ForLoop(K)`` that a Split with strides
(1, 1) adds into one local iteration ``forTile + forK``; a ``Sunder`` selector value picks it (a Sunder whose
selector no edge consumes: the kernel supplies it).

:func:`schedule` evaluates the graph's reverse expressions for every (workgroup, local iteration)
at once with numpy: the iterations a workgroup runs are the prefix of ``local = 0, 1, ...`` for which
every dimension on the reverse walk is in bounds -- exactly the loops the kernel runs, which stop at
the first out-of-range iteration.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import networkx as nx
import numpy as np
import sympy

from .dimensions import ForLoop, MacroTileNumber, Workgroup
from .edges import Sunder
from .evaluate import NUMPY, NumpyIndexPrinter
from .expr import index, to_int
from .graph import CoordinateGraph, Walk

__all__ = ["NUMPY", "Section", "TileCoords", "schedule", "section_walk", "sections", "tile_coords"]


@dataclass(frozen=True)
class Section:
    """The coordinates that drive one section; ``selector`` is ``(dimension, value)`` under a Sunder."""

    name: str
    workgroup: int
    for_tile: int
    for_k: int
    selector: tuple[int, int] | None = None
    whole_tiles: bool = False  # every workgroup gets whole output tiles: no fixup needed


@dataclass(frozen=True)
class TileCoords:
    """Tags of the tile numbers a kernel iterates over: m (D's rows), n (D's columns), k (A's columns)."""

    m: int
    n: int
    k: int


def tile_coords(g: CoordinateGraph) -> TileCoords:
    return TileCoords(
        g.find(MacroTileNumber, tensor="D", dim=0),
        g.find(MacroTileNumber, tensor="D", dim=1),
        g.find(MacroTileNumber, tensor="A", dim=1),
    )


def sections(g: CoordinateGraph) -> list[Section]:
    """The sections of a transformed GEMM graph, in execution order (selector order under a Sunder)."""
    found = []
    whole = g.attrs.get("whole_tiles", frozenset())
    for wg in g.dimensions(Workgroup):
        name = getattr(g.dimension(wg), "section", "")
        if name == g.attrs.get("reduce"):
            continue  # a separate reduction kernel's workgroups, not a section of the main kernel
        loops = g.find(ForLoop, name="Tile", section=name), g.find(ForLoop, name="K", section=name)
        found.append(Section(name, wg, *loops, whole_tiles=name in whole))
    if not found:
        raise ValueError("the graph has no Workgroup dimension: run a transform (ctgraph.compile) first")
    # NOTE: a Sunder picks sections only where the kernel supplies its selector (a sink); a selector the walk
    # computes (a ragged tile order's, ctgraph.passes.raster) is index algebra, not a section.
    sunders = [e for e in g.edges(Sunder) if not g.edges_out(g.outputs(e)[-1])]
    if not sunders:
        if len(found) != 1:
            raise ValueError(f"{len(found)} workgroup dimensions but no Sunder to choose between them")
        return found
    (sunder,) = sunders
    *parts, selector = g.outputs(sunder)
    ordered = []
    for value, part in enumerate(parts):
        (sec,) = [s for s in found if s.workgroup in _downstream(g, part)]
        ordered.append(replace(sec, selector=(selector, value)))
    return ordered


def _downstream(g: CoordinateGraph, tag: int) -> set[int]:
    return nx.descendants(g.nx, tag)


def section_walk(
    g: CoordinateGraph, sec: Section, wg: sympy.Expr, for_tile: sympy.Expr, for_k: sympy.Expr, targets: list[int]
) -> Walk:
    """Reverse-walk ``targets`` from the section's coordinates (workgroup, forTile, forK[, selector])."""
    values: dict[int, sympy.Expr | int] = {sec.workgroup: wg, sec.for_tile: for_tile, sec.for_k: for_k}
    if sec.selector is not None:
        values[sec.selector[0]] = sec.selector[1]
    return g.walk(values, targets)


def schedule(g: CoordinateGraph) -> list[list[tuple[int, int, int]]]:
    """Per workgroup, the ``(m_tile, n_tile, k_iter)`` iterations it processes, in order."""
    tc = tile_coords(g)
    secs = sections(g)
    workgroups = to_int(g.size(secs[0].workgroup))
    out: list[list[tuple[int, int, int]]] = [[] for _ in range(workgroups)]
    wg, local = index("wg"), index("local")
    for sec in secs:
        per_wg = to_int(g.size(sec.for_tile))
        if per_wg == 0:
            continue
        w = section_walk(g, sec, wg, local, sympy.Integer(0), [tc.m, tc.n, tc.k])
        exprs = [w[tc.m], w[tc.n], w[tc.k], sympy.And(*w.in_bounds([tc.m, tc.n, tc.k]))]
        # NOTE: the index printer keeps integers through a Piecewise (a ragged tile order's); sympy's prints
        # numpy.select(..., default=nan), which makes every result a float.
        fn = sympy.lambdify([wg, local], exprs, modules=NUMPY, printer=NumpyIndexPrinter)
        W, L = np.meshgrid(np.arange(workgroups, dtype=np.int64), np.arange(per_wg, dtype=np.int64), indexing="ij")
        m, n, k, ok = (np.broadcast_to(np.asarray(a), W.shape) for a in fn(W, L))
        run = np.logical_and.accumulate(ok, axis=1)  # the loops stop at the first out-of-range iteration
        for i in range(workgroups):
            cnt = int(run[i].sum())
            if cnt:
                out[i].extend(zip(m[i, :cnt].tolist(), n[i, :cnt].tolist(), k[i, :cnt].tolist(), strict=True))
    return out
