"""A missing optional stack gives one clear error, from the API and the CLI: pycuda, a GPU, nvcc, torch,
matplotlib and graphviz's ``dot`` (simulated by blocking the import or hiding the program)."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import ctgraph
from ctgraph import deps
from ctgraph.cli import main
from ctgraph.deps import MissingDependency

SMALL = dict(m=64, n=64, k=64, macro_tile=(32, 32, 16))


@pytest.fixture
def no_pycuda(monkeypatch):
    """pycuda cannot be imported (an entry of None in sys.modules blocks the import)."""
    for name in ("pycuda", "pycuda.driver", "pycuda.autoprimaryctx", "pycuda.compiler", "pycuda.gpuarray"):
        monkeypatch.setitem(sys.modules, name, None)


def run(argv):
    try:
        return main(argv)
    except SystemExit as e:
        return e.code


def test_missing_dependency_is_import_and_not_implemented_error():
    e = MissingDependency("pycuda", "a test", "pip install 'ctgraph[cuda]'")
    assert isinstance(e, ImportError) and isinstance(e, NotImplementedError) and isinstance(e, RuntimeError)
    assert "a test needs pycuda" in str(e) and "pip install 'ctgraph[cuda]'" in str(e)
    assert ctgraph.MissingDependency is MissingDependency


def test_compile_cuda_without_pycuda(no_pycuda):
    g = ctgraph.gemm(**SMALL)
    with pytest.raises(MissingDependency, match=r"pycuda.*pip install 'ctgraph\[cuda\]'") as info:
        ctgraph.compile(g, transform="streamk", workgroups=4, target="cuda")
    assert info.value.what == "pycuda"
    with pytest.raises(NotImplementedError):  # what docs/design.md promised for an unavailable backend
        ctgraph.compile(g, transform="streamk", target="cuda")


def test_source_without_pycuda_then_call(no_pycuda):
    g = ctgraph.gemm(**SMALL)
    kern = ctgraph.compile(g, transform="streamk", workgroups=4, target="cuda", build=False)
    assert "__global__" in kern.source  # the source needs no pycuda
    A, B = np.ones((64, 64), np.float16), np.ones((64, 64), np.float16)
    with pytest.raises(MissingDependency, match="pycuda"):
        kern(A, B)


def test_auto_target_falls_back_to_cpu_without_pycuda(no_pycuda):
    assert ctgraph.compile(ctgraph.gemm(**SMALL), transform="streamk", target="cpu").target == "cpu"


def test_no_gpu_with_pycuda(monkeypatch):
    fake = types.ModuleType("pycuda")
    driver = types.ModuleType("pycuda.driver")

    def init() -> None:
        raise RuntimeError("cuInit failed: no CUDA-capable device is detected")

    driver.init = init  # type: ignore[attr-defined]
    fake.driver = driver  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pycuda", fake)
    monkeypatch.setitem(sys.modules, "pycuda.driver", driver)
    deps._gpu_error.cache_clear()
    try:
        with pytest.raises(MissingDependency, match=r"GPU.*no CUDA-capable device.*build=False") as info:
            ctgraph.compile(ctgraph.gemm(**SMALL), transform="streamk", workgroups=4, target="cuda")
        assert "GPU" in info.value.what
    finally:
        deps._gpu_error.cache_clear()


def test_no_nvcc(monkeypatch):
    monkeypatch.setattr(deps.shutil, "which", lambda name: None)
    kern = ctgraph.compile(ctgraph.gemm(**SMALL), transform="streamk", workgroups=4, target="cuda", build=False)
    with pytest.raises(MissingDependency, match=r"nvcc.*CUDA toolkit"):
        kern.ptx  # noqa: B018


def test_no_matplotlib(monkeypatch, tmp_path):
    kern = ctgraph.compile(ctgraph.gemm(**SMALL), transform="streamk", workgroups=4, target="cpu")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(MissingDependency, match=r"matplotlib.*pip install 'ctgraph\[plot\]'"):
        ctgraph.plot_schedule(kern, tmp_path / "s.png")
    assert not (tmp_path / "s.png").exists()


def test_no_dot_is_a_missing_dependency(monkeypatch, tmp_path):
    import importlib

    dump_module = importlib.import_module("ctgraph.dump")
    DotNotFoundError = dump_module.DotNotFoundError
    monkeypatch.setattr(dump_module.shutil, "which", lambda name: None)
    with pytest.raises(MissingDependency, match="graphviz") as info:
        ctgraph.dump(ctgraph.gemm(**SMALL), tmp_path / "g.svg")
    assert isinstance(info.value, DotNotFoundError) and isinstance(info.value, RuntimeError)


def test_require_reports_a_blocked_module(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(MissingDependency, match="python -m ctgraph bench needs torch"):
        deps.require("torch", "python -m ctgraph bench")


# --- the command line: error: ..., exit 2, no traceback ----------------------------------------------

CUDA_ARGS = ["--m", "64", "--n", "64", "--k", "64", "--tile", "32", "32", "16", "--target", "cuda"]


@pytest.mark.parametrize("command", ["compile", "run"])
def test_cli_without_pycuda_exits_2(no_pycuda, capsys, command):
    assert run([command, *CUDA_ARGS]) == 2
    out = capsys.readouterr()
    assert out.err.startswith("error: ") and "pycuda" in out.err and "pip install 'ctgraph[cuda]'" in out.err
    assert "Traceback" not in out.err and out.err.count("\n") == 1


@pytest.mark.parametrize("command", [["bench"], ["heldout", "test"], ["tune", "test"], ["calibrate"]])
def test_cli_gpu_commands_without_torch_exit_2(monkeypatch, capsys, command):
    monkeypatch.setitem(sys.modules, "torch", None)
    assert run(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "torch" in err and "Traceback" not in err


def test_cli_plot_without_matplotlib_before_any_work(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["compile", "--m", "64", "--n", "64", "--k", "64", "--plot", str(tmp_path / "s.png")]
    assert run(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and "matplotlib" in out.err


def test_fit_without_lightgbm(monkeypatch, tmp_path, capsys):
    """The fit's trees need LightGBM: the command says so before it reads a table, and so does the library call."""
    from ctgraph.select import H100_SXM
    from ctgraph.select.cache import Table
    from ctgraph.select.fit import fit

    monkeypatch.setitem(sys.modules, "lightgbm", None)
    assert run(["fit", str(tmp_path / "absent.json"), str(tmp_path / "absent.json")]) == 2
    err = capsys.readouterr().err
    assert "python -m ctgraph fit needs lightgbm" in err and "pip install 'ctgraph[fit]'" in err
    table = Table.from_json(
        '{"device": "NVIDIA H100 80GB HBM3", "entries": {"1024,1024,1024,float16": {"config": '
        '"128x128x64 1b dataparallel g64 r1", "cublas": 1e-05, "seconds": {"128x128x64 1b dataparallel g64 r1": '
        '1e-05, "128x256x64 1b dataparallel g32 r1": 2e-05}, "kernels": "test"}}}'
    )
    with pytest.raises(MissingDependency, match=r"fitting the ranker's trees needs lightgbm"):
        fit(table, table, H100_SXM, kernels="test")
