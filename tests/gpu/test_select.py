"""The default path on the GPU: the frozen held-out test set, the shipped entries, autotune's cache, a sharded tune.

Every shape runs as a user calls it (``macro_tile="auto"``, ``transform="auto"``) and is checked against float64 with
``alpha`` and ``beta``, then run again for a bit-identical result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ctgraph
from ctgraph.select import cache, shapes

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
TEST_SET = shapes.read(shapes.DATA / "test.csv")
SHIPPED = sorted(tuple(map(int, key.split(",")[:3])) for key in cache.load("NVIDIA H100 80GB HBM3").entries)


def check_default_path(shape: tuple[int, int, int]) -> None:
    torch = pytest.importorskip("torch")
    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(m * n + k)
    A, B, C = (torch.randn(s, generator=gen, device="cuda").half() for s in ((m, k), (k, n), (m, n)))
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), transform="auto", target="cuda")
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    ref = 1.5 * (A.double() @ B.double()) + 0.5 * C.double()
    err = float((D.double() - ref).abs().max()) / max(1.0, float(ref.abs().max()))
    assert err < 3e-3, f"{kern.selection}: relative error {err:.3e}"
    assert torch.equal(D, kern(A, B, C, alpha=1.5, beta=0.5))


@pytest.mark.parametrize("shape", TEST_SET, ids=lambda s: "x".join(map(str, s)))
def test_default_path_on_the_frozen_test_set(shape):
    check_default_path(shape)


@pytest.mark.parametrize("shape", SHIPPED, ids=lambda s: "x".join(map(str, s)))
def test_default_path_on_every_shipped_entry(shape):
    check_default_path(shape)


def test_the_call_objective_on_the_test_shapes_it_moves(monkeypatch):
    """CTGRAPH_OBJECTIVE=call: every test shape whose config it changes (one launch where kernel time chose split-K's
    two, mostly) runs that config, against float64 and bit-identical on a repeat."""
    from ctgraph.select.objective import launches

    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "kernel")  # restored after the test

    def config(shape: tuple[int, int, int]) -> object:
        kern = ctgraph.compile(ctgraph.gemm(*shape, macro_tile="auto"), transform="auto", target="cuda", build=False)
        return kern.selection.config

    by_kernel = {shape: config(shape) for shape in TEST_SET}
    monkeypatch.setenv("CTGRAPH_OBJECTIVE", "call")
    moved = [shape for shape in TEST_SET if config(shape) != by_kernel[shape]]
    assert moved and sum(launches(config(s)) < launches(by_kernel[s]) for s in moved) > len(moved) // 2
    for shape in moved:
        check_default_path(shape)


AUTOTUNE = """
import ctgraph, torch
kern = ctgraph.compile(ctgraph.gemm(520, 776, 1032, macro_tile="auto"), transform="auto", target="cuda",
                       autotune=True)
