"""The held-out protocol's summaries, without a GPU: kinds of shape, the per-set and per-kind figures, and
``heldout --summarize`` on a CSV an earlier run wrote."""

from __future__ import annotations

import math

import pytest

from ctgraph.cli import main
from ctgraph.heldout import (
    KINDS,
    Stability,
    _selection,
    _write,
    by_kind,
    cached,
    chosen_by,
    compare,
    flip_costs,
    kind,
    matches_float64,
    predicted_us,
    read,
    stability,
    summary,
)
from ctgraph.plot import plot_heldout as plot


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        ((3768, 24, 1272), "skinny"),
        ((16, 4096, 4096), "skinny"),
        ((128, 8192, 8192), "skinny"),
        ((129, 129, 1024), "small"),
        ((1024, 1024, 1023), "small"),
        ((1024, 1024, 1024), "large"),
        ((8192, 8192, 8192), "large"),
    ],
)
def test_kinds_split_as_the_selection_docs_do(shape, want):
    assert kind(*shape) == want in KINDS


def _rows(ratios: dict[tuple[int, int, int], float]) -> list[dict]:
    return [
        {"m": m, "n": n, "k": k, "kernel_ratio": r, "call_ratio": r, "regret": math.nan, "close": "True"}
        for (m, n, k), r in ratios.items()
    ]


def test_summary_and_kinds_of_a_set():
    rows = _rows({(3768, 24, 1272): 0.5, (1000, 24, 64): 0.8, (512, 512, 512): 1.0, (4096, 4096, 4096): 1.25})
    s = summary(rows)
    assert s["shapes"] == 4 and s["geomean"] == pytest.approx((0.5 * 0.8 * 1.0 * 1.25) ** 0.25)
    assert (s["below_0.9"], s["below_0.85"], s["below_0.8"], s["worst"], s["failed"]) == (2, 2, 1, 0.5, 0)
    rows[2]["call_ratio"] = 0.84  # call time's tail counted apart from the kernel's
    s = summary(rows)
    assert (s["below_0.85"], s["call_below_0.85"]) == (2, 3) and s["call_p10"] < 0.8
    kinds = by_kind(rows)
    assert list(kinds) == ["skinny", "small", "large"]
    assert kinds["skinny"]["shapes"] == 2 and kinds["skinny"]["geomean"] == pytest.approx(math.sqrt(0.4))
    assert kinds["large"] == {"shapes": 1, "geomean": 1.25, "p10": 1.25}
    assert "small" not in by_kind(rows[:1] + rows[3:])  # a kind with no shape is left out


def test_a_run_says_how_its_kernel_times_stand_to_the_rankers_prices(tmp_path):
    """``predicted_us``: the chosen config's price among the ranked (nan where the ranker did not keep it, or there
    is no selection); the summary's p10 and p90 of kernel time over price, nan for a run that wrote no prices."""
    from ctgraph.select import Config, Layout, Selection

    a, b = (Config((128, 128, 64), Layout(), "dataparallel", g) for g in (132, 66))
    ranked = Selection(b, "ranker", ((a, 2e-6), (b, 3e-6)))
    assert predicted_us(ranked) == pytest.approx(3.0) and math.isnan(predicted_us(None))
    assert math.isnan(predicted_us(Selection(b, "measured", ((a, 2e-6),), "measured")))
    rows = _rows({(1, 2, 3): 1.0, (4, 5, 6): 1.0, (7, 8, 9): 1.0})
    for r, (ours, price) in zip(rows, ((9.0, 10.0), (11.0, 10.0), (5.0, math.nan)), strict=True):
        r["ours_us"], r["predicted_us"] = ours, price
    s = summary(rows)
    assert s["time_over_predicted_p10"] == pytest.approx(0.92) and s["time_over_predicted_p90"] == pytest.approx(1.08)
    path = tmp_path / "run.csv"
    _write(rows, path)
    assert summary(read(path))["time_over_predicted_p90"] == pytest.approx(1.08)  # read back from the CSV
    old = _rows({(1, 2, 3): 1.0})  # a run before the prices: no such column
    assert math.isnan(summary(old)["time_over_predicted_p10"])


