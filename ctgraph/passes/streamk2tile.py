"""Two-tile Stream-K + data-parallel (seed 004): a Stream-K section, then whole tiles.

    Sunder(L; SK, DP, selector)    L = sk            (selector 0)
                                   L = N_SK + dp     (selector 1)
    each part: Tile(part; Workgroup, Local), Split(Local; ForLoop(Tile), ForLoop(K)) as in Stream-K

With T output tiles, Kt k-iterations per tile and g workgroups::

    N_DP = (T // g - 1) * g * Kt      (a multiple of g*Kt: whole tiles, no fixup)
    N_SK = T*Kt - N_DP = Kt * (T % g + g)

so each workgroup streams between one and two tiles' worth of SK iterations. When ``T % g == 0`` all
work is data-parallel (``N_SK = 0``); when ``T < g``, ``N_DP`` would be negative and is clamped to 0
(all Stream-K). SK iterations come first (selector 0): a workgroup stores its partial tile early, so
an owner rarely waits long, and the data-parallel tiles that follow need no synchronisation at all.
"""

from __future__ import annotations

import sympy

from ..counts import split_sk_dp
from ..dimensions import Linear
from ..edges import Sunder, Tile
from ..graph import CoordinateGraph
from .common import PassOptions, distribute, distribute_rounds
from .streamk import _global_tiles

__all__ = ["split_sk_dp", "streamk2tile", "sunder_sk_dp"]  # split_sk_dp: from ctgraph.counts, its home

# NOTE: ``streamk_hybrid`` (Stream-K++'s DP + b SK batches) runs these same two passes with
# ``PassOptions.sk_batches = b``; ``streamk2tile`` is the hybrid with b = 2.


def sunder_sk_dp(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """``Sunder(global tiles; SK tiles, DP tiles, selector)`` sized by :func:`ctgraph.counts.split_sk_dp`."""
    g = g.copy()
    space = _global_tiles(g)
    *tiles, k = (g.size(t) for t in g.inputs(g.edges_in(space)[0]))  # the output tile coordinates, then K
    n_sk, n_dp = split_sk_dp(sympy.Mul(*tiles), k, opts.workgroups, opts.sk_batches)
    sk = g.add_dimension(Linear(n_sk, name="SK tiles", param="numTilesSK"))
    dp = g.add_dimension(Linear(n_dp, name="DP tiles", param="numTilesDP"))
    sel = g.add_dimension(Linear(2, name="SK/DP selector"))
    g.add_edge(Sunder(), inputs=[space], outputs=[sk, dp, sel])
    return g


def streamk2tile(g: CoordinateGraph, opts: PassOptions) -> CoordinateGraph:
    """Distribute each Sunder partition over the workgroups: SK in even ranges, DP in whole tiles.

    The DP part is seed 004's contiguous ranges (``tile = N_SK + perWG*wg + forTile + forK``), or, where
    the tiles are in a raster order (a group of more than one tile row, ragged or not: ``g.attrs["raster"] > 1``),
    whole tiles in rounds as the data-parallel transform hands them out::

        Tile(DP; DP output tiles, K tiles)     DP = tile*Kt + k
        then distribute_rounds                 tile = round*g + wg

    so the g tiles that run at once are consecutive in the raster order and share what L2 holds (a
    range of ``perWG`` tiles per workgroup runs tiles ``perWG`` apart at once: ``perWG`` times the rows
    and columns of A and B).
    """
    g = g.copy()
    part = g.find(Linear, name="SK tiles")
    distribute(g, part, opts.workgroups, section="SK", param="numSKTilesPerWG")
    part = g.find(Linear, name="DP tiles")
    if g.attrs.get("raster", 1) > 1:
        kt = g.find(Linear, name="K tiles")
        tiles = g.add_dimension(Linear(g.size(part) // g.size(kt), name="DP output tiles", param="numDPTiles"))
        k = g.add_dimension(Linear(g.size(kt), name="DP K tiles", param=g.dimension(kt).param))
        g.add_edge(Tile(), inputs=[part], outputs=[tiles, k])
        distribute_rounds(g, tiles, k, opts.workgroups, section="DP", param="numDPTilesPerWG")
    else:
        distribute(g, part, opts.workgroups, section="DP", param="numDPTilesPerWG")
    g.attrs["whole_tiles"] = frozenset({"DP"})  # N_DP is a multiple of g*Kt: whole tiles per workgroup
    return g
