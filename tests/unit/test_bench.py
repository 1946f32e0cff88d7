"""The GPU-free parts of the benchmark and calibration tools: shape files, tables, plots, fit reports."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from ctgraph.bench import DEFAULT_SHAPES, geomean, markdown, plot, read_shapes

NAN = float("nan")


def row(m, n, k, **tflops):
    r = {"m": m, "n": n, "k": k}
    for name, tf in tflops.items():
        r[f"{name}_tflops"] = r[f"{name}_call_tflops"] = tf
    return r


def test_shape_files():
    anchors = read_shapes(DEFAULT_SHAPES)
    assert (8192, 8192, 8192) in anchors and len(anchors) == 8
    assert len(read_shapes(Path(DEFAULT_SHAPES).with_name("corpus.csv"))) == 120


def test_geomean_skips_shapes_a_transform_cannot_run():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([2.0, NAN, 8.0]) == pytest.approx(4.0)
    assert math.isnan(geomean([NAN]))


def test_markdown_table():
    rows = [
        row(1, 2, 3, dataparallel=100.0, splitk_reduce=NAN, auto=120.0, cublas=200.0) | {"tile": "64x64x64"},
        row(4, 5, 6, dataparallel=50.0, splitk_reduce=80.0, auto=79.0, cublas=100.0),
    ]
    text = markdown(rows, ("dataparallel", "splitk_reduce", "auto"), "Test GPU")
    assert "Device: Test GPU" in text and "| m | n | k | tile | DP TF |" in text
    assert "| 1 | 2 | 3 | 64x64x64 | 100 | - | 120 | 200 | 0.50 | - | 0.60 | - | 1.20 | 12% |" in text
    assert "| 4 | 5 | 6 | - | 50 |" in text  # rows from before the tile column
    assert "auto within 3% of the best of dataparallel, splitk_reduce: 2 of 2 shapes" in text
    assert "- auto: 0.688x cuBLAS" in text  # sqrt(0.6 * 0.79)


def test_ratios_to_cublas_are_taken_round_by_round():
    """Over interleaved rounds each ratio is against the same round's cuBLAS: a clock drift common to a round
    cancels. The table shows their median and range, and the geomean uses the median; rows without per-round
    ratios (one round's tables from before) keep the ratio of the medians."""
    from ctgraph.bench import round_ratios, vs_cublas

    # cuBLAS and ours drift together: 100, 90, 110 us against 101, 90, 108 us
    got = round_ratios("auto", [100e-6, 90e-6, 110e-6], [101e-6, 90e-6, 108e-6])
    assert got == pytest.approx({"auto_ratio": 1.0, "auto_ratio_min": 100 / 101, "auto_ratio_max": 110 / 108})
    drifted = row(1, 2, 3, auto=100.0, cublas=98.0) | got  # medians 101 and 100 us: 0.99x by their ratio
    assert vs_cublas(drifted, "auto") == pytest.approx(1.0)
    assert vs_cublas(row(1, 2, 3, auto=100.0, cublas=98.0), "auto") == pytest.approx(100 / 98)
    text = markdown([drifted, row(4, 5, 6, auto=50.0, cublas=100.0)], ("auto",), "Test GPU")
    assert "| 1 | 2 | 3 | - | 100 | 98 | 1.00 [0.99-1.02] | 10% |" in text
    assert "| 4 | 5 | 6 | - | 50 | 100 | 0.50 | 5% |" in text  # one round: no range
    assert "- auto: 0.707x cuBLAS" in text  # sqrt(1.0 * 0.5)
    with pytest.raises(ValueError):
        round_ratios("auto", [1.0, 2.0], [1.0])  # a round without its cuBLAS figure is a bug


def test_plot_is_written(tmp_path):
    pytest.importorskip("matplotlib")
    rows = [row(1, 2, 3, dataparallel=100.0, auto=120.0, cublas=200.0)]
    plot(rows, ("dataparallel", "auto"), tmp_path / "r.png")
    assert (tmp_path / "r.png").read_bytes().startswith(b"\x89PNG")


def test_bench_on_the_mma_path_needs_a_tile(capsys):
    """The auto tiles are the wgmma path's (ctgraph.select): ``--mainloop mma`` is refused without ``--tile``,
    before any GPU work; ``--mainloop`` offers exactly the backend's mainloops."""
    from ctgraph.cli import main
    from lowering.cuda.options import MAINLOOPS

    assert main(["bench", "--mainloop", "mma"]) == 2
    assert "--mainloop mma needs --tile BM BN BK" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "--mainloop", "hopper"])
    assert "{" + ",".join(MAINLOOPS) + "}" in capsys.readouterr().err