def test_chosen_by_counts_what_chose_each_config(tmp_path, monkeypatch, capsys):
    """The reasons selection writes, counted by their source: a default-path run that read an autotune cache says
    so in its summary."""
    from ctgraph.backends import backend
    from ctgraph.select import Config, Layout, select
    from ctgraph.select import cache as entries
    from ctgraph.target import known_target

    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    h100 = known_target()
    own = Config((128, 128, 64), Layout(), "dataparallel", 132)
    entries.store(h100.name, {entries.key(1000, 1000, 1000, "float16"): entries.Entry(own, ((own.name, 1e-3),))})
    shapes = [(8192, 8192, 8192), (1000, 1000, 1000), (3000, 3000, 3000), (2000, 3000, 3000)]
    reasons = [select(*shape, "float16", h100, "wgmma", backend("cuda").supports).reason for shape in shapes]
    reasons += ["autotuned on first call (8 candidates timed)", f"measured on this device ({h100.name})", "error: x"]
    rows = _rows(dict.fromkeys([*shapes, (1, 2, 3), (4, 5, 6), (7, 8, 9), (1, 1, 1)], 1.0))
    for r, why in zip(rows, reasons, strict=False):  # the last row has no reason
        r["reason"] = why
    assert chosen_by(rows) == {
        "autotune cache": 1,
        "autotuned on first call": 1,
        "error": 1,
        "measured": 1,
        "ranker": 2,
        "shipped entry": 1,
        "unrecorded": 1,
    }
    path = tmp_path / "run.csv"
    _write(rows, path)
    assert main(["heldout", str(path), "--summarize"]) == 0
    assert "{'chosen by': {'autotune cache': 1," in capsys.readouterr().out


def test_summarize_reads_a_runs_csv(tmp_path, capsys):
    path = tmp_path / "run.csv"
    _write(_rows({(3768, 24, 1272): 0.5, (4096, 4096, 4096): 1.25}), path)
    assert summary(read(path))["shapes"] == 2
    assert main(["heldout", str(path), "--summarize"]) == 0
    out = capsys.readouterr().out
    assert "'shapes': 2" in out and "'skinny'" in out and "'large'" in out
    assert main(["heldout", "test", "--summarize"]) == 2
    assert "not a file" in capsys.readouterr().err


def test_a_regret_rows_timed_configs_come_back_from_its_csv(tmp_path):
    """``--regret``: every config timed for a shape is kept (``timed``), one that did not build left out; a row
    without them reads as none."""
    from ctgraph.heldout import timed_json, timed_of
    from ctgraph.select import Config

    chosen = Config.parse("128x128x64 1b dataparallel g64 r1")
    other = Config.parse("128x256x64 2b dataparallel g32 r1")
    broken = Config.parse("256x256x64 2b dataparallel g16 r1")
    times = {chosen: 8e-6, other: 7.5e-6, broken: math.inf}
    rows = _rows({(1024, 1024, 1024): 1.0, (2048, 2048, 2048): 1.0})
    rows[0]["timed"] = timed_json(times)
    path = tmp_path / "regret.csv"
    _write(rows, path)
    back = read(path)
    assert timed_of(back[0]) == {chosen.name: 8e-6, other.name: 7.5e-6}
    assert timed_of(back[1]) == {} and timed_of({}) == {}


