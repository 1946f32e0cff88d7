"""Schedule arithmetic: the one home of tile counts, K iterations, waves and the Stream-K / data-parallel split.

The passes build these quantities as graph sizes (sympy); selection needs them as plain integers for thousands of
candidates, so they are written once here, for numbers and numpy arrays, and ``tests/unit/test_counts.py`` ties each
to the sizes of the transformed graph for every transform. For ``T`` output tiles of ``kt`` K iterations on ``g``
workgroups::

    T  = ceil(m / BM) * ceil(n / BN)          kt = ceil(k / BK)
    W  = ceil(T / g)                          (data-parallel waves; a = T - (W - 1) g tiles in the last)
    N_DP = (T // g - (b - 1)) g kt  clamped at 0, all of T kt where g divides T     (b Stream-K batches)
    N_SK = T kt - N_DP                        (Stream-K iterations, ceil(N_SK / g) per workgroup)

**In step.** A Stream-K section of ``T_sk < g`` tiles on ``g = s T_sk`` workgroups cuts every tile into ``s`` parts
of ``I = ceil(kt / s)`` iterations; the workgroups then read K in ``s`` groups in step, so an operand slice is
fetched from HBM once and shared through the L2. Where ``s`` does not divide ``kt`` the parts of tile ``t`` start
``t (s I - kt)`` iterations late; the grid stays in step while ``2 T_sk (s I - kt) <= I``. On other grids each
workgroup streams its own rows from HBM (on an H100, 1280x1536x16384 in 128 x 256 tiles ran Stream-K in 229 us on
132 CTAs and in 99 us on 120).
"""

from __future__ import annotations

import numpy as np

from ..passes import split_sk_dp

__all__ = [
    "in_step",
    "k_iterations",
    "output_tiles",
    "padding",
    "sk_tiles",
    "split_sk_dp",
    "step_grids",
    "tile_counts",
    "waves",
]


def tile_counts(m: int, n: int, tile: tuple[int, int, int]) -> tuple[int, int]:
    """Tile rows and columns: ``(ceil(m / BM), ceil(n / BN))``, partial tiles included."""
    return -(-m // tile[0]), -(-n // tile[1])


def output_tiles(m: int, n: int, tile: tuple[int, int, int]) -> int:
    """``T = ceil(m / BM) * ceil(n / BN)``."""
    tm, tn = tile_counts(m, n, tile)
    return tm * tn


def k_iterations(k: int, tile: tuple[int, int, int]) -> int:
    """``kt = ceil(k / BK)``, the last partial where ``BK`` does not divide ``k``."""
    return -(-k // tile[2])


def padding(m: int, n: int, tile: tuple[int, int, int]) -> float:
    """The fraction of an output's multiply-adds spent on padding: ``ceil(m/BM) BM ceil(n/BN) BN / (m n) - 1``."""
    tm, tn = tile_counts(m, n, tile)
    return tm * tile[0] * tn * tile[1] / (m * n) - 1.0


def waves(tiles: int, g: int) -> tuple[int, int]:
    """``(W, a)``: data-parallel waves of ``tiles`` on ``g`` workgroups and the tiles of the last."""
    w = -(-tiles // g)
    return w, tiles - (w - 1) * g


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
    size = -(-kt // parts)
    drift = sk * (parts * size - kt)
    return (sk == 0) | ((g % per == 0) & (2 * drift <= size))


def step_grids(tiles: int, kt: int, most: int) -> list[int]:
    """The grids ``g = s T <= most`` (``s >= 2``) on which Stream-K over ``T < most`` tiles reads K in step."""
    grids = np.arange(2 * tiles, most + 1, tiles, dtype=np.int64)
    return [int(x) for x in grids[in_step("streamk", tiles, kt, grids)]]
