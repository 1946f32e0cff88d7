"""Selection without a GPU: the typed target, candidates, the ranker, the fit, the caches and the backend contract."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import warnings
from typing import ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctgraph
from ctgraph.backends import backend
from ctgraph.counts import output_tiles, padding
from ctgraph.select import CPU, H100_SXM, H200, KNOWN, Config, Layout, Target, candidates, rank, select, select_schedule
from ctgraph.select import cache as entries
from ctgraph.select.autotune import interleaved
from ctgraph.select.candidates import (
    MANY_WAVES,
    MANY_WAVES_ROWS,
    NAMED_ONLY,
    NARROW,
    PAD_LIMIT,
    PAD_SLACK,
    SHORT_K,
    THIN,
    WAVE_COUNTS,
    empty_cta,
    few_empty,
    hidden_padding,
    near_wave,
    offered,
    tall_wide,
    thin_grid,
    tiles_for,
    wave_layouts,
    wave_tiles,
    wide_enough,
)
from ctgraph.select.fit import _solve, fit, kernel_hash, pooled, regret, samples
from ctgraph.select.model import FEATURES, Correction, analytic, features, predict, rank_keys
from ctgraph.target import same_chip

CUDA = backend("cuda")
dims = st.integers(1, 20000)
aligned = st.integers(1, 2500).map(lambda x: 8 * x)
targets = st.sampled_from([H100_SXM, H200, KNOWN["NVIDIA H100 PCIe"]])


def test_target_is_frozen_and_checked():
    with pytest.raises(dataclasses.FrozenInstanceError):
        H100_SXM.sms = 1  # type: ignore[misc]
    with pytest.raises(ValueError, match=r"Target\.sms must be a positive integer"):
        H100_SXM.with_(sms=0)
    assert (
        H100_SXM.resident(4) == 30
        and H100_SXM.resident(2) == 66
        and H100_SXM.with_(resident_clusters=()).resident(4) == 33
    )
    assert H100_SXM.family == H200.family == "sm90" and H200.hbm_bandwidth > H100_SXM.hbm_bandwidth


def test_paths_follow_the_operands_alignment():
    assert H100_SXM.paths("float16", 4096, 4096) == ("wgmma", "vector", "scalar")
    assert H100_SXM.paths("float16", 4100, 4096) == ("scalar",)  # rows not whole 16-byte vectors
    assert H100_SXM.paths("float16", 4096, 4096, aligned_pointers=False) == ("scalar",)
    assert H100_SXM.paths("float32", 4096, 4096) == ("scalar",)
    assert H100_SXM.with_(compute_capability=(8, 0), arch="sm_80").paths("float16", 64, 64) == ("vector", "scalar")
    assert CPU.paths("float16", 64, 64) == ("cpu",)


def test_config_and_layout_names_round_trip():
    c = Config((176, 256, 64), Layout(4, "a", True), "streamk_hybrid", 30, 8, 3)
    assert Config.parse(c.name) == c and c.name == "176x256x64 4a/swap streamk_hybrid/b3 g30 r8"
    s = Config((64, 64, 64), Layout(), "splitk_reduce", 128, 1, None, 4)
    assert Config.parse(s.name) == s
    with pytest.raises(ValueError, match="a config is"):
        Config.parse("128x128 1b dataparallel")
    with pytest.raises(ValueError, match="a layout is"):
        Layout.parse("3x")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(m=dims, n=aligned, k=aligned, target=targets)
def test_candidates_are_valid_for_their_path_with_no_empty_cta_and_bounded_padding(m, n, k, target):
    path = target.paths("float16", k, n)[0]
    pool = candidates(m, n, k, "float16", target, path, CUDA.supports)
    assert pool
    least = min(padding(m, n, c.tile) for c in pool)
    thin = path == "wgmma" and n <= THIN and wide_enough(n, m, target)  # there a cluster may hold an empty CTA
    for c in pool:
        assert CUDA.supports(c.tile, "float16", c.layout, path), c.name
        assert (
            not empty_cta(m, n, c.tile, c.layout)
            or few_empty(m, n, c.tile, c.layout)  # and here, a few in the last tile row
            or (thin and thin_grid(m, n, c.tile, c.layout, target))
        ), c.name
        bounded = padding(m, n, c.tile) <= max(PAD_LIMIT, least + PAD_SLACK) + 1e-12
        assert bounded or hidden_padding(m, n, "float16", c.tile, c.layout, target), c.name
        tiles = output_tiles(m, n, c.tile)
        assert 1 <= c.workgroups <= max(tiles, target.resident(c.layout.cluster)) or c.transform == "splitk_reduce"
        if c.transform == "dataparallel":
            assert c.workgroups <= tiles  # no workgroup without a tile
        assert (
            ctgraph.compile(  # the front end accepts what it proposes
                ctgraph.gemm(m, n, k, macro_tile=c.tile),
                target="cuda",
                build=False,
                **c.compile_args(),
                **c.layout.options(),
            ).workgroups
            == c.workgroups
            or c.transform == "splitk_reduce"
        )


@settings(max_examples=40, deadline=None, derandomize=True)
@given(m=dims, n=dims, k=dims)
def test_unaligned_rows_get_tiles_of_the_element_load_path(m, n, k):
    """130x70x4100 once raised 'does not fit the fp16 mma path': candidates follow the path that will run."""
    path = H100_SXM.paths("float16", k, n)[0]
    pool = candidates(m, n, k, "float16", H100_SXM, path, CUDA.supports)
    assert pool and all(CUDA.supports(c.tile, "float16", c.layout, path) for c in pool)
    if path != "wgmma":
        assert all(c.layout == Layout() for c in pool)


def test_n_is_part_of_the_tile_choice():
    """2600x192x3280 got a 176 x 512 tile (60 of 120 CTAs computing nothing, 63% padding): no longer a candidate."""
    pool = candidates(2600, 192, 3280, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert all(c.tile[1] <= 256 for c in pool)
    assert max(padding(2600, 192, c.tile) for c in pool if not c.layout.swap) <= PAD_LIMIT + PAD_SLACK
    assert any(c.tile[1] == 192 for c in pool) and any(c.tile[1] == 96 for c in pool)


@pytest.mark.parametrize("m", [64, 128, 192, 256, 61, 121])
def test_swapped_single_ctas_take_rows_of_any_multiple_of_8_fitted_to_m(m):
    """Rows fitted to m that are multiples of 64 are offered swapped too: on one CTA 128 x 64 swapped is not the
    menu's 128 x 64 (one math warpgroup over n against two over m), and m = 64, 128, 192 had no swapped one-CTA tile
    of one tile row (fresh draws, H200: 73 changed choices 0.996x -> 1.013x cuBLAS, docs/selection.md)."""
    pool = candidates(m, 4096, 4096, "float16", H100_SXM, "wgmma", CUDA.supports)
    rows = 8 * -(-m // 8)
    assert any(c.tile[:2] == (rows, 64) and c.layout == Layout(1, "b", True) for c in pool)


def test_a_thin_output_gets_swapped_tiles_whose_padding_hides_under_the_loads():
    """A swapped CTA's 64 columns pad a thin n (88 to 128 here), but the padded multiply-adds take less time than
    reading A once, so such tiles are offered (3768x24x1272 ran 0.57x cuBLAS on 256 x 16 tiles, 30 CTAs, before they
    were); a square shape gets none. (A thin n of at most THIN columns takes the thin grids: the next test.)"""
    pool = candidates(3768, 88, 1272, "float16", H100_SXM, "wgmma", CUDA.supports)
    least = min(padding(3768, 88, c.tile) for c in pool)
    padded = [c for c in pool if padding(3768, 88, c.tile) > max(PAD_LIMIT, least + PAD_SLACK)]
    assert padded and all(c.layout.swap for c in padded)
    assert any(c.workgroups * c.layout.cluster >= 100 for c in padded if c.transform == "dataparallel")
    square = candidates(4096, 4096, 4096, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert not any(hidden_padding(4096, 4096, "float16", c.tile, c.layout, H100_SXM) for c in square)
    assert not hidden_padding(3768, 24, "float16", (256, 16, 64), Layout(1, "b", False), H100_SXM)  # unswapped


def test_a_thin_n_takes_only_clusters_sharing_b():
    """n <= THIN on a wide m: unswapped CTAs on clusters of 2 or 4 along m that share B, one tile column, in one wave
    of clusters; the last cluster may hold CTAs past m (14648 x 32: 29 tiles of 512 rows, its last CTA empty), and
    only there. A wide n, or a thin n on a short m, keeps the other candidates."""
    pool = candidates(14648, 32, 1080, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert pool and all(thin_grid(14648, 32, c.tile, c.layout, H100_SXM) for c in pool)
    assert all(c.tile[1] >= 32 and c.layout.grid == (c.layout.cluster, 1) for c in pool)
    assert any(c.tile == (512, 32, 64) and c.layout == Layout(4, "b", False) for c in pool)
    small = candidates(4344, 24, 816, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert any(c.tile == (256, 32, 64) and c.layout == Layout(4, "b", False) for c in small)  # CTAs of 64 rows
    assert any(empty_cta(14648, 32, c.tile, c.layout) for c in pool)
    assert not thin_grid(14648, 32, (512, 32, 64), Layout(4, "b", True), H100_SXM)  # swapped
    assert not thin_grid(14648, 32, (64, 32, 64), Layout(1, "b", False), H100_SXM)  # one CTA
    assert not thin_grid(40000, 32, (512, 32, 64), Layout(4, "b", False), H100_SXM)  # two waves of clusters
    for m, n in ((14648, 96), (14648, 1024), (600, 32)):
        other = candidates(m, n, 1080, "float16", H100_SXM, "wgmma", CUDA.supports)
        assert not all(thin_grid(m, n, c.tile, c.layout, H100_SXM) for c in other), (m, n)
        assert not any(empty_cta(m, n, c.tile, c.layout) and not few_empty(m, n, c.tile, c.layout) for c in other)


def test_narrow_outputs_get_64_row_ctas_on_clusters_sharing_b():
    """Where the output's shorter side is at most NARROW, unswapped CTAs of 64 rows on clusters of 2 and 4 along m
    that share B are offered beside the other candidates (cuBLAS: 64 x 96 CTAs on clusters of 4 for 2272 x 272);
    where both sides are longer they are not (they ran slower there: docs/decisions.md)."""

    def cta64(m: int, n: int) -> set[int]:
        """The cluster sizes of the 64-row CTAs sharing B offered for ``m x n``."""
        pool = candidates(m, n, 2048, "float16", H100_SXM, "wgmma", CUDA.supports)
        assert any(c.tile[0] // c.layout.cluster != 64 for c in pool if not c.layout.swap), (m, n)  # beside others
        return {
            c.layout.cluster
            for c in pool
            if not c.layout.swap
            and c.layout.multicast == "b"
            and c.layout.cluster in (2, 4)
            and c.tile[0] == 64 * c.layout.cluster
        }

    for m, n in ((2272, 272), (248, 6224), (5000, NARROW), (NARROW, 3000)):
        assert cta64(m, n) == {2, 4}, (m, n)
    for m, n in ((NARROW + 8, NARROW + 8), (3216, 4216)):
        assert not cta64(m, n), (m, n)


def test_few_empty_ctas_keep_the_anchors_tiles():
    """An unswapped cluster along m sharing B may leave CTAs past m in its last tile row, at most EMPTY_SHARE of the
    grid's: 4168 x 7288 (17 tile rows of 256, the last of 72 rows) keeps 256 x 256 on 2 CTAs; a short m (300: 2 tile
    rows, a quarter of the CTAs empty), a swapped layout, clusters sharing A or CTAs past n do not."""
    assert empty_cta(4168, 7288, (256, 256, 64), Layout(2, "b", False))
    assert few_empty(4168, 7288, (256, 256, 64), Layout(2, "b", False))
    pool = candidates(4168, 7288, 4168, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert any(c.tile == (256, 256, 64) and c.layout == Layout(2, "b", False) for c in pool)
    assert not few_empty(300, 7288, (256, 256, 64), Layout(2, "b", False))
    assert not few_empty(4168, 7288, (256, 256, 64), Layout(2, "b", True))
    assert not few_empty(7288, 4168, (128, 512, 64), Layout(2, "a", False))  # CTAs past n
    # 512 x 256 on 4 CTAs: 9 tile rows of 512, the last of 72 rows: 3 of 36 CTAs empty (1/12 <= 1/8); with 5 tile
    # rows, 3 of 20 (above 1/8)
    assert empty_cta(4168, 7288, (512, 256, 64), Layout(4, "b", False))
    assert few_empty(4168, 7288, (512, 256, 64), Layout(4, "b", False))
    assert not few_empty(2120, 7288, (512, 256, 64), Layout(4, "b", False))


def test_few_empty_ctas_on_swapped_clusters_sharing_a():
    """A swapped cluster along n sharing A may leave CTAs past n in its last tile column, at most EMPTY_SHARE of the
    grid's: 144 x 13352 (27 tile columns of 512, the last of 40 columns) keeps 144 x 512 on 4 CTAs sharing A (3 of
    108 empty) among the candidates; few tile columns (552: 3 of 8 empty), CTAs past m or an unswapped grid do
    not."""
    tile, layout = (144, 512, 64), Layout(4, "a", True)
    assert empty_cta(144, 13352, tile, layout) and few_empty(144, 13352, tile, layout)
    pool = candidates(144, 13352, 11176, "float16", H200, "wgmma", CUDA.supports)
    assert any(c.tile == tile and c.layout == layout for c in pool)
    assert not few_empty(144, 552, tile, layout)
    assert not few_empty(144, 13352, tile, Layout(4, "a", False))
    assert not few_empty(100, 13352, (256, 512, 64), Layout(8, "ab", True))  # CTAs past m as well
    assert not few_empty(13352, 144, (512, 144, 64), Layout(4, "b", True))  # swapped, sharing B


def test_wave_layouts_fill_the_waves_of_the_targets_clusters():
    for tile, layout in wave_layouts(1408, 1664, H100_SXM):
        grid_m, _ = layout.grid
        assert layout.swap and tile[0] // grid_m <= 256 and tile[0] % (8 * grid_m) == 0


@settings(max_examples=60, deadline=None)
@given(dims, dims, targets)
def test_wave_tiles_make_whole_waves(m, n, target):
    for tile, layout in wave_tiles(m, n, target):
        grid_m, grid_n = layout.grid
        rows = tile[0] // grid_m
        assert not layout.swap and rows in (128, 192, 256) and tile[1] % (16 * grid_n) == 0
        most = max(MANY_WAVES) if rows <= MANY_WAVES_ROWS else max(WAVE_COUNTS)  # columns fitted to whole waves
        assert output_tiles(m, n, tile) <= most * target.resident(layout.cluster)


def test_wave_tiles_fill_a_wave_where_the_menu_leaves_a_partial_one():
    # 4928 x 880: the menu's 128 x 448 tiles make 78 tiles on 66 clusters (1.18 waves); cuBLAS runs 192 x 192 on 130
    # CTAs. A wave tile of 256 x 320 on clusters of 2 makes 60 tiles, one wave of the 66 clusters
    tiles = wave_tiles(4928, 880, H100_SXM)
    assert ((256, 320, 64), Layout(2, "a", False)) in tiles and ((192, 176, 64), Layout(1, "b", False)) in tiles
    pool = candidates(4928, 880, 3688, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert ((256, 320, 64), Layout(2, "a", False)) in {(c.tile, c.layout) for c in pool}  # valid for the path: ranked
    ranked = dict(rank(4928, 880, 3688, "float16", H100_SXM, "wgmma", CUDA.supports))
    correction = ctgraph.select._correction("sm90")
    for c, seconds in ranked.items():  # priced as predicted, the wave tiles too (the fitted sample times them)
        assert seconds == predict(c, 4928, 880, 3688, "float16", H100_SXM, correction)


def test_wave_tiles_fill_the_last_of_many_waves():
    # 3772 x 8192 on an H200: the menu's 256 x 128 tiles make 960 tiles, 7.27 waves of 132 CTAs (the last 27% full).
    # A wave tile of 256 x 240 on clusters of 2 (CTAs of 128 x 240) makes 525 tiles, 7.95 waves of the 66 clusters
    tiles = wave_tiles(3772, 8192, H200)
    assert ((256, 240, 64), Layout(2, "b", False)) in tiles
    assert output_tiles(3772, 8192, (256, 240, 64)) == 525 and H200.resident(2) == 66
    pool = candidates(3772, 8192, 8192, "float16", H200, "wgmma", CUDA.supports)
    assert ((256, 240, 64), Layout(2, "b", False)) in {(c.tile, c.layout) for c in pool}  # valid for the path: ranked


@settings(max_examples=60, deadline=None)
@given(dims, dims, st.integers(1, 64 * SHORT_K), targets)
def test_a_short_k_offers_no_tall_wide_cta(m, n, k, target):
    assert not any(tall_wide(t, lay) for t, lay in tiles_for(m, n, k, "float16", target, "wgmma", CUDA.supports))


def test_tall_wide_ctas_are_offered_past_a_short_k():
    # 2240 x 4256 x 232 (4 K iterations) on an H200: 256 x 160 CTAs ran 0.88x cuBLAS, 256 x 208 tiles on clusters of 2
    # (CTAs of 128 x 208) 0.99x (docs/results/tallwide-probe-h200.csv)
    wide = ((256, 160, 64), Layout(1, "b", False))
    assert tall_wide(*wide) and not tall_wide((256, 128, 64), Layout()) and not tall_wide((512, 160, 64), Layout(4))
    assert tall_wide((512, 160, 64), Layout(2)) and tall_wide((256, 320, 64), Layout(2, "a"))
    assert wide not in tiles_for(2240, 4256, 232, "float16", H200, "wgmma", CUDA.supports)
    assert wide in tiles_for(2240, 4256, 64 * SHORT_K + 1, "float16", H200, "wgmma", CUDA.supports)


def test_selection_is_deterministic_and_keyed_by_the_target():
    a = select(1000, 3000, 2000, "float16", H100_SXM, "wgmma", CUDA.supports)
    b = select(1000, 3000, 2000, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert a == b
    small = H100_SXM.with_(name="Small GPU", sms=32, resident_clusters=((1, 32), (2, 16), (4, 8), (8, 4)))
    c = select(1000, 3000, 2000, "float16", small, "wgmma", CUDA.supports)
    assert c.config.workgroups <= small.resident(c.config.layout.cluster)


def test_measured_entries_serve_their_device_then_the_same_chip(tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    chosen = select(8192, 8192, 8192, "float16", H100_SXM, "wgmma", CUDA.supports)
    assert chosen.reason == f"measured on this device ({H100_SXM.name}, shipped)" and chosen.source == "measured"
    assert same_chip(H200) == (H100_SXM, KNOWN["NVIDIA H800"]) and H100_SXM in same_chip(KNOWN["NVIDIA H800"])
    sibling = select(8192, 8192, 8192, "float16", H200, "wgmma", CUDA.supports)
    assert sibling.config == chosen.config and sibling.source == "measured"
    assert sibling.reason == f"measured on the same chip ({H100_SXM.name}, shipped)"
    pcie = KNOWN["NVIDIA H100 PCIe"]  # 114 SMs: another grid, so not the same chip
    assert same_chip(pcie) == ()
    assert select(8192, 8192, 8192, "float16", pcie, "wgmma", CUDA.supports).source == "ranker"
    own = Config((128, 128, 64), Layout(), "dataparallel", 132)  # the device's own entry wins over the chip's
    entries.store(H200.name, {entries.key(8192, 8192, 8192, "float16"): entries.Entry(own, ((own.name, 1e-3),))})
    mine = select(8192, 8192, 8192, "float16", H200, "wgmma", CUDA.supports)
    assert mine.config == own and mine.reason == f"measured on this device ({H200.name}, autotune cache)"


def test_ranked_order_is_by_prediction():
    ranked = rank(3000, 3000, 3000, "float16", H100_SXM, "wgmma", CUDA.supports)
    times = [t for _, t in ranked]
    assert times == sorted(times) and all(t > 0 and math.isfinite(t) for t in times)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(m=dims, n=aligned, k=aligned)
def test_the_models_ring_has_the_kernels_stages(m, n, k):
    """The ring term's stage count and the math warpgroups the correction reads (model._stages, _warpgroups) are the
    ones the wgmma kernel's plan builds, for every candidate."""
    from ctgraph.select.model import _stages, _warpgroups
    from lowering.cuda.options import CudaOptions
    from lowering.cuda.plan.hopper import hopper_layout

    for c in candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports):
        plan = hopper_layout(c.tile, "float16", CudaOptions(mainloop="wgmma", **c.layout.options()))
        assert _stages(c, "float16", H100_SXM) == plan["STAGES"], c.name
        assert _warpgroups(c) == plan["CONSUMERS"], c.name