def test_against_an_earlier_run_separates_the_shapes_whose_config_changed(tmp_path, capsys):
    """Two runs of the same shapes: the per-shape quotient, the changed shapes before and after, the unchanged ones
    (the spread between runs), the movers each way; shapes only one run holds are left out."""
    before = _rows({(1, 2, 3): 0.5, (4, 5, 6): 1.0, (7, 8, 9): 1.0, (10, 11, 12): 0.8, (13, 14, 15): 2.0})
    after = _rows({(1, 2, 3): 1.0, (4, 5, 6): 0.5, (7, 8, 9): 1.0, (10, 11, 12): 0.8, (16, 17, 18): 3.0})
    for r in before + after:
        r["config"] = "A"
    after[0]["config"] = after[1]["config"] = "B"  # 1x2x3 gained 2x, 4x5x6 lost 2x; the others kept theirs
    c = compare(after, before, movers=1)
    assert c["shapes"] == 4 and c["quotient"] == pytest.approx(1.0)
    assert (c["changed"], c["same"]) == (2, 2)
    assert c["changed_before"] == pytest.approx(math.sqrt(0.5)) and c["changed_after"] == pytest.approx(math.sqrt(0.5))
    assert c["same_before"] == c["same_after"] == pytest.approx(math.sqrt(0.8))
    after[0]["call_ratio"] = 2.0  # by call time the changed shapes went 0.5 and 1.0 to 2.0 and 0.5
    assert compare(after, before)["changed_call_before"] == pytest.approx(math.sqrt(0.5))
    assert compare(after, before)["changed_call_after"] == pytest.approx(1.0)
    assert c["gained"] == [("1x2x3", "A", "B", 0.5, 1.0)] and c["lost"] == [("4x5x6", "A", "B", 1.0, 0.5)]
    assert compare(before, before)["changed"] == 0 and compare(before, before)["gained"] == []
    new, old = tmp_path / "new.csv", tmp_path / "old.csv"
    _write(after, new)
    _write(before, old)
    assert main(["heldout", str(new), "--summarize", "--against", str(old)]) == 0
    assert "'changed': 2" in capsys.readouterr().out
    assert main(["heldout", str(new), "--summarize", "--against", str(tmp_path / "none.csv")]) == 2
    assert "--against" in capsys.readouterr().err


def test_cached_counts_the_shapes_an_autotune_cache_would_answer(tmp_path, monkeypatch):
    """A default-path run after an ``--autotune`` run in the same cache folder would time the autotuned entries:
    ``cached`` counts them (``run`` warns), and another folder holds none."""
    from ctgraph.select import Config, Layout
    from ctgraph.select import cache as entries

    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path / "a"))
    c = Config((128, 128, 64), Layout(), "dataparallel", 64)
    entries.store("Test GPU", {entries.key(64, 128, 256, "float16"): entries.Entry(c, ((c.name, 1e-5),))})
    shapes = [(64, 128, 256), (64, 128, 512)]
    assert cached(shapes, "Test GPU") == 1
    assert cached(shapes, "Other GPU") == 0
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path / "b"))
    assert cached(shapes, "Test GPU") == 0


