"""The held-out protocol's sets: seeded, disjoint, and the frozen test set still what the generator draws."""

from __future__ import annotations

import pytest

from ctgraph.select import shapes


def test_the_frozen_sets_are_what_the_seeded_generator_draws():
    drawn = shapes.sets()
    for name in ("train", "validation", "test", "llm"):
        assert shapes.read(shapes.DATA / f"{name}.csv") == drawn[name], name


def test_sets_are_disjoint_and_hold_no_benchmark_shape():
    drawn = shapes.sets()
    train, validation, test = (set(drawn[n]) for n in ("train", "validation", "test"))
    bench = shapes.benchmark_shapes()
    assert not (train & validation or train & test or validation & test)
    assert not ((train | validation | test) & bench)
    assert len(test) == 200 and len(train) == 400 and len(validation) == 100


def test_every_shape_has_rows_the_wgmma_path_takes():
    for name in ("train", "validation", "test", "llm"):
        for m, n, k in shapes.read(shapes.DATA / f"{name}.csv"):
            assert m >= 1 and n % 8 == 0 and k % 8 == 0, (name, m, n, k)


def test_llm_set_covers_every_layer_at_every_row_count():
    llm = set(shapes.llm_shapes())
    for layers in shapes.LAYERS.values():
        for n, k in layers:
            assert all((m, n, k) in llm for m in shapes.LLM_ROWS)


def test_fresh_draws_hold_no_shape_of_any_set_and_keep_their_bounds():
    rows = shapes.fresh("train", 0, 3000, {"m": (16, 256), "n": (512, 8192)})
    held = set().union(*shapes.sets().values(), shapes.benchmark_shapes())
    assert rows and all(s not in held for _, s, _ in rows)  # the train set's own draws come first: all left out
    assert all(16 <= m <= 256 and 512 <= n <= 8192 for _, (m, n, _), _ in rows)
    draws = [i for i, _, _ in rows]
    assert draws == sorted(draws) and len({s for _, s, _ in rows}) == len(rows)
    assert all(stratum in shapes.STRATA for _, _, stratum in rows)


def test_fresh_draws_are_the_seeds_stream_from_start_to_stop():
    everything = shapes.fresh("validation", 2000, 2600)
    later = shapes.fresh("validation", 2300, 2600)
    assert later == [r for r in everything if r[0] >= 2300]
    assert all(2000 <= i < 2600 for i, _, _ in everything)
    assert shapes.fresh("validation", 2000, 2600, limit=3) == everything[:3]


def test_fresh_draws_reject_bad_arguments():
    with pytest.raises(ValueError, match="start <= stop"):
        shapes.fresh("train", 10, 5)
    with pytest.raises(ValueError, match="bounds are on m, n and k"):
        shapes.fresh("train", 0, 10, {"q": (1, 2)})
    with pytest.raises(ValueError, match="unknown shape set"):
        shapes.fresh("corpus", 0, 10)


def test_draw_cli_writes_a_csv_tune_and_heldout_read(tmp_path, capsys):
    from ctgraph.cli import main

    out = tmp_path / "fresh.csv"
    assert (
        main(["draw", "train", "--start", "0", "--stop", "3000", "--k", "512:4096", "--limit", "4", "--out", str(out)])
        == 0
    )
    got = shapes.read(out)
    assert len(got) == 4 and all(512 <= k <= 4096 for _, _, k in got)
    assert main(["draw", "train", "--start", "0", "--stop", "10", "--m", "256:16"]) == 2
    assert "draw --m: give LO:HI" in capsys.readouterr().err
    assert main(["draw", "train", "--start", "0", "--stop", "10", "--out", str(tmp_path / "fresh.txt")]) == 2
    assert "draw --out path must end in .csv" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown shape set"):
        shapes.fresh("corpus", 0, 0)  # before any draw
