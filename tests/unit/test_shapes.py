"""The held-out protocol's sets: seeded, disjoint, and the frozen test set still what the generator draws."""

from __future__ import annotations

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