def test_one_warpgroup_feature_marks_swapped_single_ctas_of_64_columns():
    """``swap_one_warpgroup`` is 1 exactly for a swapped CTA of one math warpgroup (at most 64 columns of n) that is
    not in a cluster: 32 x 64 on one CTA, not on 8 CTAs nor unswapped, nor 32 x 128 (two warpgroups)."""
    at = FEATURES.index("swap_one_warpgroup")

    def flag(tile: tuple[int, int, int], layout: Layout) -> float:
        c = Config(tile, layout, "dataparallel", 48)
        return features(c, 106, 768, 768, "float16", H200, analytic(c, 106, 768, 768, "float16", H200))[at]

    assert flag((32, 64, 64), Layout(1, "b", True)) == 1.0
    assert flag((64, 256, 64), Layout(8, "ab", True)) == 0.0  # the same 32 x 64 CTAs, on clusters of 8
    assert flag((32, 64, 64), Layout(1, "b", False)) == 0.0
    assert flag((32, 128, 64), Layout(1, "b", True)) == 0.0


def test_analytic_model_prices_waves_and_l2_reuse():
    one = Config((128, 256, 64), Layout(), "dataparallel", 132)
    # 132 tiles: one wave; 133 tiles: a second wave of one tile costs a whole tile's K loop
    t132 = analytic(one, 128 * 12, 256 * 11, 4096, "float16", H100_SXM)
    t133 = analytic(one, 128 * 12 + 1, 256 * 11, 4096, "float16", H100_SXM)
    assert t133 > 1.5 * t132
    rows = Config((256, 256, 64), Layout(2, "b", False), "streamk2tile", 66, 1)
    grouped = dataclasses.replace(rows, raster=8)
    assert analytic(grouped, 4096, 28672, 4096, "float16", H100_SXM) < analytic(
        rows, 4096, 28672, 4096, "float16", H100_SXM
    )


