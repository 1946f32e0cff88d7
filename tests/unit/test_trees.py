"""The ranker's trees: read from LightGBM exactly, stored as data, evaluated alike in any batch, fitted on what the
linear correction leaves and kept only where they lower the validation regret."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ctgraph.backends import backend
from ctgraph.select import H100_SXM, Config, Layout, candidates
from ctgraph.select import cache as entries
from ctgraph.select.fit import TREE_PARAMS, fit, pooled, regret
from ctgraph.select.model import (
    FEATURES,
    TREE_INPUTS,
    Correction,
    analytic,
    features,
    predict,
    predict_many,
    ranked_row,
)
from ctgraph.select.trees import Trees, from_lightgbm

CUDA = backend("cuda")
# the fit's library (the dev and fit extras); the GPU machine, which runs only the gpu-marked tests, goes without it
lightgbm = pytest.importorskip("lightgbm")


def _booster(rows: np.ndarray, y: np.ndarray, rounds: int = 30) -> lightgbm.Booster:
    params = TREE_PARAMS | {"min_data_in_leaf": 5}
    return lightgbm.train(params, lightgbm.Dataset(rows, y), num_boost_round=rounds)


def test_trees_read_from_lightgbm_predict_as_it_does():
    rng = np.random.default_rng(0)
    rows = rng.normal(size=(400, 5))
    y = np.sin(3 * rows[:, 0]) + (rows[:, 1] > 0.3) * rows[:, 2] + 0.1 * rng.normal(size=400)
    model = _booster(rows, y)
    trees = from_lightgbm(model.dump_model(), [f"x{i}" for i in range(5)], digits=15)
    assert len(trees) == 30
    fresh = rng.normal(size=(300, 5))
    np.testing.assert_allclose(trees.predict(fresh), model.predict(fresh), rtol=0, atol=1e-9)
    np.testing.assert_allclose(trees.predict(rows), model.predict(rows), rtol=0, atol=1e-9)
    # the leaves as stored (8 decimals) move a prediction by at most half a unit of the 8th decimal per tree
    stored = from_lightgbm(model.dump_model(), [f"x{i}" for i in range(5)])
    assert np.max(np.abs(stored.predict(fresh) - model.predict(fresh))) <= 30 * 0.5e-8 + 1e-12


def test_trees_predict_a_row_the_same_alone_or_in_any_batch():
    rng = np.random.default_rng(1)
    rows = rng.normal(size=(200, 3))
    trees = from_lightgbm(_booster(rows, rows[:, 0] * rows[:, 1]).dump_model(), ["a", "b", "c"])
    batch = trees.predict(rows)
    assert all(trees.predict(rows[i : i + 1])[0] == batch[i] for i in range(len(rows)))  # bit-identical
    assert trees.predict(rows[::-1])[::-1].tolist() == batch.tolist()


def test_a_tree_of_one_leaf_and_an_empty_ensemble():
    one = Trees(("a",), ((),), ((),), ((),), ((),), ((0.25,),))
    assert one.predict(np.zeros((3, 1))).tolist() == [0.25] * 3
    assert Trees(("a",), (), (), (), (), ()).predict(np.zeros((2, 1))).tolist() == [0.0, 0.0]
    # a root split: x <= 1 to leaf 0, else leaf 1
    stump = Trees(("a",), ((0,),), ((1.0,),), ((-1,),), ((-2,),), ((-1.0, 2.0),))
    assert stump.predict(np.array([[0.5], [1.0], [1.5]])).tolist() == [-1.0, -1.0, 2.0]


def test_malformed_trees_and_rows_are_refused_by_name():
    with pytest.raises(ValueError, match="one threshold and two children per split"):
        Trees(("a",), ((0,),), ((1.0,),), ((-1,),), ((-2,),), ((1.0,),))
    with pytest.raises(ValueError, match="node 0 of tree 0 names an input or a child"):
        Trees(("a",), ((3,),), ((1.0,),), ((-1,),), ((-2,),), ((1.0, 2.0),))
    with pytest.raises(ValueError, match="node 0 of tree 0 names an input or a child"):
        Trees(("a",), ((0,),), ((1.0,),), ((-1,),), ((-5,),), ((1.0, 2.0),))
    with pytest.raises(ValueError, match="one entry per tree"):
        Trees(("a",), ((0,),), (), ((-1,),), ((-2,),), ((1.0, 2.0),))
    stump = Trees(("a",), ((0,),), ((1.0,),), ((-1,),), ((-2,),), ((-1.0, 2.0),))
    with pytest.raises(ValueError, match="rows must have 1 columns"):
        stump.predict(np.zeros((2, 2)))


def _stump_over(name: str, threshold: float, low: float, high: float) -> Trees:
    return Trees(TREE_INPUTS, ((TREE_INPUTS.index(name),),), ((threshold,),), ((-1,),), ((-2,),), ((low, high),))


def test_a_correction_with_trees_round_trips_and_adds_them_to_the_linear_part():
    weights = tuple(0.01 * i for i in range(len(FEATURES)))
    trees = _stump_over("log_m", math.log(1000), 0.3, -0.2)
    c = Correction("sm90", weights, "abc", FEATURES, (("trees", "1"),), trees)
    text = c.to_json()
    assert Correction.from_json(text) == c and Correction.from_json(text).to_json() == text
    assert text.count("\n") < 100  # the trees on one line
    cfg = Config((128, 128, 64), Layout(), "dataparallel", 132)
    for m, extra in ((512, 0.3), (4096, -0.2)):
        base = analytic(cfg, m, 2048, 2048, "float16", H100_SXM)
        phi = features(cfg, m, 2048, 2048, "float16", H100_SXM, base)
        want = base * math.exp(float(np.dot(weights, phi)) + extra)
        assert predict(cfg, m, 2048, 2048, "float16", H100_SXM, c) == pytest.approx(want, rel=1e-12)
    assert not c.analytic_only and Correction("sm90").analytic_only
    assert not Correction("sm90", trees=trees).analytic_only
    with pytest.raises(ValueError, match=r"trees read inputs this version does not compute \(a\)"):
        Correction("sm90", trees=Trees(("a",), ((),), ((),), ((),), ((),), ((0.0,),)))
    # a file of another version's trees still ranks, with its linear part, and says so
    stale = text.replace('"inputs":["bias"', '"inputs":["old_bias"')
    assert stale != text
    with pytest.warns(UserWarning, match=r"read inputs this version does not compute \(old_bias\)"):
        read = Correction.from_json(stale)
    assert read.trees is None and read.weights == c.weights


def test_trees_read_their_inputs_by_name():
    """Trees fitted before an input was added (fewer inputs, in another order) rank as the same trees over every
    input: a new input keeps an older fit's trees, which never split on it."""
    rng = np.random.default_rng(2)
    names = ("log_n", "swap", "log_m", "padding")
    own = rng.normal(size=(300, len(names)))
    older = from_lightgbm(_booster(own, own[:, 0] * own[:, 2] - own[:, 3]).dump_model(), names)
    widen = [TREE_INPUTS.index(name) for name in names]
    remapped = tuple(tuple(widen[f] for f in feature) for feature in older.feature)
    full = Trees(TREE_INPUTS, remapped, older.threshold, older.left, older.right, older.value)
    rows = rng.normal(size=(50, len(TREE_INPUTS)))
    weights = tuple(0.02 * i for i in range(len(FEATURES)))
    by_name, by_index = Correction("sm90", weights, trees=older), Correction("sm90", weights, trees=full)
    assert by_name.log_factors(rows).tolist() == by_index.log_factors(rows).tolist()
    assert Correction.from_json(by_name.to_json()) == by_name  # read back as stored, its own inputs, no warning
    assert older.predict(rows[:, widen]).tolist() == full.predict(rows).tolist()


