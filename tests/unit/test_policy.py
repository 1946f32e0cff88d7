"""transform="auto": Bloom filters, the tuning table, selection."""

from __future__ import annotations

import random

import pytest

import ctgraph
from ctgraph.bench import read_shapes
from ctgraph.policy import BY_NAME, POLICIES, BloomFilter, TuningTable, load_table, select, shape_key
from ctgraph.tune import POLICY_MARGIN

CORPUS = read_shapes(__file__.replace("unit/test_policy.py", "bench/corpus.csv"))


def random_table(seed: int = 0, fp_rate: float = 0.01) -> TuningTable:
    rng = random.Random(seed)
    rows = [{"m": m, "n": n, "k": k, "dtype": "float16", "best": rng.choice(list(BY_NAME))} for m, n, k in CORPUS]
    return TuningTable.build("Test GPU", rows, fp_rate)


def test_bloom_has_no_false_negatives_and_a_measured_false_positive_rate():
    bloom = BloomFilter.for_capacity(1000, fp_rate=0.01)
    keys = [shape_key(i, 2 * i, 3 * i, "float16") for i in range(1000)]
    for key in keys:
        bloom.add(key)
    assert all(key in bloom for key in keys)
    others = [shape_key(i, 7, 11, "float32") for i in range(20000)]
    rate = sum(key in bloom for key in others) / len(others)
    assert rate < 0.03  # designed for 1%; measured here, reported in docs/benchmarks.md


@pytest.mark.parametrize("items", [5, 10, 30])
def test_small_filters_keep_their_designed_false_positive_rate(items):
    """A table's filters hold 1-40 shapes in 64-500 bits: the probes must be independent there too (double
    hashing measured 0.0136, 0.0073 and 0.0032 for 5, 10 and 30 shapes at a designed 0.001)."""
    rates = []
    for seed in range(3):
        bloom = BloomFilter.for_capacity(items, fp_rate=0.001)
        for i in range(items):
            bloom.add(shape_key(1000 * seed + i, 2 * i + 1, 3 * i + 7, "float16"))
        others = [shape_key(i, 7, 11 + seed, "float32") for i in range(50000)]
        rates.append(sum(key in bloom for key in others) / len(others))
    assert sum(rates) / len(rates) < 0.002


def test_table_no_false_negatives_over_every_tuned_shape():
    table = random_table()
    for row in table.rows:
        assert row["best"] in table.candidates(row["m"], row["n"], row["k"], "float16")


def test_table_roundtrip_is_stable():
    table = random_table()
    again = TuningTable.from_json(table.to_json())
    assert again.to_json() == table.to_json()
    assert all(
        again.candidates(r["m"], r["n"], r["k"], "float16") == table.candidates(r["m"], r["n"], r["k"], "float16")
        for r in table.rows
    )


def test_hash_is_stable_across_processes():
    # BLAKE2b, not Python's salted hash(): a fixed key always probes the same bits
    bloom = BloomFilter(1024, 3)
    assert bloom._probes(shape_key(4096, 4096, 4096, "float16")) == bloom._probes(b"4096,4096,4096,float16")
    assert bloom._probes(b"x") == [842, 206, 392]


@pytest.fixture
def test_gpu_table(tmp_path, monkeypatch):
    """Install a tuning table for "Test GPU" in a fresh cache directory: ``install(rows, macro_tile)``."""
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    load_table.cache_clear()
    select.cache_clear()

    def install(rows: list[dict], macro_tile: tuple[int, int, int]) -> None:
        path = tmp_path / "tuning" / "tuning-Test_GPU.json"
        path.parent.mkdir(parents=True)
        path.write_text(TuningTable.build("Test GPU", rows, macro_tile=macro_tile).to_json())

    yield install
    load_table.cache_clear()
    select.cache_clear()


