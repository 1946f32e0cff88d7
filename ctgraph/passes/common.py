"""Pieces the GEMM passes share: finding the dangling tile coordinates, flattening them, and
distributing a linear iteration space over workgroups as two loops. The tile order (``raster``) lives in
:mod:`ctgraph.passes.raster`; ``raster_group`` and ``tile_order`` are re-exported here."""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import sympy

from ..counts import per_workgroup
from ..dimensions import ForLoop, Linear, MacroTileNumber, Workgroup
from ..edges import Flatten, Split, Tile
from ..graph import CoordinateGraph
from .raster import raster_group, tile_order

__all__ = [
    "MAX_SK_BATCHES",
    "PassOptions",
    "distribute",
    "distribute_rounds",
    "flatten_tiles",
    "gemm_tiles",
    "output_tile_numbers",
    "raster_group",
    "tile_order",
]

MAX_SK_BATCHES = 6


@dataclass(frozen=True)
class PassOptions:
    """Options every pass receives. ``workgroups`` is the grid size g; ``sk_batches`` the waves of
    Stream-K work of a hybrid schedule (1 to 6; two-tile Stream-K is 2); ``split`` the K chunks per
    output tile of split-K; ``raster`` the tile rows walked together (:func:`tile_order`; 1: row-major);
    where a raster applies, a two-tile or hybrid schedule hands its data-parallel tiles out in rounds
    (:func:`distribute_rounds`), so that the tiles running at once are neighbours in that order."""

    workgroups: int
    sk_batches: int = 2
    split: int = 4
    raster: int = 1

    def __post_init__(self) -> None:
        w = self.workgroups
        if isinstance(w, bool) or not isinstance(w, numbers.Integral) or w < 1:
            raise ValueError(f"workgroups must be a positive integer, got {w!r}")
        b = self.sk_batches
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not 1 <= b <= MAX_SK_BATCHES:
            raise ValueError(f"sk_batches must be an integer in [1, {MAX_SK_BATCHES}], got {b!r}")
        s = self.split
        if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 1:
            raise ValueError(f"split must be a positive integer (K chunks per output tile), got {s!r}")
        r = self.raster
        if isinstance(r, bool) or not isinstance(r, numbers.Integral) or r < 1:
            raise ValueError(f"raster must be a positive integer (tile rows walked together; 1: row-major), got {r!r}")


@dataclass(frozen=True)
class GemmTiles:
    """Tags of the precondition graph's dangling coordinates: the m and n tile numbers and the K loop."""

    m: int
    n: int
    k: int


def output_tile_numbers(g: CoordinateGraph) -> tuple[int, int]:
    """``MacroTileNumber(A; 0)`` and ``MacroTileNumber(B; 1)``: the m and n tile numbers a schedule walks."""
    return g.find(MacroTileNumber, tensor="A", dim=0), g.find(MacroTileNumber, tensor="B", dim=1)


def gemm_tiles(g: CoordinateGraph) -> GemmTiles:
    """Find ``MacroTileNumber(A; 0)``, ``MacroTileNumber(B; 1)`` and ``ForLoop(K)``; they must be dangling."""
    try:
        tags = GemmTiles(*output_tile_numbers(g), g.find(ForLoop, name="K", section=""))
    except ValueError as e:
        raise ValueError(f"not a GEMM precondition graph (build it with ctgraph.gemm): {e}") from None
    for t in (tags.m, tags.n, tags.k):
        if g.edges_out(t):
            raise ValueError(f"{g.label(t)} is already transformed; a pass takes a precondition graph")
    return tags


def flatten_tiles(g: CoordinateGraph, dims: list[int], name: str, param: str) -> int:
    """``Flatten(dims; L)``: one row-major linear space over ``dims``; returns L.

    A ``ForLoop(K)`` among ``dims`` becomes ``Linear(K tiles)``: once flattened it is a coordinate of
    the tile space, not a loop of the kernel.
    """
    for t in dims:
        d = g.dimension(t)
        if isinstance(d, ForLoop):
            g.replace_dimension(t, Linear(d.size, name="K tiles", param=d.param))
    size = sympy.Mul(*[g.size(t) for t in dims])
    flat = g.add_dimension(Linear(size, name=name, param=param))
    g.add_edge(Flatten(), inputs=dims, outputs=[flat])
    return flat


def distribute(g: CoordinateGraph, space: int, workgroups: int, section: str = "", param: str = "tilesPerWG") -> None:
    """Give each workgroup a contiguous range of ``space``, walked by two loops (seed 004)::

        Tile(space; Workgroup, Linear(per WG))       space = wg*perWG + local
        Split(Linear(per WG); ForLoop(Tile), ForLoop(K)) strides (1, 1):  local = forTile + forK

    ``perWG = ceil(|space| / g)``. The outer loop ``forTile`` advances by however many iterations the
    inner ``forK`` loop ran; the kernel stops both where ``space`` or the range ends.
    """
    per_wg = per_workgroup(g.size(space), workgroups)
    wg = g.add_dimension(Workgroup(workgroups, section=section, param="numWGs"))
    local = g.add_dimension(Linear(per_wg, name=f"{section + ' ' if section else ''}tiles of this WG", param=param))
    g.add_edge(Tile(), inputs=[space], outputs=[wg, local])
    for_tile = g.add_dimension(ForLoop(per_wg, name="Tile", section=section, param=param))
    for_k = g.add_dimension(ForLoop(per_wg, name="K", section=section, param=param))
    g.add_edge(Split(strides=(1, 1)), inputs=[local], outputs=[for_tile, for_k])


def distribute_rounds(
    g: CoordinateGraph, tiles: int, k: int, workgroups: int, section: str = "", param: str = "tilesPerWG"
) -> None:
    """Give the workgroups whole output ``tiles`` in rounds, ``K`` looped inside (persistent data-parallel)::

        Tile(tiles; Linear(rounds), Workgroup)     tile = round*g + wg        (rounds = ceil(|tiles| / g))
        Flatten(round, k; Linear(per WG))          local = round*Kt + k
        Split(Linear(per WG); ForLoop(Tile), ForLoop(K)) strides (1, 1):  local = forTile + forK

    the same two loops as :func:`distribute`. The g tiles of a round run at the same time and are
    consecutive in the tile order (:func:`tile_order`), so what they read is what a raster keeps in L2;
    :func:`distribute` over the same tiles would run tiles ``perWG`` apart at once.
    """
    prefix = f"{section} " if section else ""
    size, name = per_workgroup(g.size(tiles), workgroups), f"num{section}Rounds" if section else "tileRounds"
    rounds = g.add_dimension(Linear(size, name=f"{prefix}tile round", param=name))
    wg = g.add_dimension(Workgroup(workgroups, section=section, param="numWGs"))
    g.add_edge(Tile(), inputs=[tiles], outputs=[rounds, wg])
    local = flatten_tiles(g, [rounds, k], f"{prefix}tiles of this WG", param)
    per_wg = g.size(local)
    for_tile = g.add_dimension(ForLoop(per_wg, name="Tile", section=section, param=param))
    for_k = g.add_dimension(ForLoop(per_wg, name="K", section=section, param=param))
    g.add_edge(Split(strides=(1, 1)), inputs=[local], outputs=[for_tile, for_k])