@pytest.mark.parametrize("transform, split", [("splitk_reduce", 4), ("streamk", None)])
def test_analytic_model_reads_k_once_however_it_is_split(transform, split):
    """22x6144x4096 streams B (50 MB) from HBM: workgroups sharing a tile read their own K slabs, so splitting K over
    four times the workgroups cannot read it faster (the old model priced split-K at half the data-parallel time;
    measured on an H100 it ran 23.1 us against 19.7)."""
    m, n, k = 22, 6144, 4096
    dp = Config((24, 192, 64), Layout(1, "b", True), "dataparallel", 32)
    shared = dataclasses.replace(dp, transform=transform, workgroups=128, split=split)
    b_once = n * k * 2 / (0.7 * H100_SXM.hbm_bandwidth)
    assert analytic(shared, m, n, k, "float16", H100_SXM) >= b_once
    assert analytic(shared, m, n, k, "float16", H100_SXM) >= 0.9 * analytic(dp, m, n, k, "float16", H100_SXM)


def test_correction_round_trips_and_multiplies():
    c = Correction("sm90", tuple(0.1 * i for i in range(len(FEATURES))), "abc", FEATURES, (("lambda", "1.0"),))
    assert Correction.from_json(c.to_json()) == c
    cfg = Config((128, 128, 64), Layout(), "dataparallel", 132)
    base = analytic(cfg, 2048, 2048, 2048, "float16", H100_SXM)
    phi = features(cfg, 2048, 2048, 2048, "float16", H100_SXM, base)
    assert predict(cfg, 2048, 2048, 2048, "float16", H100_SXM, c) == pytest.approx(
        base * math.exp(np.dot(c.weights, phi))
    )
    with pytest.raises(ValueError, match="features must be"):
        Correction("sm90", (0.0,), names=("bias",))


