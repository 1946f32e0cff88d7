"""Selection: every ``"auto"`` (tile, cluster layout, transform, grid, tile order) resolved in the front end.

From a typed :class:`Target` that the backend reports and from data files, never from a device name alone::

    measured entry for this exact device and shape    (autotune cache, then the shipped entries: cache.py)
    else one measured on the same chip                 (an H100 SXM's entries on an H200: target.same_chip)
    else the ranker's best candidate                   (candidates.py -> model.py: analytic x fitted correction)
    with autotune=True: the ranker's top candidates timed on first call, the winner cached (autotune.py)

Selection is deterministic for a given target and data: candidates come in a fixed order and ties keep the first.
The backend is asked only through the registry and only which tiles and layouts its path runs
(``backend.layout_of``); it never imports this package.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from ..config import Config, Layout, parse_tile, tile_name
from ..counts import k_iterations, tile_counts
from ..target import CPU, H100_SXM, H200, KNOWN, Target, known_target, same_chip
from . import cache
from .candidates import Supports, candidates, offered, schedules
from .model import Correction, load_correction, rank_keys, user_correction_path

__all__ = [
    "CPU",
    "H100_SXM",
    "H200",
    "KNOWN",
    "Config",
    "Correction",
    "Layout",
    "Selection",
    "Target",
    "candidates",
    "known_target",
    "parse_tile",
    "rank",
    "select",
    "select_schedule",
    "tile_name",
]


@dataclass(frozen=True)
class Selection:
    """What ``auto`` chose and why (``kern.selection``): the config, where it came from (``source``: "measured",
    "ranker" or "autotune"), a reason, and the ranked candidates the ranker saw first (config, predicted seconds)."""

    config: Config
    reason: str
    ranked: tuple[tuple[Config, float], ...] = ()
    source: str = "ranker"

    def __str__(self) -> str:
        return f"{self.config.name}: {self.reason}"


def rank(
    m: int, n: int, k: int, dtype: str, target: Target, path: str, supports: Supports, pool: list[Config] | None = None
) -> list[tuple[Config, float]]:
    """``pool`` (default: every candidate) ordered by the ranker's predicted seconds; ties keep the pool's order."""
    pool = candidates(m, n, k, dtype, target, path, supports) if pool is None else pool
    return _ranked(pool, m, n, k, dtype, target)


def _ranked(pool: list[Config], m: int, n: int, k: int, dtype: str, target: Target) -> list[tuple[Config, float]]:
    """``pool`` with the predicted seconds of each, fastest first (ordered before the shape's level scales them:
    the level moves no choice); ties keep the pool's order."""
    keys, level = rank_keys(pool, m, n, k, dtype, target, _correction(target.family))
    return [(c, t * level) for t, _, c in sorted(zip(keys, range(len(pool)), pool, strict=True))]


def _correction(family: str) -> Correction:
    """The family's correction, read again when ``calibrate`` writes a new one (keyed by the file's time)."""
    user = user_correction_path(family)
    return _load_correction(family, user.stat().st_mtime_ns if user.is_file() else 0)


@functools.cache
def _load_correction(family: str, stamp: int) -> Correction:
    return load_correction(family)


def select(
    m: int, n: int, k: int, dtype: str, target: Target, path: str, supports: Supports, top: int = 8
) -> Selection:
    """The config for an ``m x n x k`` GEMM on ``target``'s ``path``: the device's measured entry where it has one
    for this shape and the path runs it, else one measured on the same chip (:func:`~ctgraph.target.same_chip`),
    else the ranker's first candidate. A measured entry's reason names its file: the user's autotune cache (which
    a benchmark of the default path should not read) or the shipped entries."""
    ranked = rank(m, n, k, dtype, target, path, supports)
    for device in (target, *same_chip(target)):
        entry = cache.load(device.name).get(m, n, k, dtype)
        if entry is not None and supports(entry.config.tile, dtype, entry.config.layout, path):
            where = "this device" if device is target else "the same chip"
            mine = cache.load_user(device.name).get(m, n, k, dtype) is not None  # else a shipped entry
            why = f"measured on {where} ({device.name}, {'autotune cache' if mine else 'shipped'})"
            return Selection(entry.config, why, tuple(ranked[:top]), "measured")
    how = "analytic model" if _correction(target.family).analytic_only else "ranker"
    return Selection(ranked[0][0], f"{how} ({target.family}, {len(ranked)} candidates)", tuple(ranked[:top]))


def select_schedule(
    m: int,
    n: int,
    k: int,
    dtype: str,
    tile: tuple[int, int, int],
    layout: Layout,
    target: Target,
    transform: str | None = None,
) -> Selection:
    """The schedule (transform, grid, tile order) for a fixed tile and layout, ranked by the model; ``transform``:
    only that transform's grids and tile orders (None: the schedules :func:`~.candidates.offered` to "auto"). An
    empty ``ranked`` where the transform has no candidate here (Stream-K on one K iteration, split-K on more tiles
    than the device holds)."""
    pool = [
        c
        for c in schedules(m, n, k, dtype, tile, layout, target)
        if (c.transform == transform if transform else offered(c, m, n))
    ]
    if not pool:  # e.g. Stream-K on one K iteration: the resident grid, no more workgroups than iterations
        tm, tn = tile_counts(m, n, tile)
        g = min(target.resident(layout.cluster), tm * tn * k_iterations(k, tile))
        return Selection(Config(tile, layout, transform or "dataparallel", g), "no candidate of this transform")
    ranked = _ranked(pool, m, n, k, dtype, target)
    return Selection(ranked[0][0], f"ranker, schedules of {tile_name(tile)} on {layout.name}", tuple(ranked[:8]))
