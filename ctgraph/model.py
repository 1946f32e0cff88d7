"""The grid-size model of the Stream-K paper, fitted per GPU: pick the workgroup count g per shape.

Per workgroup (CTA), for a schedule with ``iters(g)`` MAC iterations per CTA and ``peers(g)`` CTAs
contributing to one output tile::

    time(g) = a + b*[peers > 1] + c(g)*iters(g) + d*(peers - 1) + c_spread*[out of step]*sk_iters(g)

``a`` is the fixed cost of a CTA, ``b`` of storing a partial tile, ``d`` of each peer the owner waits
for and adds, ``c`` of one BM x BN x BK iteration. Two refinements over the paper: when g exceeds the
number of SMs, CTAs share an SM and each runs slower, so ``c(g)`` is ``c_alone`` for g <= SMs and
``c_shared`` above; and a Stream-K section whose workgroups do not read K in step (below) pays
``c_spread`` more per iteration. Two-tile and hybrid schedules add their data-parallel section's
iterations (no peers) to the Stream-K section's time.

**k-aligned grids.** When a Stream-K section has fewer tiles ``T`` than workgroups, ``best_grid`` only
takes grids ``g = s*T`` that cut every tile into ``s`` parts of ``I = ceil(kt / s)`` iterations.
Workgroup ``q`` starts at iteration ``q*I`` and reads k-slice ``(q*I + t) mod kt`` at time ``t``: with
``s*I = kt`` the workgroups fall into ``s`` groups, each reading its own ``1/s`` of K in step with the
others, so an operand slice is fetched from HBM once and shared through the L2, as in data-parallel.
When ``s`` does not divide ``kt`` the parts of tile ``t`` start ``t*(s*I - kt)`` iterations late; such
a grid is taken while that drift stays within half a part over all the tiles (``2*T*(s*I - kt) <= I``).
On other grids the start phases spread over the whole tile and each workgroup streams its own rows
from HBM: on an H100, 1280x1536x16384 with 128x256 tiles (60 tiles) ran Stream-K in 229 us on the
resident 132 CTAs and in 99 us on 120 (each tile in two), 640x640x24576 with 128x128 tiles in 97 us on
132 and in 52 us on 125 (docs/benchmarks.md). Sections with at least as many tiles as workgroups (the
two-tile schedule's) keep every grid, since no grid puts them in step, but pay ``c_spread``: on the
H100 anchors such sections ran slower per iteration than data-parallel waves of the same tile (4096^3
and 8192^3: Stream-K at 0.62-0.81x, two-tile at 0.87-0.96x of data-parallel). The default, 20% of
``c_alone``, is the most that still lets a section of about one tile per workgroup beat a grid of one
whole tile per CTA beyond the SM count (1408x1664x8192 in 128x128 tiles: 132 CTAs, 1.33x data-parallel,
measured; 0.6e-6 chose 143 CTAs and lost it, since ``c_shared`` spreads the cost of SMs holding two CTAs
over all of them).

``python -m ctgraph calibrate`` fits (a, b, c_alone, c_shared, d, c_spread) by nonnegative least squares on kernel
times of this project's own kernels, and stores them per device name in the cache directory;
:data:`DEFAULTS` are the documented constants used where no fit is stored.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from . import knobs
from .cache import write_whole
from .passes import split_chunks, split_for_budget, split_sk_dp

__all__ = [
    "DEFAULTS",
    "GridModel",
    "Work",
    "in_step",
    "k_aligned",
    "load_model",
    "save_model",
    "useful_grid",
    "work",
]


@dataclass(frozen=True)
class Work:
    """What one CTA does under a schedule: iterations, whether it shares tiles and with how many peers."""

    iters: int
    peers: int
    dp_iters: int = 0  # iterations of a data-parallel section that follows (no fixup)
    spread: bool = False  # the Stream-K iterations' workgroups do not read K in step (see in_step)


def _peers(iters: np.ndarray, kt: int) -> np.ndarray:
    """The most CTAs that cover one tile when every CTA gets ``iters`` consecutive iterations."""
    it = np.maximum(iters, 1)
    return np.where((iters <= 0) | (iters % kt == 0), 1, np.where(kt % it == 0, kt // it, 1 + -(-(kt - 1) // it)))


def works(transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int = 2) -> tuple[np.ndarray, ...]:
    """``(iters, peers, dp_iters, spread)`` per CTA for every grid size in ``g`` (numpy arrays, vectorised);
    ``spread``: the CTA shares tiles in a Stream-K section that is not :func:`in_step`."""
    g = np.asarray(g, dtype=np.int64)
    iters, peers, dp = _iterations(transform, tiles, kt, g, sk_batches)
    return iters, peers, dp, (peers > 1) & ~in_step(transform, tiles, kt, g, sk_batches)


def _iterations(transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int) -> tuple[np.ndarray, ...]:
    """``(iters, peers, dp_iters)`` of :func:`works`."""
    zero = np.zeros_like(g)
    if transform == "dataparallel":
        return -(-tiles // g) * kt, np.ones_like(g), zero
    if transform == "streamk":
        iters = -(-tiles * kt // g)
        return iters, _peers(iters, kt), zero
    if transform in ("splitk", "splitk_reduce"):
        # g is the workgroup budget, shared out over the tiles as compile does
        chunks, per = split_chunks(kt, split_for_budget(tiles, g))
        fits = tiles * chunks <= g
        return np.where(fits, per, 1 << 40), np.where(fits, chunks, 1), zero
    if transform in ("streamk2tile", "streamk_hybrid"):
        n_sk, n_dp = split_sk_dp(tiles, kt, g, sk_batches)
        iters = -(-n_sk // g)
        return iters, np.where(n_sk > 0, _peers(iters, kt), 1), n_dp // g
    raise ValueError(f"the grid model does not know transform {transform!r}")


def _sk_tiles(transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int) -> np.ndarray:
    """The output tiles of the Stream-K section for every grid size in ``g`` (0: none)."""
    if transform == "streamk":
        return np.full_like(g, tiles)
    if transform in ("streamk2tile", "streamk_hybrid"):
        return np.asarray(split_sk_dp(tiles, kt, g, sk_batches)[0]) // kt
    return np.zeros_like(g)


def in_step(transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int = 2) -> np.ndarray:
    """For every grid size in ``g``: do the Stream-K section's workgroups, if any, read K in step?

    True where there is no Stream-K section, or where the grid is ``s`` times its ``T`` tiles and the
    parts stay in step (see the module docstring).
    """
    g = np.asarray(g, dtype=np.int64)
    sk_tiles = _sk_tiles(transform, tiles, kt, g, sk_batches)
    per = np.maximum(sk_tiles, 1)
    parts = np.maximum(g // per, 1)
    size = -(-kt // parts)  # iterations per part
    drift = sk_tiles * (parts * size - kt)  # how far the last tile's parts start from the first tile's
    return (sk_tiles == 0) | ((g % per == 0) & (2 * drift <= size))


def k_aligned(transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int = 2) -> np.ndarray:
    """For every grid size in ``g``: may ``best_grid`` take it? Where the Stream-K section is
    :func:`in_step`, or has at least as many tiles as workgroups (no grid puts those in step)."""
    g = np.asarray(g, dtype=np.int64)
    return in_step(transform, tiles, kt, g, sk_batches) | (_sk_tiles(transform, tiles, kt, g, sk_batches) >= g)


def useful_grid(transform: str, tiles: int, g: int) -> int:
    """``g`` without the workgroups that could only launch and exit: data-parallel takes at most one per
    tile (on the H100 the idle ones cost up to 12% on small GEMMs, docs/benchmarks.md)."""
    return min(g, tiles) if transform == "dataparallel" else g


def work(transform: str, tiles: int, kt: int, g: int, sk_batches: int = 2) -> Work:
    """The per-CTA work of ``transform`` for ``tiles`` output tiles of ``kt`` iterations on ``g`` CTAs."""
    iters, peers, dp, spread = (a[0] for a in works(transform, tiles, kt, np.array([g]), sk_batches))
    return Work(int(iters), int(peers), int(dp), bool(spread))


@dataclass(frozen=True)
class GridModel:
    """Constants in seconds (see the module docstring); ``sms`` and ``ctas_per_sm`` describe the GPU."""

    a: float
    b: float
    c_alone: float
    c_shared: float
    d: float
    sms: int = 132
    ctas_per_sm: int = 2
    device: str = "default"
    c_spread: float = 0.0  # extra seconds per iteration of a Stream-K section out of step (0 in older fits)

    @property
    def constants(self) -> list[float]:
        """The fitted constants, in the order of :meth:`features`."""
        return [self.a, self.b, self.c_alone, self.c_shared, self.d, self.c_spread]

    def features(self, w: Work, g: int) -> list[float]:
        """The regressors of ``time = constants . features``."""
        iters = w.iters + w.dp_iters
        alone = g <= self.sms
        spread = float(w.iters if w.spread else 0)
        return [1.0, float(w.peers > 1), iters if alone else 0.0, 0.0 if alone else iters, float(w.peers - 1), spread]

    def time(self, w: Work, g: int) -> float:
        return float(np.dot(self.constants, self.features(w, g)))

    def times(self, transform: str, tiles: int, kt: int, g: np.ndarray, sk_batches: int = 2) -> np.ndarray:
        """Predicted time for every grid size in ``g`` (the vectorised :meth:`time`)."""
        iters, peers, dp, spread = works(transform, tiles, kt, g, sk_batches)
        c = np.where(np.asarray(g) <= self.sms, self.c_alone, self.c_shared)
        return self.a + self.b * (peers > 1) + c * (iters + dp) + self.d * (peers - 1) + self.c_spread * spread * iters

    def best_grid(self, transform: str, tiles: int, kt: int, max_grid: int | None = None, sk_batches: int = 2) -> int:
        """The :func:`k_aligned` g in [1, :func:`useful_grid` of max_grid] with the least predicted time (ties:
        the larger g, shorter last rounds)."""
        g = np.arange(1, useful_grid(transform, tiles, max_grid or self.sms * self.ctas_per_sm) + 1)
        t = self.times(transform, tiles, kt, g, sk_batches)
        t = np.where(k_aligned(transform, tiles, kt, g, sk_batches), t, np.inf)
        return int(g[np.flatnonzero(t == t.min())[-1]])


# NOTE: a hand-set starting point, not a fit: on the H100 anchors it picks grids that gain up to 1.6x over
# the resident-count default (docs/benchmarks.md), where this session's least-squares fit, with its 26%
# median error, picked worse ones on some shapes. `python -m ctgraph calibrate` fits your GPU and stores
# the result per device name; load_model prefers that file.
DEFAULTS: dict[str, GridModel] = {
    "default": GridModel(a=4e-6, b=2e-6, c_alone=1.5e-6, c_shared=2.2e-6, d=2e-6, c_spread=0.3e-6),
}


def _path(device: str) -> Path:
    return knobs.cache_dir() / "model" / (re.sub(r"[^A-Za-z0-9_.-]+", "_", device) + ".json")


def save_model(model: GridModel) -> Path:
    return write_whole(_path(model.device), json.dumps(asdict(model), indent=2, sort_keys=True) + "\n")


def load_model(device: str) -> GridModel:
    """The calibrated model of ``device`` (cache directory), else the shipped one, else the defaults."""
    path = _path(device)
    if path.exists():
        return GridModel(**json.loads(path.read_text()))
    return DEFAULTS.get(device, DEFAULTS["default"])
