"""The default path (``macro_tile="auto"``, ``transform="auto"``) on every shape of the shipped tuning table.

Each row hands its shape a measured tile, often a cluster layout (pairs or 2-D grids of CTAs that multicast A, B or
both, swapped ``D^T = B^T A^T`` tiles) and a policy: the kernels ``python -m ctgraph bench`` times. ``bench`` checks
them against cuBLAS's fp16 result; here each is checked against float64 with ``alpha`` and ``beta``, and run twice.
"""

from __future__ import annotations

import pytest

import ctgraph
from ctgraph import knobs
from ctgraph.policy import load_table

pytestmark = pytest.mark.gpu

TABLE = load_table(knobs.tile_device())
SHAPES = sorted({(r["m"], r["n"], r["k"]) for r in TABLE.rows}) if TABLE is not None else []  # 120 corpus, 8 anchors


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_every_tuned_shape_under_auto_matches_float64_and_repeats_bit_identical(shape):
    torch = pytest.importorskip("torch")
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m * n + k)
    A, B, C = (torch.randn(s, generator=gen, device="cuda").half() for s in ((m, k), (k, n), (m, n)))
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), transform="auto", target="cuda")
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    ref = 1.5 * (A.double() @ B.double()) + 0.5 * C.double()
    err = float((D.double() - ref).abs().max()) / max(1.0, float(ref.abs().max()))
    assert err < 3e-3, f"{kern.policy}: relative error {err:.3e}"
    assert torch.equal(D, kern(A, B, C, alpha=1.5, beta=0.5))
