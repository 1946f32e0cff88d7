"""Stream-K++'s hybrid family: data-parallel plus 1 to 6 waves of Stream-K work (``streamk_hybrid``)."""

from __future__ import annotations

import numpy as np
import pytest

import ctgraph
from ctgraph.params import bindings
from ctgraph.passes import split_sk_dp


def sizes(kern):
    return {s.name: v for s, v in bindings(kern.graph).items()}


@pytest.mark.parametrize(("batches", "n_sk"), [(1, 24 * 512), (2, 28672), (3, 45056), (4, 61440), (6, 61440)])
def test_seed_split(batches, n_sk):
    """Seed example (120 tiles, 512 k-iterations, 32 WGs): SK gets T % g + (b - 1) * g tiles, clamped."""
    g = ctgraph.gemm(160, 192, 4096, macro_tile=(16, 16, 8))
    kern = ctgraph.compile(g, transform="streamk_hybrid", workgroups=32, target="cpu", sk_batches=batches)
    s = sizes(kern)
    assert (s["numTilesSK"], s["numTilesDP"]) == (n_sk, 61440 - n_sk)


def test_two_batches_is_streamk2tile():
    g = ctgraph.gemm(300, 200, 500, macro_tile=(32, 32, 16))
    a = ctgraph.compile(g, transform="streamk_hybrid", workgroups=7, target="cpu", sk_batches=2)
    b = ctgraph.compile(g, transform="streamk2tile", workgroups=7, target="cpu")
    assert a.schedule() == b.schedule()
    assert a.graph.structure() == b.graph.structure()


@pytest.mark.parametrize("tiles", [1, 5, 8, 13, 40])
@pytest.mark.parametrize("batches", [1, 2, 3, 6])
def test_split_never_negative_and_all_dp_when_even(tiles, batches):
    n_sk, n_dp = (int(x) for x in split_sk_dp(tiles, 10, 4, batches))
    assert n_sk >= 0 and n_dp >= 0 and n_sk + n_dp == tiles * 10
    assert n_dp % (4 * 10) == 0  # whole tiles for every workgroup
    if tiles % 4 == 0:
        assert n_sk == 0


@pytest.mark.parametrize("batches", [1, 3, 6])
@pytest.mark.parametrize("workgroups", [1, 3, 7, 40])
@pytest.mark.parametrize("shape", [(33, 17, 70), (1, 64, 9), (96, 80, 200)])
def test_covers_every_iteration_once_and_matches_numpy(shape, workgroups, batches):
    m, n, k = shape
    g = ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8), dtype="float32")
    kern = ctgraph.compile(g, transform="streamk_hybrid", workgroups=workgroups, target="cpu", sk_batches=batches)
    work = [it for w in kern.schedule() for it in w]
    mt, nt, kt = g.attrs["gemm"].tiles
    assert sorted(work) == [(a, b, c) for a in range(mt) for b in range(nt) for c in range(kt)]
    rng = np.random.default_rng(1)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    D = kern(A, B, C, alpha=2.0, beta=-1.0)
    np.testing.assert_allclose(D, 2.0 * (A.astype(np.float64) @ B) - C, rtol=1e-4, atol=1e-4 * np.sqrt(k))


def test_one_kernel_serves_every_batch_count():
    g = ctgraph.gemm(500, 300, 700, macro_tile=(32, 32, 16))
    src = {
        ctgraph.compile(g, transform="streamk_hybrid", workgroups=9, target="cpu", sk_batches=b).source
        for b in range(1, 7)
    }
    assert len(src) == 1


def test_bad_sk_batches():
    g = ctgraph.gemm(64, 64, 64)
    with pytest.raises(ValueError, match="sk_batches must be an integer in"):
        ctgraph.compile(g, transform="streamk_hybrid", sk_batches=0, target="cpu")
    with pytest.raises(ValueError, match="applies to streamk_hybrid"):
        ctgraph.compile(g, transform="dataparallel", sk_batches=2, target="cpu")