def test_the_shipped_ranker_ranks_a_pool_as_it_predicts_each_config():
    from ctgraph.select import _correction

    correction = _correction("sm90")
    assert correction.trees is not None and set(correction.trees.inputs) <= set(TREE_INPUTS)
    pool = candidates(144, 4864, 6928, "float16", H100_SXM, "wgmma", CUDA.supports)
    batch = predict_many(pool, 144, 4864, 6928, "float16", H100_SXM, correction)
    assert batch == [predict(c, 144, 4864, 6928, "float16", H100_SXM, correction) for c in pool]


def _synthetic(count: int, seed: int, truth) -> entries.Table:
    """A tune table whose seconds are the analytic model's times ``exp(truth(inputs))``: per shape up to 5 swapped
    and 5 unswapped configs of its candidates, drawn at random (so the swap's cost shows however many tiles of
    either kind the candidates hold)."""
    r = np.random.default_rng(seed)
    out = {}
    for _ in range(count):
        m, n, k = (int(8 * round(np.exp(r.uniform(np.log(64), np.log(6000))) / 8)) for _ in range(3))
        pool = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)
        secs = {}
        kinds = ([c for c in pool if c.layout.swap], [c for c in pool if not c.layout.swap])
        for c in (kind[i] for kind in kinds for i in r.choice(len(kind), size=min(5, len(kind)), replace=False)):
            base, row = ranked_row(c, m, n, k, "float16", H100_SXM)
            secs[c] = base * math.exp(truth(dict(zip(TREE_INPUTS, row, strict=True))))
        best = min(secs, key=secs.__getitem__)
        out[entries.key(m, n, k, "float16")] = entries.Entry(
            best, tuple(sorted((c.name, t) for c, t in secs.items())), kernels="test"
        )
    return entries.Table(H100_SXM.name, out)