def test_select_uses_the_table_then_the_model(test_gpu_table):
    test_gpu_table(
        [{"m": 1000, "n": 1000, "k": 1000, "dtype": "float16", "best": "streamk_hybrid/b3/resident"}], (128, 128, 64)
    )
    s = select("Test GPU", 1000, 1000, 1000, "float16", (128, 128, 64), 264, 132)
    assert s.policy.name == "streamk_hybrid/b3/resident" and s.reason == "tuning table" and s.workgroups == 264
    unseen = select("Test GPU", 1234, 567, 890, "float16", (128, 128, 64), 264, 132)
    assert unseen.policy in POLICIES and "not in the tuning table" in unseen.reason
    other = select("Test GPU", 1000, 1000, 1000, "float16", (64, 64, 64), 264, 132)  # timed with another tile
    assert other.reason == "grid model (the tuning table was timed with macro tile 128x128x64)"


def test_data_parallel_takes_one_workgroup_per_tile_at_most(test_gpu_table):
    test_gpu_table([{"m": 128, "n": 584, "k": 176, "dtype": "float16", "best": "dataparallel/resident"}], (64, 128, 64))
    s = select("Test GPU", 128, 584, 176, "float16", (64, 128, 64), 132, 132)  # 2 x 5 tiles
    assert s.policy.name == "dataparallel/resident" and s.workgroups == 10


def test_tile_costs_decide_whether_an_untuned_shape_splits_k(test_gpu_table):
    from ctgraph.tiles import tile_cost

    cost = tile_cost((64, 128, 64))
    test_gpu_table([{"m": 512, "n": 512, "k": 512, "dtype": "float16", "best": "streamk/model"}], (64, 128, 64))
    assert select("Test GPU", 512, 512, 512, "float16", (64, 128, 64), 132, 132, 0, cost).reason == "tuning table"
    # untuned: the grid model alone splits each of the 32 tiles' 8 iterations; the tile model says not to
    grid = select("Test GPU", 512, 512, 768, "float16", (64, 128, 64), 132, 132)
    assert grid.policy.transform != "dataparallel"
    s = select("Test GPU", 512, 512, 768, "float16", (64, 128, 64), 132, 132, 0, cost)
    assert s.policy.name == "dataparallel/resident" and s.workgroups == 32
    why = "data-parallel beats each Stream-K schedule of this tile"
    assert s.reason == f"tile model (shape not in the tuning table): {why}"
    # long K: the tile model prices parts of a tile cheaper, and the grid model picks the schedule and grid
    long = select("Test GPU", 512, 512, 1 << 16, "float16", (64, 128, 64), 132, 132, 0, cost)
    assert long.policy.transform != "dataparallel" and long.reason.startswith("grid model")
    # many waves: the tile model prefers the two-tile schedule, and the grid model may only choose between
    # that and data-parallel (alone, it takes a hybrid that measured 1.55x the best at 8192^3 on the H100)
    big = tile_cost((256, 256, 64), cluster=2)
    alone = select("Test GPU", 8192, 8192, 8192, "float16", (256, 256, 64), 66, 66)
    both = select("Test GPU", 8192, 8192, 8192, "float16", (256, 256, 64), 66, 66, 0, big)
    assert alone.policy.transform == "streamk_hybrid"
    assert both.policy.transform in ("dataparallel", "streamk2tile")
    assert both.reason.endswith("the tile model narrowed it to data-parallel or two-tile Stream-K")


def test_selection_is_cached():
    select.cache_clear()
    a = select("Some GPU", 4096, 4096, 4096, "float16", (128, 128, 64), 264, 132)
    for _ in range(10):
        assert select("Some GPU", 4096, 4096, 4096, "float16", (128, 128, 64), 264, 132) is a
    info = select.cache_info()
    assert (info.misses, info.hits) == (1, 10)  # timings are in docs/benchmarks.md, not in a test


def test_shipped_h100_table_has_no_false_negatives():
    table = load_table("NVIDIA H100 80GB HBM3")
    assert table is not None and len(table.rows) == 128 and table.macro_tile == "auto"
    for r in table.rows:
        assert r["best"] in table.candidates(r["m"], r["n"], r["k"], r["dtype"])
        # the fastest, or a policy a recheck kept within its margin of the fastest (tune.pick_policy)
        assert r["seconds"][r["best"]] * POLICY_MARGIN <= min(r["seconds"].values())


