"""``macro_tile="auto"``: the per-tile cost model and the tile it picks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctgraph
from ctgraph.cli import main
from ctgraph.tiles import (
    CANDIDATES,
    DEFAULT_TILE,
    FIXUP_BANDWIDTH,
    FIXUP_LEVEL,
    H100,
    LAYOUTS,
    REFERENCES,
    SWAP_2D_MIN_ITERATIONS,
    SWAP_2D_MIN_ROWS,
    SWAP_MIN_ITERATIONS,
    WAVE_CTA_COLUMNS,
    WAVE_GRIDS,
    WAVE_QUARTERS,
    Layout,
    TileCost,
    candidates,
    choose_tile,
    k_iterations,
    output_tiles,
    parts_in_step,
    predict,
    preferred_schedule,
    ranked_tiles,
    schedules,
    swapped_cost,
    swapped_heights,
    tile_cost,
    tile_layout,
    wave_layouts,
)


def test_every_candidate_has_costs_and_runs_on_the_wgmma_path():
    from lowering.cuda.hopper import hopper_layout
    from lowering.cuda.options import CudaOptions

    assert tuple(c.tile for c in H100) == CANDIDATES
    for cost in H100:
        lay = hopper_layout(cost.tile, "float16", CudaOptions(mainloop="wgmma"))
        assert lay["CLUSTER"] == cost.sms_per_workgroup
        assert 0 < cost.c < cost.t0 + cost.launch


def test_predict_is_waves_of_tiles_or_shared_iterations():
    cost = TileCost((128, 128, 64), launch=2e-6, t0=1e-6, c=0.5e-6)
    # 132 tiles of 4 iterations on 132 SMs: one wave, data-parallel
    assert predict(cost, 12 * 128, 11 * 128, 256) == pytest.approx(2e-6 + 1e-6 + 4 * 0.5e-6)
    # 133 tiles: a second, almost empty wave costs data-parallel a whole tile; Stream-K shares it out
    dp = 2 * (1e-6 + 4 * 0.5e-6)
    fixup = FIXUP_LEVEL + 128 * 128 * 4 / FIXUP_BANDWIDTH  # one CTA's fp32 partial tile, stored and loaded
    sk = 133 * 4 / 132 * 0.5e-6 + 133 / 132 * 1e-6 + fixup  # one workgroup per tile: only the owner's level
    assert predict(cost, 133 * 128, 128, 256) == pytest.approx(2e-6 + min(dp, sk))


def test_stream_k_pays_for_its_fixup_tree():
    cost = TileCost((128, 128, 64), launch=0.0, t0=1e-6, c=0.5e-6)
    assert cost.fixup() == pytest.approx(FIXUP_LEVEL + 128 * 128 * 4 / FIXUP_BANDWIDTH)
    # one tile of 1024 iterations in s parts on s of 128 workgroups: partials add up a tree log2(s) deep, then
    # the owner; each workgroup one part, one pipeline fill. A deeper tree costs more than its shorter parts
    # save past s = 64 here.
    sk = {s: 1024 / s * 0.5e-6 + 1e-6 + (1 + math.log2(s)) * cost.fixup() for s in (2, 4, 8, 16, 32, 64, 128)}
    assert min(sk, key=sk.__getitem__) == 64
    assert predict(cost, 128, 128, 1024 * 64, sms=128) == pytest.approx(sk[64])
    # a cluster's CTAs each hold BM / cluster rows of the partial tile
    pair = TileCost((256, 128, 64), launch=0.0, t0=1e-6, c=0.5e-6, sms_per_workgroup=2)
    assert pair.fixup() == pytest.approx(cost.fixup())


def test_fewer_tiles_than_workgroups_are_cut_into_parts_in_step():
    """With ``T < g`` Stream-K runs on a grid ``s*T`` that cuts every tile into ``s`` equal parts (the grid
    model's k-aligned grids): ``ceil(kt/s)`` iterations, one pipeline fill and ``1 + log2(s)`` fixup levels."""
    assert parts_in_step(60, 256, 132) == [2]  # 120 workgroups, two parts of 128
    assert parts_in_step(25, 384, 132) == [2, 3, 4, 5]  # 384 iterations: whole parts of 192, 128, 96; 5 drifts 1
    assert parts_in_step(24, 8, 132) == [2, 4]  # 8 iterations: parts of 3 or 5 drift a part over 24 tiles
    assert parts_in_step(66, 256, 132) == [2] and parts_in_step(67, 256, 132) == []
    cost = TileCost((128, 256, 64), launch=0.0, t0=1e-6, c=0.5e-6)
    dp = 1e-6 + 256 * 0.5e-6  # 60 tiles of 256 iterations: one wave
    sk = 128 * 0.5e-6 + 1e-6 + 2 * cost.fixup()
    assert predict(cost, 5 * 128, 12 * 256, 256 * 64) == pytest.approx(min(dp, sk)) == pytest.approx(sk)


def test_schedules_name_what_predict_takes_the_least_of():
    cost = TileCost((128, 256, 64), launch=0.5e-6, t0=1e-6, c=0.5e-6)
    times = schedules(cost, 5 * 128, 12 * 256, 256 * 64, 132)  # 60 tiles of 256 iterations
    assert set(times) == {"dataparallel", "streamk/2"}  # fewer tiles than workgroups: no two-tile schedule
    assert predict(cost, 5 * 128, 12 * 256, 256 * 64) == pytest.approx(0.5e-6 + min(times.values()))
    assert set(schedules(cost, 133 * 128, 256, 256, 132)) == {"dataparallel", "streamk2tile"}


def test_preferred_schedule_is_a_verdict_only_against_schedules_it_priced():
    cost = tile_cost((64, 128, 64))
    assert cost is not None and cost.sms_per_workgroup == 1
    # 512^3: 32 tiles of 8 iterations; two or four parts pay a fixup level each for a few iterations
    assert preferred_schedule(cost, 512, 512, 512, 132) == "dataparallel"
    # 1024 iterations a tile: parts of tiles pay, and the grid-size model knows their grids better
    assert preferred_schedule(cost, 512, 512, 1 << 16, 132) is None
    # 1024^3: 128 tiles, no grid of whole parts fits 132 workgroups, so there is nothing to compare with
    assert schedules(cost, 1024, 1024, 1024, 132).keys() == {"dataparallel"}
    assert preferred_schedule(cost, 1024, 1024, 1024, 132) is None
    # 8192^3 in 256 x 256 tiles on 66 clusters: 15.5 waves, the two-tile schedule saves the half-empty last
    assert preferred_schedule(tile_cost((256, 256, 64), cluster=2), 8192, 8192, 8192, 66) == "streamk2tile"
    assert tile_cost((64, 128, 64), cluster=2) is None and tile_cost((100, 128, 64)) is None


def test_small_gemms_get_small_tiles_and_big_ones_big_tiles():
    bm, bn, _ = choose_tile(200, 688, 128)
    assert bm * bn <= 128 * 128
    assert choose_tile(8192, 8192, 8192) == (256, 256, 64)
    bm, bn, _ = choose_tile(1, 1, 1)
    assert bm * bn <= 64 * 128
    bm, bn, _ = choose_tile(4096, 4096, 4096)
    assert bm * bn >= 128 * 256


def test_ranked_tiles_start_with_the_chosen_tile_and_name_each_tile_once():
    for m, n, k in [(136, 3768, 5696), (4096, 4096, 4096), (1, 1, 1), (4520, 144, 2656)]:
        ranked = ranked_tiles(m, n, k)
        assert ranked[0] == choose_tile(m, n, k) and len(set(ranked)) == len(ranked) > 1
        times = [min(predict(c, m, n, k) for c in candidates(m, k) if c.tile == t) for t in ranked]
        assert times == sorted(times)
    assert ranked_tiles(512, 512, 512, "float32") == [DEFAULT_TILE]


def test_rows_off_128_byte_lines_cost_the_unaligned_rate():
    cost = TileCost((128, 128, 64), launch=0.0, t0=1e-6, c=0.5e-6, c_unaligned=0.9e-6)
    assert cost.per_iteration(4096, 4096) == 0.5e-6  # 8192-byte rows: whole lines
    assert cost.per_iteration(4096, 4100) == 0.9e-6  # A's rows (K) straddle lines
    assert cost.per_iteration(4104, 4096) == 0.9e-6  # B's rows (N) straddle lines
    assert TileCost((64, 64, 64), 0.0, 1e-6, 0.5e-6).per_iteration(10, 10) == 0.5e-6  # no separate rate
    # 1 wave of 132 tiles, 4 iterations
    assert predict(cost, 12 * 128, 11 * 128, 256) == pytest.approx(1e-6 + 4 * 0.5e-6)
    assert predict(cost, 12 * 128, 11 * 128 - 8, 256) == pytest.approx(1e-6 + 4 * 0.9e-6)


def test_the_unaligned_penalty_shrinks_with_the_load():
    """With fewer workgroups than the GPU holds the L2 has bandwidth to spare: ``c + (c_u - c) sqrt(load)``."""
    cost = TileCost((128, 128, 64), launch=0.0, t0=1e-6, c=0.5e-6, c_unaligned=0.9e-6)
    assert cost.per_iteration(4104, 4096, load=0.25) == pytest.approx(0.5e-6 + 0.4e-6 * 0.5)
    assert cost.per_iteration(4096, 4096, load=0.25) == 0.5e-6
    # 33 tiles of 4 iterations: a quarter of the 132 SMs, as one data-parallel wave
    assert predict(cost, 33 * 128, 128 - 8, 4 * 64) == pytest.approx(1e-6 + 4 * (0.5e-6 + 0.4e-6 * 0.5))


def test_unaligned_big_gemms_get_a_multicasting_cluster():
    """On the H100 a cluster of 4 CTAs, each reading a quarter or a half of B, loses little to unaligned rows; aligned
    big GEMMs keep clusters of 2, which pack all 132 SMs (clusters of 4 only 120)."""
    for m, n, k in ((2384, 3888, 7592), (4968, 3752, 2056)):
        tile = choose_tile(m, n, k)
        assert next(c for c in candidates(m, k) if c.tile == tile).sms_per_workgroup == 4, (m, n, k)
    assert choose_tile(4096, 4096, 4096) == choose_tile(8192, 8192, 8192) == (256, 256, 64)
    # few rows and both operands off the lines: a 2 x 4 cluster of swapped 120 x 128 CTAs sharing A and B
    assert choose_tile(232, 7304, 5176) == (240, 512, 64) and tile_layout((240, 512, 64)) == (8, "ab")
    # 6168 rows in 30 tiles of 2 x 2 swapped CTAs of 104 x 128, where 512 x 192 tiles took 26 of 30 clusters
    assert choose_tile(6168, 200, 2648) == (208, 256, 64) and tile_layout((208, 256, 64)) == (4, "ab")


def test_clusters_that_do_not_pack_the_gpu_count_what_is_resident():
    cost = TileCost((512, 256, 64), launch=0.0, t0=1e-6, c=0.5e-6, sms_per_workgroup=4, resident=30)
    assert cost.workgroups(132) == 30 and cost.workgroups(64) == 16
    assert TileCost((128, 128, 64), 0.0, 1e-6, 0.5e-6).workgroups(132) == 132
    # 30 tiles are one wave of the 30 resident clusters; 35 take two
    assert predict(cost, 5 * 512, 6 * 256, 64) == pytest.approx(1e-6 + 0.5e-6)
    assert predict(cost, 5 * 512, 6 * 256 + 1, 64) > 1.5e-6


@given(st.integers(1, 20000), st.integers(1, 20000), st.integers(1, 70000))
def test_choice_is_the_least_prediction(m, n, k):
    tile = choose_tile(m, n, k)
    weighed = candidates(m, k)
    assert set(H100) <= set(weighed)
    best = min(predict(c, m, n, k) for c in weighed)
    assert predict(next(c for c in weighed if c.tile == tile), m, n, k) == best
    assert math.isfinite(best)


def test_swapped_tiles_are_priced_from_the_measured_tile_they_transpose():
    """A swapped CTA of M x N runs the kernel of a CTA of N x M: linear between two measured widths; beyond them a K
    iteration costs the bytes a CTA receives, ``(M + N) * BK * 2``, or its math where that grows faster, and the
    epilogue the elements it stores."""
    ref = tile_cost((128, 128, 64))
    cost = swapped_cost((96, 128, 64))  # below the narrowest CTA of 128 rows: by the bytes
    assert cost is not None and cost == tile_cost((96, 128, 64))
    assert cost.c == pytest.approx(ref.c * (96 + 128) / 256) and cost.t0 == pytest.approx(ref.t0 * 96 / 128)
    assert cost.c_unaligned == pytest.approx(ref.c_unaligned * (96 + 128) / 256)
    lo, hi = tile_cost((128, 192, 64)), tile_cost((128, 256, 64))  # 232 rows: between 128 x 192 and 128 x 256
    cost = swapped_cost((232, 128, 64))
    for got, a, b in (
        (cost.c, lo.c, hi.c),
        (cost.c_unaligned, lo.c_unaligned, hi.c_unaligned),
        (cost.t0, lo.t0, hi.t0),
    ):
        assert got == pytest.approx(a + (b - a) * 40 / 64)
    assert swapped_cost((136, 64, 64)).c == pytest.approx(tile_cost((64, 128, 64)).c * 136 / 128)  # beyond: the math
    # no measured CTA of 192 rows: from the one of 192 columns with the least rows above
    assert swapped_cost((72, 192, 64)).c == pytest.approx(lo.c * (72 + 192) / (128 + 192))
    for tile in [(128, 128, 64), (100, 128, 64), (264, 64, 64), (136, 192, 64), (72, 96, 64), (72, 128, 32)]:
        assert swapped_cost(tile) is None, tile
    assert swapped_heights(136) == [136, 72, 48, 40] and swapped_heights(1) == [8]
    assert swapped_heights(1000) == [] and swapped_heights(256) == [88]  # 256, 128 and 64 are measured tiles
    # a 2-D grid of CTAs fits m in any number of rows of tiles
    assert swapped_heights(744, 2) == [192, 160, 112, 96, 80, 64, 48, 32, 16]


def test_swapped_tiles_need_enough_k_iterations_to_be_weighed():
    few, enough = (SWAP_MIN_ITERATIONS - 1) * 64, SWAP_MIN_ITERATIONS * 64
    assert candidates(176, few) == list(H100)
    one_cta = {(bm, bn, 64) for bm in (176, 88, 48) for bn in (64, 128, 192, 256) if bn <= 128 or bm <= 128}
    assert {c.tile for c in candidates(176, enough)} - set(CANDIDATES) == one_cta
    two_d = {(176, 256, 64), (176, 384, 64), (176, 512, 64)}  # 2 x 2 grids of 128 and 192 columns, 2 x 4 of 128
    assert {c.tile for c in candidates(176, SWAP_2D_MIN_ITERATIONS * 64)} - set(CANDIDATES) == one_cta | two_d
    assert choose_tile(168, 920, 760) == (48, 64, 64)  # 60 tiles, where 64 x 64 made 45


@given(st.integers(1, 600))
def test_every_swapped_candidate_runs_swapped_on_the_wgmma_path(m):
    """On the layout it was priced on: one CTA, or a 2 x 4 grid of CTAs that share both operands."""
    from lowering.cuda.hopper import hopper_layout
    from lowering.cuda.options import CudaOptions

    for cost in candidates(m, 1 << 16)[len(H100) :]:
        lay = hopper_layout(cost.tile, "float16", CudaOptions(mainloop="wgmma"))
        assert lay["SWAP"] == 1 and lay["CLUSTER"] == cost.sms_per_workgroup
        assert (lay["CLUSTER_M"], cost.multicast) in ((1, "b"), (2, "ab")) and lay["CTA_M"] >= 8
        assert tile_cost(cost.tile, cost.sms_per_workgroup) == cost


def test_references_price_swapped_tiles_but_are_not_candidates():
    ref = REFERENCES[0]
    assert (ref.tile, ref.sms_per_workgroup, ref.multicast) == ((256, 512, 64), 8, "ab") and ref.tile not in CANDIDATES
    assert LAYOUTS[ref.tile] == tile_layout(ref.tile) == (8, "ab") and tile_cost(ref.tile, 8) == ref
    cost = swapped_cost((240, 512, 64), ref_layout=(8, "ab"))  # CTAs of 120 x 128, against the reference's 128 x 128
    assert cost.c == pytest.approx(ref.c * (120 + 128) / 256) and cost.resident == 15 and cost.multicast == "ab"
    rows = SWAP_2D_MIN_ROWS - 8
    assert swapped_cost((2 * rows, 512, 64), ref_layout=(8, "ab")) is None  # too few rows per CTA
    assert swapped_cost((2 * rows, 512, 64)) is None  # no one-CTA tile is 512 wide
    assert ref.line() == "TileCost((256, 512, 64), 3.19e-6, 1.21e-6, 0.389e-6, 8, 0.402e-6, 15, 'ab'),"
    two_by_two = REFERENCES[1]  # CTAs of 128 x 192: prices 2 x 2 grids of swapped CTAs 128 (and 192) wide
    assert LAYOUTS[two_by_two.tile] == (4, "ab") and two_by_two.tile not in CANDIDATES
    cost = swapped_cost((192, 256, 64), ref_layout=(4, "ab"))  # CTAs of 96 x 128: the reference's 128 x 192, transposed
    assert cost.c == pytest.approx(two_by_two.c * (96 + 128) / (128 + 192)) and cost.resident == 30


def test_float32_keeps_the_default_tile():
    assert choose_tile(8192, 8192, 8192, "float32") == DEFAULT_TILE


def test_gemm_auto_tile_records_the_choice_and_runs_on_the_cpu():
    g = ctgraph.gemm(200, 120, 72, macro_tile="auto")
    assert g.attrs["gemm"].macro_tile == choose_tile(200, 120, 72)
    kern = ctgraph.compile(g, transform="streamk2tile", workgroups=4, target="cpu")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((200, 72)).astype(np.float16), rng.standard_normal((72, 120)).astype(np.float16)
    ref = A.astype(np.float64) @ B.astype(np.float64)
    assert np.abs(kern(A, B).astype(np.float64) - ref).max() < 3e-3 * max(1.0, np.abs(ref).max())


@pytest.mark.parametrize("tile", ["big", "", (128, 128), None])
def test_bad_tile_names_the_argument_and_auto(tile):
    with pytest.raises(ValueError, match=r"macro_tile must be three positive integers \(BM, BN, BK\) or 'auto'"):
        ctgraph.gemm(64, 64, 64, macro_tile=tile)


def test_cli_takes_tile_auto_or_three_integers(capsys):
    assert main(["compile", "--m", "300", "--n", "200", "--k", "100", "--tile", "auto", "--workgroups", "4"]) == 0
    with pytest.raises(SystemExit):
        main(["compile", "--m", "300", "--n", "200", "--k", "100", "--tile", "64", "64"])
    assert "--tile takes three positive integers" in capsys.readouterr().err


def test_a_fitted_cost_prints_as_a_line_of_the_shipped_table():
    import inspect

    import ctgraph.tiles

    source = inspect.getsource(ctgraph.tiles)
    assert all(f"    {cost.line()}" in source for cost in H100)
    assert TileCost((64, 64, 64), 1e-6, 2e-6, 3e-7).line() == "TileCost((64, 64, 64), 1.00e-6, 2.00e-6, 0.300e-6, 1),"


def test_layout_names_round_trip_and_bad_names_are_rejected():
    for cluster, multicast in WAVE_GRIDS:
        for swap in (False, True):
            layout = Layout(cluster, multicast, swap)
            assert Layout.parse(layout.name) == layout
    assert Layout(2, "a", True).name == "2a/swap"
    assert Layout(8, "ab", False).options() == {"cluster": 8, "multicast": "ab", "swap": False}
    for bad in ("", "a", "2c", "2a/flip", "2a/swap/swap", "x2b"):
        with pytest.raises(ValueError, match="a layout is CTAs, the operands they share"):
            Layout.parse(bad)


@given(st.integers(1, 9000), st.integers(1, 9000))
def test_wave_layouts_fill_at_most_their_waves_and_run_on_the_wgmma_path(m, n):
    """Each tile covers m in rows of tiles that, times the tiles along n, make at most q/4 waves of resident
    clusters; each runs on its layout (CTAs of 32-256 rows, a multiple of 8, and 64 or 128 columns)."""
    from lowering.cuda.hopper import hopper_layout
    from lowering.cuda.options import CudaOptions

    resident = {2: 66, 4: 30, 8: 15}  # the H100's clusters of 2, 4 and 8 (2 x 4) at once
    got = wave_layouts(m, n)
    assert len(got) == len(set(got)) <= len(WAVE_QUARTERS) * len(WAVE_GRIDS) * len(WAVE_CTA_COLUMNS)
    for (bm, bn, bk), layout in got:
        lay = hopper_layout((bm, bn, bk), "float16", CudaOptions(mainloop="wgmma", **layout.options()))
        assert lay["SWAP"] == 1 and lay["CTA_N"] in WAVE_CTA_COLUMNS and lay["CLUSTER"] == layout.cluster
        assert 32 <= lay["CTA_M"] <= 256 and lay["CTA_M"] % 8 == 0 and bk == 64
        t_m, t_n = -(-m // bm), -(-n // bn)
        assert t_m == 1 or 4 * t_m * t_n <= max(WAVE_QUARTERS) * resident[layout.cluster]
        least = bm - lay["CLUSTER_M"] * 8 < -(-m // t_m)  # the least multiple of 8 a CTA that covers m in t_m rows
        assert least or lay["CTA_M"] == 32


def test_wave_layouts_fit_the_tiles_cublas_runs():
    """cuBLAS's kernels on eight corpus shapes (docs/bench/cublas-kernels.txt, in our orientation)."""
    assert ((160, 256, 64), Layout(2, "a", True)) in wave_layouts(1408, 1664)  # nvjet 128x160 2x1
    assert ((144, 128, 64), Layout(2, "b", True)) in wave_layouts(1008, 1152)  # nvjet 128x72 1x2
    assert ((232, 256, 64), Layout(2, "a", True)) in wave_layouts(3688, 976)  # nvjet 128x232 2x1
    assert ((88, 128, 64), Layout(2, "a", True)) in wave_layouts(176, 4080)  # nvjet 64x88 2x1
    assert ((144, 256, 64), Layout(8, "ab", True)) in wave_layouts(144, 2680)  # nvjet 64x72 4x2
    assert ((80, 256, 64), Layout(4, "a", True)) in wave_layouts(240, 1488)  # nvjet 64x80 4x1: 0.55 of a wave
    assert ((64, 256, 64), Layout(4, "a", True)) in wave_layouts(192, 1744)  # nvjet 64x64 4x1: 0.64 of a wave
    assert ((224, 64, 64), Layout(4, "b", True)) in wave_layouts(1368, 184)  # nvjet 64x56 1x4: 0.64 of a wave
    assert wave_layouts(8192, 8192) == []  # CTAs of more than 256 rows


def test_fewer_quarters_of_a_wave_give_larger_tiles():
    """Half a wave of tiles takes CTAs at least as tall as a whole wave does, on every grid, and taller on some."""
    for m, n in ((240, 1488), (1416, 280), (4520, 144), (144, 2680)):
        heights: dict[tuple[int, Layout], list[int]] = {}
        for q in (2, 4):
            for (bm, bn, _), layout in wave_layouts(m, n, quarters=(q,)):
                heights.setdefault((bn, layout), []).append(bm)
        pairs = [rows for rows in heights.values() if len(rows) == 2]
        assert pairs and all(half >= whole for half, whole in pairs)
        assert any(half > whole for half, whole in pairs)


@given(
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.integers(1, 70000),
    st.sampled_from((*CANDIDATES, (8, 16, 32), (40, 120, 64))),
)
def test_tile_counts_are_the_graphs_own(m, n, k, tile):
    """The models count tiles and K iterations as the GEMM graph does: partial tiles and a partial last K step count."""
    tm, tn, kt = ctgraph.gemm(m, n, k, macro_tile=tile).attrs["gemm"].tiles
    assert output_tiles(m, n, tile) == tm * tn == math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    assert k_iterations(k, tile) == kt == math.ceil(k / tile[2])
