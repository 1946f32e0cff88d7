"""Stream-K (seed 004): the flattened m -> n -> k iteration space, split evenly over workgroups.

    Flatten(m, n, k; L)                        L = (m*|n| + n)*Kt + k     (|L| = T*Kt)
    Tile(L; Workgroup, Local)                  L = wg*tilesPerWG + local,  tilesPerWG = ceil(T*Kt/g)
    Split(Local; ForLoop(Tile), ForLoop(K))    local = forTile + forK      (strides 1, 1)

Reading it back (the reverse walk) gives seed 004's formulas::

    tile = tilesPerWG*wg + forTile + forK
    m = (tile // Kt) // Nt,   n = (tile // Kt) % Nt,   k = tile % Kt

With ``PassOptions.raster = G`` the output tiles are ``(R, n, r)`` instead of ``(m, n)``, or the walk's
position ``O`` where the last group is ragged (:mod:`ctgraph.passes.raster`); K stays innermost.
"""

from __future__ import annotations

from ..graph import CoordinateGraph
from .common import PassOptions, distribute, flatten_tiles, gemm_tiles, tile_order

__all__ = ["flatten_mnk", "streamk"]


def flatten_mnk(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """``Flatten(MacroTileNumber(A; 0), MacroTileNumber(B; 1), K tiles; global tiles)`` (m and n in
    :func:`~ctgraph.passes.common.tile_order`)."""
    g = g.copy()
    t = gemm_tiles(g)
    flatten_tiles(g, [*tile_order(g, t.m, t.n, opts.raster), t.k], "global tiles", "totalTiles")
    return g


def _global_tiles(g: CoordinateGraph) -> int:
    from ..dimensions import Linear

    found = [t for t in g.dimensions(Linear, name="global tiles") if not g.edges_out(t)]
    if len(found) != 1:
        raise ValueError("expected one dangling Linear(global tiles): run flatten_mnk first")
    return found[0]


def streamk(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """Distribute the global tile space over ``opts.workgroups`` in contiguous, equal ranges."""
    g = g.copy()
    distribute(g, _global_tiles(g), opts.workgroups)
    return g
