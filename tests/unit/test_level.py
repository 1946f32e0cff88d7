"""The ranker's level: a factor per shape, tied to the analytic model by a reference config and fitted on what the
correction leaves of each shape's mean, that makes its prices seconds and moves no choice."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

import ctgraph.select as selection
from ctgraph.backends import backend
from ctgraph.select import H100_SXM, H200, Config, candidates, rank
from ctgraph.select import cache as entries
from ctgraph.select.fit import fit, pooled, references, spread
from ctgraph.select.model import (
    FEATURES,
    LEVEL_INPUTS,
    Correction,
    analytic,
    features,
    level_inputs,
    load_correction,
    predict,
    predict_many,
    rank_keys,
    ranked_row,
    reference_row,
)

CUDA = backend("cuda")
SHAPES = [(128, 4096, 4096), (5382, 1600, 6400), (24, 5016, 584), (624, 680, 45080), (8192, 8192, 8192)]
TRUE_LEVEL = dict(bias=0.3, log_m=0.05, log_n=-0.04, log_k=0.02, log_footprint_l2=-0.1)


def _psi_dot(v: dict[str, float], reference: list[float]) -> float:
    return sum(v.get(name, 0.0) * x for name, x in zip(LEVEL_INPUTS, level_inputs(reference), strict=True))


def _levelled(correction: Correction) -> Correction:
    return dataclasses.replace(correction, level=tuple(TRUE_LEVEL.get(name, 0.0) for name in LEVEL_INPUTS))


def _log_level(correction: Correction, m: int, n: int, k: int, target) -> float:
    """What the level should be: ``v . psi`` less the reference config's correction (its trees included), the
    reference's bounds joined as the correction joins them."""
    reference = reference_row(m, n, k, "float16", target, correction.bounds_norm)
    return _psi_dot(TRUE_LEVEL, reference) - float(correction.log_factors(np.array([reference]))[0])


@pytest.mark.parametrize("shape", SHAPES)
def test_the_level_moves_no_choice_and_scales_every_price_alike(monkeypatch, shape):
    m, n, k = shape
    flat = dataclasses.replace(load_correction("sm90"), level=(0.0,) * len(LEVEL_INPUTS))
    monkeypatch.setattr(selection, "_correction", lambda family: flat)
    before = rank(m, n, k, "float16", H200, "wgmma", CUDA.supports)
    monkeypatch.setattr(selection, "_correction", lambda family: _levelled(flat))
    after = rank(m, n, k, "float16", H200, "wgmma", CUDA.supports)
    assert [c for c, _ in after] == [c for c, _ in before]
    factor = math.exp(_log_level(flat, m, n, k, H200))
    assert all(t == pytest.approx(s * factor, rel=1e-12) for (_, s), (_, t) in zip(before, after, strict=True))
    keys, level = rank_keys([c for c, _ in before], m, n, k, "float16", H200, _levelled(flat))
    assert level == pytest.approx(factor, rel=1e-12) and keys == [s for _, s in before]
    assert predict_many([], m, n, k, "float16", H200, flat) == []
    assert rank_keys([], m, n, k, "float16", H200, flat)[1] == 1.0  # no level fitted: prices as before


def test_level_inputs_are_the_shapes_alone():
    """Every config of a shape reads the same psi, its reference row's; psi follows the shape and the device's L2."""
    m, n, k = 5382, 1600, 6400
    pool = candidates(m, n, k, "float16", H200, "wgmma", CUDA.supports)[:20]
    psis = {tuple(level_inputs(ranked_row(c, m, n, k, "float16", H200)[1])) for c in pool}
    assert psis == {tuple(level_inputs(reference_row(m, n, k, "float16", H200)))}
    (psi,) = psis
    footprint = math.log((m + n) * k * 2 / H200.l2_bytes)
    assert psi == pytest.approx((1.0, math.log(m), math.log(n), math.log(k), footprint))
    other = level_inputs(reference_row(m, n, k, "float16", H100_SXM))
    assert other[-1] == pytest.approx(math.log((m + n) * k * 2 / H100_SXM.l2_bytes)) and other[:-1] == list(psi[:-1])


