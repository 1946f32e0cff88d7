"""The mma.sync kernel's resource plan: macro tile, element type and options -> :class:`MmaPlan`, a frozen record
computed once and printed by :mod:`lowering.cuda.emit.mma` (its fields, upper-cased, are the source's ``constexpr``
constants; :func:`layout` gives them as a dict, the form the runtime reads).

Steps (:func:`mma_plan`): the warps and stages of the options (:meth:`CudaOptions.mma_shape`), then per element type
the thread layout over the tile (:func:`fp16_warps`: a ``WM x WN`` warp grid of ``MI x NI`` m16n8 fragments;
:func:`fp32_threads`: a 16 x (threads/16) grid of ``TM x TN`` blocks), then the shared-memory pipeline
(:func:`pipeline`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..options import CudaOptions, warp_grid

__all__ = ["MmaPlan", "layout", "mma_plan"]


@dataclass(frozen=True)
class MmaPlan:
    """Tile constants of the mma.sync (fp16) or FMA (fp32) kernel. Each set field, upper-cased, is a ``constexpr
    int`` of the source, in this order (:meth:`constants`); ``None`` fields are the other element type's."""

    bm: int
    bn: int
    bk: int
    threads: int
    block: int
    # fp16: a WM x WN grid of warps, each MI x NI fragments of m16n8
    wm: int | None = None
    wn: int | None = None
    mi: int | None = None
    ni: int | None = None
    # fp32: a 16 x TY grid of threads, each a strided TM x TN block
    ty: int | None = None
    tm: int | None = None
    tn: int | None = None
    nacc: int = 0
    stages: int = 0
    a_stage: int = 0
    b_stage: int = 0
    smem_bytes: int = 0

    def constants(self) -> dict[str, int]:
        """``{"BM": ..., "SMEM_BYTES": ...}``: the set fields as the source's constants and the runtime's layout."""
        fields = ((f.name, getattr(self, f.name)) for f in dataclasses.fields(self))
        return {name.upper(): value for name, value in fields if value is not None}


def fp16_warps(macro_tile: tuple[int, int, int], warps: int) -> tuple[int, int, int, int]:
    """``(WM, WN, MI, NI)``: the squarest ``WM x WN`` grid of the warps (:func:`warp_grid`) with
    ``BM % (16*WM) == 0``, ``BN % (16*WN) == 0``, and ``BK % 16 == 0``; each warp holds ``MI = BM/WM/16`` by
    ``NI = BN/WN/8`` fragments (``NACC = 4*MI*NI``). ``ValueError`` where none fits."""
    bm, bn, bk = macro_tile
    grid = warp_grid(bm, bn, warps)
    if grid is None or bk % 16:
        raise ValueError(
            f"macro_tile {macro_tile} does not fit the fp16 mma path with {warps} warps: it needs a "
            f"WM x WN grid of the warps with BM a multiple of 16*WM and BN of 16*WN, and BK a multiple of 16"
        )
    wm, wn = grid
    return wm, wn, bm // wm // 16, bn // wn // 8


def fp32_threads(macro_tile: tuple[int, int, int], warps: int) -> tuple[int, int, int]:
    """``(TY, TM, TN)``: a 16 x ``TY = threads/16`` thread grid, each thread a strided ``TM = BM/TY`` by
    ``TN = BN/16`` block (``NACC = TM*TN``). ``ValueError`` unless ``BM % TY == 0`` and ``BN % 16 == 0``."""
    bm, bn, _ = macro_tile
    ty = 32 * warps // 16
    if bm % ty or bn % 16:
        raise ValueError(
            f"the fp32 FMA path with {warps} warps needs BM a multiple of {ty} and BN of 16, "
            f"got macro_tile {macro_tile}"
        )
    return ty, bm // ty, bn // 16


def pipeline(macro_tile: tuple[int, int, int], dtype: str, stages: int) -> tuple[int, int, int, int]:
    """``(STAGES, A_STAGE, B_STAGE, SMEM_BYTES)``: fp16 stages of ``BM*BK + BK*BN`` halves; fp32 at most 2 stages
    (element loads are synchronous: a deeper pipeline buys nothing) of ``BM*(BK+1) + BK*BN`` floats.

    NOTE: fp32 A rows are padded by one float so the column reads of the FMA loop avoid bank conflicts."""
    bm, bn, bk = macro_tile
    if dtype == "float16":
        return stages, bm * bk, bk * bn, stages * (bm * bk + bk * bn) * 2
    stages = min(stages, 2)
    return stages, bm * (bk + 1), bk * bn, stages * (bm * (bk + 1) + bk * bn) * 4


def mma_plan(macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions) -> MmaPlan:
    """The mma.sync kernel's plan; ``ValueError`` when the macro tile does not fit the instruction set."""
    bm, bn, bk = macro_tile
    warps, stages = opts.mma_shape(macro_tile, dtype)
    t = 32 * warps
    if dtype == "float16":
        wm, wn, mi, ni = fp16_warps(macro_tile, warps)
        threads = {"wm": wm, "wn": wn, "mi": mi, "ni": ni, "nacc": mi * ni * 4}
    else:
        ty, tm, tn = fp32_threads(macro_tile, warps)
        threads = {"ty": ty, "tm": tm, "tn": tn, "nacc": tm * tn}
    stages, a_stage, b_stage, smem = pipeline(macro_tile, dtype, stages)
    return MmaPlan(bm, bn, bk, t, t, **threads, stages=stages, a_stage=a_stage, b_stage=b_stage, smem_bytes=smem)


def layout(macro_tile: tuple[int, int, int], dtype: str, opts: CudaOptions) -> dict[str, int]:
    """Tile constants of the kernel (:func:`mma_plan` as a dict); ``ValueError`` when the macro tile does not fit
    the instruction set."""
    return mma_plan(macro_tile, dtype, opts).constants()