def test_plot_draws_a_run_and_says_what_it_needs(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rows = _rows({(3768, 24, 1272): 0.5, (1000, 24, 64): 0.8, (512, 512, 512): 1.0, (4096, 4096, 4096): 1.25})
    for r, config in zip(
        rows, ("64x64x64 2b/swap dataparallel g59 r1", "", "a b", "256x256x64 2b streamk g66 r1"), strict=True
    ):
        r["config"] = config  # any config text: an unknown transform is drawn grey
    data = plot(rows, tmp_path / "a.png", "test").read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot(rows, tmp_path / "b.png", "test").read_bytes() == data  # deterministic: no dates
    assert plot(rows, tmp_path / "c.svg").read_bytes() == plot(rows, tmp_path / "d.svg").read_bytes()
    with pytest.raises(ValueError, match=r"heldout --plot must end in \.png, \.svg or \.pdf"):
        plot(rows, tmp_path / "a.jpg")
    with pytest.raises(ValueError, match="no shape with a finite kernel ratio"):
        plot([dict(rows[0], kernel_ratio=math.nan)], tmp_path / "d.png")
    path = tmp_path / "run.csv"
    _write(rows, path)
    assert main(["heldout", str(path), "--summarize", "--plot", str(tmp_path / "e.png")]) == 0
    assert (tmp_path / "e.png").is_file() and "wrote" in capsys.readouterr().out
    assert main(["heldout", "test", "--plot", str(tmp_path / "e.jpg")]) == 2  # before any GPU work
    assert "--plot must end in .png" in capsys.readouterr().err


def test_skip_and_limit_pick_a_slice_of_the_set(capsys):
    """``--skip N --limit M``: shapes N+1 to N+M of the set, so a run can be split over several calls or machines;
    a skip below zero is refused naming the option."""
    from ctgraph.select import shapes

    assert main(["heldout", "test", "--skip", "197", "--stability"]) == 0
    assert "of 3 shapes" in capsys.readouterr().out
    assert main(["heldout", "test", "--skip", "100", "--limit", "2", "--stability"]) == 0
    assert "of 2 shapes" in capsys.readouterr().out
    assert len(shapes.read(shapes.DATA / "test.csv")) == 200
    for bad in ("-1", "200"):  # below zero; past the end
        assert main(["heldout", "test", "--skip", bad, "--stability"]) == 2
        assert "--skip" in capsys.readouterr().err


def test_stability_on_a_known_device_and_device_refused_elsewhere(capsys):
    """``--stability --device NAME`` selects for that known device; ``--device`` without ``--stability`` (a run
    times the GPU at hand) and an unknown name are refused before any work."""
    assert main(["heldout", "test", "--skip", "196", "--stability", "--device", "NVIDIA H200"]) == 0
    assert "of 4 shapes keep their tile, layout and transform (NVIDIA H200)" in capsys.readouterr().out
    assert main(["heldout", "test", "--device", "NVIDIA H200"]) == 2
    assert "only with --stability" in capsys.readouterr().err
    assert main(["heldout", "test", "--stability", "--device", "NVIDIA H9"]) == 2
    assert "unknown target device 'NVIDIA H9'" in capsys.readouterr().err


def test_stability_prices_keeping_the_old_choice_at_the_moved_shape():
    """A choice that changes at +8 is priced: the old tile, layout and transform at the moved shape against the new
    choice, by the ranker. The H100's tile fitted to m = 232 would need a second row of tiles at m = 240."""
    from ctgraph.select import select_schedule
    from ctgraph.target import known_target

    moved = stability([(232, 6760, 6840)], 8)
    assert moved.kept == 0.0 and len(moved.costs) == 1 and moved.costs[0] > 1.02
    old, new = _selection((232, 6760, 6840), None), _selection((240, 6768, 6848), None)
    assert old.config.tile[0] == 232 and new.config.tile[0] != 232
    keep = select_schedule(
        240, 6768, 6848, "float16", old.config.tile, old.config.layout, known_target(), old.config.transform
    )
    assert moved.costs[0] == pytest.approx(keep.ranked[0][1] / new.ranked[0][1])
    assert stability([(232, 6760, 6840)], 0) == Stability(1.0, ())
    assert math.isnan(stability([(8192, 8192, 8192)], 1).costs[0])  # k = 8193 leaves the wgmma path
    line = flip_costs(Stability(0.25, (0.99, 1.5, math.nan)))
    assert line.startswith("3 changed;") and "median 1.245x" in line and "1 within 2%" in line
    assert "cheaper" not in line and line.endswith("(1 not priced)")
    assert "; 1 cheaper (the old one not among the candidates there)" in flip_costs(Stability(0.0, (0.9,)))
    assert flip_costs(Stability(1.0, ())) == "no shape changed its choice"


@pytest.mark.parametrize(
    ("visible", "want"),
    [
        (None, ["0", "1"]),
        ("", ["0", "1"]),
        ("2,3", ["2", "3"]),
        (" 5 , 1 ", ["5", "1"]),
        ("GPU-ab,GPU-cd", ["GPU-ab", "GPU-cd"]),
    ],
)
def test_workers_take_the_gpus_their_parent_sees(monkeypatch, visible, want):
    """tune's and heldout's spawned workers: worker i gets the i-th GPU the parent's CUDA_VISIBLE_DEVICES names."""
    from ctgraph.knobs import visible_device

    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert [visible_device(i) for i in range(2)] == want


def test_a_worker_past_the_visible_gpus_is_refused(monkeypatch):
    from ctgraph.knobs import visible_device

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pytest.raises(ValueError, match="worker 1: CUDA_VISIBLE_DEVICES names 1 GPU"):
        visible_device(1)


def test_choose_writes_the_default_paths_config_and_keeps_what_a_change_moved(tmp_path, capsys):
    """choose: each shape's config and reason as the default path decides them on a known device (no GPU), the same
    as select on that target, with the ranker's price and its runner-up; --against keeps only the shapes whose
    config differs from an earlier CSV's."""
    import csv

    from ctgraph.backends import backend
    from ctgraph.select import Config, select
    from ctgraph.select.resolve import path_of
    from ctgraph.target import known_target

    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,n,k\n128,4096,4096\n1000,130,4100\n8192,8192,8192\n")
    out = tmp_path / "choices.csv"
    assert main(["choose", str(shapes), "--device", "NVIDIA H200", "--out", str(out)]) == 0
    rows = list(csv.DictReader(out.open()))
    target = known_target("NVIDIA H200")
    for r in rows:
        m, n, k = int(r["m"]), int(r["n"]), int(r["k"])
        want = select(m, n, k, "float16", target, path_of(target, "float16", k, n, {}), backend("cuda").supports)
        assert (r["config"], r["reason"]) == (want.config.name, want.reason)
        if len(want.ranked) < 2:  # a path of one candidate: no runner-up
            assert r["runner_up"] == "" and math.isnan(float(r["margin"]))
        elif want.source == "ranker":  # its price, and the config it priced next, no cheaper
            prices = dict(want.ranked)
            assert float(r["predicted_us"]) == pytest.approx(prices[want.config] * 1e6, abs=1e-3)
            assert r["runner_up"] != r["config"] and float(r["margin"]) >= 1.0
            assert float(r["margin"]) == pytest.approx(
                prices[Config.parse(r["runner_up"])] * 1e6 / float(r["predicted_us"]), rel=1e-3
            )
    assert len(rows) == 3 and "3 shapes" in capsys.readouterr().out

    rows[1]["config"] = "64x64x64 1b dataparallel g1 r1"  # an earlier run that chose otherwise for one shape
    before = tmp_path / "before.csv"
    with before.open("w", newline="") as f:
        w = csv.DictWriter(f, rows[0].keys())
        w.writeheader()
        w.writerows(rows)
    moved = tmp_path / "moved.csv"
    assert main(["choose", str(shapes), "--device", "NVIDIA H200", "--against", str(before), "--out", str(moved)]) == 0
    assert [r["m"] for r in csv.DictReader(moved.open())] == ["1000"]
    assert "1 of 3 shapes change their config" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--device", "H300"], "unknown target device 'H300'"),
        (["--against", "nowhere.csv"], "choose --against: 'nowhere.csv' is not a file"),
        (["--out", "choices.txt"], "choose --out path must end in .csv"),
    ],
)
def test_choose_refuses_bad_input_before_any_work(extra, message, capsys):
    assert main(["choose", "test", *extra]) != 0
    assert message in capsys.readouterr().err