def test_a_correction_says_how_the_bounds_join_and_the_ranker_reads_it():
    """``bounds_norm``: the p of a K step's p-norm of bounds (the largest where infinite, and then not written, so
    older files read alike); the ranker prices with the correction's own, the fit with the one it is given."""
    four = Correction("sm90", bounds_norm=4.0)
    assert Correction.from_json(four.to_json()) == four and '"bounds_norm": 4.0' in four.to_json()
    assert Correction("sm90", bounds_norm=4).to_json() == four.to_json()  # an int p writes the same file
    assert "bounds_norm" not in Correction("sm90").to_json()
    for bad in (0.5, 0.0, math.nan):
        with pytest.raises(ValueError, match="bounds_norm is a p >= 1"):
            Correction("sm90", bounds_norm=bad)
    m, n, k = 1000, 3000, 2048
    pool = candidates(m, n, k, "float16", H200, "wgmma", CUDA.supports)[:12]
    largest = [analytic(c, m, n, k, "float16", H200) for c in pool]
    soft = [analytic(c, m, n, k, "float16", H200, 4.0) for c in pool]
    assert all(a < b <= a * 5 ** (1 / 4) for a, b in zip(largest, soft, strict=True))  # five bounds, the largest a
    assert rank_keys(pool, m, n, k, "float16", H200, four)[0] == pytest.approx(soft, rel=1e-12)
    assert rank_keys(pool, m, n, k, "float16", H200, Correction("sm90"))[0] == pytest.approx(largest, rel=1e-12)
    table = _timed(H200, [(1000, 3000, 2048), (512, 4096, 4096), (2048, 1024, 8192)], np.zeros(len(FEATURES)))
    assert fit(table, table, H200, kernels="test", bounds_norm=4.0).correction.bounds_norm == 4.0
    with pytest.raises(ValueError, match="bounds_norm is a p >= 1"):
        fit(table, table, H200, kernels="test", bounds_norm=0.5)


def _table(device: str, rows: dict[tuple[int, int, int], dict[Config, float]]) -> entries.Table:
    out = {}
    for (m, n, k), secs in rows.items():
        best = min(secs, key=secs.__getitem__)
        out[entries.key(m, n, k, "float16")] = entries.Entry(
            best, tuple(sorted((c.name, t) for c, t in secs.items())), kernels="test"
        )
    return entries.Table(device, out)