def test_auto_on_the_cpu():
    g = ctgraph.gemm(300, 200, 1000, macro_tile=(32, 32, 16), dtype="float32")
    kern = ctgraph.compile(g, transform="auto", target="cpu")
    assert kern.policy is not None and kern.transform == kern.policy.policy.transform
    assert "grid model" in kern.policy.reason
    with pytest.raises(ValueError, match="sk_batches is chosen"):
        ctgraph.compile(g, transform="auto", sk_batches=2, target="cpu")
    with pytest.raises(ValueError, match="needs the GPU"):
        ctgraph.compile(g, transform="auto", target="cuda", build=False)


def test_auto_table_applies_only_to_the_tile_each_shape_was_timed_with():
    """A table tuned with macro_tile="auto" records each shape's tile; once choose_tile picks another tile
    for a shape, that shape's timings no longer apply (the grid model decides)."""
    from ctgraph.tiles import choose_tile

    now = choose_tile(4000, 3000, 2000)
    other = (64, 64, 64) if now != (64, 64, 64) else (128, 128, 64)
    rows = [
        {"m": 4000, "n": 3000, "k": 2000, "dtype": "float16", "tile": "x".join(map(str, now)), "best": "streamk/model"},
        {"m": 5000, "n": 3000, "k": 2000, "dtype": "float16", "tile": "64x64x64", "best": "streamk/model"},
        {"m": 6000, "n": 3000, "k": 2000, "dtype": "float16", "best": "streamk/model"},  # a table without tiles
    ]
    table = TuningTable.build("Test GPU", rows, macro_tile="auto")
    assert table.applies(4000, 3000, 2000, "float16", now)
    assert not table.applies(4000, 3000, 2000, "float16", other)
    assert table.applies(5000, 3000, 2000, "float16", (64, 64, 64))
    assert not table.applies(5000, 3000, 2000, "float16", choose_tile(5000, 3000, 2000))
    assert table.applies(6000, 3000, 2000, "float16", choose_tile(6000, 3000, 2000))
    assert table.applies(7000, 3000, 2000, "float16", choose_tile(7000, 3000, 2000))  # not tuned: today's tile


def test_every_row_of_the_shipped_h100_table_was_timed_with_todays_tile():
    """After a change of the tile model, `tune --update` re-times the shapes whose tile changed; rows whose tiles
    were searched keep their measured tile, which macro_tile="auto" gives the shape."""
    table = load_table("NVIDIA H100 80GB HBM3")
    assert table is not None
    for r in table.rows:
        tile = ctgraph.gemm(r["m"], r["n"], r["k"], macro_tile="auto").attrs["gemm"].macro_tile
        assert table.timed(r["m"], r["n"], r["k"], r["dtype"], tile), r
        assert set(r["seconds"]) == set(BY_NAME), r  # every policy timed on the row's tile


def test_searched_rows_keep_a_tile_within_the_margin_of_the_fastest():
    from ctgraph.tiles import Layout
    from ctgraph.tune import TILE_MARGIN, layout_key

    table = load_table("NVIDIA H100 80GB HBM3")
    assert table is not None
    searched = [r for r in table.rows if "tiles" in r]
    assert searched
    for r in searched:
        if "layout" in r:  # a wave layout that beat the row's tile (timed then) by the margin, and no other by as much
            own = r["layouts"][layout_key(r["tile"], Layout.parse(r["layout"]))]
            assert own * TILE_MARGIN <= min(r["layouts"].values()), r
        else:
            assert r["tile"] in r["tiles"] and r["tiles"][r["tile"]] * TILE_MARGIN <= min(r["tiles"].values()), r
        assert r["seconds"][r["best"]] * POLICY_MARGIN <= min(r["seconds"].values()), r
    assert any("layout" in r for r in searched)