def test_choose_against_a_csv_without_configs_names_the_missing_columns(tmp_path, capsys):
    plain = tmp_path / "shapes.csv"
    plain.write_text("m,n,k\n128,128,128\n")
    assert main(["choose", str(plain), "--against", str(plain), "--out", str(tmp_path / "c.csv")]) != 0
    assert "no column config in its header m,n,k" in capsys.readouterr().err


def test_outputs_are_checked_against_float64():
    """fp16 rounding of the exact product passes; a lost K chunk, a shifted row or a stray entry does not."""
    torch = pytest.importorskip("torch")
    g = torch.Generator().manual_seed(0)
    m, n, k = 40, 24, 3000
    A = torch.randn(m, k, generator=g).half()
    B = torch.randn(k, n, generator=g).half()
    exact = A.double() @ B.double()
    assert matches_float64(exact.half(), A, B)
    assert not matches_float64((A[:, 64:].double() @ B[64:].double()).half(), A, B)  # one K chunk of 64 lost
    assert not matches_float64(exact.roll(1, dims=0).half(), A, B)
    stray = exact.clone()
    stray[7, 3] += 16.0
    assert not matches_float64(stray.half(), A, B)


@pytest.mark.parametrize("rounds, warned", [(1, False), (2, False), (3, True), (4, False)])
def test_an_odd_count_of_rounds_is_warned_of_before_any_work(tmp_path, monkeypatch, capsys, rounds, warned):
    """Rounds take their kernels in turn: an odd count (but one) puts cuBLAS first once more than ctgraph."""
    import ctgraph.heldout as heldout

    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)  # no GPU: the run stops right after its checks
    with pytest.raises(RuntimeError, match="heldout needs a GPU"):
        heldout.run([(64, 64, 64)], tmp_path / "out.csv", rounds=rounds)
    err = capsys.readouterr().err
    assert ("cuBLAS first in 2 of them and ctgraph in 1" in err) == warned