def test_fit_recovers_a_known_correction_and_reduces_regret():
    """Timings made by a known correction of the analytic model: the fit finds it, chosen on validation."""
    rng = np.random.default_rng(0)
    true = np.zeros(len(FEATURES))
    true[FEATURES.index("swap")], true[FEATURES.index("streamk")], true[FEATURES.index("padding")] = 0.4, 0.5, 1.0

    def synth(count: int, seed: int) -> entries.Table:
        r = np.random.default_rng(seed)
        rows = {}
        for _ in range(count):
            m, n, k = (int(8 * round(np.exp(r.uniform(np.log(64), np.log(6000))) / 8)) for _ in range(3))
            pool = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)
            picks = [pool[i] for i in r.choice(len(pool), size=min(8, len(pool)), replace=False)]
            rows[m, n, k] = {
                c: analytic(c, m, n, k, "float16", H100_SXM)
                * math.exp(
                    float(
                        np.dot(
                            true, features(c, m, n, k, "float16", H100_SXM, analytic(c, m, n, k, "float16", H100_SXM))
                        )
                    )
                )
                for c in picks
            }
        return _table(H100_SXM.name, rows)

    del rng
    validation = synth(15, 2)
    train = synth(40, 1)
    f = fit(train, validation, H100_SXM, kernels="test")
    assert f.validation_regret == pytest.approx(1.0, abs=1e-6)
    assert f.validation_regret <= f.validation_regret_analytic
    # the features are near collinear (swap and its interactions, padding and its square), so a weight may be shared
    # among them, and the chosen lambda (the largest whose regret ties the least: here every one) shrinks them; the
    # ranking above is what it must keep. Unregularised, the solver gives back the correction itself: each config's
    # factor against its shape's
    rows = pooled(train, H100_SXM)
    w = _solve(rows, 0.0)
    for key in dict.fromkeys(r[0] for r in rows):
        phis = np.array([r[2][: len(FEATURES)] for r in rows if r[0] == key])
        got, want = phis @ w, phis @ true
        assert np.allclose(got - got.mean(), want - want.mean(), atol=1e-4), key
    assert f.correction.kernels == "test"


def _timed(target: Target, shapes: list[tuple[int, int, int]], true: np.ndarray) -> entries.Table:
    """A tune table of ``target`` whose timings are the analytic model times the correction ``true``."""
    rows = {}
    for m, n, k in shapes:
        pool = candidates(m, n, k, "float16", target, "wgmma", CUDA.supports)[:8]
        rows[m, n, k] = {
            c: analytic(c, m, n, k, "float16", target)
            * math.exp(
                float(np.dot(true, features(c, m, n, k, "float16", target, analytic(c, m, n, k, "float16", target))))
            )
            for c in pool
        }
    return _table(target.name, rows)


def test_fit_pools_the_devices_of_a_family(monkeypatch, tmp_path, capsys):
    """An H100's and an H200's tables fit one correction: the same shape on two devices is two shapes (each its own
    analytic model and fixed effect), the fit of a correction both share ranks both exactly, and a table of another
    family is refused by name; ``fit --also`` reads them."""
    from ctgraph import target as targets
    from ctgraph.cli import main
    from ctgraph.select.fit import pooled

    true = np.zeros(len(FEATURES))
    true[FEATURES.index("swap")], true[FEATURES.index("padding")] = 0.4, 1.0
    train_shapes = [(200, 3000, 2048), (1504, 904, 2048), (96, 4096, 4096), (3000, 176, 1024), (640, 640, 8192)]
    tables = [_timed(t, train_shapes, true) for t in (H100_SXM, H200)]
    rows = pooled(tables, H100_SXM)
    assert len(rows) == len(samples(tables[0], H100_SXM)) + len(samples(tables[1], H200))
    assert len({r[0] for r in rows}) == 2 * len(train_shapes)  # a shape per device
    f = fit(tables, tables, H100_SXM, kernels="test")
    assert f.validation_regret == pytest.approx(1.0, abs=1e-6)
    assert dict(f.correction.meta)["device"] == f"{H100_SXM.name}, {H200.name}"

    monkeypatch.setitem(targets.KNOWN, "Other GPU", H100_SXM.with_(name="Other GPU", family="sm80"))
    with pytest.raises(ValueError, match="'Other GPU' is of family 'sm80', not 'sm90'"):
        fit([tables[0], _table("Other GPU", {})], tables, H100_SXM, kernels="test")

    paths = []
    for i, t in enumerate(tables):
        paths.append(tmp_path / f"t{i}.json")
        paths[-1].write_text(t.to_json())
    out = tmp_path / "ranker.json"
    monkeypatch.setattr("ctgraph.select.fit.kernel_hash", lambda *configs: "test")  # the kernels that timed them
    args = ["fit", str(paths[0]), str(paths[0]), "--also", str(paths[1]), str(paths[1]), "--out", str(out)]
    assert main([*args, "--report"]) == 0 and out.is_file()
    printed = capsys.readouterr().out
    assert f"{len(rows)} rows" in printed
    # the report: each table fitted (train and validation of each pair), its shapes and regrets, ranked exactly
    lines = [line.split() for line in printed.splitlines() if line.startswith(str(tmp_path))]
    assert [line[0] for line in lines] == [str(paths[0]), str(paths[0]), str(paths[1]), str(paths[1])]
    assert all(line[1] == str(len(train_shapes)) and float(line[3]) == pytest.approx(1.0) for line in lines)
    # without a train table, the report is of the correction in use, on the tables named
    assert main(["fit", "--report", str(paths[1])]) == 0
    assert str(paths[1]) in capsys.readouterr().out
    assert main(["fit"]) == 2
    assert "give a train and a validation table" in capsys.readouterr().err


def test_regret_is_one_when_the_first_ranked_is_the_fastest():
    rows = samples(
        _table(
            H100_SXM.name,
            {
                (1024, 1024, 1024): {
                    Config((128, 128, 64), Layout(), "dataparallel", 64): 1.0,
                    Config((128, 256, 64), Layout(), "dataparallel", 32): 2.0,
                }
            },
        ),
        H100_SXM,
    )
    r = regret(rows, np.zeros(len(FEATURES)))
    assert len(r) == 1 and r[0] >= 1.0


def test_kernel_hash_follows_the_generated_sources(monkeypatch):
    before = kernel_hash()
    assert before == kernel_hash()  # deterministic
    from lowering.cuda import runtime
    from lowering.cuda.emit import hopper

    monkeypatch.setattr(hopper, "WATCHDOG_NS", hopper.WATCHDOG_NS + 1)
    monkeypatch.setattr(runtime, "_SOURCES", runtime.LRU(runtime.MODULES))  # printed again by the patched emitter
    assert kernel_hash() != before


def test_autotune_times_in_interleaved_rounds_and_keeps_the_median():
    """Rounds go forward, backward, forward (so the first and last items see the run's start and end alike); each
    item keeps the median of its rounds; a timing that raises counts as infinity in its round only."""
    calls: list[str] = []
    fails = {("c", 1)}

    def time(x: str) -> float:
        calls.append(x)
        if (x, calls.count(x)) in fails:
            raise RuntimeError("launch failed")
        return 10.0 * "abc".index(x) + len(calls)

    got = interleaved(["a", "b", "c"], 3, time)
    assert calls == ["a", "b", "c", "c", "b", "a", "a", "b", "c"]
    assert got == {"a": 6.0, "b": 15.0, "c": 29.0}  # a: 1, 6, 7; b: 12, 15, 18; c: inf, 24, 29
    assert interleaved(["a"], 1, lambda x: 2.0) == {"a": 2.0}
    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        interleaved(["a"], 0, lambda x: 1.0)


