"""Split-K: every output tile's K range cut into ``s`` chunks, one workgroup per (tile, chunk).

With Kt k-iterations per tile, chunks hold ``c = ceil(Kt / s)`` iterations and there are
``s' = ceil(Kt / c)`` non-empty ones (the last may be short)::

    Tile(K tiles; chunk, kk)                     k = chunk*c + kk            (|chunk| = s', |kk| = c)
    Flatten(m, n, chunk; units)                  unit = (m*|n| + n)*s' + chunk
    PassThrough(units; Workgroup)                one workgroup per unit:  g = T*s'
    Split(kk; ForLoop(Tile), ForLoop(K))         kk = forTile + forK         (strides 1, 1)

The chunk holding k == 0 owns the tile (the same fixup rule as Stream-K): the other ``s' - 1``
workgroups of a tile are its neighbours ``wg+1 .. wg+s'-1``, each storing one partial. The inner loop
stops at ``k == Kt`` in the short last chunk, because ``k`` is bounded by ``|K tiles|`` in the walk.
For few tiles and long K (where data-parallel leaves most of the GPU idle).
"""

from __future__ import annotations

from ..counts import split_chunks, split_for_budget
from ..dimensions import ForLoop, Linear, Workgroup
from ..edges import Flatten, PassThrough, Split, Tile
from ..graph import CoordinateGraph
from .common import PassOptions, gemm_tiles, output_tile_numbers

__all__ = ["split_chunks", "split_for_budget", "splitk", "splitk_reduce"]  # the first two: ctgraph.counts

REDUCE = "reduce"  # the section name of the separate reduction's workgroups


def splitk(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """One workgroup per (output tile, K chunk); ``opts.split`` chunks per tile (see the module docstring)."""
    g = g.copy()
    t = gemm_tiles(g)
    k = g.dimension(t.k)
    g.replace_dimension(t.k, Linear(k.size, name="K tiles", param=k.param))
    chunks, per = split_chunks(k.size, opts.split)
    chunk = g.add_dimension(Linear(chunks, name="K chunk", param="numChunks"))
    kk = g.add_dimension(Linear(per, name="k in chunk", param="chunkIters"))
    g.add_edge(Tile(), inputs=[t.k], outputs=[chunk, kk])
    units_size = g.size(t.m) * g.size(t.n) * chunks
    units = g.add_dimension(Linear(units_size, name="split-K units", param="numUnits"))
    g.add_edge(Flatten(), inputs=[t.m, t.n, chunk], outputs=[units])
    wg = g.add_dimension(Workgroup(units_size, param="numWGs"))
    g.add_edge(PassThrough(), inputs=[units], outputs=[wg])
    for_tile = g.add_dimension(ForLoop(per, name="Tile", param="chunkIters"))
    for_k = g.add_dimension(ForLoop(per, name="K", param="chunkIters"))
    g.add_edge(Split(strides=(1, 1)), inputs=[kk], outputs=[for_tile, for_k])
    return g


def splitk_reduce(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """Split-K without spin-waits: every chunk stores its partial, a second kernel sums them.

    The reduction's coordinates::

        Flatten(m, n; output tiles)                 tile = m*|n| + n
        PassThrough(output tiles; Workgroup(reduce)) one reduction workgroup per output tile

    Its loop over the K chunks reads ``unit = Flatten(m, n, chunk)`` forward: the partial's slot.
    """
    g = splitk(g, opts)
    m, n = output_tile_numbers(g)
    tiles = g.add_dimension(Linear(g.size(m) * g.size(n), name="output tiles", param="numTiles"))
    g.add_edge(Flatten(), inputs=[m, n], outputs=[tiles])
    wg = g.add_dimension(Workgroup(g.size(tiles), section=REDUCE, param="numTiles"))
    g.add_edge(PassThrough(), inputs=[tiles], outputs=[wg])
    g.attrs["reduce"] = REDUCE
    return g