def test_fit_adds_trees_where_the_linear_part_cannot_rank_and_none_where_it_can():
    # an interaction no feature holds: swapped configs cost 40% more where m is small and K long
    def bent(x):
        return 0.4 * x["swap"] * (x["log_m"] < math.log(400)) * (x["log_k"] > math.log(1500))

    # 120 and 60 shapes: at half as many, whether the linear part happens to rank the drawn configs turns on the seed
    train, validation = _synthetic(120, 1, bent), _synthetic(60, 2, bent)
    f = fit(train, validation, H100_SXM, kernels="test")
    assert f.trees > 0 and f.correction.trees is not None and len(f.correction.trees) == f.trees
    assert f.validation_regret < f.validation_regret_linear
    assert dict(f.correction.meta)["trees"] == str(f.trees)
    rows = pooled(validation, H100_SXM)
    got = regret(rows, np.array(f.correction.weights), f.correction.trees)
    assert math.exp(np.mean(np.log(got))) == pytest.approx(f.validation_regret)
    again = fit(train, validation, H100_SXM, kernels="test")
    assert again.correction.to_json() == f.correction.to_json()  # deterministic, byte for byte

    def linear(x):
        return 0.3 * x["swap"] + 0.5 * x["padding"]

    plain = fit(_synthetic(20, 3, linear), _synthetic(10, 4, linear), H100_SXM, kernels="test")
    assert plain.validation_regret == pytest.approx(1.0, abs=1e-6)
    assert plain.trees == 0 and plain.correction.trees is None  # ties keep fewer trees: none


@pytest.mark.parametrize(
    ("m", "n", "k", "streams"),
    [
        (4096, 4096, 4096, True),
        (1024, 1024, 2048, False),
        (128, 14336, 8192, True),
        (16, 768, 768, False),
        (8192, 28672, 8192, True),
    ],
)
def test_tree_inputs_say_which_bound_binds(m, n, k, streams):
    """The five bounds of a K iteration as shares of the largest (log, floored), and whether A and B outgrow the
    L2's resident share: the same terms the analytic model takes the largest of."""
    from ctgraph.select.model import L2_RESIDENT, TERM_FLOOR

    pool = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)
    for c in pool[:: max(1, len(pool) // 8)]:
        x = dict(zip(TREE_INPUTS, ranked_row(c, m, n, k, "float16", H100_SXM)[1], strict=True))
        shares = [x[f"log_{t}_share"] for t in ("math", "l2", "hbm", "sm", "ring")]
        assert max(shares) == 0.0 and min(shares) >= math.log(TERM_FLOOR)
        assert x["streams_hbm"] == float(streams)
        assert streams == ((m + n) * k * 2 > L2_RESIDENT * H100_SXM.l2_bytes)
        if not streams:
            assert x["log_hbm_share"] == math.log(TERM_FLOOR)  # A and B stay in the L2: no HBM bound
        assert x["log_m"] == math.log(m) and x["log_footprint_l2"] == pytest.approx(
            math.log((m + n) * k * 2 / H100_SXM.l2_bytes)
        )
