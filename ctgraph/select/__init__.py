"""Selection: every ``"auto"`` (tile, cluster layout, transform, grid, tile order) resolved in the front end.

From a typed :class:`Target` that the backend reports and from data files, never from a device name alone::

    measured entry for this exact device and shape    (autotune cache, then the shipped entries: cache.py)
    else one measured on the same chip                 (an H100 SXM's entries on an H200: target.same_chip)
    else the ranker's best candidate                   (candidates.py -> model.py: analytic x fitted correction)
    by the objective's time                            (objective.py: the kernel's, or an eager call's)
    with autotune=True: the ranker's top candidates timed on first call, the winner cached (autotune.py)

Selection is deterministic for a given target and data: candidates come in a fixed order and ties keep the first.
The backend is asked only through the registry and only which tiles and layouts its path runs
(``backend.layout_of``); it never imports this package.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from .. import knobs
from ..config import Config, Layout, parse_tile, tile_name
from ..counts import check_counts, element_counts, k_iterations, tile_counts
from ..target import CPU, H100_SXM, H200, KNOWN, Target, known_target, same_chip
from . import cache
from .candidates import TWIN, Supports, candidates, offered, schedules
from .model import Correction, load_correction, rank_keys, user_correction_path
from .objective import by, check_objective, order_key

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
    "measured_choice",
    "objective_or_env",
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
    m: int,
    n: int,
    k: int,
    dtype: str,
    target: Target,
    path: str,
    supports: Supports,
    pool: list[Config] | None = None,
    objective: str | None = None,
) -> list[tuple[Config, float]]:
    """``pool`` (default: every candidate) with the ranker's predicted kernel seconds of each, ordered by
    ``objective`` (None: ``CTGRAPH_OBJECTIVE``, default "kernel"; :mod:`.objective`); ties keep the pool's order."""
    objective = objective_or_env(objective)
    pool = candidates(m, n, k, dtype, target, path, supports, objective=objective) if pool is None else pool
    return _ranked(pool, m, n, k, dtype, target, objective)


def objective_or_env(objective: str | None) -> str:
    """``objective``, checked (:mod:`.objective`); None: ``CTGRAPH_OBJECTIVE`` (:func:`ctgraph.knobs.objective`,
    default "kernel")."""
    return knobs.objective() if objective is None else check_objective(objective)


def _ranked(
    pool: list[Config], m: int, n: int, k: int, dtype: str, target: Target, objective: str
) -> list[tuple[Config, float]]:
    """``pool`` with the predicted kernel seconds of each, first by ``objective`` (checked by the caller); ties keep
    the pool's order. By kernel time they are ordered before the shape's level scales them (the level moves no
    choice); by call time after, since the host's time is in seconds."""
    keys, level = rank_keys(pool, m, n, k, dtype, target, _correction(target.family))
    if objective == "kernel":
        return [(c, t * level) for t, _, c in sorted(zip(keys, range(len(pool)), pool, strict=True))]
    timed = [(c, t * level) for c, t in zip(pool, keys, strict=True)]
    return [timed[i] for _, i in sorted((order_key(c, t, objective), i) for i, (c, t) in enumerate(timed))]


def _correction(family: str) -> Correction:
    """The family's correction, read again when ``calibrate`` writes a new one (keyed by the file's time)."""
    user = user_correction_path(family)
    return _load_correction(family, user.stat().st_mtime_ns if user.is_file() else 0)


@functools.cache
def _load_correction(family: str, stamp: int) -> Correction:
    return load_correction(family)