def test_a_correction_reads_and_writes_its_level_and_one_without_reads_as_before():
    c = _levelled(load_correction("sm90"))
    assert Correction.from_json(c.to_json()) == c
    body = json.loads(c.to_json())
    assert body["level"] == {name: TRUE_LEVEL.get(name, 0.0) for name in LEVEL_INPUTS}
    del body["level"]  # a correction fitted before the level
    old = Correction.from_json(json.dumps(body))
    assert old.level == (0.0,) * len(LEVEL_INPUTS) and old.weights == c.weights
    cfg = candidates(2048, 2048, 2048, "float16", H100_SXM, "wgmma", CUDA.supports)[0]
    base, row = ranked_row(cfg, 2048, 2048, 2048, "float16", H100_SXM, old.bounds_norm)
    unlevelled = base * math.exp(float(old.log_factors(np.array([row]))[0]))
    assert predict(cfg, 2048, 2048, 2048, "float16", H100_SXM, old) == unlevelled
    assert predict(cfg, 2048, 2048, 2048, "float16", H100_SXM, c) == pytest.approx(
        unlevelled * math.exp(_log_level(c, 2048, 2048, 2048, H100_SXM)), rel=1e-12
    )
    with pytest.raises(ValueError, match="one weight per"):
        Correction("sm90", level=(1.0,))


def test_the_shipped_level_prices_a_shape_past_the_sample_as_the_analytic_model_scales():
    """Tied to the analytic model, the price of the first config of a cube far past the sample (at most 16384 on a
    side) grows with its FLOPs and stays above them at the device's peak."""
    prices = {}
    for side in (4096, 8192, 16384, 32768, 65536):
        first, seconds = rank(side, side, side, "float16", H200, "wgmma", CUDA.supports)[0]
        prices[side] = seconds
        assert seconds > 2 * side**3 / H200.tensor_flops, (side, first.name)
    assert all(6 < prices[2 * s] / prices[s] < 16 for s in (4096, 8192, 16384, 32768))  # 8x the work


def _table(shapes: list[tuple[int, int, int]], level: dict[str, float]) -> entries.Table:
    """An H100's tune table timed as the analytic model times a known correction (swap 0.4, Stream-K 0.5) and
    ``level``'s factor on each shape's psi."""
    true = np.zeros(len(FEATURES))
    true[FEATURES.index("swap")], true[FEATURES.index("streamk")] = 0.4, 0.5
    out = {}
    for m, n, k in shapes:
        shape_level = _psi_dot(level, reference_row(m, n, k, "float16", H100_SXM))
        secs = {}
        for c in candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)[:8]:
            phi = features(c, m, n, k, "float16", H100_SXM, analytic(c, m, n, k, "float16", H100_SXM))
            secs[c.name] = analytic(c, m, n, k, "float16", H100_SXM) * math.exp(float(np.dot(true, phi)) + shape_level)
        best = min(secs, key=secs.__getitem__)
        out[entries.key(m, n, k, "float16")] = entries.Entry(
            Config.parse(best), tuple(sorted(secs.items())), kernels="test"
        )
    return entries.Table(H100_SXM.name, out)


def _draw(count: int, seed: int) -> list[tuple[int, int, int]]:
    r = np.random.default_rng(seed)

    def side() -> int:
        return int(8 * round(np.exp(r.uniform(np.log(64), np.log(6000))) / 8))

    return [(side(), side(), side()) for _ in range(count)]


def test_a_fit_prices_each_shape_in_seconds():
    """Timings with a shape-level factor the fixed-effect fit cannot see: the level takes it up, and the ranked-first
    config's predicted seconds come within a few percent of its measured ones on the validation shapes (what is
    left is the regularised linear part's error within a shape); without the level they are off by the factor."""
    pytest.importorskip("lightgbm")  # fit's trees
    train, validation = _table(_draw(40, 1), TRUE_LEVEL), _table(_draw(15, 2), TRUE_LEVEL)
    f = fit(train, validation, H100_SXM, kernels="test")
    assert f.validation_regret == pytest.approx(1.0, abs=1e-6)
    p10, p90 = f.validation_spread
    assert 0.95 < p10 <= p90 < 1.05, f.validation_spread
    flat = dataclasses.replace(f.correction, level=(0.0,) * len(LEVEL_INPUTS))
    p10, p90 = spread(pooled(validation, H100_SXM), flat, references(validation, H100_SXM))
    assert p10 < 0.85 and p90 > 1.1  # the shapes' factors left in
    assert spread([], flat, {}) == (pytest.approx(math.nan, nan_ok=True),) * 2