def test_a_layout_search_after_the_wave_layouts_grew_times_only_the_new_ones():
    from ctgraph.policy import tile_name
    from ctgraph.tiles import Layout, wave_layouts
    from ctgraph.tune import layout_key, parse_layout_key, untried_layouts

    every = [(tile_name(tile), layout) for tile, layout in wave_layouts(144, 2680)]
    assert len(every) > 4
    assert untried_layouts(144, 2680, None) == every  # a row never searched: all of them
    tried = {layout_key(tile, layout): 1e-5 for tile, layout in every[::2]}  # searched before the others were added
    assert untried_layouts(144, 2680, tried) == every[1::2]
    assert untried_layouts(144, 2680, tried | {layout_key(*c): 2e-5 for c in every}) == []
    assert all(parse_layout_key(layout_key(*c)) == c for c in every)
    assert layout_key("144x256x64", Layout.parse("8ab/swap")) == "144x256x64 8ab/swap"


def test_a_layout_search_pairs_the_ctas_of_a_tile_that_splits_k():
    from ctgraph.tiles import Layout
    from ctgraph.tune import LAYOUT_POLICIES, PAIR_TILES, layout_policies, pair_layouts, untried_layouts

    # 16 tiles of 64 x 64: two CTAs that share B (the tile twice as tall) and two that share A (twice as wide)
    assert pair_layouts(256, 256, "64x64x64") == [
        ("128x64x64", Layout(2, "b", False)),
        ("64x128x64", Layout(2, "a", False)),
    ]
    # a swapped tile (rows not a multiple of 64) pairs swapped CTAs
    assert {layout.swap for _, layout in pair_layouts(168, 168, "48x64x64")} == {True}
    # no pairs where the tiles fill the GPU, or where the tile already runs on several CTAs
    assert pair_layouts(8192, 8192, "128x128x64") == []
    assert PAIR_TILES < (8192 // 128) ** 2
    assert pair_layouts(256, 256, "512x128x64") == []
    # a search times the pairs of each tile given, after the wave layouts, each once and only if untried
    pairs = pair_layouts(256, 256, "64x64x64") + pair_layouts(256, 256, "64x128x64")
    untried = untried_layouts(256, 256, None, ("64x64x64", "64x128x64", "64x64x64"))
    assert untried[-len(pairs) :] == pairs and len(untried) == len(set(untried))
    assert untried_layouts(256, 256, None)[: len(untried) - len(pairs)] == untried[: -len(pairs)]
    # split-K is timed only on layouts of few tiles, where the grid splits K
    assert layout_policies(256, 256, "128x128x64")[: len(LAYOUT_POLICIES)] == LAYOUT_POLICIES
    assert "splitk_reduce/resident" in layout_policies(256, 256, "128x128x64")
    assert layout_policies(8192, 8192, "128x256x64") == LAYOUT_POLICIES


def test_a_layout_search_offers_two_block_ctas_where_their_tiles_make_about_one_wave():
    from ctgraph.policy import parse_tile
    from ctgraph.tiles import Layout
    from ctgraph.tune import block_layouts, layout_key, untried_layouts
    from lowering.cuda.hopper import hopper_layout
    from lowering.cuda.options import CudaOptions

    # 960x5168: 2 x 33 tiles of 512 x 160 fill the 66 clusters of 2 (cuBLAS's CTAs of 256 x 160); 512 x 144 makes 72
    assert block_layouts(960, 5168) == [("512x160x64", Layout(2, "b", False))]
    assert block_layouts(4096, 4096) == [] and block_layouts(256, 256) == []  # several waves; a few tiles
    for tile, layout in block_layouts(3688, 976):
        lay = hopper_layout(parse_tile(tile), "float16", CudaOptions(mainloop="wgmma", **layout.options()))
        assert (lay["BLOCKS"], lay["CTA_M"], lay["CONSUMERS"]) == (2, 256, 2)
    # a row searched before they were offered times only them
    tried = {layout_key(t, lay): 1e-4 for t, lay in untried_layouts(960, 5168, None) if lay.swap}
    assert untried_layouts(960, 5168, tried) == block_layouts(960, 5168)


def test_pick_tile_keeps_the_model_tile_unless_another_is_clearly_faster():
    from ctgraph.tune import pick_tile

    assert pick_tile("a", {"a": 10.0, "b": 9.8}) == "a"  # 2% is within the timings' noise
    assert pick_tile("a", {"a": 10.0, "b": 9.6, "c": 9.5}) == "c"
    assert pick_tile("a", {"a": float("inf"), "b": 9.6}) == "b"  # the model's tile could not run


def test_pick_policy_keeps_a_rechecked_rows_policy_unless_another_is_clearly_faster():
    """A recheck on the row's own tile and layout keeps its policy against one within the timings' noise; a fresh
    row (nothing to keep) and a policy that can no longer run take the fastest."""
    from ctgraph.tune import POLICY_MARGIN, pick_policy

    seconds = {"dataparallel/model": 10.0, "streamk/model": 9.9, "streamk2tile/model": 10.5}
    assert pick_policy(seconds) == "streamk/model"
    assert pick_policy(seconds, keep="dataparallel/model") == "dataparallel/model"  # 1% is noise
    assert pick_policy(seconds | {"streamk/model": 10.0 * POLICY_MARGIN}, keep="dataparallel/model") == "streamk/model"
    assert pick_policy(seconds | {"dataparallel/model": float("inf")}, keep="dataparallel/model") == "streamk/model"
    assert pick_policy(seconds, keep="splitk_reduce/model") == "streamk/model"  # not timed this time


def test_auto_tile_is_the_searched_tile_of_the_tile_device(test_gpu_table, monkeypatch):
    from ctgraph.tiles import choose_tile

    model = choose_tile(4000, 3000, 2000)
    other = (64, 64, 64) if model != (64, 64, 64) else (128, 128, 64)
    row = {"m": 4000, "n": 3000, "k": 2000, "dtype": "float16", "best": "streamk/model", "seconds": {}}
    searched = row | {"tile": "x".join(map(str, other)), "tiles": {"x".join(map(str, model)): 2.0, "64x64x64": 1.0}}
    unsearched = row | {"m": 5000, "tile": "64x64x64"}
    test_gpu_table([searched, unsearched], "auto")
    shape = (4000, 3000, 2000)
    assert ctgraph.gemm(*shape, macro_tile="auto").attrs["gemm"].macro_tile == model  # the H100's table
    monkeypatch.setenv("CTGRAPH_TILE_DEVICE", "Test GPU")
    assert ctgraph.gemm(*shape, macro_tile="auto").attrs["gemm"].macro_tile == other
    assert ctgraph.gemm(5000, 3000, 2000, macro_tile="auto").attrs["gemm"].macro_tile == choose_tile(5000, 3000, 2000)
    assert ctgraph.gemm(*shape, macro_tile="auto", dtype="float32").attrs["gemm"].macro_tile == (128, 128, 32)
    s = select("Test GPU", *shape, "float16", other, 132, 132)
    assert (s.policy.name, s.reason) == ("streamk/model", "tuning table")


def test_a_searched_layout_is_the_default_of_its_shape_and_tile(test_gpu_table, monkeypatch):
    """A row's ``layout`` (``tune --layouts``) is what the wgmma path runs its tile on where the caller leaves the
    layout open; another tile, another shape or a layout the caller gives are left alone."""
    from ctgraph.policy import auto_layout
    from ctgraph.tiles import Layout

    row = {"m": 1408, "n": 1664, "k": 8192, "dtype": "float16", "best": "streamk2tile/model", "seconds": {}}
    tried = {"160x256x64 2a/swap": 1.0, "144x128x64 2b/swap": 1.1}
    test_gpu_table([row | {"tile": "160x256x64", "layout": "2a/swap", "layouts": tried}], "auto")
    monkeypatch.setenv("CTGRAPH_TILE_DEVICE", "Test GPU")
    shape = (1408, 1664, 8192)
    g = ctgraph.gemm(*shape, macro_tile="auto")
    assert g.attrs["gemm"].macro_tile == (160, 256, 64)  # a row searched for layouts keeps its tile
    assert auto_layout(*shape, "float16", (160, 256, 64)) == Layout(2, "a", True)
    assert auto_layout(*shape, "float16", (128, 256, 64)) is None
    assert auto_layout(1408, 1664, 4096, "float16", (160, 256, 64)) is None

    def layout(graph, **options):
        kern = ctgraph.compile(graph, "dataparallel", 8, target="cuda", build=False, mainloop="wgmma", **options)
        return {key: kern.program.layout[key] for key in ("CLUSTER", "CLUSTER_M", "CLUSTER_N", "SWAP")}

    assert layout(g) == {"CLUSTER": 2, "CLUSTER_M": 1, "CLUSTER_N": 2, "SWAP": 1}
    assert layout(g, cluster=4) == {"CLUSTER": 4, "CLUSTER_M": 2, "CLUSTER_N": 2, "SWAP": 1}  # the tile's own
    assert layout(ctgraph.gemm(1408, 1664, 4096, macro_tile=(160, 256, 64)))["CLUSTER"] != 2


def test_update_replaces_the_rows_of_re_timed_shapes_and_keeps_the_others():
    rows = [
        {"m": 100, "n": 100, "k": 100, "dtype": "float16", "tile": "64x64x64", "best": "streamk/model"},
        {"m": 200, "n": 100, "k": 100, "dtype": "float16", "tile": "64x64x64", "best": "dataparallel/model"},
    ]
    table = TuningTable.build("Test GPU", rows, macro_tile="auto")
    assert table.timed(100, 100, 100, "float16", (64, 64, 64))
    assert not table.timed(100, 100, 100, "float16", (128, 128, 64))  # another tile
    assert not table.timed(300, 100, 100, "float16", (64, 64, 64))  # not tuned
    new = [
        {"m": 200, "n": 100, "k": 100, "dtype": "float16", "tile": "128x128x64", "best": "streamk2tile/model"},
        {"m": 300, "n": 100, "k": 100, "dtype": "float16", "tile": "64x64x64", "best": "dataparallel/resident"},
    ]
    up = table.updated(new)
    assert [(r["m"], r["best"]) for r in up.rows] == [
        (100, "streamk/model"),
        (200, "streamk2tile/model"),
        (300, "dataparallel/resident"),
    ]
    assert up.device == "Test GPU" and up.macro_tile == "auto"
    assert up.candidates(200, 100, 100, "float16") == ["streamk2tile/model"]
    assert table.rows == rows  # the table itself is unchanged


def test_tune_rejects_a_bad_tile_count_before_any_work():
    from ctgraph.tune import tune

    for bad in (-1, True, 2.5):
        with pytest.raises(ValueError, match="tiles must be a count of candidate tiles"):
            tune([(64, 64, 64)], tiles=bad)
    with pytest.raises(ValueError, match="tiles: a tile search needs macro_tile='auto'"):
        tune([(64, 64, 64)], macro_tile=(64, 64, 64), tiles=2)
    with pytest.raises(ValueError, match="layouts must be True"):
        tune([(64, 64, 64)], layouts=2)
    with pytest.raises(ValueError, match="layouts: a tile search needs macro_tile='auto'"):
        tune([(64, 64, 64)], macro_tile=(64, 64, 64), layouts=True)
    for bad in (-1, True, 0.5, 3, "1.1"):
        with pytest.raises(ValueError, match="recheck_within must be a ratio to the row's best time"):
            tune([(64, 64, 64)], recheck_within=bad)
    with pytest.raises(ValueError, match="recheck_within: a tile search needs macro_tile='auto'"):
        tune([(64, 64, 64)], macro_tile=(64, 64, 64), recheck_within=1.1)
