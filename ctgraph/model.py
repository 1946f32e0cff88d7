"""The grid-size model of the Stream-K paper, fitted per GPU: pick the workgroup count g per shape.

Per workgroup (CTA), for a schedule with ``iters(g)`` MAC iterations per CTA and ``peers(g)`` CTAs
contributing to one output tile::

    time(g) = a + b*[peers > 1] + c(g)*iters(g) + d*(peers - 1)

``a`` is the fixed cost of a CTA, ``b`` of storing a partial tile, ``d`` of each peer the owner waits
for and adds, ``c`` of one BM x BN x BK iteration. One refinement over the paper: when g exceeds the
number of SMs, CTAs share an SM and each runs slower, so ``c(g)`` is ``c_alone`` for g <= SMs and
``c_shared`` above. Two-tile and hybrid schedules add their data-parallel section's iterations (no
peers) to the Stream-K section's time.

``python -m ctgraph calibrate`` fits (a, b, c_alone, c_shared, d) by nonnegative least squares on kernel
times of this project's own kernels, and stores them per device name in the cache directory;
:data:`DEFAULTS` are the documented constants used where no fit is stored.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from . import knobs
from .passes import split_sk_dp

__all__ = ["DEFAULTS", "GridModel", "Work", "load_model", "save_model", "work"]


@dataclass(frozen=True)
class Work:
    """What one CTA does under a schedule: iterations, whether it shares tiles and with how many peers."""

    iters: int
    peers: int
    dp_iters: int = 0  # iterations of a data-parallel section that follows (no fixup)


def _peers(iters: int, kt: int) -> int:
    """The most CTAs that cover one tile when every CTA gets ``iters`` consecutive iterations."""
    if iters <= 0 or iters % kt == 0:
        return 1
    if kt % iters == 0:
        return kt // iters
    return 1 + math.ceil((kt - 1) / iters)


def work(transform: str, tiles: int, kt: int, g: int, sk_batches: int = 2) -> Work:
    """The per-CTA work of ``transform`` for ``tiles`` output tiles of ``kt`` iterations on ``g`` CTAs."""
    if transform == "dataparallel":
        return Work(-(-tiles // g) * kt, 1)
    if transform == "streamk":
        iters = -(-tiles * kt // g)
        return Work(iters, _peers(iters, kt))
    if transform in ("streamk2tile", "streamk_hybrid"):
        n_sk, n_dp = (int(x) for x in split_sk_dp(tiles, kt, g, sk_batches))
        iters = -(-n_sk // g)
        return Work(iters, _peers(iters, kt) if n_sk else 1, n_dp // g)
    raise ValueError(f"the grid model does not know transform {transform!r}")


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

    def features(self, w: Work, g: int) -> list[float]:
        """The regressors of ``time = [a, b, c_alone, c_shared, d] . features``."""
        iters = w.iters + w.dp_iters
        alone = g <= self.sms
        return [1.0, float(w.peers > 1), iters if alone else 0.0, 0.0 if alone else iters, float(w.peers - 1)]

    def time(self, w: Work, g: int) -> float:
        return sum(
            k * x
            for k, x in zip((self.a, self.b, self.c_alone, self.c_shared, self.d), self.features(w, g), strict=True)
        )

    def best_grid(self, transform: str, tiles: int, kt: int, max_grid: int | None = None, sk_batches: int = 2) -> int:
        """The g in [1, max_grid] with the least predicted time (ties: the larger g, shorter last rounds)."""
        top = max_grid or self.sms * self.ctas_per_sm
        return min(range(1, top + 1), key=lambda g: (self.time(work(transform, tiles, kt, g, sk_batches), g), -g))


# NOTE: a hand-set starting point, not a fit: on the H100 anchors it picks grids that gain up to 1.6x over
# the resident-count default (docs/benchmarks.md), where this session's least-squares fit, with its 26%
# median error, picked worse ones on some shapes. `python -m ctgraph calibrate` fits your GPU and stores
# the result per device name; load_model prefers that file.
DEFAULTS: dict[str, GridModel] = {
    "default": GridModel(a=4e-6, b=2e-6, c_alone=1.5e-6, c_shared=2.2e-6, d=2e-6),
}


def _path(device: str) -> Path:
    return knobs.cache_dir() / "model" / (re.sub(r"[^A-Za-z0-9_.-]+", "_", device) + ".json")


def save_model(model: GridModel) -> Path:
    path = _path(model.device)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(asdict(model), indent=2, sort_keys=True) + "\n")
    return path


def load_model(device: str) -> GridModel:
    """The calibrated model of ``device`` (cache directory), else the shipped one, else the defaults."""
    path = _path(device)
    if path.exists():
        return GridModel(**json.loads(path.read_text()))
    return DEFAULTS.get(device, DEFAULTS["default"])
