"""Schedule arithmetic: the one home of tile counts, K iterations, waves, the Stream-K / data-parallel split and
the split-K chunks.

Where it sits: below the passes and above nothing but :mod:`ctgraph.expr`. The passes size the graph's dimensions
with these formulas (sympy sizes), :mod:`ctgraph.gemm` counts a problem's tiles with them, ``compile`` fits split-K
into its grid with them, and :mod:`ctgraph.select` evaluates them for thousands of candidates (plain integers and
numpy arrays of grid sizes). One formula serves all three: :func:`ceil_div` folds sympy sizes into
:func:`~ctgraph.expr.ceildiv` and divides numbers and arrays directly. ``tests/unit/test_counts.py`` ties every
function to the transformed graph's own sizes and schedule, for every transform. For ``T`` output tiles of ``kt``
K iterations on ``g`` workgroups::

    T  = ceil(m / BM) * ceil(n / BN)          kt = ceil(k / BK)
    W  = ceil(T / g)                          (data-parallel waves; a = T - (W - 1) g tiles in the last)
    perWG = ceil(N / g)                       (a contiguous range of N iterations per workgroup: Stream-K)
    N_DP = (T // g - (b - 1)) g kt  clamped at 0, all of T kt where g divides T     (b Stream-K batches)
    N_SK = T kt - N_DP                        (Stream-K iterations, ceil(N_SK / g) per workgroup)
    split-K with s chunks:  c = ceil(kt / s) iterations a chunk, s' = ceil(kt / c) chunks, g = T s'

**In step.** A Stream-K section of ``T_sk < g`` tiles on ``g = s T_sk`` workgroups cuts every tile into ``s`` parts
of ``I = ceil(kt / s)`` iterations; the workgroups then read K in ``s`` groups in step, so an operand slice is
fetched from HBM once and shared through the L2. Where ``s`` does not divide ``kt`` the parts of tile ``t`` start
``t (s I - kt)`` iterations late; the grid stays in step while ``2 T_sk (s I - kt) <= I``. On other grids each
workgroup streams its own rows from HBM (on an H100, 1280x1536x16384 in 128 x 256 tiles ran Stream-K in 229 us on
132 CTAs and in 99 us on 120).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy

from .expr import ceildiv

__all__ = [
    "INDEX_LIMIT",
    "ceil_div",
    "check_counts",
    "element_counts",
    "in_step",
    "itemsize",
    "k_iterations",
    "output_tiles",
    "padding",
    "per_workgroup",
    "problem_tiles",
    "sk_dp_iterations",
    "sk_tiles",
    "split_chunks",
    "split_for_budget",
    "split_sk_dp",
    "splitk_workgroups",
    "step_grids",
    "tile_counts",
    "waves",
]

Tile = tuple[int, int, int]


def ceil_div(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` for nonnegative ``a`` and positive ``b``: ints and numpy arrays directly, sympy sizes as
    :func:`~ctgraph.expr.ceildiv` (``FloorDiv(a + b - 1, b)``, which folds where both are numbers)."""
    if isinstance(a, sympy.Basic) or isinstance(b, sympy.Basic):
        return ceildiv(a, b)
    return -(-a // b)


def tile_counts(m: int, n: int, tile: Tile) -> tuple[int, int]:
    """Tile rows and columns: ``(ceil(m / BM), ceil(n / BN))``, partial tiles included."""
    return ceil_div(m, tile[0]), ceil_div(n, tile[1])


def k_iterations(k: int, tile: Tile) -> int:
    """``kt = ceil(k / BK)``, the last partial where ``BK`` does not divide ``k``."""
    return ceil_div(k, tile[2])


def problem_tiles(m: int, n: int, k: int, tile: Tile) -> tuple[int, int, int]:
    """``(ceil(m / BM), ceil(n / BN), ceil(k / BK))``: the sizes of the precondition graph's tile numbers."""
    return (*tile_counts(m, n, tile), k_iterations(k, tile))


def output_tiles(m: int, n: int, tile: Tile) -> int:
    """``T = ceil(m / BM) * ceil(n / BN)``."""
    tm, tn = tile_counts(m, n, tile)
    return tm * tn


def itemsize(dtype: str) -> int:
    """Bytes of one element of A, B or D: 2 for float16, 4 for float32."""
    return 2 if dtype == "float16" else 4


def padding(m: int, n: int, tile: Tile) -> float:
    """The fraction of an output's multiply-adds spent on padding: ``ceil(m/BM) BM ceil(n/BN) BN / (m n) - 1``."""
    tm, tn = tile_counts(m, n, tile)
    return tm * tile[0] * tn * tile[1] / (m * n) - 1.0


def waves(tiles: int, g: int) -> tuple[int, int]:
    """``(W, a)``: data-parallel waves of ``tiles`` on ``g`` workgroups and the tiles of the last."""
    w = ceil_div(tiles, g)
    return w, tiles - (w - 1) * g


def per_workgroup(iterations: Any, g: Any) -> Any:
    """``ceil(N / g)``: the iterations of each workgroup's contiguous range when ``N`` are shared out over ``g``
    (Stream-K's ``tilesPerWG``; the range of a Sunder part); a sympy size gives a sympy size."""
    return ceil_div(iterations, g)


def split_sk_dp(
    tiles: int | sympy.Expr, k_iters: int | sympy.Expr, workgroups: int | np.ndarray, batches: int = 2
) -> tuple[int, int] | tuple[np.ndarray, np.ndarray]:
    """``(N_SK, N_DP)`` in k-iterations for ``tiles`` output tiles of ``k_iters`` iterations each.

    ``batches`` is the number of workgroup-waves of Stream-K work (Stream-K++'s hybrids): the SK part
    holds the partial wave plus ``batches - 1`` full waves, ``N_DP = (T // g - (batches - 1)) * g * Kt``,
    clamped at 0 (all Stream-K), and all data-parallel when ``T % g == 0``. ``batches=2`` is the two-tile
    schedule of seed 004. Sympy sizes of numbers work (the pass); an array of grid sizes gives arrays.
    """
    T, Kt = int(tiles), int(k_iters)
    g = np.asarray(workgroups, dtype=np.int64)  # NOTE: an array of grid sizes works too (the ranker's search)
    n_dp = np.where(T % g == 0, T * Kt, np.maximum(0, (T // g - (batches - 1)) * g * Kt))
    n_sk = T * Kt - n_dp
    if n_dp.ndim == 0:
        return int(n_sk), int(n_dp)
    return n_sk, n_dp


def sk_dp_iterations(transform: str, tiles: int, kt: int, g: int, sk_batches: int = 2) -> tuple[int, int]:
    """``(N_SK, N_DP)`` of any persistent transform: Stream-K is all SK, data-parallel all DP, two-tile Stream-K
    (``sk_batches`` 2) and the hybrids split by :func:`split_sk_dp`."""
    if transform == "streamk":
        return tiles * kt, 0
    if transform == "dataparallel":
        return 0, tiles * kt
    n_sk, n_dp = split_sk_dp(tiles, kt, g, 2 if transform == "streamk2tile" else sk_batches)
    return int(n_sk), int(n_dp)


def sk_tiles(transform: str, tiles: int, kt: int, g: np.ndarray | int, sk_batches: int = 2) -> np.ndarray:
    """Output tiles of the Stream-K section for every grid size in ``g`` (0: none)."""
    g = np.asarray(g, dtype=np.int64)
    if transform == "streamk":
        return np.full_like(g, tiles)
    if transform in ("streamk2tile", "streamk_hybrid"):
        return np.asarray(split_sk_dp(tiles, kt, g, sk_batches)[0]) // kt
    return np.zeros_like(g)


def in_step(transform: str, tiles: int, kt: int, g: np.ndarray | int, sk_batches: int = 2) -> np.ndarray:
    """For every grid size in ``g``: does the Stream-K section, if any, read K in step (module docstring)?"""
    g = np.asarray(g, dtype=np.int64)
    sk = sk_tiles(transform, tiles, kt, g, sk_batches)
    per = np.maximum(sk, 1)
    parts = np.maximum(g // per, 1)
    size = ceil_div(kt, parts)
    drift = sk * (parts * size - kt)
    return (sk == 0) | ((g % per == 0) & (2 * drift <= size))


def step_grids(tiles: int, kt: int, most: int) -> list[int]:
    """The grids ``g = s T <= most`` (``s >= 2``) on which Stream-K over ``T < most`` tiles reads K in step."""
    grids = np.arange(2 * tiles, most + 1, tiles, dtype=np.int64)
    return [int(x) for x in grids[in_step("streamk", tiles, kt, grids)]]


def split_for_budget(tiles: int, workgroups: Any) -> Any:
    """Chunks per tile when ``workgroups`` are shared out over ``tiles`` (at least 1; numpy arrays work too)."""
    return np.maximum(1, workgroups // tiles)


def split_chunks(k_iters: Any, split: Any) -> tuple[Any, Any]:
    """``(chunks, iterations per chunk)``: ``s' = ceil(Kt / c)`` non-empty chunks of ``c = ceil(Kt / s)``."""
    per = ceil_div(int(k_iters), split)
    return ceil_div(int(k_iters), per), per


def splitk_workgroups(tiles: int, k_iters: int, split: int) -> int:
    """Split-K's grid: one workgroup per (output tile, non-empty K chunk), ``T s'``."""
    return tiles * int(split_chunks(k_iters, split)[0])


INDEX_LIMIT = 2**62  # the kernels' indices are 64-bit integers; a count must stay below this


def element_counts(m: int, n: int, k: int) -> dict[str, int]:
    """The element counts of A, B and D, by what each is (what :func:`ctgraph.checks.check_index_range` bounds)."""
    return {"m*k (elements of A)": m * k, "k*n (elements of B)": k * n, "m*n (elements of D)": m * n}


def check_counts(m: int, n: int, k: int, counts: dict[str, int], hint: str = "") -> None:
    """``ValueError`` where one of ``counts`` of this GEMM reaches :data:`INDEX_LIMIT`, saying which."""
    for what, value in counts.items():
        if value >= INDEX_LIMIT:
            raise ValueError(
                f"this {m} x {n} x {k} GEMM is too large to index: {what} = {value} is not below 2**62, the range "
                f"ctgraph's 64-bit kernel indices keep{hint}"
            )
