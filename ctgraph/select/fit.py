"""Fit the ranker's correction on measured samples, choose its regularisation on validation, check it is current.

Samples are tune tables (:mod:`ctgraph.tune`): per shape, the seconds of several configs. Each timed config is a row
``(phi, y)`` with ``phi`` its :func:`~ctgraph.select.model.features` and ``y = log(measured / analytic)``. What the
ranker must get right is the order of one shape's configs, not how hard the shape is, so the fit is ridge regression
on the deviations from each shape's mean (a fixed effect per shape)::

    X~ = X - mean_shape(X),  y~ = y - mean_shape(y);   w = (X~^T X~ + lambda I)^-1 X~^T y~;   w_0 = mean(y - X w)

(on the H200 sample this took the validation regret from 1.051 for a plain least-squares fit to 1.039). ``w`` is
fitted on the train table for each ``lambda`` of :data:`LAMBDAS` and scored on the validation table by its
**regret**: per shape, the measured seconds of the config it ranks first among those timed over the least seconds
timed. Timing noise leaves a floor of a few percent that says nothing about the ranking, so the kept ``lambda`` is
the largest whose mean log regret is within one standard error of the least (the one-standard-error rule of
cross-validation): the most regularised fit that ranks as well as the best within noise. The fit is stored with
:func:`kernel_hash` of the kernels it timed, so a change to the kernels' sources says that the fit is stale
(:func:`is_current`). Each shape of a tune table records the hash of the code that timed it, and the fit refuses
shapes timed on other kernels than the hash it stores, or with none recorded (``tune --retime`` times them again).

**Trees.** The features are few and mostly ratios; a linear sum misses how their effects bend with the shape
(which layout streams B best at m near 128, say). A second stage fits gradient-boosted regression trees (LightGBM,
:data:`TREE_PARAMS`) to what the linear part leaves, each shape's mean again taken out, over the features and the
shape (:data:`~ctgraph.select.model.TREE_INPUTS`)::

    log(measured / analytic) = w . phi + sum over trees of value[leaf(inputs)]

Their count is chosen from :data:`TREE_COUNTS` by the validation regret, as stored (leaf values rounded), 0 (the
linear part alone) included, so a sample too small for trees gets none. The trees are stored as data beside
``w`` (:mod:`ctgraph.select.trees`); only the fit needs LightGBM.

**Level.** Taking each shape's mean out leaves the level of a shape's predictions free, and the trees' leaves move
it with the shape. A last ridge, on the shapes alone, fits it (:func:`_level`): per train shape the mean of what
the correction leaves, plus the correction of the shape's reference config (:func:`~.model.reference_row`),
``r = mean_shape(y - w . phi - trees(x)) + (w . phi + trees(x))_reference``, on ``psi(shape)``
(:data:`~ctgraph.select.model.LEVEL_INPUTS`; the bias not penalised), its lambda of :data:`LAMBDAS` the least
mean square of ``r`` on the validation shapes. It is the same for every config of a shape, so it moves no
choice; it makes the predicted seconds seconds (:attr:`Fit.validation_spread`).

Several devices of one family (an H100 and an H200) fit one correction together (:func:`pooled`): each table's rows
get the analytic seconds and features of its own device, and its shapes are keyed by device, so the fixed effect and
the regret stay per device and shape.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from ..config import Config, Layout
from ..target import Target, known_target
from .cache import Table, parse_key
from .model import FEATURES, LEVEL_INPUTS, TREE_INPUTS, Correction, level_inputs, ranked_row, reference_row
from .trees import Trees, from_lightgbm

__all__ = [
    "LAMBDAS",
    "REFERENCE_CONFIGS",
    "TREE_COUNTS",
    "TREE_PARAMS",
    "Fit",
    "fit",
    "is_current",
    "kernel_hash",
    "pooled",
    "predictions",
    "references",
    "regret",
    "samples",
    "spread",
    "table_predictions",
    "table_regret",
    "timed_on",
]

LAMBDAS = (0.0, 0.1, 1.0, 10.0, 100.0)
TREE_COUNTS = (0, 100, 200, 400)  # the trees' counts the validation regret chooses from (0: linear alone)
# LightGBM's settings for the trees: shallow (15 leaves), slow (rate 0.03), and a leaf needs 50 timings; each tree
# sees a seeded 80% of the rows and of the inputs; one thread and `deterministic`, so a refit gives the same trees
TREE_PARAMS = {
    "objective": "regression",
    "num_leaves": 15,
    "learning_rate": 0.03,
    "min_data_in_leaf": 50,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "feature_fraction": 0.8,
    "seed": 0,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 1,
    "verbose": -1,
}
# the kernels whose sources key a fit: one per transform and layout family (the generator changes them all alike)
REFERENCE_CONFIGS = (
    Config((128, 256, 64), Layout(1, "b", False), "dataparallel", 132),
    Config((256, 256, 64), Layout(2, "b", False), "streamk2tile", 66, 8),
    Config((128, 128, 64), Layout(1, "b", False), "streamk", 132),
    Config((128, 128, 64), Layout(1, "b", False), "streamk_hybrid", 132, 1, 3),
    Config((64, 128, 64), Layout(1, "b", False), "splitk_reduce", 128, 1, None, 4),
    Config((176, 256, 64), Layout(4, "a", True), "dataparallel", 30),
    Config((336, 256, 64), Layout(8, "ab", True), "dataparallel", 15),
)
REFERENCE_SHAPE = (512, 512, 8192)


def kernel_hash(configs: tuple[Config, ...] = REFERENCE_CONFIGS) -> str:
    """BLAKE2b of the CUDA sources the configs generate (no GPU needed): the kernels a fit was timed on."""
    from ..api import compile_config

    h = hashlib.blake2b(digest_size=12)
    for c in configs:
        h.update(compile_config(c, *REFERENCE_SHAPE, "float16", "cuda", build=False, mainloop="wgmma").source.encode())
    return h.hexdigest()


def timed_on(tables: Table | Sequence[Table]) -> dict[str, int]:
    """How many shapes of ``tables`` each kernel hash timed (:attr:`~.cache.Entry.kernels`; "": not recorded)."""
    each = [tables] if isinstance(tables, Table) else tables
    return dict(Counter(e.kernels for t in each for e in t.entries.values()))


def _timed_on_these(tables: Sequence[Table | Sequence[Table]], kernels: str) -> None:
    """Raise where a shape of ``tables`` was not timed on ``kernels``: a fit keyed by a hash must have measured the
    kernels that hash names. A shape with no hash recorded (timed before 2026-11-28) is refused too: the kernels
    have changed since (0c28b21), so whatever timed it was not these."""
    counts: Counter[str] = Counter()
    for t in tables:
        counts.update(timed_on(t))
    other = {h: c for h, c in counts.items() if h != kernels}
    if other:
        ordered = sorted(other.items(), key=lambda hc: (hc[0] == "", hc[0]))  # the unrecorded last
        which = [f"{c} on {h}" if h else f"{c} with none recorded" for h, c in ordered]
        raise ValueError(
            f"fit: {sum(other.values())} of the tables' {counts.total()} shapes were timed on other kernels than "
            f"this code generates ({kernels}): {', '.join(which)}; time them again with "
            "python -m ctgraph tune TABLE.json --retime --out NEW.json"
        )


def is_current(correction: Correction) -> bool:
    """Whether ``correction`` was fitted on the kernels this code generates (an unfitted one always is)."""
    return not any(correction.weights) or correction.kernels == kernel_hash()


def samples(
    table: Table, target: Target, norm: float = math.inf
) -> list[tuple[str, Config, list[float], float, float]]:
    """``(shape key, config, inputs, analytic seconds, measured seconds)`` of every finite timing in ``table`` whose
    label is a config (entries converted from the old table are labelled by policy and skipped); ``inputs`` are its
    :func:`~ctgraph.select.model.tree_inputs`, the features first; ``norm``: how the analytic model joins a K step's
    bounds (:attr:`~.model.Correction.bounds_norm`)."""
    out = []
    for key_, entry in sorted(table.entries.items()):
        m, n, k, dtype = parse_key(key_)
        for c, secs in entry.timed():
            if not math.isfinite(secs) or secs <= 0:
                continue
            base, inputs = ranked_row(c, m, n, k, dtype, target, norm)
            out.append((key_, c, inputs, base, secs))
    return out


def _solve(rows: list, lam: float) -> np.ndarray:
    """Ridge on the within-shape deviations (each shape's mean row subtracted from its rows): only the ranking of a
    shape's configs counts, not how hard the shape is; the bias is then the mean residual."""
    X = np.array([r[2][: len(FEATURES)] for r in rows])
    y = np.array([math.log(r[4] / r[3]) for r in rows])
    Xd, yd = X.copy(), y.copy()
    for idx in _groups(rows).values():
        Xd[idx] -= X[idx].mean(axis=0)
        yd[idx] -= y[idx].mean()
    Xd[:, 0] = 0.0
    eye = np.eye(X.shape[1])
    w = np.linalg.solve(Xd.T @ Xd + (lam + 1e-6) * eye, Xd.T @ yd)
    w[0] = float(np.mean(y - X[:, 1:] @ w[1:]))
    return w


def _groups(rows: list) -> dict[str, list[int]]:
    """The indices of each shape's rows."""
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        groups.setdefault(r[0], []).append(i)
    return groups


def _logs(rows: list, correction: Correction) -> tuple[np.ndarray, np.ndarray]:
    """Of each row, ``log(analytic x correction)``, what the ranker orders a shape's configs by (as it evaluates
    them, :meth:`~ctgraph.select.model.Correction.log_factors`), and ``log(measured / analytic) - log(correction)``,
    what the correction leaves (the level left out); the correction evaluated once for both."""
    factors = correction.log_factors(np.array([r[2] for r in rows]))
    return np.log([r[3] for r in rows]) + factors, np.array([math.log(r[4] / r[3]) for r in rows]) - factors


def _log_residuals(rows: list, weights: np.ndarray) -> np.ndarray:
    """``log(measured / analytic) - w . phi`` of each row: what the linear part leaves to the trees."""
    return _logs(rows, Correction("", tuple(float(w) for w in weights)))[1]


def regret(rows: list, weights: np.ndarray, trees: Trees | None = None) -> list[float]:
    """Per shape: measured seconds of the config ranked first (analytic x correction: ``weights`` and ``trees``)
    over the least measured."""
    log_t, _ = _logs(rows, Correction("", tuple(float(w) for w in weights), trees=trees))
    return [rows[idx[int(np.argmin(log_t[idx]))]][4] / min(rows[i][4] for i in idx) for idx in _groups(rows).values()]


def _boost(rows_t: list, rows_v: list, weights: np.ndarray) -> tuple[Trees | None, float]:
    """The trees on what the linear part leaves (each shape's mean taken out, like the ridge's), fitted on the train
    rows; their count is chosen from :data:`TREE_COUNTS` by the validation regret (the least; ties: fewer trees).
    Returns the trees (None for 0) and their validation regret."""
    from ..deps import require

    lightgbm = require("lightgbm", "fitting the ranker's trees")
    y = _log_residuals(rows_t, weights)
    for idx in _groups(rows_t).values():
        y[idx] -= y[idx].mean()
    data = lightgbm.Dataset(np.array([r[2] for r in rows_t]), y, feature_name=list(TREE_INPUTS), free_raw_data=False)
    model = lightgbm.train(TREE_PARAMS, data, num_boost_round=max(TREE_COUNTS))
    scored = []
    for count in TREE_COUNTS:  # each count scored as it would be stored (leaves rounded), read by the ranker's code
        trees = from_lightgbm(model.dump_model(num_iteration=count), TREE_INPUTS) if count else None
        scored.append((_geomean(regret(rows_v, weights, trees)), count, trees))
    loss, _, trees = min(scored, key=lambda s: s[:2])
    return trees, loss


def _level(rows_t: list, rows_v: list, correction: Correction, references: dict[str, list[float]]) -> tuple[float, ...]:
    """The level's weights ``v`` (module): ridge of each train shape's mean log residual under ``correction``, its
    reference config's correction added back, on its ``psi``; the lambda of :data:`LAMBDAS` with the least mean
    square residual on the validation shapes (ties: the first), rounded as stored. ``references``: each shape's
    :func:`~.model.reference_row` by its key in the rows."""

    def shapes(rows: list) -> tuple[np.ndarray, np.ndarray]:
        """Each shape's psi and its level's log."""
        (_, left), groups = _logs(rows, correction), _groups(rows)
        refs = [references[key] for key in groups]
        back = correction.log_factors(np.array(refs))
        y = [left[idx].mean() + b for idx, b in zip(groups.values(), back, strict=True)]
        return np.array([level_inputs(r) for r in refs]), np.array(y)

    (X, y), (Xv, yv) = shapes(rows_t), shapes(rows_v)
    penalty = np.diag([0.0] + [1.0] * (len(LEVEL_INPUTS) - 1))  # the bias is not shrunk
    jitter = 1e-6 * np.eye(len(LEVEL_INPUTS))
    fits = [np.linalg.solve(X.T @ X + lam * penalty + jitter, X.T @ y) for lam in LAMBDAS]
    v = min(fits, key=lambda v: float(np.mean((yv - Xv @ v) ** 2)))
    return tuple(round(float(x), 6) + 0.0 for x in v)


def spread(rows: list, correction: Correction, references: dict[str, list[float]]) -> tuple[float, float]:
    """The p10 and p90 over shapes of measured / predicted seconds (the level included) of the config
    ``correction`` ranks first; ``references`` as for :func:`_level`."""
    ranked, left = _logs(rows, correction)
    logs = []
    for key, idx in _groups(rows).items():
        first = idx[int(np.argmin(ranked[idx]))]
        logs.append(left[first] - correction.log_level(references[key]))
    if not logs:
        return math.nan, math.nan
    p10, p90 = np.percentile(logs, [10, 90])
    return math.exp(p10), math.exp(p90)


def references(tables: Table | Sequence[Table], target: Target, norm: float = math.inf) -> dict[str, list[float]]:
    """Each shape's :func:`~.model.reference_row` on the target it is read on, keyed as :func:`pooled` keys its
    rows."""
    read = _read_on(tables, target)
    return {
        _pooled_key(t, key, len(read) > 1): reference_row(*parse_key(key), own, norm)
        for t, own in read
        for key in t.entries
    }


def predictions(
    tables: Table | Sequence[Table], target: Target, correction: Correction
) -> list[tuple[str, Config, float, float, bool]]:
    """``correction`` on ``tables`` (read as :func:`pooled` reads them, with the correction's bound norm): per timed
    config, ``(shape key, config, predicted seconds, measured seconds, ranked first)``; predicted is the analytic
    model times the correction and the shape's level (:meth:`~.model.Correction.log_level`), what the ranker prices
    a config at, and ``ranked first`` marks the config it would choose among those timed (what :func:`regret`
    scores)."""
    rows = pooled(tables, target, correction.bounds_norm)
    refs = references(tables, target, correction.bounds_norm)
    ranked, _ = _logs(rows, correction)
    first = {idx[int(np.argmin(ranked[idx]))] for idx in _groups(rows).values()}
    levels = {key: correction.log_level(ref) for key, ref in refs.items()}
    return [(r[0], r[1], math.exp(ranked[i] + levels[r[0]]), r[4], i in first) for i, r in enumerate(rows)]


def table_predictions(tables: Sequence[Table], correction: Correction) -> list[tuple[str, Config, float, float, bool]]:
    """:func:`predictions` of each of ``tables`` on its own device's known target, as :func:`table_regret` scores
    them: a shape timed in two tables stays two shapes (keys ``"<i>:<key>"``, ``i`` the table's place)."""
    return [
        (f"{i}:{key}", config, predicted, measured, first)
        for i, table in enumerate(tables)
        for key, config, predicted, measured, first in predictions(table, known_target(table.device), correction)
    ]


def table_regret(table: Table, correction: Correction) -> tuple[int, float, float, int]:
    """``correction`` on one table, read on its device's known target: the shapes, the regret (geomean) of its
    linear part alone and of the whole, and how many shapes the whole ranks above 1.10."""
    rows = samples(table, known_target(table.device), correction.bounds_norm)
    weights = np.array(correction.weights)
    whole = regret(rows, weights, correction.trees)
    return len(whole), _geomean(regret(rows, weights)), _geomean(whole), sum(r > 1.10 for r in whole)


@dataclass(frozen=True)
class Fit:
    correction: Correction
    lam: float
    train_regret: float
    validation_regret: float
    validation_regret_analytic: float
    rows: int
    trees: int = 0  # the trees' count (0: the linear part alone)
    validation_regret_linear: float = math.nan  # the linear part's alone
    validation_spread: tuple[float, float] = (math.nan, math.nan)  # measured / predicted, p10 and p90 (:func:`spread`)


def _read_on(tables: Table | Sequence[Table], target: Target) -> list[tuple[Table, Target]]:
    """Each table with the target it is read on: one table on ``target``; several each on the known target of its
    own device (:func:`~ctgraph.target.known_target`: its SMs, L2 and bandwidth), of ``target``'s family."""
    tables = [tables] if isinstance(tables, Table) else list(tables)
    if len(tables) == 1:
        return [(tables[0], target)]
    out = []
    for table in tables:
        own = target if table.device == target.name else known_target(table.device)
        if own.family != target.family:
            raise ValueError(
                f"fit: the table of {table.device!r} is of family {own.family!r}, not {target.family!r}: a correction "
                "is fitted per family"
            )
        out.append((table, own))
    return out


def _geomean(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else math.nan


def pooled(
    tables: Table | Sequence[Table], target: Target, norm: float = math.inf
) -> list[tuple[str, Config, list[float], float, float]]:
    """The :func:`samples` of one table on ``target``, or of several tables of ``target``'s family, each on its own
    device's target (:func:`_read_on`), its shapes keyed by device as well, so that a shape timed on two devices is
    two shapes to rank."""
    read = _read_on(tables, target)
    return [
        (_pooled_key(t, key, len(read) > 1), c, phi, base, secs)
        for t, own in read
        for key, c, phi, base, secs in samples(t, own, norm)
    ]


def _pooled_key(table: Table, key: str, several: bool) -> str:
    """A shape's key among several tables' rows: its device's name first (one table: the key)."""
    return f"{table.device}:{key}" if several else key


def fit(
    train: Table | Sequence[Table],
    validation: Table | Sequence[Table],
    target: Target,
    kernels: str | None = None,
    bounds_norm: float = math.inf,
) -> Fit:
    """The correction of ``target``'s family: ridge on ``train``, its lambda chosen on ``validation`` (module); each
    may be several tables, of devices of that family (:func:`pooled`). ``bounds_norm``: how the analytic model it
    corrects joins a K step's bounds (:attr:`~.model.Correction.bounds_norm`; the largest by default)."""
    hashed = kernel_hash() if kernels is None else kernels
    Correction(target.family, bounds_norm=bounds_norm)  # a bad norm is refused before the rows are read
    _timed_on_these([train, validation], hashed)
    rows_t, rows_v = pooled(train, target, bounds_norm), pooled(validation, target, bounds_norm)
    if not rows_t or not rows_v:
        raise ValueError("fit needs timed configs in both the train and the validation table")
    zero = np.zeros(len(FEATURES))
    scored = []
    for lam in LAMBDAS:
        w = _solve(rows_t, lam)
        logs = np.log(regret(rows_v, w))
        scored.append(
            (float(logs.mean()), float(logs.std(ddof=1) / math.sqrt(len(logs))) if len(logs) > 1 else 0.0, lam, w)
        )
    least, se = min((s[0], s[1]) for s in scored)
    mean, _, lam, w = max((s for s in scored if s[0] <= least + se + 1e-12), key=lambda s: s[2])
    w = np.array([round(float(x), 6) + 0.0 for x in w])  # as stored; NOTE: + 0.0 turns -0.0 into 0.0
    trees, loss = _boost(rows_t, rows_v, w)
    meta = (
        ("lambda", str(lam)),
        ("train_rows", str(len(rows_t))),
        ("validation_rows", str(len(rows_v))),
        ("device", ", ".join(dict.fromkeys(own.name for t in (train, validation) for _, own in _read_on(t, target)))),
        ("trees", str(len(trees) if trees else 0)),
    )
    weights = tuple(float(x) for x in w)
    correction = Correction(target.family, weights, hashed, FEATURES, meta, trees, bounds_norm=bounds_norm)
    refs = references(train, target, bounds_norm) | references(validation, target, bounds_norm)
    correction = replace(correction, level=_level(rows_t, rows_v, correction, refs))
    return Fit(
        correction,
        lam,
        _geomean(regret(rows_t, w, trees)),
        loss,
        _geomean(regret(rows_v, zero)),
        len(rows_t),
        len(trees) if trees else 0,
        math.exp(mean),
        spread(rows_v, correction, refs),
    )
