"""``macro_tile="auto"``: the macro tile per GEMM shape, from a per-tile cost model of the GPU.

A big tile does more math per byte loaded but makes fewer tiles, so small GEMMs leave SMs idle and
every GEMM pays a last, partly empty wave; a small tile fills the GPU but runs slower per FLOP. Each
candidate tile has measured costs on a loaded GPU: ``launch`` per kernel, ``t0`` per output tile
(pipeline fill, epilogue) and ``c`` per ``BM x BN x BK`` iteration, and runs ``g`` workgroups at once:
``SMs / cluster``, or fewer where clusters do not pack into the GPCs (30 clusters of 4 on the H100, not
33). ``c`` has two values: rows of A and B that start on 128-byte lines (``K`` and ``N`` multiples of 64
fp16 elements), and rows that do not (``c_u``), where each 128-byte TMA box row straddles two lines. A
CTA's L2 reads then nearly double, and with all ``g`` workgroups running a tile whose CTA reads
``CTA_M + BN/cluster`` rows per iteration becomes bound by the L2: single-CTA tiles run up to 1.9x slower
per iteration, clusters of 2 that multicast B 1.2-1.35x, clusters of 4 (a quarter of B per CTA)
1.05-1.2x. With ``a < g`` workgroups running the L2 has bandwidth to spare, and the penalty shrinks as
the square root of the load::

    c(a) = c + (c_u - c) * sqrt(a / g)            (c(a) = c for aligned rows)

For ``T`` tiles of ``kt`` iterations, ``W = ceil(T / g)`` waves with ``a = T - (W - 1) * g`` tiles in the
last, the cheapest of these schedules is predicted::

    data-parallel:      launch + W * t0 + kt * ((W - 1) * c(g) + c(a))
    Stream-K, T >= g:   launch + (T * kt / g) * c(g) + (T / g) * t0 + fixup
    Stream-K, T < g:    launch + ceil(kt / s) * c(s * T) + t0 + (1 + ceil(log2(s))) * fixup
    fixup             = FIXUP_LEVEL + (BM / cluster) * BN * 4 / FIXUP_BANDWIDTH

With at least as many tiles as workgroups (the two-tile schedule) the iterations are shared out evenly and
a tile has one partial to add. With fewer, the grid-size model runs Stream-K on ``g = s * T`` workgroups,
each tile cut into ``s`` parts whose workgroups read K in step (:func:`parts_in_step`,
:func:`ctgraph.model.k_aligned`); the ``s`` parts add their fp32 partials up a tree ``log2(s)`` deep and
the tile's owner adds the last one: each level is a serial store, flag and load of one CTA's partial tile.
``FIXUP_LEVEL`` and ``FIXUP_BANDWIDTH`` (and the square root above) were fitted to a sweep of every
candidate tile on 38 corpus shapes and checked on 40 held-out shapes. Pricing Stream-K as parts in step
(the sweeps' Stream-K re-timed on those grids) took the model's tile from 0.768x to 0.818x cuBLAS on 12
long-K shapes, for 0.754x -> 0.747x on the 38 and 0.803x -> 0.800x on the held-out (docs/benchmarks.md).

:func:`choose_tile` returns the candidate with the least prediction (ties: the earlier, larger tile).
For a shape the tuning table does not know, ``transform="auto"`` asks :func:`preferred_schedule` first:
whether to split K at all, and whether as the two-tile schedule (:func:`ctgraph.policy.select`).
``python -m ctgraph calibrate --tiles`` measures the per-tile costs on the GPU at hand
(:func:`ctgraph.calibrate.calibrate_tiles`); :data:`H100` holds the H100 SXM figures. float32 GEMMs
(mma.sync / FMA paths) keep the default tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .model import k_aligned

__all__ = [
    "CANDIDATES",
    "FIXUP_BANDWIDTH",
    "FIXUP_LEVEL",
    "H100",
    "SWAP_MIN_ITERATIONS",
    "TileCost",
    "candidates",
    "choose_tile",
    "parts_in_step",
    "predict",
    "preferred_schedule",
    "schedules",
    "swapped_cost",
    "swapped_heights",
    "tile_cost",
]

DEFAULT_TILE = (128, 128, 32)
LINE = 128  # bytes: the L2 line a TMA box row should start on
FIXUP_LEVEL = 2.0e-6  # seconds per level of the Stream-K fixup tree (flag round trip, pipeline restart)
FIXUP_BANDWIDTH = 20e9  # bytes per second one CTA moves its fp32 partial tile through a fixup level
CANDIDATES: tuple[tuple[int, int, int], ...] = (
    (512, 256, 64),
    (512, 192, 64),
    (256, 256, 64),
    (256, 192, 64),
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
    tile of a workgroup (pipeline fill, epilogue), ``c`` per K iteration with 128-byte aligned rows and
    ``c_unaligned`` without (default ``c``); the SMs a workgroup occupies, and ``resident``: how many
    workgroups the calibrated GPU held at once (default: one per ``sms_per_workgroup`` SMs)."""

    tile: tuple[int, int, int]
    launch: float
    t0: float
    c: float
    sms_per_workgroup: int = 1
    c_unaligned: float | None = None
    resident: int | None = None

    def workgroups(self, sms: int) -> int:
        """Workgroups at once on ``sms`` SMs: one per ``sms_per_workgroup``, at most ``resident``."""
        g = max(1, sms // self.sms_per_workgroup)
        return min(g, self.resident) if self.resident else g

    def line(self) -> str:
        """This cost as a line of a table like :data:`H100` (microseconds written as ``e-6``)."""
        us = [f"{x * 1e6:.{d}f}e-6" for x, d in ((self.launch, 2), (self.t0, 2), (self.c, 3))]
        tail = [str(self.sms_per_workgroup)]
        if self.c_unaligned is not None or self.resident is not None:
            tail.append("None" if self.c_unaligned is None else f"{self.c_unaligned * 1e6:.3f}e-6")
        if self.resident is not None:
            tail.append(str(self.resident))
        return f"TileCost({self.tile}, {', '.join(us + tail)}),"

    def per_iteration(self, n: int, k: int, itemsize: int = 2, load: float = 1.0) -> float:
        """``c`` for B's and A's rows of ``n`` and ``k`` elements with a fraction ``load`` of the workgroups
        running: ``c`` when both are whole 128-byte lines, else ``c + (c_unaligned - c) * sqrt(load)``."""
        aligned = (n * itemsize) % LINE == 0 and (k * itemsize) % LINE == 0
        if aligned or self.c_unaligned is None:
            return self.c
        return self.c + (self.c_unaligned - self.c) * math.sqrt(load)

    def fixup(self) -> float:
        """Seconds of one level of the Stream-K fixup tree: one CTA's fp32 partial tile stored and loaded."""
        bm, bn, _ = self.tile
        return FIXUP_LEVEL + bm // self.sms_per_workgroup * bn * 4 / FIXUP_BANDWIDTH


# NOTE: fitted by `python -m ctgraph calibrate --tiles` on an H100 SXM (132 SMs), 2026-11-23: wgmma path
# with the TMA-store epilogue (docs/benchmarks.md). Rows that straddle 128-byte lines cost single-CTA tiles
# about 1.9x per iteration, clusters of 2 (B multicast) 1.2-1.35x, clusters of 4 1.05-1.2x.
H100: tuple[TileCost, ...] = (
    TileCost((512, 256, 64), 4.08e-6, 2.97e-6, 0.652e-6, 4, 0.686e-6, 30),
    TileCost((512, 192, 64), 4.44e-6, 1.37e-6, 0.523e-6, 4, 0.629e-6, 30),
    TileCost((256, 256, 64), 3.86e-6, 2.13e-6, 0.714e-6, 2, 0.865e-6, 66),
    TileCost((256, 192, 64), 4.13e-6, 1.18e-6, 0.567e-6, 2, 0.754e-6, 66),
    TileCost((256, 128, 64), 1.05e-6, 2.02e-6, 0.857e-6, 1, 1.295e-6, 132),
    TileCost((128, 256, 64), 0.00e-6, 3.29e-6, 0.750e-6, 1, 1.339e-6, 132),
    TileCost((128, 192, 64), 0.00e-6, 2.53e-6, 0.580e-6, 1, 1.105e-6, 132),
    TileCost((128, 128, 64), 0.74e-6, 1.27e-6, 0.492e-6, 1, 0.897e-6, 132),
    TileCost((64, 128, 64), 0.29e-6, 1.53e-6, 0.352e-6, 1, 0.677e-6, 132),
    TileCost((64, 64, 64), 1.94e-6, 0.73e-6, 0.299e-6, 1, 0.424e-6, 132),
)


def parts_in_step(tiles: int, kt: int, g: int) -> list[int]:
    """The ways ``s >= 2`` to cut each of ``tiles < g`` tiles into ``s`` parts whose workgroups read K in step
    (:func:`ctgraph.model.k_aligned`): the grids ``s * tiles`` the grid-size model takes."""
    grids = np.arange(2 * tiles, g + 1, tiles)
    return [int(x) // tiles for x in grids[k_aligned("streamk", tiles, kt, grids)]]


def schedules(cost: TileCost, m: int, n: int, k: int, g: int) -> dict[str, float]:
    """Predicted seconds, launch excluded, of each schedule the model prices for ``m x n x k`` with ``cost``'s
    tile on ``g`` workgroups at once: ``"dataparallel"``, ``"streamk2tile"`` (at least as many tiles as
    workgroups) and ``"streamk/s"`` (each of fewer tiles than workgroups in ``s`` parts, in step)."""
    bm, bn, bk = cost.tile
    tiles, kt = math.ceil(m / bm) * math.ceil(n / bn), math.ceil(k / bk)
    waves = math.ceil(tiles / g)
    last = tiles - (waves - 1) * g
    full, tail = cost.per_iteration(n, k), cost.per_iteration(n, k, load=last / g)
    out = {"dataparallel": waves * cost.t0 + kt * ((waves - 1) * full + tail)}
    if tiles >= g:  # two-tile Stream-K: the iterations shared out evenly, one partial per tile to add
        out["streamk2tile"] = tiles * kt / g * full + tiles / g * cost.t0 + cost.fixup()
    for s in parts_in_step(tiles, kt, g):  # fewer tiles than workgroups: each tile in s parts
        c = cost.per_iteration(n, k, load=s * tiles / g)
        out[f"streamk/{s}"] = math.ceil(kt / s) * c + cost.t0 + (1 + math.ceil(math.log2(s))) * cost.fixup()
    return out


def predict(cost: TileCost, m: int, n: int, k: int, sms: int = 132) -> float:
    """Predicted seconds of the fastest of :func:`schedules` for ``m x n x k`` with ``cost``'s tile."""
    return cost.launch + min(schedules(cost, m, n, k, cost.workgroups(sms)).values())


def preferred_schedule(cost: TileCost, m: int, n: int, k: int, g: int) -> str | None:
    """What the model says of splitting K for this shape on ``g`` workgroups at once: ``"dataparallel"`` when
    data-parallel is predicted faster than every Stream-K schedule it prices, ``"streamk2tile"`` when the
    two-tile schedule is the fastest, else None (it prices no Stream-K schedule, or prefers parts of
    tiles, whose grid the grid-size model knows better)."""
    times = schedules(cost, m, n, k, g)
    if len(times) == 1:
        return None
    best = min(times, key=times.__getitem__)
    return best if best in ("dataparallel", "streamk2tile") else None


def tile_cost(
    macro_tile: tuple[int, int, int], cluster: int = 1, costs: tuple[TileCost, ...] = H100
) -> TileCost | None:
    """The measured costs of ``macro_tile`` run on clusters of ``cluster`` CTAs, if ``costs`` has them, or of a
    swapped one-CTA tile (:func:`swapped_cost`)."""
    bm, bn, bk = macro_tile
    measured = next((c for c in costs if c.tile == (bm, bn, bk) and c.sms_per_workgroup == cluster), None)
    return measured or (swapped_cost((bm, bn, bk), costs) if cluster == 1 else None)


# NOTE: swapped tiles are priced from their bytes per K iteration; with few iterations the fixed costs the
# prices extrapolate decide. On the H100 corpus (2026-11-24) they lost 1-12% on 9 of 10 shapes of 2-5 iterations
# and gained up to 1.5x on shapes of 10 or more.
SWAP_MIN_ITERATIONS = 6


def swapped_cost(macro_tile: tuple[int, int, int], costs: tuple[TileCost, ...] = H100) -> TileCost | None:
    """Costs of a one-CTA tile whose BM is a multiple of 8 but not of 64: the wgmma path runs it swapped
    (``D^T = B^T A^T``, :mod:`lowering.cuda.hopper`), with one consumer warpgroup per 64 columns. It is priced
    from ``ref``, the measured one-CTA tile of the same BN and BK and the least BM above it (else the largest),
    on the probes' finding that a CTA's K iteration is bound by the bytes it receives, and its epilogue by the
    elements it stores::

        c  = ref.c  * (BM + BN) / (ref.BM + BN)        (likewise c_unaligned)
        t0 = ref.t0 * BM / ref.BM

    None where no such tile is measured, or where the accumulators outgrow a consumer thread's registers
    (BN of 192 or 256, three or four warpgroups, hold BM <= 128)."""
    bm, bn, bk = macro_tile
    if bm % 8 or bm % 64 == 0 or not 8 <= bm <= 256 or bn % 64 or bn > 256 or (bn > 128 and bm > 128):
        return None
    refs = sorted((c for c in costs if c.sms_per_workgroup == 1 and c.tile[1:] == (bn, bk)), key=lambda c: c.tile[0])
    ref = next((c for c in refs if c.tile[0] > bm), refs[-1] if refs else None)
    if ref is None:
        return None
    rows, scale = bm / ref.tile[0], (bm + bn) / (ref.tile[0] + bn)
    unaligned = None if ref.c_unaligned is None else ref.c_unaligned * scale
    return TileCost(macro_tile, ref.launch, ref.t0 * rows, ref.c * scale, 1, unaligned, ref.resident)


def swapped_heights(m: int) -> list[int]:
    """BM for ``m`` rows in ``t = 1 .. 4`` rows of tiles, each a multiple of 8 up to 256 that is not a multiple
    of 64 (those the measured tiles cover): ``8 * ceil(m / 8t)``."""
    heights = (8 * -(-m // (8 * t)) for t in range(1, 5))
    return sorted({h for h in heights if h <= 256 and h % 64}, reverse=True)


def candidates(m: int, k: int, costs: tuple[TileCost, ...] = H100) -> list[TileCost]:
    """The tiles :func:`choose_tile` weighs for ``m`` rows and depth ``k``: ``costs``' and, where a tile has at
    least :data:`SWAP_MIN_ITERATIONS` K iterations, the swapped tiles that fit ``m`` (:func:`swapped_heights`) in
    the widths of ``costs``' one-CTA tiles (:func:`swapped_cost`)."""
    widths = sorted({(c.tile[1], c.tile[2]) for c in costs if c.sms_per_workgroup == 1}, reverse=True)
    heights = swapped_heights(m) if all(k >= SWAP_MIN_ITERATIONS * bk for _, bk in widths) else []
    swapped = (swapped_cost((bm, bn, bk), costs) for bm in heights for bn, bk in widths)
    return [*costs, *(c for c in swapped if c is not None)]


def choose_tile(
    m: int, n: int, k: int, dtype: str = "float16", sms: int = 132, costs: tuple[TileCost, ...] = H100
) -> tuple[int, int, int]:
    """The macro tile with the least predicted time for an ``m x n x k`` GEMM on ``sms`` SMs, of
    :func:`candidates`."""
    if dtype != "float16":
        return DEFAULT_TILE
    return min(candidates(m, k, costs), key=lambda c: predict(c, m, n, k, sms)).tile
