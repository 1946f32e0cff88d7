"""``gemm()``: build the precondition coordinate graph of ``D = alpha*A@B + beta*C`` (seed 004).

For each tensor X in A (m x k), B (k x n), D (m x n)::

    User(X) -Split-> SubDimension(X; 0), SubDimension(X; 1)
    SubDimension(X; d) -Tile-> MacroTileNumber(X; d), MacroTileIndex(X; d)

and the tile numbers are tied together::

    MacroTileNumber(A; 1), MacroTileNumber(B; 0) -PassThrough-> ForLoop(K)      (A and B share k)
    MacroTileNumber(D; 0) -PassThrough-> MacroTileNumber(A; 0)                   (D's rows are A's)
    MacroTileNumber(D; 1) -PassThrough-> MacroTileNumber(B; 1)                   (D's columns are B's)

``MacroTileNumber(A; 0)``, ``MacroTileNumber(B; 1)`` and ``ForLoop(K)`` are left dangling: the passes
attach them to workgroups and loops. Partial tiles are allowed: ``|MacroTileNumber| = ceil(size/tile)``
and the overhang is masked by the kernel. Sizes that depend on the shape carry a ``param`` name, so
lowering can turn them into kernel arguments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .arguments import positive_int
from .counts import ceil_div, problem_tiles
from .dimensions import ForLoop, MacroTileIndex, MacroTileNumber, SubDimension, User
from .edges import PassThrough, Split, Tile
from .graph import CoordinateGraph

if TYPE_CHECKING:
    from .select.resolve import AutoTile

__all__ = ["DTYPES", "GemmProblem", "gemm"]

DTYPES = ("float16", "float32")


@dataclass(frozen=True)
class GemmProblem:
    """What a GEMM graph was built for; stored as ``graph.attrs["gemm"]``."""

    m: int
    n: int
    k: int
    macro_tile: tuple[int, int, int]
    dtype: str

    @property
    def tiles(self) -> tuple[int, int, int]:
        """Number of macro tiles along m, n and k (partial tiles included): :func:`ctgraph.counts.problem_tiles`."""
        return problem_tiles(self.m, self.n, self.k, self.macro_tile)


def _dtype_name(dtype: object) -> str:
    name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None) or str(dtype)
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, got {dtype!r}")
    return name


def check_problem(m: object, n: object, k: object, macro_tile: object, dtype: object) -> GemmProblem:
    """Validate ``gemm``'s arguments; ``ValueError`` names the argument and what is allowed."""
    return _checked(m, n, k, macro_tile, dtype)[0]


def _checked(m: object, n: object, k: object, macro_tile: object, dtype: object) -> tuple[GemmProblem, AutoTile | None]:
    """:func:`check_problem`, and for ``macro_tile="auto"`` the selection that chose the tile (else None)."""
    m_, n_, k_ = (positive_int(a, v) for a, v in (("m", m), ("n", n), ("k", k)))
    chosen: AutoTile | None = None
    if isinstance(macro_tile, str) and macro_tile == "auto":
        from .select.resolve import auto_tile

        chosen = auto_tile(m_, n_, k_, _dtype_name(dtype))
        macro_tile = chosen.selection.config.tile
    if isinstance(macro_tile, str | bytes) or not hasattr(macro_tile, "__len__") or len(macro_tile) != 3:
        raise ValueError(f"macro_tile must be three positive integers (BM, BN, BK) or 'auto', got {macro_tile!r}")
    entries: list[object] = list(macro_tile)  # type: ignore[call-overload]
    bm, bn, bk = (positive_int(f"macro_tile[{i}]", v) for i, v in enumerate(entries))
    return GemmProblem(m_, n_, k_, macro_tile=(bm, bn, bk), dtype=_dtype_name(dtype)), chosen


def _tensor(
    g: CoordinateGraph, name: str, rows: tuple[int, str, int, str], cols: tuple[int, str, int, str]
) -> list[int]:
    """``User(X) -Split-> SubDimension x2 -Tile-> (MacroTileNumber, MacroTileIndex) x2``; returns the numbers."""
    user = g.add_dimension(User(rows[0] * cols[0], tensor=name, param=f"size{name}"))
    numbers_, subs = [], []
    for d, (extent, param, tile, tiles_param) in enumerate((rows, cols)):
        sub = g.add_dimension(SubDimension(extent, tensor=name, dim=d, param=param))
        num = g.add_dimension(MacroTileNumber(ceil_div(extent, tile), tensor=name, dim=d, param=tiles_param))
        idx = g.add_dimension(MacroTileIndex(tile, tensor=name, dim=d))
        g.add_edge(Tile(), inputs=[sub], outputs=[num, idx])
        subs.append(sub)
        numbers_.append(num)
    g.add_edge(Split(), inputs=[user], outputs=subs)
    return numbers_


def gemm(
    m: int, n: int, k: int, macro_tile: tuple[int, int, int] | str = (128, 128, 32), dtype: str = "float16"
) -> CoordinateGraph:
    """The precondition graph of an m x n x k GEMM tiled by ``macro_tile = (BM, BN, BK)``.

    ``macro_tile="auto"``: the tile :mod:`ctgraph.select` chooses for this shape on the GPU at hand (else on the
    known device of ``CTGRAPH_TARGET_DEVICE``, default the H100 SXM): the device's measured entry, else the
    ranker's best candidate; ``graph.attrs["gemm"].macro_tile`` says which, and ``graph.attrs["auto_selection"]``
    what chose it. ``compile(..., transform="auto")`` takes that selection where it compiles for the same target and
    path, and otherwise chooses again for its own, rebuilding the graph where the tile differs.

    ``dtype`` is the type of A, B, C and D ("float16" or "float32"); accumulation is always fp32.
    """
    p, chosen = _checked(m, n, k, macro_tile, dtype)
    bm, bn, bk = p.macro_tile
    g = CoordinateGraph()
    g.attrs["gemm"] = p
    if chosen is not None:  # what chose the tile, for the target and path it chose on: compile's "auto" reuses it
        g.attrs["auto_selection"] = chosen
    M, N, K = (p.m, "M", bm, "numTilesM"), (p.n, "N", bn, "numTilesN"), (p.k, "K", bk, "numTilesK")
    a_m, a_k = _tensor(g, "A", M, K)
    b_k, b_n = _tensor(g, "B", K, N)
    d_m, d_n = _tensor(g, "D", M, N)
    for_k = g.add_dimension(ForLoop(p.tiles[2], name="K", param="numTilesK"))
    g.add_edge(PassThrough(), inputs=[a_k], outputs=[for_k])
    g.add_edge(PassThrough(), inputs=[b_k], outputs=[for_k])
    g.add_edge(PassThrough(), inputs=[d_m], outputs=[a_m])
    g.add_edge(PassThrough(), inputs=[d_n], outputs=[b_n])
    return g