def test_autotune_compiles_every_candidate_at_once_from_programs_made_in_the_callers_thread(monkeypatch):
    """compile_ahead: the programs (their sources) are made one by one in the calling thread; their ``cubin()`` run
    at once (a barrier that all three must reach together); a program that fails to be made or to compile, and one
    with no ``cubin`` (another backend), are passed over without stopping the others."""
    import threading

    from ctgraph.select.autotune import compile_ahead

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    caller, made, compiled = threading.get_ident(), [], []
    together = threading.Barrier(3, timeout=10)

    class Program:
        def __init__(self, i: int) -> None:
            self.i = i

        def cubin(self) -> bytes:
            together.wait()  # BrokenBarrierError (so never compiled) unless all three compile at the same time
            if self.i == 1:
                raise RuntimeError("nvcc failed")
            compiled.append(self.i)
            return b""

    class Kern:
        def __init__(self, i: int) -> None:
            self.i = i

        @property
        def program(self) -> Program:
            made.append(threading.get_ident())
            return Program(self.i)

    class Unbuildable:
        @property
        def program(self) -> Program:
            raise ValueError("does not fit the path")

    other = type("OtherBackend", (), {"program": object()})()
    compile_ahead([Kern(0), Unbuildable(), Kern(1), other, Kern(2)])
    assert made == [caller] * 3 and sorted(compiled) == [0, 2]
    compile_ahead([Kern(3)])  # one alone: nothing to overlap, compiled at its launch
    assert made == [caller] * 4 and sorted(compiled) == [0, 2]


def test_autotune_cache_stores_merges_and_reloads(tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    c1 = Config((128, 128, 64), Layout(), "dataparallel", 64)
    c2 = Config((64, 128, 64), Layout(), "streamk", 132)
    entries.store("Test GPU", {entries.key(1, 2, 3, "float16"): entries.Entry(c1, ((c1.name, 1e-5),))})
    entries.store("Test GPU", {entries.key(4, 5, 6, "float16"): entries.Entry(c2, ((c2.name, 2e-5),), cublas=3e-5)})
    table = entries.load("Test GPU")
    assert table.get(1, 2, 3, "float16").config == c1 and table.get(4, 5, 6, "float16").cublas == 3e-5
    assert json.loads(entries.user_path("Test GPU").read_text())["device"] == "Test GPU"
    assert entries.load("Other GPU").entries == {}


@pytest.mark.parametrize(
    "text", ['{"device": "Test GPU", "entr', "", "[]", '{"device": "x", "entries": {"1,2,3,float16": {}}}']
)
def test_a_cache_this_version_cannot_read_is_skipped_with_a_warning_and_rewritten(tmp_path, monkeypatch, text):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    path = entries.user_path(H100_SXM.name)
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.warns(UserWarning, match="ignoring the autotune cache .*delete it"):
        kern = ctgraph.compile(ctgraph.gemm(777, 776, 1032, macro_tile="auto"), "auto", target="cuda", build=False)
    assert kern.selection is not None and kern.selection.source == "ranker"
    c = Config((64, 64, 64), Layout(), "streamk", 100)
    with pytest.warns(UserWarning, match="ignoring the autotune cache"):
        entries.store(H100_SXM.name, {entries.key(1, 2, 3, "float16"): entries.Entry(c, ((c.name, 1e-5),))})
    assert entries.load_user(H100_SXM.name).get(1, 2, 3, "float16").config == c  # the store wrote a table again


def test_a_calibrated_correction_this_version_cannot_read_gives_way_to_the_shipped_one(tmp_path, monkeypatch):
    from importlib import resources

    from ctgraph.select.model import load_correction, user_correction_path

    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    path = user_correction_path("sm90")
    path.parent.mkdir(parents=True)
    path.write_text('{"family": "sm90", "weigh')
    with pytest.warns(UserWarning, match="ignoring the calibrated correction .*shipped one"):
        assert load_correction("sm90") == load_correction(
            "sm90", str(resources.files("ctgraph") / "data" / "ranker-sm90.json")
        )


def test_a_store_merges_the_file_not_a_memo_of_it(tmp_path, monkeypatch):
    """Another process may replace the file within one tick of a coarse clock (same time stamp): the store reads the
    file itself under the lock, so the other's entries stay."""
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    c = Config((64, 64, 64), Layout(), "streamk", 100)
    entry = entries.Entry(c, ((c.name, 1e-5),))
    path = entries.store("Test GPU", {entries.key(1, 1, 1, "float16"): entry})
    assert entries.load_user("Test GPU").get(1, 1, 1, "float16") is not None  # read, and memoized
    stamp = path.stat().st_mtime_ns
    other = entries.Table("Test GPU", {entries.key(k, k, k, "float16"): entry for k in (1, 2)})
    path.write_text(other.to_json())  # the other process's write, within the same tick
    os.utime(path, ns=(stamp, stamp))
    entries.store("Test GPU", {entries.key(3, 3, 3, "float16"): entry})
    assert sorted(entries.load_user("Test GPU").entries) == ["1,1,1,float16", "2,2,2,float16", "3,3,3,float16"]


def test_autotune_that_cannot_write_its_cache_warns_and_keeps_the_winner(tmp_path, monkeypatch):
    from ctgraph.select import autotune as tuner

    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(blocked / "cache"))  # under a file: no directory can be made
    a, b = Config((64, 64, 64), Layout(), "streamk", 100), Config((64, 64, 64), Layout(), "dataparallel", 64)
    monkeypatch.setattr(tuner, "time_configs", lambda m, n, k, dtype, configs, build, rounds: {a: 2e-6, b: 1e-6})
    with pytest.warns(UserWarning, match="could not store 64x64x64's winner .*CTGRAPH_CACHE_DIR"):
        entry = tuner.autotune(64, 64, 64, "float16", H100_SXM, [a, b], build=lambda c: None)
    assert entry.config == b


def test_select_reads_a_users_autotune_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    mine = Config((64, 64, 64), Layout(), "streamk", 100)
    entries.store(H100_SXM.name, {entries.key(777, 776, 1032, "float16"): entries.Entry(mine, ((mine.name, 1e-5),))})
    kern = ctgraph.compile(ctgraph.gemm(777, 776, 1032, macro_tile="auto"), "auto", target="cuda", build=False)
    assert kern.selection.config == mine and kern.problem.macro_tile == (64, 64, 64) and kern.workgroups == 100


def test_auto_without_a_gpu_decides_for_the_known_device(monkeypatch):
    monkeypatch.delenv("CTGRAPH_TARGET_DEVICE", raising=False)
    kern = ctgraph.compile(ctgraph.gemm(130, 72, 4104, macro_tile="auto"), "auto", target="cuda", build=False)
    assert kern.selection is not None and "candidates" in kern.selection.reason
    kern.source  # noqa: B018 -- generates
    with pytest.raises(ValueError, match="autotune times kernels on the GPU"):
        ctgraph.compile(ctgraph.gemm(130, 72, 4104), "auto", target="cuda", build=False, autotune=True)
    with pytest.raises(ValueError, match="autotune must be True or False"):
        ctgraph.compile(ctgraph.gemm(130, 72, 4104), "auto", target="cpu", autotune="yes")
    monkeypatch.setenv("CTGRAPH_AUTOTUNE", "1")  # the environment's autotune applies to built kernels only
    auto = ctgraph.compile(ctgraph.gemm(130, 72, 4104, macro_tile="auto"), "auto", target="cuda", build=False)
    assert auto.selection == kern.selection