def select(
    m: int,
    n: int,
    k: int,
    dtype: str,
    target: Target,
    path: str,
    supports: Supports,
    top: int = 8,
    objective: str | None = None,
) -> Selection:
    """The config for an ``m x n x k`` GEMM on ``target``'s ``path``: the device's measured entry where it has one
    for this shape and the path runs it, else one measured on the same chip (:func:`~ctgraph.target.same_chip`),
    else the ranker's first candidate by ``objective`` (None: ``CTGRAPH_OBJECTIVE``; :mod:`.objective`). A measured
    entry's reason names its file: the user's autotune cache (which a benchmark of the default path should not
    read) or the shipped entries; measured entries were timed by kernel time and apply under either objective."""
    objective = objective_or_env(objective)
    check_counts(m, n, k, element_counts(m, n, k))  # NOTE: before the model prices a tile of a GEMM none can index
    ranked = rank(m, n, k, dtype, target, path, supports, objective=objective)
    for device in (target, *same_chip(target)):
        entry = cache.load(device.name).get(m, n, k, dtype)
        if entry is None:
            continue
        chosen = measured_choice(entry, objective)
        if chosen is not None and supports(chosen.tile, dtype, chosen.layout, path):
            where = "this device" if device is target else "the same chip"
            mine = cache.load_user(device.name).get(m, n, k, dtype) is not None  # else a shipped entry
            why = f"measured on {where} ({device.name}, {'autotune cache' if mine else 'shipped'}{by(objective)})"
            return Selection(chosen, why, tuple(ranked[:top]), "measured")
    how = "analytic model" if _correction(target.family).analytic_only else "ranker"
    why = f"{how} ({target.family}, {len(ranked)} candidates{by(objective)})"
    return Selection(ranked[0][0], why, tuple(ranked[:top]))


def measured_choice(entry: cache.Entry, objective: str | None = None) -> Config | None:
    """The config a measured entry gives ``objective`` (None: ``CTGRAPH_OBJECTIVE``), so that one entry serves both
    objectives. By kernel time the one it keeps, the fastest kernel timed, except a config the kernel objective never
    offers: an in-kernel split-K twin (:data:`~.candidates.TWIN`), which only an autotune by call time times; then
    the fastest of its other timed configs, or None (no measured answer: the ranker's). By call time, the first of
    its timed configs by :func:`~.objective.order_key` on their measured seconds (ties: the kept one, then by name)."""
    kernel = objective_or_env(objective) == "kernel"
    if kernel and entry.config.transform != TWIN:
        return entry.config
    timed = [(c, t) for c, t in entry.timed() if math.isfinite(t)]
    if kernel:
        offered = [(t, c.name, c) for c, t in timed if c.transform != TWIN]
        return min(offered)[2] if offered else None
    if not timed:
        return entry.config
    return min(timed, key=lambda ct: (order_key(ct[0], ct[1], "call"), ct[0] != entry.config, ct[0].name))[0]


def select_schedule(
    m: int,
    n: int,
    k: int,
    dtype: str,
    tile: tuple[int, int, int],
    layout: Layout,
    target: Target,
    transform: str | None = None,
    objective: str | None = None,
) -> Selection:
    """The schedule (transform, grid, tile order) for a fixed tile and layout, ranked by the model by ``objective``
    (None: ``CTGRAPH_OBJECTIVE``); ``transform``: only that transform's grids and tile orders (None: the schedules
    :func:`~.candidates.offered` to "auto"). An empty ``ranked`` where the transform has no candidate here
    (Stream-K on one K iteration, split-K on more tiles than the device holds)."""
    objective = objective_or_env(objective)
    pool = [
        c
        for c in schedules(m, n, k, dtype, tile, layout, target, objective)
        if (c.transform == transform if transform else offered(c, m, n))
    ]
    if not pool:  # e.g. Stream-K on one K iteration: the resident grid, no more workgroups than iterations
        tm, tn = tile_counts(m, n, tile)
        g = min(target.resident(layout.cluster), tm * tn * k_iterations(k, tile))
        return Selection(Config(tile, layout, transform or "dataparallel", g), "no candidate of this transform")
    ranked = _ranked(pool, m, n, k, dtype, target, objective)
    return Selection(ranked[0][0], f"ranker, schedules of {tile_name(tile)} on {layout.name}", tuple(ranked[:8]))
