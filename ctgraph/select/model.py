"""The ranker: an analytic time model in device terms, times a correction fitted on measurements.

**Analytic part** (:func:`analytic`). A workgroup of ``q`` CTAs in a ``cm x cn`` grid computes a ``BM x BN`` tile,
each CTA ``BM/cm x BN/cn``; one K iteration of ``BK`` costs a CTA, with ``a`` CTAs loading at once::

    math  = 2 (BM/cm)(BN/cn) BK / (F / SMs)                         F: the device's tensor FLOP/s
    L2    = a [ (BM/cm) BK / cn + (BN/cn) BK / cm ] s u / L2_rate    s: element bytes; u: 1.9 for rows off the
                                                                      128-byte lines (k s or n s not a multiple)
    HBM   = z [ r BM + c BN ] BK s / (0.7 HBM_rate)                     r x c: the tile rows x columns a wave touches
                                                                      (row-major: c = min(a, tn); raster G: r = G);
                                                                      z = max(1, a / (r c)): the K slabs in flight
                                                                      (split-K and Stream-K put several workgroups
                                                                      on one tile, each reading its own slab);
                                                                      0 where A and B fit in 3/4 of the L2
                                                                      (L2_RESIDENT: a timed kernel finds them
                                                                      there from its last run); a (BM + BN)
                                                                      BK s / HBM_rate where the workgroups read K out
                                                                      of step and the wave's r BM + c BN rows of K
                                                                      outgrow half the L2
    SM    = (BM/cm + BN/cn) BK s / SM_rate                           what one SM's shared memory receives (its
                                                                      own loads and its multicast share), SM_rate
                                                                      100 GB/s: an SM's own path from the L2 (no
                                                                      u: the bytes that land are the same)
    ring  = RING_LATENCY / S                                          S: the ring's stages (shared memory over a
                                                                      stage's bytes, at most 8): a stage is loaded
                                                                      again only a round trip after its last load
    t_it  = max(math / e, L2, HBM, SM, ring)                         e: the tensor pipes' efficiency, 0.8; or
                                                                      their p-norm (sum t_i^p)^(1/p) where the
                                                                      correction says p (Correction.bounds_norm)

The L2 term prices the whole device's traffic and falls with fewer CTAs; SM bounds what each CTA can pull however
few run, which prices thin CTAs (swapped tiles of a small m, 64-column CTAs) and grids that leave SMs idle (H200
sample: analytic validation regret 1.104 -> 1.049, the fitted ranker's 1.039 -> 1.029; SM_rate and leaving u out
were chosen by the fitted ranker's train regret, 1.054 -> 1.032). The ring term prices CTAs whose ring of small
stages cannot keep enough bytes in flight (thin outputs on few CTAs, against split-K on every SM): RING_LATENCY 2 us,
chosen the same way, took the refit's train / validation regret from 1.039 / 1.038 to 1.035 / 1.029 (400-shape H200
sample). On fresh shapes it helped large ones and hurt thin outputs and small m, about even overall; the held-out
sets show no gain (docs/selection.md). The slab count ``z`` stops split-K and Stream-K from reading K ``s`` times
faster than a data-parallel grid on a memory-bound output (small m, wide n and k: the old model ranked split-K first
on such shapes, 10-20% slower than data-parallel on an H100): refitted with an H100 sample of that stratum (40
train, 20 validation shapes), validation regret 1.0400 -> 1.0397 over both devices' validation shapes, 1.047 ->
1.033 on the stratum's. ``L2_RESIDENT`` was a half while a skinny m on a B of 4096 x 4096 (32 MiB) ran 0.66x
cuBLAS (57 x 4096 x 4096 of the train sample: 15.4 us against 10.1 us; split-K on twice the CTAs 11.2 us): cuBLAS
reads that B faster than the HBM can, from the L2 where the run before left it, and the model priced it
from HBM, so every grid cost the same (in the L2 the ring term favours more CTAs, split-K). Refitted at 3/4 the
validation regret is within noise (1.040 -> 1.037); on fresh shapes with A and B in 1/2..3/4 of the L2 the ranker's
first ran 0.907x -> 0.983x cuBLAS, elsewhere 1.000x -> 0.997x (H100, ``docs/selection.md``).

A tile costs ``t0`` more (prologue, epilogue), a Stream-K tile shared by ``p`` workgroups a fixup of
``FIXUP_LEVEL + (BM/cm)(BN/cn) 4 / FIXUP_RATE`` per level of a radix-4 tree, and a Stream-K section out of step
(:func:`~ctgraph.counts.in_step`) streams its rows from HBM (each workgroup its own). Then per schedule, with
``W`` waves of ``g`` workgroups and ``a`` tiles in the last (:mod:`ctgraph.counts`)::

    dataparallel:   sum over waves of (t0 + kt t_it(a_w))
    streamk:        ceil(T kt / g) t_it(g) + ceil(T / g + 1) t0 + fixup levels
    two-tile/hybrid: the data-parallel waves of N_DP, then ceil(N_SK / g) t_it(g) + 2 t0 + fixup
    split-K:        t0 + ceil(kt / s) t_it(T s) + the reduction (T BM BN (4 s + s) bytes / HBM_rate + launch)

plus a launch. **Correction** (:class:`Correction`): ``log(measured / analytic) = w . phi(config) + trees(x)``,
``phi`` the features of :func:`features`, ``w`` fitted by ridge regression on a seeded random sample of shapes and
the trees (:mod:`ctgraph.select.trees`) on what ``w`` leaves, ``x`` the features and the shape
(:func:`tree_inputs`; :mod:`ctgraph.select.fit`), stored as JSON per device family together with a hash of the
kernel sources it timed.

Most features are the analytic terms' pieces; ``swap_one_warpgroup`` (a swapped CTA of one math warpgroup, not in a
cluster) is empirical: such CTAs ran 5-9% faster than predicted on small m and mid-sized layers, where the ring term
makes the analytic model flat (H200 sample: validation regret 1.037 -> 1.036, a held-out probe 1.067 -> 1.040;
docs/selection.md).

**Level** (:attr:`Correction.level`). The fit takes each shape's mean out (only the order of a shape's configs
counts), so ``analytic x correction`` is right in order but not in level: the trees' leaves carry offsets that vary
with the shape, and on the tune tables measured / predicted ran 0.68 to 1.55 (p10 to p90 of the ranked-first
config). A last factor, the same for every config of a shape, sets the level: it takes out the correction of a
reference config on the shape (128 x 256 data-parallel on every SM: :func:`reference_row`), which ties the level to
the analytic model, and puts back a fitted one that is linear in the shape::

    predicted seconds = analytic x exp(w . phi + trees(x)) x exp(v . psi - (w . phi + trees(x))_reference)
    psi = (1, log m, log n, log k, log((m + n) k s / L2))

``v`` by ridge on each train shape's mean log residual (:mod:`ctgraph.select.fit`). Tied to the analytic model, a
shape far past the sample is priced as the analytic model scales (16384^3 at 10 ms, 32768^3 at 86 ms on an H200),
not below its FLOPs at peak. The ranker orders a shape's configs without the level (:func:`rank_keys`), so no
choice depends on it; it makes the seconds in ``kern.selection.ranked`` predictions of the kernel's time (measured
/ predicted on the held-out sets: docs/selection.md). A correction without a fitted level prices as before.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import warnings
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path

import numpy as np

from .. import knobs
from ..config import Config, Layout
from ..counts import (
    in_step,
    itemsize,
    k_iterations,
    padding,
    per_workgroup,
    sk_dp_iterations,
    split_chunks,
    tile_counts,
    waves,
)
from ..target import Target
from .candidates import TWIN
from .trees import Trees

__all__ = [
    "FEATURES",
    "IN_KERNEL_SPLITK",
    "LEVEL_INPUTS",
    "LEVEL_REFERENCE",
    "TREE_INPUTS",
    "Correction",
    "analytic",
    "features",
    "level_inputs",
    "load_correction",
    "predict",
    "predict_many",
    "rank_keys",
    "ranked_row",
    "reference_row",
    "tree_inputs",
    "user_correction_path",
]

EFFICIENCY = 0.8  # the tensor pipes' share a wgmma mainloop keeps busy at best
HBM_EFFICIENCY = 0.7  # the share of the datasheet's HBM bandwidth a GEMM's tile loads reach
UNALIGNED = 1.9  # L2 reads of rows that straddle 128-byte lines (H100: single-CTA tiles up to 1.9x per iteration)
LINE = 128
T0 = 1.5e-6  # seconds per tile: pipeline fill and epilogue
# padding as the correction sees it, no more: the samples reach 7.2 (a swapped tile on a thin output), and past them
# the fitted square would price the 128 x 128 tile of a 1x1x1 GEMM (padding 16383) at any factor, exp(10^6) included
PAD_FEATURE_MAX = 8.0
LAUNCH = 2.5e-6  # seconds per kernel launch (graph replay)
FIXUP_LEVEL = 2.0e-6
FIXUP_RATE = 20e9  # bytes/s one CTA moves a partial tile through a fixup level
FIXUP_RADIX = 4
# split-K with its fixup in the kernel (``"splitk"``, offered by call time alone: objective.py) has no timings in the
# tune tables, so it is priced as its twin with a reduction kernel (``"splitk_reduce"``, the same tile, layout, grid
# and chunks) times the ratio they ran at: 1.12 at the geomean over the 15 fresh draws whose twin took under 17 us,
# where the call objective can choose it (H200, 2026-11-28, docs/results/splitk-inkernel-probe-h200.csv)
IN_KERNEL_SPLITK = 1.12
# a ring stage is loaded again only a round trip after its last load (the load's latency under a loaded HBM and the
# consumers' release): with ``S`` stages a K iteration takes at least RING_LATENCY / S (sm90; chosen by the train
# sample's regret, like SM_RATE). The stage count mirrors the wgmma kernel's plan (lowering/cuda/plan/hopper.py).
RING_LATENCY = 2.0e-6
MAX_STAGES = 8
A_STAGE_MIN = 8192  # bytes an A region of a stage takes at least
D_STAGING = 2 * 64 * 64 * 2  # bytes of staged D boxes per consumer warpgroup (two 64 x 64 boxes of halves)
STAGES_RESERVE = 1024 + 1024 + 16 * MAX_STAGES + 8  # the SM's reserve, alignment slack, barriers
L2_RESIDENT = 0.75  # the share of the L2 that A and B together may fill and still stay in it (docs/selection.md)
SM_RATE = 100e9  # bytes/s one SM's shared memory takes in from the L2 (sm90; chosen by the train sample's regret)

FEATURES = (
    "bias",
    "swap",
    "cluster2",
    "cluster4+",
    "share_a",
    "unaligned",
    "streamk",
    "streamk2tile",
    "hybrid",
    "splitk",
    "log_kt",
    "inv_kt",
    "last_fill",
    "padding",
    "log_cta_area",
    "raster",
    "log_analytic",
    "log_waves",
    "swap_x_cta_area",
    "streamk_x_waves",
    "splitk_x_inv_kt",
    "log_analytic_sq",
    "last_fill_x_log_kt",
    "cluster8",
    "swap_x_log_analytic",
    "padding_sq",
    "swap_one_warpgroup",
)
# the trees' inputs (:func:`tree_inputs`): the features, then what places the config on its shape
TREE_INPUTS = (
    *FEATURES,
    "log_m",
    "log_n",
    "log_k",
    "log_tile_rows",
    "log_tile_columns",
    "log_workgroups",
    "log_split",
    "cta_grid_m",
    "cta_grid_n",
    "log_math_share",
    "log_l2_share",
    "log_hbm_share",
    "log_sm_share",
    "log_ring_share",
    "streams_hbm",
    "log_footprint_l2",
    "warpgroups",
)
# psi of a shape's level (:attr:`Correction.level`), read off its reference row (:func:`reference_row`)
LEVEL_INPUTS = ("bias", "log_m", "log_n", "log_k", "log_footprint_l2")
LEVEL_REFERENCE = ((128, 256, 64), Layout(), "dataparallel")  # tile, layout, transform; on every SM
TERM_FLOOR = 1e-6  # a term's share of the binding one, at least (the HBM term is 0 where A and B stay in the L2)


def _iteration(
    c: Config, m: int, n: int, k: int, dtype: str, target: Target, active: int, shared: bool, norm: float
) -> float:
    """Seconds of one K iteration of a workgroup with ``active`` workgroups loading (``shared``: they read K in
    step, so a wave's slice comes from HBM once): the largest of :func:`_terms` (``norm`` infinite), else their
    ``norm``-norm. Near a knee, where two bounds are close, both cost (a ring that barely covers the HBM's latency
    still loses bandwidth), which the largest alone does not see (docs/decisions.md)."""
    terms = _terms(c, m, n, k, dtype, target, active, shared)
    return max(terms) if math.isinf(norm) else sum(t**norm for t in terms) ** (1 / norm)


def _terms(
    c: Config, m: int, n: int, k: int, dtype: str, target: Target, active: int, shared: bool
) -> tuple[float, float, float, float, float]:
    """The bounds on one K iteration (module docstring): math, L2, HBM, SM intake and ring, in seconds."""
    bm, bn, bk = c.tile
    cm, cn = c.layout.grid
    s = itemsize(dtype)
    cta_m, cta_n = bm / cm, bn / cn
    ctas = active * c.layout.cluster
    math_t = 2 * cta_m * cta_n * bk / (target.tensor_flops / target.sms) / EFFICIENCY
    u_a = UNALIGNED if (k * s) % LINE else 1.0
    u_b = UNALIGNED if (n * s) % LINE else 1.0
    l2 = ctas * (cta_m * bk * s * u_a / cn + cta_n * bk * s * u_b / cm) / target.l2_rate
    hbm = 0.0
    if _streams_hbm(m, n, k, dtype, target):  # else A and B stay in the L2 from the run before
        tm, tn = tile_counts(m, n, c.tile)
        rows = min(tm, c.raster) if c.raster > 1 else min(tm, -(-active // tn))
        cols = min(tn, -(-active // rows))
        slabs = max(1.0, active / (rows * cols))  # workgroups beyond the tiles read other K slabs of them
        if shared or (rows * bm + cols * bn) * k * s <= target.l2_bytes / 2:
            hbm = (
                slabs * (rows * bm + cols * bn) * bk * s / (HBM_EFFICIENCY * target.hbm_bandwidth)
            )  # rows and columns stay in the L2
        else:  # out of step and too many rows for the L2: each workgroup streams its own
            hbm = active * (bm + bn) * bk * s / (HBM_EFFICIENCY * target.hbm_bandwidth)
    ingress = (cta_m + cta_n) * bk * s / SM_RATE  # one SM's own intake, however few SMs load
    return math_t, l2, hbm, ingress, RING_LATENCY / _stages(c, dtype, target)


def _streams_hbm(m: int, n: int, k: int, dtype: str, target: Target) -> bool:
    """Whether A and B together outgrow :data:`L2_RESIDENT` of the L2 (else a timed kernel finds them there)."""
    return (m + n) * k * itemsize(dtype) > L2_RESIDENT * target.l2_bytes


def _stages(c: Config, dtype: str, target: Target) -> int:
    """The ring's stages a CTA of ``c`` holds, as the wgmma kernel's plan counts them: the shared memory a CTA may
    opt into (the SM's less 1 KiB) less alignment slack, barriers and the staged D boxes of its math warpgroups
    (:func:`_warpgroups`), over a stage's bytes
    (A's rows in 1 KiB steps and at least :data:`A_STAGE_MIN` bytes, B's columns in whole 64-column chunks), at most
    :data:`MAX_STAGES`."""
    bm, bn, bk = c.tile
    cm, cn = c.layout.grid
    s = itemsize(dtype)
    rows, cols = bm // cm, bn // cn
    stride = max(-(-rows * bk * s // 1024) * 1024, A_STAGE_MIN) + -(-cols // 64) * 64 * bk * s
    staging = _warpgroups(c) * D_STAGING
    return int(max(2, min(MAX_STAGES, (target.smem_per_sm - STAGES_RESERVE - staging) // stride)))


def _warpgroups(c: Config) -> int:
    """The math warpgroups of a CTA of ``c``: one per 64 rows, swapped per 64 columns; CTAs of 256 x 144 or 160
    have two, of two 64-row blocks each (the plan's ``row_blocks``)."""
    rows, cols = c.tile[0] // c.layout.grid[0], c.tile[1] // c.layout.grid[1]
    if not c.layout.swap and rows == 256 and cols > 128:
        return 2
    return -(-(cols if c.layout.swap else rows) // 64)


def _fixup(c: Config, peers: int) -> float:
    """A shared tile's fixup: ``ceil(log4(peers))`` levels of one CTA's fp32 partial, at least one."""
    if peers <= 1:
        return 0.0
    cm, cn = c.layout.grid
    level = FIXUP_LEVEL + (c.tile[0] / cm) * (c.tile[1] / cn) * 4 / FIXUP_RATE
    return level * max(1, math.ceil(math.log(peers, FIXUP_RADIX)))


def analytic(c: Config, m: int, n: int, k: int, dtype: str, target: Target, norm: float = math.inf) -> float:
    """Predicted seconds of ``c`` on ``target`` (module docstring); ``norm``: how a K step's bounds join
    (:func:`_iteration`)."""
    tm, tn = tile_counts(m, n, c.tile)
    tiles, kt, g = tm * tn, k_iterations(k, c.tile), c.workgroups
    if c.transform == "dataparallel":
        w, last = waves(tiles, g)
        full = _iteration(c, m, n, k, dtype, target, g, True, norm)
        tail = _iteration(c, m, n, k, dtype, target, last, True, norm)
        return LAUNCH + (w - 1) * (T0 + kt * full) + T0 + kt * tail
    if c.transform == "splitk_reduce":
        s = c.split or 1
        per = split_chunks(kt, s)[1]
        it = _iteration(c, m, n, k, dtype, target, min(tiles * s, g), True, norm)
        reduce = tiles * c.tile[0] * c.tile[1] * 5 * s / target.hbm_bandwidth
        return 2 * LAUNCH + T0 + per * it + reduce
    batches = 2 if c.transform == "streamk2tile" else (c.sk_batches or 1)
    n_sk, n_dp = sk_dp_iterations(c.transform, tiles, kt, g, batches)
    steady = bool(in_step(c.transform, tiles, kt, g, batches))
    t = LAUNCH
    if n_dp:
        t += n_dp // (g * kt) * (T0 + kt * _iteration(c, m, n, k, dtype, target, g, True, norm))
    if n_sk:
        per = per_workgroup(n_sk, g)
        sk_tiles = n_sk // kt
        peers = -(-kt // per) + (1 if kt % per else 0) if per < kt else 1
        t += per * _iteration(c, m, n, k, dtype, target, g, steady, norm) + math.ceil(sk_tiles / g + 1) * T0
        t += _fixup(c, peers)
    return t


def features(c: Config, m: int, n: int, k: int, dtype: str, target: Target, base: float) -> list[float]:
    """The correction's regressors (:data:`FEATURES`) of ``c``, ``base`` its analytic seconds."""
    tm, tn = tile_counts(m, n, c.tile)
    tiles, kt = tm * tn, k_iterations(k, c.tile)
    cm, cn = c.layout.grid
    s = itemsize(dtype)
    w, last = waves(tiles, c.workgroups)
    phi = [
        1.0,
        float(c.layout.swap),
        float(c.layout.cluster == 2),
        float(c.layout.cluster >= 4),
        float(cn > 1),
        float((k * s) % LINE != 0 or (n * s) % LINE != 0),
        float(c.transform == "streamk"),
        float(c.transform == "streamk2tile"),
        float(c.transform == "streamk_hybrid"),
        float(c.transform == "splitk_reduce"),
        math.log(kt),
        1.0 / kt,
        last / c.workgroups if c.transform == "dataparallel" else 1.0,
        min(padding(m, n, c.tile), PAD_FEATURE_MAX),
        math.log2(c.tile[0] / cm * c.tile[1] / cn / 16384),
        float(c.raster > 1),
        math.log(base / 1e-5),
        math.log(w),
    ]
    swap, area, log_base, pad = phi[1], phi[14], phi[16], phi[13]
    return [
        *phi,
        swap * area,  # interactions: what a linear model of the main effects misses most (validation regret)
        phi[6] * phi[17],
        phi[9] * phi[11],
        log_base**2,
        phi[12] * phi[10],
        float(c.layout.cluster == 8),
        swap * log_base,
        pad**2,
        float(c.layout.swap and c.layout.cluster == 1 and _warpgroups(c) == 1),
    ]


def tree_inputs(c: Config, m: int, n: int, k: int, dtype: str, target: Target, phi: list[float]) -> list[float]:
    """The trees' inputs (:data:`TREE_INPUTS`) of ``c``: its features ``phi``; the shape and the config's place on
    it; and which bound of a K iteration binds (:func:`_terms` over the largest, for the workgroups that load at once
    in the first wave, floored at :data:`TERM_FLOOR`), with how far A and B outgrow the L2; and the CTA's math
    warpgroups (:func:`_warpgroups`). The features are mostly ratios; the trees split on where the shape lies and on
    what holds the kernel back. An input is added at the end: trees fitted before it read theirs by name."""
    tm, tn = tile_counts(m, n, c.tile)
    cm, cn = c.layout.grid
    streamk = c.transform.startswith("streamk")
    active = c.workgroups if streamk else min(tm * tn * (c.split or 1), c.workgroups)
    terms = _terms(c, m, n, k, dtype, target, active, True)
    bound = max(terms)
    footprint = (m + n) * k * itemsize(dtype)
    return [
        *phi,
        math.log(m),
        math.log(n),
        math.log(k),
        math.log(tm),
        math.log(tn),
        math.log(c.workgroups),
        math.log(c.split or 1),
        float(cm),
        float(cn),
        *(math.log(max(t / bound, TERM_FLOOR)) for t in terms),
        float(_streams_hbm(m, n, k, dtype, target)),
        math.log(footprint / target.l2_bytes),
        float(_warpgroups(c)),
    ]


@dataclass(frozen=True)
class Correction:
    """``log(measured / analytic) = weights . features + trees(inputs)``: fitted for one device family on kernels
    whose sources hash to ``kernels`` (:func:`ctgraph.select.fit.kernel_hash`). The trees (:mod:`.trees`), fitted on
    what the linear part leaves, are optional; all zero weights and no trees is the analytic model alone."""

    family: str
    weights: tuple[float, ...] = field(default=(0.0,) * len(FEATURES))
    kernels: str = ""
    names: tuple[str, ...] = FEATURES
    meta: tuple[tuple[str, str], ...] = ()
    trees: Trees | None = None
    level: tuple[float, ...] = field(default=(0.0,) * len(LEVEL_INPUTS))  # v of the module's level (0: none)
    bounds_norm: float = math.inf  # p of the K step's p-norm of bounds the fit read (:func:`_iteration`; inf: max)

    def __post_init__(self) -> None:
        if not self.bounds_norm >= 1:
            raise ValueError(f"a correction's bounds_norm is a p >= 1 (inf: the largest bound), got {self.bounds_norm}")
        object.__setattr__(self, "bounds_norm", float(self.bounds_norm))  # 4 and 4.0: one correction, one file
        if tuple(self.names) != FEATURES or len(self.weights) != len(FEATURES):
            raise ValueError(f"a correction's features must be {FEATURES}, got {self.names}")
        if len(self.level) != len(LEVEL_INPUTS):
            raise ValueError(f"a correction's level has one weight per {LEVEL_INPUTS}, got {len(self.level)}")
        if self.trees is not None and (unknown := _uncomputed(self.trees)):
            raise ValueError(
                f"a correction's trees read inputs this version does not compute ({', '.join(unknown)}): refit it "
                "(python -m ctgraph fit)"
            )

    @property
    def analytic_only(self) -> bool:
        return not any(self.weights) and not self.trees

    def log_factors(self, rows: np.ndarray) -> np.ndarray:
        """``log(correction)`` of each row of :func:`tree_inputs` (shape ``(n, len(TREE_INPUTS))``)."""
        rows = np.asarray(rows, dtype=np.float64).reshape(-1, len(TREE_INPUTS))
        linear = np.zeros(rows.shape[0])
        for i, w in enumerate(self.weights):  # feature by feature: a row's sum is the same in any batch
            linear += w * rows[:, i]
        if not self.trees:
            return linear
        if self._tree_columns is not None:  # trees fitted before inputs were added: their columns, by name
            rows = rows[:, self._tree_columns]
        return linear + self.trees.predict(rows)

    @functools.cached_property
    def _tree_columns(self) -> list[int] | None:
        """Where the trees' inputs sit in a row of :data:`TREE_INPUTS` (None: they read it whole), found once, not
        at every ranking."""
        if self.trees is None or self.trees.inputs == TREE_INPUTS:
            return None
        return [TREE_INPUTS.index(name) for name in self.trees.inputs]

    def log_level(self, reference: list[float]) -> float:
        """``log`` of the shape's level factor (module), from its :func:`reference_row`: ``v . psi`` less the
        correction of the reference config; 0 where no level is fitted."""
        if not any(self.level):
            return 0.0
        fitted = sum(v * x for v, x in zip(self.level, level_inputs(reference), strict=True))
        return fitted - float(self.log_factors(np.array([reference]))[0])

    def to_json(self) -> str:
        body: dict[str, object] = {
            "family": self.family,
            "kernels": self.kernels,
            "features": dict(zip(self.names, self.weights, strict=True)),
            "level": dict(zip(LEVEL_INPUTS, self.level, strict=True)),
            "meta": dict(self.meta),
        }
        if not math.isinf(self.bounds_norm):  # written only where it is not the largest: older files read alike
            body["bounds_norm"] = self.bounds_norm
        text = json.dumps(body, indent=1, sort_keys=True)
        if self.trees:  # the last key in order; one line, its thousands of numbers are not read by eye
            text = text[:-2] + ',\n "trees": ' + json.dumps(self.trees.to_dict(), separators=(",", ":")) + "\n}"
        return text + "\n"

    @classmethod
    def from_json(cls, text: str) -> Correction:
        d = json.loads(text)
        weights = tuple(float(d["features"].get(name, 0.0)) for name in FEATURES)
        level = tuple(float(d.get("level", {}).get(name, 0.0)) for name in LEVEL_INPUTS)  # none before the level
        trees = Trees.from_dict(d["trees"]) if d.get("trees") else None
        if trees is not None and (unknown := _uncomputed(trees)):  # a fit by another version: rank without them
            warnings.warn(
                f"the ranker's trees ({d['family']}) read inputs this version does not compute ({', '.join(unknown)});"
                " ranking with the linear correction alone. Refit it: python -m ctgraph fit (or calibrate)",
                stacklevel=2,
            )
            trees = None
        meta = tuple(sorted(d.get("meta", {}).items()))
        norm = float(d.get("bounds_norm", math.inf))
        return cls(d["family"], weights, d.get("kernels", ""), FEATURES, meta, trees, level, norm)

    @property
    def digest(self) -> str:
        return hashlib.blake2b(self.to_json().encode(), digest_size=8).hexdigest()


def _uncomputed(trees: Trees) -> list[str]:
    """The inputs ``trees`` read that :func:`tree_inputs` does not compute. Trees read their columns by name, so a
    fit made before an input was added still ranks as fitted (:meth:`Correction.log_factors`); one that reads an
    input since renamed or removed cannot."""
    return [name for name in trees.inputs if name not in TREE_INPUTS]


def user_correction_path(family: str) -> Path:
    """Where ``python -m ctgraph calibrate`` stores a family's correction: ``CTGRAPH_CACHE_DIR/ranker/``."""
    return knobs.cache_dir() / "ranker" / f"ranker-{family}.json"


def load_correction(family: str, path: str | None = None) -> Correction:
    """The correction of ``family``: ``calibrate``'s (the cache directory), else the shipped one
    (``ctgraph/data/ranker-<family>.json``), else the analytic model alone (zero weights). ``path``: that file."""
    if path is not None:
        with open(path) as f:
            return Correction.from_json(f.read())
    user = user_correction_path(family)
    if user.is_file():
        try:
            return Correction.from_json(user.read_text())
        except (ValueError, KeyError, TypeError, AttributeError) as e:  # NOTE: JSONDecodeError is a ValueError
            warnings.warn(
                f"ignoring the calibrated correction {user}: not one this version reads ({type(e).__name__}: {e}); "
                "using the shipped one (delete the file, or run `python -m ctgraph calibrate` again)",
                stacklevel=2,
            )
    shipped = resources.files("ctgraph") / "data" / f"ranker-{family}.json"
    return Correction.from_json(shipped.read_text()) if shipped.is_file() else Correction(family)


def predict(c: Config, m: int, n: int, k: int, dtype: str, target: Target, correction: Correction) -> float:
    """Predicted seconds of ``c``: analytic times the fitted correction and the shape's level."""
    return predict_many([c], m, n, k, dtype, target, correction)[0]


def predict_many(
    configs: list[Config], m: int, n: int, k: int, dtype: str, target: Target, correction: Correction
) -> list[float]:
    """:func:`predict` of each of ``configs``, the correction evaluated once for all of them."""
    keys, level = rank_keys(configs, m, n, k, dtype, target, correction)
    return [t * level for t in keys]


def rank_keys(
    configs: list[Config], m: int, n: int, k: int, dtype: str, target: Target, correction: Correction
) -> tuple[list[float], float]:
    """What the ranker orders ``configs`` by, ``analytic x correction`` (right in order, not in level), and the
    shape's level factor that makes them predicted seconds (:meth:`Correction.log_level`); split-K with its fixup in
    the kernel at its reduction-kernel twin's times :data:`IN_KERNEL_SPLITK`."""
    norm = correction.bounds_norm
    level = 1.0
    if any(correction.level):
        level = math.exp(correction.log_level(reference_row(m, n, k, dtype, target, norm)))
    if not configs:
        return [], level
    priced = [replace(c, transform="splitk_reduce") if c.transform == TWIN else c for c in configs]
    base, rows = zip(*(ranked_row(c, m, n, k, dtype, target, norm) for c in priced), strict=True)
    logs = correction.log_factors(np.array(rows)).tolist()
    factor = [IN_KERNEL_SPLITK if c.transform == TWIN else 1.0 for c in configs]
    return [b * math.exp(x) * f for b, x, f in zip(base, logs, factor, strict=True)], level


def reference_row(m: int, n: int, k: int, dtype: str, target: Target, norm: float = math.inf) -> list[float]:
    """The :func:`tree_inputs` of the level's reference config on this shape (:data:`LEVEL_REFERENCE` on
    ``target.sms`` workgroups): what ties a shape's level to the analytic model."""
    tile, layout, transform = LEVEL_REFERENCE
    return ranked_row(Config(tile, layout, transform, target.sms), m, n, k, dtype, target, norm)[1]


def level_inputs(row: list[float]) -> list[float]:
    """``psi`` of :data:`LEVEL_INPUTS`: the shape's part of a config's :func:`tree_inputs` ``row``."""
    return [1.0, *(row[TREE_INPUTS.index(name)] for name in LEVEL_INPUTS[1:])]  # the shape's inputs share names


def ranked_row(
    c: Config, m: int, n: int, k: int, dtype: str, target: Target, norm: float = math.inf
) -> tuple[float, list[float]]:
    """What the ranker reads of ``c``: its analytic seconds (its bounds joined by ``norm``) and its
    :func:`tree_inputs` (the features first), the row the correction is fitted on (:func:`ctgraph.select.fit.samples`)
    and evaluated on (:func:`predict_many`)."""
    base = analytic(c, m, n, k, dtype, target, norm)
    return base, tree_inputs(c, m, n, k, dtype, target, features(c, m, n, k, dtype, target, base))