def test_unaligned_auto_shapes_compile_on_the_element_load_path():
    """130x70x4100 raised 'macro_tile (40, 64, 64) does not fit the fp16 mma path'; now its tile is the path's."""
    kern = ctgraph.compile(ctgraph.gemm(130, 70, 4100, macro_tile="auto"), "auto", target="cuda", build=False)
    assert CUDA.supports(kern.problem.macro_tile, "float16", Layout(), "scalar")
    kern.source  # noqa: B018


def test_cpu_auto_runs_and_matches_numpy():
    g = ctgraph.gemm(70, 50, 90, macro_tile="auto", dtype="float32")
    kern = ctgraph.compile(g, "auto", target="cpu")
    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((70, 90), np.float32), rng.standard_normal((90, 50), np.float32)
    np.testing.assert_allclose(kern(A, B), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-3)


def test_a_graph_of_an_auto_tile_is_selected_once_for_its_target(monkeypatch):
    """gemm(macro_tile="auto") selects for the GPU's target; compile(transform="auto") for that target and path takes
    the graph's selection (one select for a new shape, not two), and selects again for another target."""
    from ctgraph.select import resolve

    calls = []
    monkeypatch.setattr(resolve, "select", lambda *a, **kw: calls.append((a[4].family, a[5])) or select(*a, **kw))
    g = ctgraph.gemm(1000, 4096, 4096, macro_tile="auto")
    assert g.attrs["auto_selection"].selection.config.tile == g.attrs["gemm"].macro_tile and len(calls) == 1
    once = ctgraph.compile(g, "auto", target="cuda", build=False)
    assert len(calls) == 1 and once.selection == g.attrs["auto_selection"].selection
    monkeypatch.setattr(resolve, "select", select)  # the same config as selecting again
    fixed = ctgraph.gemm(1000, 4096, 4096, macro_tile=once.problem.macro_tile)
    again = ctgraph.compile(fixed, "auto", target="cuda", build=False)
    assert (again.transform, again.workgroups, again.raster) == (once.transform, once.workgroups, once.raster)
    monkeypatch.setattr(resolve, "select", lambda *a, **kw: calls.append((a[4].family, a[5])) or select(*a, **kw))
    ctgraph.compile(g, "auto", target="cuda", build=False, mainloop="mma")  # another path: selected again
    ctgraph.compile(ctgraph.gemm(70, 50, 90, macro_tile="auto", dtype="float32"), "auto", target="cpu")
    assert calls[1:] == [("sm90", "vector"), ("sm90", "scalar"), ("cpu", "cpu")]  # mma; the graph (fp32 on sm90); cpu


class FakeBackend:
    """A backend as the contract says: target(), layout_of(), supports() (and build, not needed to select)."""

    calls: ClassVar[list[tuple]] = []

    @staticmethod
    def target() -> Target:
        return H100_SXM.with_(name="Fake GPU", sms=16, resident_clusters=((1, 16), (2, 8)))

    @staticmethod
    def layout_of(tile, dtype, options):
        return Layout()

    @staticmethod
    def supports(tile, dtype, layout, path) -> bool:
        FakeBackend.calls.append((tile, layout, path))
        return layout == Layout() and tile[0] in (64, 128) and tile[1] in (64, 128)


def test_selection_needs_only_the_backend_contract():
    t = FakeBackend.target()
    chosen = select(1000, 1000, 1000, "float16", t, "wgmma", FakeBackend.supports)
    assert chosen.config.tile[:2] in {(64, 64), (64, 128), (128, 64), (128, 128)}
    assert chosen.config.workgroups <= 16 or chosen.config.transform == "splitk_reduce"
    assert FakeBackend.calls and all(p == "wgmma" for _, _, p in FakeBackend.calls)
    for name in ("target", "layout_of", "supports", "build"):
        assert callable(getattr(backend("cuda"), name)) and callable(getattr(backend("cpu"), name))


def test_tiles_for_never_empty():
    for m, n, k in [(1, 8, 8), (16, 16, 16), (9000, 8, 64), (8, 50000, 8)]:
        assert tiles_for(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)


def test_ctgraph_reaches_backends_only_through_the_registry():
    """No module of ctgraph imports lowering (the registry, ctgraph/backends.py, imports it by name), and the CUDA
    backend never imports the selection code beyond its value types (config, target)."""
    import ast
    from pathlib import Path

    root = Path(ctgraph.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            assert not any(n == "lowering" or n.startswith("lowering.") for n in names), path
    lowering_root = root.parent / "lowering"
    allowed = {"ctgraph.config", "ctgraph.target"}
    for path in lowering_root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ctgraph.select"):
                assert node.module in allowed, (path, node.module)


def test_fit_check_says_whether_a_correction_matches_the_kernels(monkeypatch, capsys):
    from ctgraph.cli import main
    from ctgraph.select import fit as fitting

    monkeypatch.setattr(fitting, "kernel_hash", lambda *a: "kernels-of-today")
    assert main(["fit", "--check", "sm90"]) == 1  # the shipped fit was taken on other kernels than these
    out = capsys.readouterr().out
    assert "stale" in out and "kernels-of-today" in out and "--retime" in out  # what changed, and what to run
    assert main(["fit", "--check", "sm-unknown"]) == 2  # neither a known device's family nor one calibrated here
    assert "fit --check: a family of the known devices (sm90) or one calibrated here" in capsys.readouterr().err
    assert main(["fit"]) == 2 and "give a train and a validation table" in capsys.readouterr().err


@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 8, 8), (3, 5, 7), (1, 65536, 8), (65536, 1, 1)])
def test_the_shipped_ranker_prices_every_candidate_of_a_degenerate_shape(shape):
    """1x1x1 once overflowed ``exp``: the fitted square of the padding feature (16383 on a 128 x 128 tile) past any
    sample; the feature stops at the samples' range, so every price is finite and the ranking is total."""
    m, n, k = shape
    for path in H100_SXM.paths("float16", k, n):
        ranked = rank(m, n, k, "float16", H100_SXM, path, CUDA.supports)
        assert ranked and all(math.isfinite(t) and t > 0 for _, t in ranked), path