@pytest.mark.parametrize("rounds", ["0", "-2"])
def test_bench_refuses_rounds_below_one_before_any_gpu_work(capsys, rounds):
    """``--rounds R`` times each kernel R times, interleaved: fewer than one round is refused, naming the
    argument, before torch or the GPU is touched (this machine may have neither)."""
    from ctgraph.cli import main

    assert main(["bench", "--rounds", rounds]) == 2
    assert f"rounds must be a positive integer (>= 1), got {int(rounds)}" in capsys.readouterr().err


@pytest.mark.parametrize("rounds", [0, 1.5, True, "3"])
def test_run_bench_checks_rounds(tmp_path, rounds):
    from ctgraph.bench import run_bench

    with pytest.raises(ValueError, match="rounds must be a positive integer"):
        run_bench([(64, 64, 64)], tmp_path, rounds=rounds)
    assert not any(tmp_path.iterdir())  # nothing written


def test_timing_rounds_take_their_items_in_turn():
    """measure.in_turn: forward in even rounds, backward in odd ones (bench, heldout and autotune time in this
    order, so that no kernel always runs first on a quiet GPU or last on a hot one)."""
    from ctgraph.measure import in_turn

    assert [in_turn("abc", r) for r in range(4)] == [list("abc"), list("cba"), list("abc"), list("cba")]
    assert in_turn([], 1) == [] and in_turn(("x",), 1) == ["x"]


def test_kernel_time_lets_no_collection_run_from_the_capture_to_its_last_sample(monkeypatch):
    """measure.kernel_time on a stand-in torch: garbage collection is off while the graph captures (a cuMemFree
    there invalidates the capture) and while the samples are taken, on again after, and never forced (a full
    collection costs more than timing a small kernel)."""
    import gc
    import sys
    import types
    from contextlib import contextmanager

    from ctgraph import measure

    seen = []  # gc.isenabled() at each step, by what ran

    class Event:
        def __init__(self, enable_timing):
            self.t = 0.0

        def record(self):
            seen.append(("record", gc.isenabled()))
            self.t = len(seen) * 1.0

        def synchronize(self):
            pass

        def elapsed_time(self, end):
            return end.t - self.t

    class Graph:
        def replay(self):
            seen.append(("replay", gc.isenabled()))

    @contextmanager
    def capture(graph, stream=None):
        seen.append(("capture", gc.isenabled()))
        yield

    @contextmanager
    def on(stream):
        yield

    cuda = types.SimpleNamespace(
        Stream=lambda: types.SimpleNamespace(synchronize=lambda: None),
        stream=on,
        CUDAGraph=Graph,
        graph=capture,
        Event=Event,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))

    def forced():
        raise AssertionError("kernel_time forced a collection")

    monkeypatch.setattr(gc, "collect", forced)
    assert gc.isenabled()
    t = measure.kernel_time(lambda: seen.append(("fn", gc.isenabled())), reps=3)
    assert gc.isenabled() and t > 0
    first = next(i for i, (what, _) in enumerate(seen) if what == "capture")
    assert all(on for _, on in seen[:first])  # the warm-up calls, before the capture
    assert not any(on for _, on in seen[first:])
    assert [w for w, _ in seen].count("replay") == 1 + measure.SAMPLES
