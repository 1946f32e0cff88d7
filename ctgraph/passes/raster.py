"""Tile order: the output tiles walked row-major, or G tile rows at a time (Triton's ``GROUP_SIZE_M``).

:func:`tile_order` attaches the dangling tile numbers ``m`` (``|m| = Mt``) and ``n`` (``|n| = Nt``) to the
coordinates a schedule flattens, slowest first. With ``G = raster_group(Mt, raster)``, ``F = Mt // G`` whole
groups and ``e = Mt % G`` rows left over:

``G == 1``: ``[m, n]`` -- row-major (seed 004): the tile after ``(m, n)`` is ``(m, n + 1)``.

``e == 0`` (G divides Mt; Mt < raster included, where G = Mt): one edge, as before ragged groups were built::

    Tile(m; R, r)              m = R*G + r                  |R| = F, |r| = G
    returns [R, n, r]          Flatten(R, n, r) = (R*Nt + n)*G + r

``e > 0`` (ragged): F groups of G rows, then one group of the last e rows, each walked column by column --
Triton's ``group_size_m = min(Mt - first_pid_m, GROUP_SIZE_M)``. The rows are cut with a ``Sunder`` of the
row-major tile space, each part ordered by its own ``Split`` and ``Flatten``, and the two orders joined
again behind a selector the walk computes (see :func:`_ragged_order`)::

    Flatten(m, n; T)                  T = m*Nt + n                       |T| = Mt*Nt
    Sunder(T; Tf, Te, S)              T = Tf (S = 0) | F*G*Nt + Te (S = 1)
    Split(Tf; R, r, nf)               Tf = (R*G + r)*Nt + nf             |R| = F, |r| = G, |nf| = Nt
    Flatten(R, nf, r; Of)             Of = (R*Nt + nf)*G + r             the full groups' walk
    Split(Te; re, ne)                 Te = re*Nt + ne                    |re| = e, |ne| = Nt
    Flatten(ne, re; Oe)               Oe = ne*e + re                     the last group's walk
    Join(Of, Oe; W) strides (1, 1)    W = Of + Oe                        |W| = F*G*Nt
    Join(S, W; O)                     O = S*F*G*Nt + W                   |O| = Mt*Nt, |S| = 2
    returns [O]

Forward (``m, n -> O``) every arrow is a function: Sunder's forward leaves the partition it does not
select at 0, so one of ``Of``, ``Oe`` is 0 and ``W = Of + Oe``. Reverse (the kernel's walk, ``O -> m, n``)::

    S  = (O // (F*G*Nt)) % 2        W  = O % (F*G*Nt)           (F >= 1 and e < G, so O < 2*F*G*Nt)
    Of = W % (F*G*Nt) = W           Oe = W % (e*Nt)             (= W where S = 1)
    R, nf, r = Of // (Nt*G), (Of // G) % Nt, Of % G     ne, re = Oe // e, Oe % e
    T  = Piecewise(((R*G + r)*Nt + nf, S = 0), (F*G*Nt + re*Nt + ne, otherwise))
    m, n = T // Nt, T % Nt

The branch the selector does not pick still reads coordinates reduced modulo their own sizes, so every
bound the walk states (``Walk.in_bounds``: the kernel's loop conditions and masks) holds for every ``O <
Mt*Nt``: the walk stops exactly where ``O`` leaves the tile space, as in the other orders. The selector ``S``
is computed by the walk, not supplied by the kernel, so it picks no kernel section
(:func:`ctgraph.schedule.sections` only takes a Sunder whose selector is a sink).

G is a compile-time constant (an unnamed size); F, e and the part sizes are kernel parameters. Whether G
divides Mt is known when the pass runs (the graph is built for a shape), so a kernel whose G divides its
tile rows keeps the one-edge form and the same source as before; a ragged kernel's source differs, and
serves every shape with the same G that leaves a remainder (e > 0, hence F >= 1: no size it divides by is
0).

A wave of g consecutive tiles then reads about G tile rows of A and g/G tile columns of B, instead of g/Nt
rows of A and, once g >= Nt, all of B: far fewer bytes for L2 to hold when B is large.
"""

from __future__ import annotations

from ..dimensions import Linear
from ..edges import Flatten, Join, Split, Sunder, Tile
from ..graph import CoordinateGraph

__all__ = ["raster_group", "tile_order"]


def raster_group(tile_rows: int, raster: int) -> int:
    """The group size :func:`tile_order` uses: ``raster`` capped at the tile rows.

    The last group may be ragged (``tile_rows % group`` rows): 8 on 13 tile rows walks a group of 8 rows and
    then one of 5. (Before ragged groups were built the group was lowered to the largest divisor of the tile
    rows, so 13 rows walked row-major.)
    """
    return max(1, min(raster, tile_rows))


def tile_order(g: CoordinateGraph, m: int, n: int, raster: int) -> list[int]:
    """The output tile coordinates, slowest first, in the order a schedule walks them (module docstring).

    ``m`` and ``n`` are the dangling tile numbers; sets ``g.attrs["raster"]`` to the group when it is above 1.
    """
    rows = int(g.size(m))
    group = raster_group(rows, raster)
    if group == 1:
        return [m, n]
    g.attrs["raster"] = group
    if rows % group == 0:
        R = g.add_dimension(Linear(rows // group, name="raster groups", param="numRasterGroups"))
        r = g.add_dimension(Linear(group, name="rows of a raster group"))
        g.add_edge(Tile(), inputs=[m], outputs=[R, r])
        return [R, n, r]
    return [_ragged_order(g, m, n, group)]


def _ragged_order(g: CoordinateGraph, m: int, n: int, group: int) -> int:
    """The ragged walk's edges (module docstring); returns ``O``, the position of a tile in the walk."""
    rows, cols = int(g.size(m)), g.size(n)
    cols_param = g.dimension(n).param
    full, last = rows // group, rows % group

    def linear(size: object, name: str, param: str = "") -> int:
        return g.add_dimension(Linear(size, name=name, param=param))  # type: ignore[arg-type]

    whole = full * group * cols  # tiles of the full groups
    T = linear(rows * cols, "row-major output tiles", "numTiles")
    g.add_edge(Flatten(), inputs=[m, n], outputs=[T])
    tf = linear(whole, "tiles of the full raster groups", "numRasterFullTiles")
    te = linear(last * cols, "tiles of the last raster group", "numRasterLastTiles")
    sel = linear(2, "full/last raster group selector")
    g.add_edge(Sunder(), inputs=[T], outputs=[tf, te, sel])

    R = linear(full, "raster groups", "numRasterGroups")
    r = linear(group, "rows of a raster group")
    nf = linear(cols, "tile columns of the full raster groups", cols_param)
    g.add_edge(Split(), inputs=[tf], outputs=[R, r, nf])
    of = linear(whole, "full raster groups' walk", "numRasterFullTiles")
    g.add_edge(Flatten(), inputs=[R, nf, r], outputs=[of])

    re = linear(last, "rows of the last raster group", "numRasterLastRows")
    ne = linear(cols, "tile columns of the last raster group", cols_param)
    g.add_edge(Split(), inputs=[te], outputs=[re, ne])
    oe = linear(last * cols, "last raster group's walk", "numRasterLastTiles")
    g.add_edge(Flatten(), inputs=[ne, re], outputs=[oe])

    w = linear(whole, "raster group's walk", "numRasterFullTiles")
    g.add_edge(Join(strides=(1, 1)), inputs=[of, oe], outputs=[w])
    order = linear(rows * cols, "raster order", "numTiles")
    g.add_edge(Join(), inputs=[sel, w], outputs=[order])
    return order
