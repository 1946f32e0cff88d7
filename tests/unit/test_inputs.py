"""The input gaps of issue 52: ``build`` must be a bool, the grid is bounded, a C with beta == 0 warns,
GEMMs too large to index are refused, ``build=False`` stays cheap, split-K fits the CPU's default grid,
and the control-graph dump is readable."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ctgraph
from ctgraph.api import CIgnoredWarning
from ctgraph.checks import GRID_LIMIT, IDLE_GRID_LIMIT


@pytest.fixture(scope="module")
def small():
    return ctgraph.gemm(64, 48, 40, macro_tile=(16, 16, 8), dtype="float32")  # 4 x 3 tiles, 5 k-iterations


@pytest.mark.parametrize("build", ["no", "False", 0, 1, None])
def test_build_must_be_a_bool(small, build):
    with pytest.raises(TypeError, match="build must be True or False"):
        ctgraph.compile(small, transform="streamk", target="cpu", build=build)


def test_build_numpy_bool_is_accepted(small):
    kern = ctgraph.compile(small, transform="streamk", target="cpu", build=np.False_)
    assert kern.options["build"] is False and "program" not in kern.__dict__


def test_grid_bounds(small):
    with pytest.raises(ValueError, match=r"workgroups=1000000 is more than this GEMM's 60 iterations"):
        ctgraph.compile(small, transform="streamk", workgroups=10**6, target="cpu", build=False)
    with pytest.raises(ValueError, match="2\\*\\*31 - 1"):
        ctgraph.compile(ctgraph.gemm(2**20, 2**20, 64), "dataparallel", workgroups=GRID_LIMIT + 1, build=False)
    # idle workgroups are fine up to the limit (the tests' 257-workgroup matrix relies on it)
    kern = ctgraph.compile(small, transform="streamk", workgroups=IDLE_GRID_LIMIT, target="cpu", build=False)
    assert kern.workgroups == IDLE_GRID_LIMIT
    # and a big GEMM may have a big grid
    big = ctgraph.gemm(2**14, 2**14, 2**10, macro_tile=(16, 16, 8))
    assert ctgraph.compile(big, "dataparallel", workgroups=10**6, target="cpu", build=False).workgroups == 10**6


def test_c_with_beta_zero_warns(small):
    kern = ctgraph.compile(small, transform="streamk", workgroups=5, target="cpu")
    rng = np.random.default_rng(0)
    A, B, C = (rng.standard_normal(s).astype(np.float32) for s in ((64, 40), (40, 48), (64, 48)))
    with pytest.warns(CIgnoredWarning, match=r"beta == 0.*torch.addmm.*beta=1.0"):
        D = kern(A, B, C)
    np.testing.assert_allclose(D, A @ B, rtol=1e-5, atol=1e-5)
    with pytest.warns(CIgnoredWarning):
        kern(A, B, C, beta=0.0)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kern(A, B)  # no C: no warning
        np.testing.assert_allclose(kern(A, B, C, beta=1.0), A @ B + C, rtol=1e-5, atol=1e-5)


def test_too_large_to_index():
    g = ctgraph.gemm(2**31, 2**31, 2**31)
    with pytest.raises(ValueError, match=r"too large to index.*2\*\*62"):
        ctgraph.compile(g, target="cpu", build=False)


def test_build_false_is_cheap_for_any_size():
    kern = ctgraph.compile(ctgraph.gemm(2**31, 128, 128), transform="streamk", target="cpu", build=False)
    assert "define" in kern.source and kern.control.kernels
    assert "_schedule" not in kern.__dict__  # no schedule was computed (2**26 iterations)
    assert "order" not in kern.program.__dict__


@pytest.mark.parametrize("transform", ["splitk", "splitk_reduce"])
@pytest.mark.parametrize("split", [None, 3])
def test_splitk_on_the_cpu_default_grid(transform, split):
    g = ctgraph.gemm(100, 90, 64, macro_tile=(16, 16, 8), dtype="float32")  # 7 x 6 = 42 output tiles
    kern = ctgraph.compile(g, transform=transform, split=split, target="cpu")
    assert kern.workgroups == 42 * (split or 1)
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((100, 64)).astype(np.float32), rng.standard_normal((64, 90)).astype(np.float32)
    np.testing.assert_allclose(kern(A, B), A @ B, rtol=1e-5, atol=1e-4)
    assert ctgraph.compile(g, transform=transform, split=split, workgroups="auto", target="cpu").workgroups == (
        kern.workgroups
    )


def test_control_dump_is_nested_by_loop(tmp_path):
    g = ctgraph.gemm(160, 192, 4096, macro_tile=(16, 16, 8))
    cg = ctgraph.compile(g, transform="streamk2tile", workgroups=32, target="cpu").control
    text = ctgraph.dump(cg, tmp_path / "c.dot").read_text()
    loops_and_ifs = [t for t in cg.nx.nodes if type(cg[t]).__name__ in ("ForLoop", "If")]
    assert len(re.findall(r"subgraph cluster_c\d+", text)) == len(loops_and_ifs)
    labels = re.findall(r'label="((?:[^"\\]|\\.)*)"', text)
    assert max(len(line) for lab in labels for line in lab.split("\\l")) < 200
    assert "ControlGraph.pretty()" in text  # the dump points at the text view
    txt = ctgraph.dump(cg, tmp_path / "c.txt").read_text()
    assert txt == cg.pretty() + "\n"
    with pytest.raises(ValueError, match=r"\.dot"):
        ctgraph.dump(ctgraph.gemm(16, 16, 16), tmp_path / "g.txt")  # text is for control graphs
