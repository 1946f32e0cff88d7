"""Data-parallel: whole output tiles over persistent workgroups, K looped inside.

    Flatten(m, n; L)                        L = m*|n| + n            (output tiles, |L| = T)
                                            (with raster G: Flatten(R, n, r), see tile_order)
    Tile(L; I, Workgroup)                   L = i*g + wg             (tile = wg + i*g, persistent)
    Flatten(I, K tiles; Local)              local = i*Kt + k
    Split(Local; ForLoop(Tile), ForLoop(K)) strides (1, 1)

The last two edges write the data-parallel schedule in the same two-loop form as Stream-K: a
workgroup's iterations are ``local = 0, 1, ...``; the inner loop runs the Kt iterations of one tile
and the outer loop advances by Kt. Every tile has exactly one owner, so there is no fixup.
"""

from __future__ import annotations

from ..dimensions import ForLoop, Linear, Workgroup
from ..edges import Split, Tile
from ..expr import ceildiv
from ..graph import CoordinateGraph
from .common import PassOptions, flatten_tiles, gemm_tiles, tile_order

__all__ = ["dataparallel"]


def dataparallel(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """Attach the dangling tile coordinates of a GEMM graph to workgroups, data-parallel."""
    g = g.copy()
    t = gemm_tiles(g)
    tiles = flatten_tiles(g, tile_order(g, t, opts.raster), "output tiles", "numTiles")
    rounds = g.add_dimension(Linear(ceildiv(g.size(tiles), opts.workgroups), name="tile round", param="tileRounds"))
    wg = g.add_dimension(Workgroup(opts.workgroups, param="numWGs"))
    g.add_edge(Tile(), inputs=[tiles], outputs=[rounds, wg])
    per_wg = g.size(rounds) * g.size(t.k)
    local = flatten_tiles(g, [rounds, t.k], "tiles of this WG", "tilesPerWG")
    for_tile = g.add_dimension(ForLoop(per_wg, name="Tile", param="tilesPerWG"))
    for_k = g.add_dimension(ForLoop(per_wg, name="K", param="tilesPerWG"))
    g.add_edge(Split(strides=(1, 1)), inputs=[local], outputs=[for_tile, for_k])
    g.attrs["whole_tiles"] = frozenset({""})
    return g