A = torch.randn(520, 1032, device="cuda").half(); B = torch.randn(1032, 776, device="cuda").half()
err = float((kern(A, B).double() - A.double() @ B.double()).abs().max())
print(kern.selection.reason, "|", kern.selection.config.name, "|", err)
"""


def test_autotune_writes_its_cache_and_a_later_process_reuses_it(tmp_path):
    env = os.environ | {"CTGRAPH_CACHE_DIR": str(tmp_path), "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}"}
    first = subprocess.run([sys.executable, "-c", AUTOTUNE], env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    reason, config, err = (x.strip() for x in first.stdout.strip().splitlines()[-1].split("|"))
    assert reason.startswith("autotuned on first call") and float(err) < 1.0
    files = list((tmp_path / "autotune").glob("autotune-*.json"))
    assert len(files) == 1
    entries = json.loads(files[0].read_text())["entries"]
    assert entries["520,776,1032,float16"]["config"] == config
    assert len(entries["520,776,1032,float16"]["seconds"]) >= 2
    second = subprocess.run([sys.executable, "-c", AUTOTUNE], env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    reason2, config2, _ = (x.strip() for x in second.stdout.strip().splitlines()[-1].split("|"))
    assert reason2.startswith("measured on this device") and reason2.endswith("autotune cache)") and config2 == config


def test_a_tune_over_two_gpus_merges_one_table(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs")
    csv = tmp_path / "s.csv"
    shapes.write(csv, [(256, 512, 1024), (512, 256, 2048), (384, 640, 768), (200, 1000, 512)])
    env = os.environ | {
        "CTGRAPH_CACHE_DIR": str(tmp_path / "c"),
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    }
    cmd = [
        sys.executable,
        "-m",
        "ctgraph",
        "tune",
        str(csv),
        "--top",
        "2",
        "--extra",
        "0",
        "--out",
        str(tmp_path / "t.json"),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads((tmp_path / "t.json").read_text())
    assert len(table["entries"]) == 4
    parts = sorted(tmp_path.glob("t.part*.json"))
    assert len(parts) == torch.cuda.device_count() >= 2
    assert all(json.loads(p.read_text())["entries"] for p in parts[:2])  # both GPUs timed shapes


def test_a_tune_records_its_kernels_and_retime_times_only_the_stale_shapes(tmp_path):
    from ctgraph.select.fit import kernel_hash

    csv = tmp_path / "s.csv"
    shapes.write(csv, [(256, 512, 1024), (200, 1000, 512)])
    env = os.environ | {
        "CTGRAPH_CACHE_DIR": str(tmp_path / "c"),
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0],
        "PYTHONPATH": f"{ROOT}:{os.environ.get('PYTHONPATH', '')}",
    }
    tune = [sys.executable, "-m", "ctgraph", "tune"]
    first = [*tune, str(csv), "--top", "2", "--extra", "0", "--out", str(tmp_path / "t.json")]
    done = subprocess.run(first, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    table = json.loads((tmp_path / "t.json").read_text())
    assert {e["kernels"] for e in table["entries"].values()} == {kernel_hash()}
    old = table["entries"]["256,512,1024,float16"]
    old["kernels"] = "kernels-of-yesterday"
    (tmp_path / "t.json").write_text(json.dumps(table))
    again = [*tune, str(tmp_path / "t.json"), "--retime", "--out", str(tmp_path / "new.json")]
    done = subprocess.run(again, env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "timed 1 of 1 stale shapes again" in done.stdout
    new = json.loads((tmp_path / "new.json").read_text())["entries"]
    assert new["200,1000,512,float16"] == table["entries"]["200,1000,512,float16"]  # current: kept as it was
    redone = new["256,512,1024,float16"]
    assert redone["kernels"] == kernel_hash() and sorted(redone["seconds"]) == sorted(old["seconds"])


def test_heldout_regret_times_the_ranked_and_names_the_fastest(tmp_path):
    """``heldout --regret N``: the ranker's first N configs timed beside the chosen one; the regret is the chosen's
    time over the fastest's (at least 1), and the CSV names the fastest, a config the ranker ranked, and keeps every
    config's seconds, the chosen one's from the run itself."""
    pytest.importorskip("torch")
    from ctgraph.heldout import _time_shape, _write, read, timed_of
    from ctgraph.select import Config

    row = _time_shape((200, 328, 1544), rounds=1, autotune=False, regret=3)
    assert row["close"] and row["regret"] >= 1.0
    kern = ctgraph.compile(ctgraph.gemm(200, 328, 1544, macro_tile="auto"), transform="auto", target="cuda")
    assert Config.parse(row["fastest"]) in [c for c, _ in kern.selection.ranked[:3]] + [kern.selection.config]
    path = tmp_path / "regret.csv"
    _write([row], path)
    assert read(path)[0]["fastest"] == row["fastest"]
    timed = timed_of(read(path)[0])  # every config timed, the fastest's seconds the least of them
    assert row["fastest"] in timed and kern.selection.config.name in timed and 1 <= len(timed) <= 4
    assert min(timed.values()) == timed[row["fastest"]]
    assert row["regret"] == timed[kern.selection.config.name] / timed[row["fastest"]]