def test_a_skinny_side_on_a_wide_output_stays_in_one_tile():
    """16x6400x1600 ran 8-row tiles (two tile rows, B read twice) at 0.70x cuBLAS: once the other side makes SMs / 8
    tiles of 64, every candidate holds the skinny side in one tile; a narrow output may still split it."""
    assert (
        wide_enough(16, 6400, H100_SXM) and not wide_enough(16, 744, H100_SXM) and not wide_enough(200, 6400, H100_SXM)
    )
    for m, n, k in ((16, 6400, 1600), (100, 4096, 4096), (128, 28672, 4096)):
        pool = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)
        assert pool and all(c.tile[0] >= m for c in pool), (m, n, k)
    for m, n, k in ((6400, 16, 1600), (3768, 24, 1272), (14648, 128, 1080)):
        pool = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports)
        assert pool and all(c.tile[1] >= n for c in pool), (m, n, k)
    assert any(c.tile[0] < 24 for c in candidates(24, 744, 496, "float16", H100_SXM, "wgmma", CUDA.supports))


@settings(max_examples=40, deadline=None)
@given(aligned, aligned, aligned, targets)
def test_auto_never_offers_a_named_only_schedule(m, n, k, target):
    """Two-tile Stream-K and the 3-batch hybrid are ranked only where the caller names their transform
    (candidates.NAMED_ONLY); naming one adds its own schedules and nothing else."""
    pool = candidates(m, n, k, "float16", target, "wgmma", CUDA.supports)
    assert pool and not any((c.transform, c.sk_batches) in NAMED_ONLY for c in pool)
    for named in ("streamk2tile", "streamk_hybrid"):
        more = candidates(m, n, k, "float16", target, "wgmma", CUDA.supports, named=named)
        assert [c for c in more if c.transform != named] == [c for c in pool if c.transform != named]
        assert all(offered(c, m, n, named) for c in more)


@settings(max_examples=40, deadline=None)
@given(aligned, aligned, aligned, targets)
def test_auto_offers_no_stream_k_on_a_grid_its_tiles_nearly_fill(m, n, k, target):
    """Stream-K on a grid its T tiles fill to two thirds or more (3 T >= 2 g: candidates.near_wave) is ranked only
    for a caller who names "streamk"; naming it adds back exactly those grids."""
    pool = candidates(m, n, k, "float16", target, "wgmma", CUDA.supports)
    assert not any(near_wave(c, m, n) for c in pool)
    named = candidates(m, n, k, "float16", target, "wgmma", CUDA.supports, named="streamk")
    assert [c for c in named if not near_wave(c, m, n)] == pool
    for c in named:
        assert near_wave(c, m, n) == (c.transform == "streamk" and 3 * output_tiles(m, n, c.tile) >= 2 * c.workgroups)


def test_near_wave_stream_k_is_left_to_a_named_transform():
    """7496 x 280 x 5888 (a fresh draw of the probe): 60 tiles of 256 x 144 on 66 pairs; the ranker put Stream-K first
    there, which ran 1.33x the time of 512 x 144 data-parallel. "auto" no longer ranks it, "streamk" still does."""
    m, n, k = 7496, 280, 5888
    sk = Config.parse("256x144x64 2b streamk g66 r6")
    tile, layout = sk.tile, sk.layout
    assert near_wave(sk, m, n) and not offered(sk, m, n) and offered(sk, m, n, "streamk")
    assert sk not in candidates(m, n, k, "float16", H200, "wgmma", CUDA.supports)
    assert sk in candidates(m, n, k, "float16", H200, "wgmma", CUDA.supports, named="streamk")
    assert select_schedule(m, n, k, "float16", tile, layout, H200).config.transform != "streamk"
    assert select_schedule(m, n, k, "float16", tile, layout, H200, "streamk").config.transform == "streamk"


def test_a_fixed_tile_under_auto_gets_no_named_only_schedule():
    """select_schedule (a caller's tile, transform="auto") ranks the same schedules as "auto" does; a named hybrid
    still ranks both batch counts."""
    m, n, k, tile, layout = 4152, 4800, 1600, (128, 256, 64), Layout(1, "b", False)
    auto = select_schedule(m, n, k, "float16", tile, layout, H100_SXM)
    assert auto.ranked and all(offered(c, m, n) for c, _ in auto.ranked)
    named = select_schedule(m, n, k, "float16", tile, layout, H100_SXM, "streamk_hybrid")
    assert {c.sk_batches for c, _ in named.ranked} == {1, 3}


def test_a_named_two_tile_schedule_still_gets_the_rankers_layout_and_order():
    m, n, k, tile = 4489, 2304, 768, (256, 256, 64)  # a shape whose ranker put two-tile Stream-K first before
    named = candidates(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports, named="streamk2tile")
    pool = [c for c in named if c.tile == tile and c.transform == "streamk2tile"]
    assert pool
    best = rank(m, n, k, "float16", H100_SXM, "wgmma", CUDA.supports, pool)[0][0]
    g = ctgraph.gemm(m, n, k, macro_tile=tile)
    kern = ctgraph.compile(g, "streamk2tile", target="cuda", build=False, cluster="auto", raster="auto")
    assert {o: kern.options[o] for o in ("cluster", "multicast", "swap")} == best.layout.options()
    chosen = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), "auto", target="cuda", build=False)
    assert chosen.selection.config.transform != "streamk2tile"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda g: ctgraph.compile(g(macro_tile="auto"), "auto", target="cpu", autotune=True), "target 'cpu'"),
        (lambda g: ctgraph.compile(g(macro_tile="auto"), "streamk", target="cpu", autotune=True), "target 'cpu'"),
        (
            lambda g: ctgraph.compile(g(macro_tile="auto"), "splitk_reduce", target="cuda", build=False, autotune=True),
            "transform='splitk_reduce'",
        ),
        (
            lambda g: ctgraph.compile(
                g(macro_tile=(128, 128, 64)), "dataparallel", target="cuda", build=False, autotune=True
            ),
            "transform='dataparallel'",
        ),
    ],
)
def test_autotune_that_has_nothing_to_time_says_so(make, why):
    """``autotune=True`` where no candidate would be timed warns, naming why, and compiles as without it."""
    with pytest.warns(UserWarning, match=rf"autotune=True has nothing to time here: {why}"):
        kern = make(lambda **tile: ctgraph.gemm(130, 72, 4104, **tile))
    assert kern is not None


def test_autotune_idle_names_each_reason():
    from ctgraph.api import _autotune_idle

    assert _autotune_idle("cuda", "auto", True, {}) is None
    assert _autotune_idle("cuda", "auto", True, {"cluster": None, "swap": 0}) is None
    assert "fixed macro_tile" in _autotune_idle("cuda", "auto", False, {})
    assert "cluster, multicast given" in _autotune_idle("cuda", "auto", True, {"cluster": 2, "multicast": "a"})
    assert "target 'cpu'" in _autotune_idle("cpu", "auto", True, {})


def test_the_environments_autotune_never_warns(monkeypatch):
    monkeypatch.setenv("CTGRAPH_AUTOTUNE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ctgraph.compile(ctgraph.gemm(130, 72, 4104, macro_tile="auto"), "streamk", target="cpu")
        ctgraph.compile(ctgraph.gemm(130, 72, 4104), "auto", target="cuda", build=False)
