"""Data-parallel: whole output tiles over persistent workgroups, K looped inside.

    Flatten(m, n; L)                        L = m*|n| + n            (output tiles, |L| = T)
                                            (with raster G: Flatten(R, n, r), or Flatten(O) where
                                            the last group is ragged; ctgraph.passes.raster)
    Tile(L; I, Workgroup)                   L = i*g + wg             (tile = wg + i*g, persistent)
    Flatten(I, K tiles; Local)              local = i*Kt + k
    Split(Local; ForLoop(Tile), ForLoop(K)) strides (1, 1)

The last three edges (:func:`~ctgraph.passes.common.distribute_rounds`) write the data-parallel schedule
in the same two-loop form as Stream-K: a workgroup's iterations are ``local = 0, 1, ...``; the inner loop
runs the Kt iterations of one tile and the outer loop advances by Kt. Every tile has exactly one owner,
so there is no fixup.
"""

from __future__ import annotations

from ..graph import CoordinateGraph
from .common import PassOptions, distribute_rounds, flatten_tiles, gemm_tiles, tile_order

__all__ = ["dataparallel"]


def dataparallel(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """Attach the dangling tile coordinates of a GEMM graph to workgroups, data-parallel."""
    g = g.copy()
    t = gemm_tiles(g)
    tiles = flatten_tiles(g, tile_order(g, t.m, t.n, opts.raster), "output tiles", "numTiles")
    distribute_rounds(g, tiles, t.k, opts.workgroups)
    g.attrs["whole_tiles"] = frozenset({""})
    return g
