"""``macro_tile="auto"``: the macro tile per GEMM shape, from a per-tile cost model of the GPU.

A big tile does more math per byte loaded but makes fewer tiles, so small GEMMs leave SMs idle and
every GEMM pays a last, partly empty wave; a small tile fills the GPU but runs slower per FLOP. Each
candidate tile has three measured costs on a loaded GPU: ``launch`` per kernel, ``t0`` per output tile
(pipeline fill, epilogue) and ``c`` per ``BM x BN x BK`` iteration, and runs ``g = SMs / cluster``
workgroups at once. For ``T`` tiles of ``kt`` iterations the cheaper of the two schedules is predicted::

    data-parallel:  launch + ceil(T / g) * (t0 + kt * c)
    Stream-K:       launch + (T * kt / g) * c + (T / g + 2) * t0    (iterations shared out; fixup seams)

and :func:`choose_tile` returns the candidate with the least prediction (ties: the earlier, larger
tile). ``python -m ctgraph calibrate --tiles`` measures the costs on the GPU at hand
(:func:`ctgraph.calibrate.calibrate_tiles`); :data:`H100` holds the H100 SXM figures. float32 GEMMs
(mma.sync / FMA paths) keep the default tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CANDIDATES", "H100", "TileCost", "choose_tile", "predict"]

DEFAULT_TILE = (128, 128, 32)
CANDIDATES: tuple[tuple[int, int, int], ...] = (
    (256, 256, 64),
    (256, 128, 64),
    (128, 256, 64),
    (128, 192, 64),
    (128, 128, 64),
    (64, 128, 64),
    (64, 64, 64),
)


@dataclass(frozen=True)
class TileCost:
    """Measured costs of one macro tile on a loaded GPU, in seconds: ``launch`` per kernel, ``t0`` per output
    tile of a workgroup (pipeline fill, epilogue), ``c`` per K iteration; and the SMs a workgroup occupies."""

    tile: tuple[int, int, int]
    launch: float
    t0: float
    c: float
    sms_per_workgroup: int = 1


# NOTE: fitted by `python -m ctgraph calibrate --tiles` on an H100 SXM (132 SMs), 2026-11-23: wgmma path
# with the TMA-store epilogue; within 9% of every measured time (docs/benchmarks.md).
H100: tuple[TileCost, ...] = (
    TileCost((256, 256, 64), 4.17e-6, 2.62e-6, 0.696e-6, 2),
    TileCost((256, 128, 64), 2.43e-6, 2.13e-6, 0.822e-6),
    TileCost((128, 256, 64), 1.97e-6, 3.14e-6, 0.726e-6),
    TileCost((128, 192, 64), 2.70e-6, 2.19e-6, 0.539e-6),
    TileCost((128, 128, 64), 2.93e-6, 1.22e-6, 0.463e-6),
    TileCost((64, 128, 64), 2.07e-6, 1.16e-6, 0.341e-6),
    TileCost((64, 64, 64), 2.07e-6, 0.80e-6, 0.298e-6),
)


def predict(cost: TileCost, m: int, n: int, k: int, sms: int = 132) -> float:
    """Predicted seconds of the better of data-parallel and Stream-K for ``m x n x k`` with ``cost``'s tile."""
    bm, bn, bk = cost.tile
    tiles, kt = math.ceil(m / bm) * math.ceil(n / bn), math.ceil(k / bk)
    g = max(1, sms // cost.sms_per_workgroup)
    dp = math.ceil(tiles / g) * (cost.t0 + kt * cost.c)
    sk = tiles * kt / g * cost.c + (tiles / g + 2) * cost.t0
    return cost.launch + min(dp, sk)


def choose_tile(
    m: int, n: int, k: int, dtype: str = "float16", sms: int = 132, costs: tuple[TileCost, ...] = H100
) -> tuple[int, int, int]:
    """The macro tile with the least predicted time for an ``m x n x k`` GEMM on ``sms`` SMs."""
    if dtype != "float16":
        return DEFAULT_TILE
    return min(costs, key=lambda c: predict(c, m, n, k, sms)).tile
