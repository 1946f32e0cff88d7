"""The selection's objective (ctgraph.select.objective): kernel time, or the time of back-to-back eager calls."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctgraph
from ctgraph import knobs
from ctgraph.backends import backend
from ctgraph.cli import main
from ctgraph.heldout import chosen_by
from ctgraph.select import H100_SXM, H200, Config, Layout, candidates, measured_choice, rank, select
from ctgraph.select import cache as entries
from ctgraph.select.model import IN_KERNEL_SPLITK
from ctgraph.select.objective import HOST_CALL, HOST_LAUNCH, call_seconds, launches, order_key

CUDA = backend("cuda")
aligned = st.integers(1, 1024).map(lambda x: 8 * x)


def _select(m: int, n: int, k: int, objective: str, target=H100_SXM):
    return select(m, n, k, "float16", target, target.paths("float16", k, n)[0], CUDA.supports, objective=objective)


def test_the_host_prices_a_call_by_its_launches():
    split = Config((64, 64, 64), Layout(), "splitk_reduce", 128, split=4)
    one = Config((64, 64, 64), Layout(), "streamk", 128)
    assert launches(split) == 2 and launches(one) == 1
    assert call_seconds(one, 3e-6) == HOST_CALL and call_seconds(split, 3e-6) == HOST_CALL + HOST_LAUNCH
    assert call_seconds(split, 1e-3) == 1e-3  # a kernel that outlasts the host is the call
    assert order_key(split, 3e-6, "kernel") < order_key(one, 5e-6, "kernel")
    assert order_key(split, 3e-6, "call") > order_key(one, 5e-6, "call")
    assert order_key(one, 3e-6, "call") < order_key(one, 5e-6, "call")  # both hidden by the host: the faster kernel


def test_a_short_split_k_gives_way_to_one_launch_by_call_time():
    kernel, call = _select(22, 768, 3072, "kernel"), _select(22, 768, 3072, "call")
    assert kernel.config.transform == "splitk_reduce" and launches(call.config) == 1
    assert call.config == replace(kernel.config, transform="splitk")  # the same split, its fixup in the kernel
    assert call.reason.endswith(", by call time)") and not kernel.reason.endswith(", by call time)")
    assert call == _select(22, 768, 3072, "call")  # deterministic


@settings(max_examples=40, deadline=None, derandomize=True)
@given(m=aligned, n=aligned, k=aligned, target=st.sampled_from([H100_SXM, H200]))
def test_call_time_is_the_ranked_order_by_its_key_and_leaves_long_kernels_alone(m, n, k, target):
    path = target.paths("float16", k, n)[0]
    by_kernel = rank(m, n, k, "float16", target, path, CUDA.supports, objective="kernel")
    by_call = rank(m, n, k, "float16", target, path, CUDA.supports, objective="call")
    # by call time the same candidates, and for each split-K its twin with the fixup in the kernel, priced at its
    # time times IN_KERNEL_SPLITK
    assert not any(c.transform == "splitk" for c, _ in by_kernel)
    twins = {c: t for c, t in by_call if c.transform == "splitk"}
    assert sorted(by_kernel, key=lambda ct: ct[0].name) == sorted(
        [ct for ct in by_call if ct[0] not in twins], key=lambda ct: ct[0].name
    )
    priced = dict(by_kernel)
    reduced = [c for c in priced if c.transform == "splitk_reduce"]
    assert sorted(twins, key=lambda c: c.name) == sorted(
        (replace(c, transform="splitk") for c in reduced), key=lambda c: c.name
    )
    for c, t in twins.items():
        assert t == pytest.approx(priced[replace(c, transform="splitk_reduce")] * IN_KERNEL_SPLITK, rel=1e-12)
        assert c.workgroups <= target.resident(c.layout.cluster)  # the owner waits: every chunk resident at once
    keys = [order_key(c, t, "call") for c, t in by_call]
    assert keys == sorted(keys)
    first, t = by_kernel[0]
    if t > HOST_CALL + HOST_LAUNCH:  # no config's call is shorter than the fastest kernel
        assert by_call[0][0] == first


def test_the_objective_knob_is_checked(monkeypatch):
    monkeypatch.delenv("CTGRAPH_OBJECTIVE", raising=False)
    assert knobs.objective() == "kernel"
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", " Call ")
    assert knobs.objective() == "call"
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "fastest")
    with pytest.raises(ValueError, match="CTGRAPH_OBJECTIVE must be one of 'kernel', 'call', got 'fastest'"):
        knobs.objective()
    with pytest.raises(ValueError, match="objective must be one of"):
        select(64, 64, 64, "float16", H100_SXM, "wgmma", CUDA.supports, objective="wall")


def test_a_compile_selects_again_where_the_objective_changed(monkeypatch):
    monkeypatch.delenv("CTGRAPH_OBJECTIVE", raising=False)
    g = ctgraph.gemm(22, 768, 3072, macro_tile="auto")  # its tile chosen by kernel time
    assert g.attrs["auto_selection"].objective == "kernel"
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "call")
    kern = ctgraph.compile(g, transform="auto", target="cuda", build=False)
    assert kern.selection is not None and launches(kern.selection.config) == 1
    assert kern.selection.reason.endswith(", by call time)")


def test_a_measured_entry_serves_either_objective(tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    split = Config((32, 64, 64), Layout(1, "b", True), "splitk_reduce", 120, split=10)
    one = Config((32, 64, 64), Layout(1, "b", True), "streamk", 48)
    entry = entries.Entry(split, ((split.name, 5e-6), (one.name, 7e-6)))
    assert measured_choice(entry, "kernel") == split and measured_choice(entry, "call") == one
    assert measured_choice(entries.Entry(split, (("old label", 1e-6),)), "call") == split  # nothing to re-rank
    entries.store(H100_SXM.name, {entries.key(22, 768, 3072, "float16"): entry})
    kernel, call = _select(22, 768, 3072, "kernel"), _select(22, 768, 3072, "call")
    assert kernel.config == split and kernel.reason == f"measured on this device ({H100_SXM.name}, autotune cache)"
    assert call.config == one
    assert call.reason == f"measured on this device ({H100_SXM.name}, autotune cache, by call time)"
    rows = [{"reason": r} for r in (kernel.reason, call.reason, "ranker (sm90, 9 candidates, by call time)")]
    assert chosen_by(rows) == {"autotune cache": 1, "autotune cache, by call time": 1, "ranker, by call time": 1}


def test_choose_lists_the_call_objectives_choices(tmp_path, monkeypatch, capsys):
    import csv

    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "kernel")  # restored after the test: --objective sets it for the process
    shapes = tmp_path / "shapes.csv"
    shapes.write_text("m,n,k\n22,768,3072\n8192,8192,8192\n")
    kernel, call = tmp_path / "kernel.csv", tmp_path / "call.csv"
    assert main(["choose", str(shapes), "--objective", "kernel", "--out", str(kernel)]) == 0
    assert main(["choose", str(shapes), "--objective", "call", "--against", str(kernel), "--out", str(call)]) == 0
    rows = list(csv.DictReader(call.open()))
    # 132 candidates by kernel time, and by call time the 15 split-K ones again with their fixup in the kernel
    assert [(r["m"], r["reason"]) for r in rows] == [("22", "ranker (sm90, 147 candidates, by call time)")]
    assert "1 of 2 shapes change their config" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["choose", "heldout"])
def test_an_unknown_objective_is_refused_by_the_cli(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "test", "--objective", "wall"])
    assert "argument --objective: invalid choice: 'wall'" in capsys.readouterr().err


def test_tune_times_the_kernel_objectives_candidates_whatever_the_knob(monkeypatch):
    """The tune tables fit the ranker's kernel times: their candidates are the kernel objective's first."""
    from ctgraph.tune import configs_for

    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "call")
    first = configs_for((22, 768, 3072), H100_SXM, 4, 0)
    assert first == configs_for((22, 768, 3072), H100_SXM, 4, 0, objective="kernel")
    assert first[0].transform == "splitk_reduce"
    assert launches(configs_for((22, 768, 3072), H100_SXM, 4, 0, objective=None)[0]) == 1


def test_overhead_sets_its_host_and_call_times_against_the_call_objectives():
    from ctgraph.overhead import KERN, SPLIT, host_check, table

    rows = [
        {"shape": s, "caller": c, "kernel_us": kernel, "call_us": call, "host_us": h}
        for s, kernel, times in (("8x8x8", 2.0, (11.0, 13.0, 17.5)), ("1024x1024x1024", 9.0, (16.0, 18.0, 23.0)))
        for c, h, call in zip(("torch.matmul(a, b, out=d)", KERN, SPLIT), times, (12.0, 14.0, 16.5), strict=True)
    ]
    assert "| 8x8x8 | `split-K kern(a, b, out=d)` | 2.0 | 16.5 | 17.5 | +6.5 |" in table(rows)
    assert host_check(rows) == (
        f"the call objective (ctgraph/select/objective.py) assumes {HOST_CALL * 1e6:.1f} us a call and "
        f"{HOST_LAUNCH * 1e6:.1f} us more for a second launch; here by host time, 13.0 to 18.0 us a call, +4.5 to "
        "+5.0 us for split-K's second; by call time where the host binds, 14.0 to 14.0 us a call, +2.5 to +2.5 us "
        "for split-K's second"  # 1024^3's 9 us kernels take more than half their calls
    )
    assert host_check(rows[:1]).startswith("no shape timed both")
    long = [r | {"kernel_us": 9.0} for r in rows]
    assert "by call time" not in host_check(long)


def test_compile_takes_the_objective_as_an_argument(monkeypatch):
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "kernel")
    g = ctgraph.gemm(22, 768, 3072, macro_tile="auto")
    by_call = ctgraph.compile(g, transform="auto", target="cuda", build=False, objective="call")
    assert launches(by_call.selection.config) == 1 and by_call.transform == "splitk"  # the fixup in the kernel
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "call")  # the argument wins over the environment
    by_kernel = ctgraph.compile(g, transform="auto", target="cuda", build=False, objective="kernel")
    assert by_kernel.transform == "splitk_reduce"
    grid = ctgraph.compile(
        ctgraph.gemm(22, 768, 3072, macro_tile=(24, 64, 64)),
        "streamk",
        workgroups="auto",
        target="cuda",
        build=False,
        objective="call",
        swap=True,
    )
    assert grid.workgroups >= 1
    with pytest.raises(ValueError, match="objective must be one of 'kernel', 'call', got 'fast'"):
        ctgraph.compile(g, transform="auto", target="cpu", objective="fast")
    cpu = ctgraph.compile(g, transform="auto", target="cpu", build=False, objective="call")
    assert cpu.selection is not None and not cpu.selection.reason.endswith(", by call time)")  # no launch to price


def test_a_twin_kept_by_a_call_autotune_is_not_what_the_kernel_objective_runs(tmp_path, monkeypatch):
    """An autotune by call time may keep an in-kernel split-K twin, which the kernel objective never offers: by
    kernel time the entry gives the fastest of its other timed configs, and with none the ranker answers."""
    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path))
    twin = Config((32, 64, 64), Layout(1, "b", True), "splitk", 120, split=10)
    split = replace(twin, transform="splitk_reduce")
    one = Config((32, 64, 64), Layout(1, "b", True), "streamk", 48)
    entry = entries.Entry(twin, ((twin.name, 5e-6), (one.name, 7e-6), (split.name, 6e-6)))
    assert measured_choice(entry, "kernel") == split and measured_choice(entry, "call") == twin
    only = entries.Entry(twin, ((twin.name, 5e-6),))
    assert measured_choice(only, "kernel") is None and measured_choice(only, "call") == twin
    entries.store(H100_SXM.name, {entries.key(22, 768, 3072, "float16"): only})
    kernel, call = _select(22, 768, 3072, "kernel"), _select(22, 768, 3072, "call")
    assert kernel.config.transform != "splitk" and kernel.source == "ranker"
    assert call.config == twin and call.source == "measured"


@pytest.mark.parametrize("workgroups", [None, 64, 128, 1024])
def test_a_grid_of_the_callers_runs_the_twin_only_where_it_is_resident(monkeypatch, workgroups):
    """``transform="auto"`` with the caller's grid takes as many K chunks as it holds; the in-kernel twin's chunks
    wait on each other, so beyond the resident grid the call objective runs the split-K it mirrors."""
    monkeypatch.delenv("CTGRAPH_OBJECTIVE", raising=False)
    kern = ctgraph.compile(
        ctgraph.gemm(64, 256, 16384, macro_tile="auto"),
        transform="auto",
        workgroups=workgroups,
        target="cuda",
        build=False,
        objective="call",
    )
    cluster = kern.selection.config.layout.cluster
    assert kern.transform == ("splitk" if kern.workgroups <= H100_SXM.resident(cluster) else "splitk_reduce")
    assert (kern.transform == "splitk") == (workgroups != 1024)


@pytest.mark.parametrize("objective", ["Call", None, "wall"])
def test_candidates_refuse_an_objective_they_do_not_know(objective):
    with pytest.raises(ValueError, match="objective must be one of 'kernel', 'call'"):
        candidates(64, 64, 64, "float16", H100_SXM, "wgmma", CUDA.supports, objective=objective)
