"""Operand safety shared by the backends: out must not overlap an input; alpha and beta finite in float32."""

from __future__ import annotations

import numpy as np
import pytest

import ctgraph
from ctgraph.operands import check_no_overlap, check_scalars, overlapping


@pytest.fixture(scope="module")
def kern():
    return ctgraph.compile(
        ctgraph.gemm(48, 48, 48, macro_tile=(16, 16, 16), dtype="float32"), "streamk", 4, target="cpu"
    )


def operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((48, 48)).astype(np.float32) for _ in range(3))


@pytest.mark.parametrize("alias", ["A", "B", "C", "part of A"])
def test_out_overlapping_an_input_raises_before_any_work(kern, alias):
    A, B, C = operands()
    if alias == "part of A":
        pool = np.ones(2 * 48 * 48, np.float32)
        A, out = pool[: 48 * 48].reshape(48, 48), pool[48 * 48 - 8 : 2 * 48 * 48 - 8].reshape(48, 48)
    else:
        out = {"A": A, "B": B, "C": C}[alias]
    before = (A.copy(), B.copy(), C.copy())
    with pytest.raises(ValueError, match="out overlaps"):
        kern(A, B, C, beta=1.0, out=out)
    assert all(np.array_equal(x, y) for x, y in zip((A, B, C), before, strict=True))  # nothing written


def test_adjacent_buffers_do_not_overlap(kern):
    A, B, _ = operands()
    pool = np.zeros(2 * 48 * 48, np.float32)
    pool[: 48 * 48] = A.reshape(-1)
    a, out = pool[: 48 * 48].reshape(48, 48), pool[48 * 48 :].reshape(48, 48)
    np.testing.assert_allclose(kern(a, B, out=out), A.astype(np.float64) @ B, rtol=1e-4, atol=1e-4)


def test_overlap_algebra():
    assert overlapping((0, 10), {"A": (10, 20), "B": (9, 11), "C": (-5, 0)}) == ["B"]
    check_no_overlap(None, {"A": (0, 10)})
    check_no_overlap((0, 10), {"A": None, "B": (10, 12)})
    with pytest.raises(ValueError, match="out overlaps A and C"):
        check_no_overlap((0, 10), {"A": (5, 6), "B": (10, 12), "C": (0, 1)})


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e39, -3.5e38])
def test_scalars_must_be_finite_in_float32(value):
    with pytest.raises(ValueError, match="alpha must be finite in float32"):
        check_scalars(value, 0.0)
    with pytest.raises(ValueError, match="beta must be finite in float32"):
        check_scalars(1.0, value)
    assert check_scalars(3.0e38, -1) == (3.0e38, -1.0)
