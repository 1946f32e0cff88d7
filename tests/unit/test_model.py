"""The grid-size model: per-CTA work, choices of g for known cases, fitting, storage."""

from __future__ import annotations

import numpy as np
import pytest

import ctgraph
from ctgraph.api import CPU_WORKGROUPS
from ctgraph.calibrate import nnls
from ctgraph.model import DEFAULTS, GridModel, Work, _peers, in_step, k_aligned, load_model, save_model, work

MODEL = GridModel(a=4e-6, b=2e-6, c_alone=1.5e-6, c_shared=2.2e-6, d=2e-6, sms=132, ctas_per_sm=2, c_spread=0.3e-6)


def test_work_per_transform():
    assert work("dataparallel", 120, 512, 32) == Work(4 * 512, 1)
    assert work("streamk", 120, 512, 32) == Work(1920, 2, spread=True)  # seed 004: 1920 iterations, tiles in two
    assert work("streamk2tile", 120, 512, 32) == Work(896, 2, 1024, True)  # seed: 896 SK + 1024 DP per WG
    assert work("streamk2tile", 128, 512, 32) == Work(0, 1, 2048)  # T % g == 0: all data-parallel
    assert work("splitk_reduce", 4, 1024, 264) == Work(16, 64)  # 66 chunks asked -> 64 of 16 iterations
    assert work("splitk_reduce", 300, 64, 264).iters > 10**9  # more tiles than workgroups: cannot run
    with pytest.raises(ValueError, match="does not know"):
        work("cublas", 1, 1, 1)


@pytest.mark.parametrize(
    ("iters", "kt", "peers"),
    [(512, 512, 1), (1024, 512, 1), (700, 512, 2), (256, 512, 2), (128, 512, 4), (300, 512, 3), (100, 512, 7)],
)
def test_peers(iters, kt, peers):
    assert _peers(iters, kt) == peers


def test_peers_matches_the_schedule():
    """The formula bounds the CTAs that really share a tile in the compiled Stream-K schedule."""
    for m, n, k, g in [(160, 192, 4096, 32), (64, 48, 900, 13), (32, 32, 2000, 40)]:
        kern = ctgraph.compile(
            ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8)), transform="streamk", workgroups=g, target="cpu"
        )
        owners: dict[tuple[int, int], set[int]] = {}
        for wg, w in enumerate(kern.schedule()):
            for a, b, _ in w:
                owners.setdefault((a, b), set()).add(wg)
        tm, tn, kt = kern.problem.tiles
        assert max(map(len, owners.values())) <= work("streamk", tm * tn, kt, g).peers


def test_all_dp_when_tiles_divide_evenly():
    # 264 tiles: data-parallel fills both CTA slots of every SM exactly
    assert MODEL.best_grid("dataparallel", 264, 64) == 264
    # 132 tiles: one tile per SM, no co-resident CTA slowing it down
    assert MODEL.best_grid("dataparallel", 132, 64) == 132
    # fewer tiles than CTA slots: one workgroup per tile, no idle CTAs
    assert MODEL.best_grid("dataparallel", 10, 3) == 10
    assert MODEL.best_grid("dataparallel", 10, 3, max_grid=4) == 4
    g = MODEL.best_grid("streamk2tile", 264, 64)
    assert 264 % g == 0 and work("streamk2tile", 264, 64, g).peers == 1  # all DP: no fixup


def test_few_tiles_long_k_prefers_stream_k_over_dp():
    dp = MODEL.time(work("dataparallel", 4, 1024, 4), 4)
    g = MODEL.best_grid("streamk", 4, 1024)
    assert g > 4 and MODEL.time(work("streamk", 4, 1024, g), g) < dp / 5


