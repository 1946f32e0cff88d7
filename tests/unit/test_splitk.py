"""splitk: one workgroup per (output tile, K chunk), the chunk holding k == 0 owns the tile."""

from __future__ import annotations

import numpy as np
import pytest

import ctgraph
from ctgraph.passes import split_chunks
from lowering.cuda.nvcc import check_cubin, nvcc_available


@pytest.mark.parametrize(
    ("kt", "split", "chunks", "per"),
    [(512, 4, 4, 128), (10, 3, 3, 4), (10, 4, 4, 3), (9, 4, 3, 3), (1, 8, 1, 1), (7, 100, 7, 1)],
)
def test_chunks_are_never_empty(kt, split, chunks, per):
    assert split_chunks(kt, split) == (chunks, per)
    assert (chunks - 1) * per < kt <= chunks * per


@pytest.mark.parametrize("transform", ["splitk", "splitk_reduce"])
@pytest.mark.parametrize("split", [1, 2, 3, 5, 64])
@pytest.mark.parametrize("shape", [(33, 17, 70), (1, 1, 1), (64, 48, 200), (16, 16, 520)])
def test_covers_every_iteration_once_and_matches_numpy(shape, split, transform):
    m, n, k = shape
    g = ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8), dtype="float32")
    mt, nt, kt = g.attrs["gemm"].tiles
    kern = ctgraph.compile(g, transform=transform, split=split, workgroups=10_000, target="cpu")
    chunks, per = split_chunks(kt, split)
    assert kern.workgroups == mt * nt * chunks
    sched = kern.schedule()
    assert sorted(it for w in sched for it in w) == [(a, b, c) for a in range(mt) for b in range(nt) for c in range(kt)]
    for wg, work in enumerate(sched):  # each workgroup: one chunk of one tile
        assert len({(a, b) for a, b, _ in work}) == 1 and [c for *_, c in work] == list(
            range((wg % chunks) * per, min(kt, (wg % chunks + 1) * per))
        )
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    D = kern(A, B, C, alpha=0.5, beta=2.0)
    np.testing.assert_allclose(D, 0.5 * (A.astype(np.float64) @ B) + 2.0 * C, rtol=1e-4, atol=1e-4 * np.sqrt(k))
    assert np.array_equal(D, kern(A, B, C, alpha=0.5, beta=2.0))


def test_split_from_the_workgroup_budget():
    g = ctgraph.gemm(32, 32, 4096, macro_tile=(16, 16, 8))  # 4 tiles, 512 k-iterations
    assert ctgraph.compile(g, transform="splitk", workgroups=40, target="cpu").workgroups == 40  # 10 chunks
    assert ctgraph.compile(g, transform="splitk", target="cpu").workgroups == 8  # CPU default 8: 2 chunks


def test_errors():
    g = ctgraph.gemm(64, 64, 64, macro_tile=(16, 16, 8))  # 16 tiles
    with pytest.raises(ValueError, match="splitk needs 32 workgroups"):
        ctgraph.compile(g, transform="splitk", split=2, workgroups=20, target="cpu")
    with pytest.raises(ValueError, match="splitk_reduce needs 32 workgroups"):  # the transform the caller named
        ctgraph.compile(g, transform="splitk_reduce", split=2, workgroups=20, target="cpu")
    with pytest.raises(ValueError, match="split applies to splitk"):
        ctgraph.compile(g, transform="streamk", split=2, target="cpu")
    with pytest.raises(ValueError, match="split must be a positive integer"):
        ctgraph.compile(g, transform="splitk", split=0, target="cpu")


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed (CUDA toolkit)")
def test_cuda_source_compiles_with_fixup():
    g = ctgraph.gemm(256, 256, 65536)
    kern = ctgraph.compile(g, transform="splitk", split=16, workgroups=132, target="cuda", build=False)
    assert kern.workgroups == 64
    check_cubin(kern.source, "sm_90a")
    assert "ld.acquire.gpu" in kern.ptx and "red.release.gpu" in kern.ptx


def test_reduce_variant_is_two_kernels_without_waits():
    g = ctgraph.gemm(100, 40, 700, macro_tile=(16, 16, 8))
    kern = ctgraph.compile(g, transform="splitk_reduce", split=4, workgroups=1000, target="cpu")
    cg = kern.control
    assert [cg[t].name for t in cg.kernels] == ["ctgraph_gemm", "ctgraph_gemm_reduce"]
    kinds = {type(cg[t]).__name__ for t, _ in cg.walk()}
    assert not kinds & {"Wait", "Signal"} and {"StorePartial", "AccumulatePartial", "Epilogue"} <= kinds
    mt, nt, _ = g.attrs["gemm"].tiles
    assert kern.program.grids == [("ctgraph_gemm", kern.workgroups), ("ctgraph_gemm_reduce", mt * nt)]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not installed (CUDA toolkit)")
def test_reduce_variant_cuda_has_no_spin_waits():
    g = ctgraph.gemm(256, 256, 65536)
    kern = ctgraph.compile(g, transform="splitk_reduce", split=16, workgroups=132, target="cuda", build=False)
    check_cubin(kern.source, "sm_90a")
    assert 'extern "C" __global__' in kern.source and "ctgraph_gemm_reduce(" in kern.source
    assert "ld.acquire" not in kern.ptx and "red.release" not in kern.ptx and "mma.sync" in kern.ptx