def test_stream_k_grids_cut_tiles_into_equal_parts():
    """Fewer tiles than workgroups: only grids s*T whose parts start in step (module docstring)."""
    assert MODEL.best_grid("streamk", 60, 256, max_grid=132) == 120  # two parts of 128, not 132 of ~116
    assert MODEL.best_grid("streamk", 24, 512, max_grid=132) == 96  # 5 parts of 103 drift 72 > 103/2 by tile 24
    assert MODEL.best_grid("streamk", 35, 320, max_grid=132) == 105  # 3 parts of 107 drift 35 <= 107/2
    assert MODEL.best_grid("streamk", 20, 89, max_grid=66) == 40  # 89 is prime: 2 parts of 45 drift 20
    assert MODEL.best_grid("streamk2tile", 80, 256, max_grid=132) == 80  # one part each: data-parallel
    g = np.arange(1, 133)
    assert k_aligned("dataparallel", 60, 256, g).all()
    assert k_aligned("streamk2tile", 300, 256, g).all()  # the two-tile section has >= g tiles: any grid
    aligned = g[k_aligned("streamk", 60, 256, g)]
    assert set(aligned[aligned > 60]) == {120}


def test_out_of_step_stream_k_pays_c_spread():
    """Stream-K sections whose workgroups read K out of step cost c_spread more per iteration; grids
    that cut each tile into equal parts in step (or give whole tiles) do not."""
    g = np.arange(1, 265)
    assert not in_step("streamk", 1024, 64, np.array([264]))[0]  # 248.2 iterations each: phases spread
    assert in_step("streamk", 60, 256, np.array([120]))[0]  # each tile in two halves, in step
    assert in_step("dataparallel", 1024, 64, g).all()
    w = work("streamk", 1024, 64, 264)
    assert w.spread and MODEL.time(w, 264) - MODEL.time(Work(w.iters, w.peers, w.dp_iters), 264) == pytest.approx(
        MODEL.c_spread * w.iters
    )
    assert np.allclose(
        MODEL.times("streamk2tile", 1024, 64, g),
        [MODEL.time(work("streamk2tile", 1024, 64, int(x)), int(x)) for x in g],
    )
    # 4096^3 in 128x128x64 tiles on 264 CTAs: data-parallel's 0.88 last wave beats out-of-step Stream-K
    assert MODEL.time(work("dataparallel", 1024, 64, 264), 264) < MODEL.time(w, 264)
    # ... while about one tile per CTA, out of step, still beats whole tiles on more CTAs than SMs (measured
    # 1.33x and 1.32x data-parallel on an H100 with 128x128x64 tiles)
    assert DEFAULTS["default"].best_grid("streamk2tile", 11 * 13, 128, 264) == 132  # 1408x1664x8192
    assert DEFAULTS["default"].best_grid("streamk2tile", 17 * 8, 64, 264) == 132  # 2176x1024x4096


def test_nnls_recovers_constants():
    rng = np.random.default_rng(0)
    X = rng.random((60, 6))
    x = np.array([4e-6, 2e-6, 1.5e-6, 2.2e-6, 0.0, 0.6e-6])
    np.testing.assert_allclose(nnls(X, X @ x), x, atol=1e-9)


def test_save_and_load(tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    assert load_model("Some GPU") == DEFAULTS["default"]
    m = GridModel(1e-6, 2e-6, 3e-6, 4e-6, 5e-6, sms=100, ctas_per_sm=1, device="Some GPU")
    path = save_model(m)
    assert path.parent.parent == tmp_path and load_model("Some GPU") == m


def test_workgroups_auto():
    g = ctgraph.gemm(64, 64, 64)
    assert ctgraph.compile(g, transform="streamk", workgroups="auto", target="cpu").workgroups == CPU_WORKGROUPS
    with pytest.raises(ValueError, match="needs the GPU"):
        ctgraph.compile(g, transform="streamk", workgroups="auto", target="cuda", build=False)
    with pytest.raises(ValueError, match="workgroups must be"):
        ctgraph.compile(g, transform="streamk", workgroups="many", target="cpu")
