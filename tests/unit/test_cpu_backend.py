"""The llvmlite CPU backend: every transform x shapes (full and partial tiles) x dtypes x workgroup counts
against numpy in float64; determinism of the Stream-K fixup; workspaces; the compiled-module cache."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
import zlib

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ctgraph
from ctgraph.lower import fixup_parent
from lowering.cpu import jit

TILES = {
    (16, 16, 8): [
        (32, 48, 16),  # multiples of the macro tile
        (64, 64, 64),  # multiples, several k tiles per output tile
        (1, 1, 1),
        (1, 40, 20),  # m = 1
        (37, 1, 24),  # n = 1
        (20, 30, 5),  # k < BK
        (45, 50, 27),  # partial tiles in m, n and k
    ],
    (8, 16, 4): [
        (24, 32, 8),
        (1, 17, 9),
        (13, 1, 3),
        (19, 35, 14),
    ],
}
DTYPES = ("float16", "float32")
WORKGROUPS = (1, 3, 8, 257)  # 257: more workgroups than iterations for every shape above
CASES = [
    pytest.param(
        t, tile, shape, dtype, wg, id=f"{t}-{'x'.join(map(str, tile))}-{'x'.join(map(str, shape))}-{dtype}-wg{wg}"
    )
    for t in ctgraph.TRANSFORMS
    for tile, shapes in TILES.items()
    for shape in shapes
    for dtype in DTYPES
    for wg in WORKGROUPS
]


def compile_gemm(transform, shape, tile=(16, 16, 8), dtype="float32", workgroups=5, raster=None):
    m, n, k = shape
    g = ctgraph.gemm(m, n, k, macro_tile=tile, dtype=dtype)
    return ctgraph.compile(g, transform=transform, workgroups=workgroups, target="cpu", raster=raster)


def operands(shape, dtype, seed=0):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def reference(A, B, C, alpha, beta):
    ref = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    if C is not None:
        ref = ref + beta * C.astype(np.float64)
    return ref


def check_close(D, A, B, C, alpha, beta):
    """fp32: ~1e-5*sqrt(k)*scale; fp16: + output rounding, 2e-3 of the largest magnitude."""
    k = A.shape[1]
    ref = reference(A, B, C, alpha, beta)
    scale = abs(alpha) * (np.abs(A.astype(np.float64)) @ np.abs(B.astype(np.float64))).max(initial=0)
    if C is not None:
        scale += abs(beta) * np.abs(C.astype(np.float64)).max(initial=0)
    scale = max(scale, 1.0)
    tol = 1e-5 * np.sqrt(k) * scale
    if D.dtype == np.float16:
        tol += 2e-3 * np.abs(ref).max(initial=0)
    np.testing.assert_allclose(D.astype(np.float64), ref, rtol=0, atol=tol)


@pytest.mark.parametrize(("transform", "tile", "shape", "dtype", "workgroups"), CASES)
def test_matches_numpy(transform, tile, shape, dtype, workgroups):
    kern = compile_gemm(transform, shape, tile, dtype, workgroups)
    A, B, C = operands(shape, dtype, seed=zlib.crc32(repr((transform, tile, shape, dtype, workgroups)).encode()))
    alpha, beta = 0.75, -1.25
    D = kern(A, B, C, alpha=alpha, beta=beta)
    assert isinstance(D, np.ndarray) and D.shape == shape[:2] and D.dtype == np.dtype(dtype)
    check_close(D, A, B, C, alpha, beta)
    assert not kern.program.flags.any()


def test_matrix_has_idle_workgroups():
    """The 257-workgroup cases really have more workgroups than iterations (some do nothing)."""
    for t in ctgraph.TRANSFORMS:
        for tile, shapes in TILES.items():
            for shape in shapes:
                sched = compile_gemm(t, shape, tile, workgroups=257).schedule()
                assert sum(map(len, sched)) < 257 and sched[-1] == []


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_beta_zero_c_omitted(transform, dtype):
    shape = (45, 50, 27)
    kern = compile_gemm(transform, shape, dtype=dtype)
    A, B, _ = operands(shape, dtype, seed=1)
    check_close(kern(A, B), A, B, None, 1.0, 0.0)
    check_close(kern(A, B, alpha=-2.5), A, B, None, -2.5, 0.0)
    check_close(kern(A, B, None, alpha=3, beta=0), A, B, None, 3, 0)


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_beta_zero_does_not_read_c(transform):
    """With beta == 0, C is not read (BLAS convention): NaN/inf in C do not reach D."""
    shape = (45, 50, 27)
    kern = compile_gemm(transform, shape)
    A, B, _ = operands(shape, "float32", seed=2)
    C = np.full(shape[:2], np.nan, dtype=np.float32)
    C[0, 0] = np.inf
    D = kern(A, B, C, alpha=1.0, beta=0.0)
    assert np.isfinite(D).all()
    check_close(D, A, B, None, 1.0, 0.0)


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.5, 2])
@pytest.mark.parametrize("beta", [1.0, -2.0, 0.25])
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_alpha_beta(transform, alpha, beta):
    shape = (37, 29, 19)
    kern = compile_gemm(transform, shape, tile=(8, 16, 4), workgroups=6)
    A, B, C = operands(shape, "float32", seed=3)
    check_close(kern(A, B, C, alpha=alpha, beta=beta), A, B, C, alpha, beta)


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_numpy_scalar_alpha_beta(transform):
    shape = (20, 33, 17)
    kern = compile_gemm(transform, shape, dtype="float16")
    A, B, C = operands(shape, "float16", seed=4)
    D = kern(A, B, C, alpha=np.float32(1.5), beta=np.float16(-0.5))
    check_close(D, A, B, C, 1.5, -0.5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_out(transform, dtype):
    shape = (45, 50, 27)
    kern = compile_gemm(transform, shape, dtype=dtype)
    A, B, C = operands(shape, dtype, seed=5)
    out = np.full(shape[:2], 7, dtype=dtype)
    D = kern(A, B, C, alpha=0.5, beta=2.0, out=out)
    assert D is out
    check_close(out, A, B, C, 0.5, 2.0)
    # out may not be C itself (nor overlap any input): a tile's D would be written while C is still read
    with pytest.raises(ValueError, match="out overlaps C"):
        kern(A, B, C, alpha=0.5, beta=2.0, out=C)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", [(45, 50, 27), (1, 17, 3), (17, 1, 9)])
def test_no_access_outside_the_operands(transform, dtype, shape):
    """Partial tiles are masked: NaN guards around A, B, C stay unread, guards around D stay unwritten."""
    m, n, _ = shape
    kern = compile_gemm(transform, shape, dtype=dtype, workgroups=4)
    A, B, C = operands(shape, dtype, seed=6)
    pad = 64

    def guarded(x, fill):
        buf = np.full(x.size + 2 * pad, fill, dtype=x.dtype)
        view = buf[pad : pad + x.size].reshape(x.shape)
        view[...] = x
        return buf, view

    _, Ag = guarded(A, np.nan)
    _, Bg = guarded(B, np.nan)
    _, Cg = guarded(C, np.nan)
    dbuf, Dg = guarded(np.zeros((m, n), dtype=dtype), 3)
    D = kern(Ag, Bg, Cg, alpha=1.0, beta=1.0, out=Dg)
    assert np.isfinite(D).all()
    check_close(D, A, B, C, 1.0, 1.0)
    assert (dbuf[:pad] == 3).all() and (dbuf[-pad:] == 3).all()


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_read_only_inputs_are_accepted(transform):
    shape = (20, 33, 17)
    kern = compile_gemm(transform, shape)
    A, B, C = operands(shape, "float32", seed=12)
    for x in (A, B, C):
        x.flags.writeable = False
    check_close(kern(A, B, C, alpha=1.0, beta=1.0), A, B, C, 1.0, 1.0)


@pytest.mark.parametrize("transform", ["streamk"])
def test_nan_beta_is_refused(transform):
    """alpha and beta must be finite in float32 (the epilogue's type): a NaN or an infinity is an error, not a D."""
    shape = (20, 20, 20)
    kern = compile_gemm(transform, shape)
    A, B, C = operands(shape, "float32", seed=13)
    with pytest.raises(ValueError, match="beta must be finite in float32"):
        kern(A, B, C, alpha=1.0, beta=float("nan"))


@settings(max_examples=30, deadline=None, derandomize=True)
@given(
    transform=st.sampled_from(ctgraph.TRANSFORMS),
    tile=st.sampled_from([(16, 16, 8), (8, 16, 4), (4, 4, 4)]),
    m=st.integers(1, 60),
    n=st.integers(1, 60),
    k=st.integers(1, 60),
    workgroups=st.integers(1, 40),
    dtype=st.sampled_from(DTYPES),
    raster=st.integers(1, 9),
)
def test_random_problems(transform, tile, m, n, k, workgroups, dtype, raster):
    kern = compile_gemm(transform, (m, n, k), tile, dtype, workgroups, raster)
    A, B, C = operands((m, n, k), dtype, seed=m * 10_000 + n * 100 + k)
    D = kern(A, B, C, alpha=-1.5, beta=0.5)
    check_close(D, A, B, C, -1.5, 0.5)
    assert not kern.program.flags.any()
    if transform != "dataparallel":
        assert np.array_equal(kern(A, B, C, alpha=-1.5, beta=0.5), D)


def emulate(kern, A, B, C, alpha, beta):
    """numpy fp32 emulation of the documented arithmetic: per workgroup segment of a tile, products summed
    in k order (control.Multiply); each workgroup's partial plus its children's sums in increasing
    workgroup order, up the fixup tree to the owner (lower.py's fixup); then ``alpha*acc + beta*C`` in
    fp32, rounded once to the GEMM's dtype."""
    p = kern.problem
    bm, bn, bk = p.macro_tile
    A32, B32 = A.astype(np.float32), B.astype(np.float32)
    segments = {}
    for w, work in enumerate(kern.schedule()):
        for mi, ni, ki in work:
            segments.setdefault((mi, ni), {}).setdefault(w, []).append(ki)
    D = np.empty((p.m, p.n), dtype=np.float32)
    for (mi, ni), parts in segments.items():
        rows, cols = slice(mi * bm, (mi + 1) * bm), slice(ni * bn, (ni + 1) * bn)
        owner = min(parts)
        assert parts[owner][0] == 0  # the first workgroup on a tile holds k == 0: the owner
        senders = set(parts) - {owner}
        children = {w: sorted(q for q in senders if fixup_parent(q, owner, senders) == w) for w in parts}

        def total(w, rows=rows, cols=cols, parts=parts, children=children):
            acc = np.zeros(D[rows, cols].shape, dtype=np.float32)
            for ki in parts[w]:
                for kk in range(ki * bk, min((ki + 1) * bk, p.k)):
                    acc += np.outer(A32[rows, kk], B32[kk, cols])
            for c in children[w]:
                acc = acc + total(c)
            return acc

        val = np.float32(alpha) * total(owner)
        if beta != 0:
            val = val + np.float32(beta) * C[rows, cols].astype(np.float32)
        D[rows, cols] = val
    return D.astype(p.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize(
    ("shape", "tile", "workgroups"),
    [((45, 50, 27), (16, 16, 8), 5), ((16, 16, 200), (16, 16, 8), 8), ((19, 35, 14), (8, 16, 4), 7)],
)
def test_bitwise_matches_documented_order(transform, shape, tile, workgroups, dtype):
    """The result is exactly the fp32 arithmetic the control graph documents, in its fixed order. (If the
    accumulation or fixup order is changed on purpose, update :func:`emulate`.)"""
    kern = compile_gemm(transform, shape, tile, dtype, workgroups)
    A, B, C = operands(shape, dtype, seed=14)
    D = kern(A, B, C, alpha=0.7, beta=-1.3)
    assert np.array_equal(D, emulate(kern, A, B, C, 0.7, -1.3))


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", [(45, 50, 27), (1, 17, 3), (64, 64, 64)])
def test_float16_accumulates_in_float32(transform, shape):
    """fp16 inputs are exact in fp32 and accumulation is fp32: the fp16 kernel's D is the fp32 kernel's D
    (same program, same order) rounded once to fp16."""
    A, B, C = operands(shape, "float16", seed=15)
    k16 = compile_gemm(transform, shape, dtype="float16")
    k32 = compile_gemm(transform, shape, dtype="float32")
    D16 = k16(A, B, C, alpha=0.7, beta=-1.3)
    D32 = k32(A.astype(np.float32), B.astype(np.float32), C.astype(np.float32), alpha=0.7, beta=-1.3)
    assert D16.dtype == np.float16
    assert np.array_equal(D16, D32.astype(np.float16))


# --- determinism, flags and workspaces -------------------------------------------------------------


SHARED_TILES = [  # shapes/grids where several workgroups share output tiles
    ((45, 50, 27), (16, 16, 8), 5),
    ((64, 64, 64), (16, 16, 8), 7),
    ((19, 35, 14), (8, 16, 4), 7),
    ((16, 16, 200), (16, 16, 8), 8),  # one output tile, split over all workgroups
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ["streamk", "streamk2tile"])
@pytest.mark.parametrize(("shape", "tile", "workgroups"), SHARED_TILES)
def test_fixup_is_deterministic_and_resets_flags(transform, shape, tile, workgroups, dtype):
    kern = compile_gemm(transform, shape, tile, dtype, workgroups)
    sched = kern.schedule()
    owners = {}
    for w, work in enumerate(sched):
        for mi, ni, _ in work:
            owners.setdefault((mi, ni), set()).add(w)
    if transform == "streamk":  # the case really exercises the fixup
        assert any(len(ws) > 1 for ws in owners.values())
    A, B, C = operands(shape, dtype, seed=7)
    first = kern(A, B, C, alpha=1.0, beta=1.0)
    check_close(first, A, B, C, 1.0, 1.0)
    assert not kern.program.flags.any()
    for _ in range(3):
        again = kern(A, B, C, alpha=1.0, beta=1.0)
        assert np.array_equal(again, first)
        assert not kern.program.flags.any()
    # a second kernel object with the same configuration gives the same bits
    other = compile_gemm(transform, shape, tile, dtype, workgroups)
    assert np.array_equal(other(A, B, C, alpha=1.0, beta=1.0), first)


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_same_kernel_new_data_stays_correct(transform):
    shape = (45, 50, 27)
    kern = compile_gemm(transform, shape, workgroups=7)
    for seed in range(4):
        A, B, C = operands(shape, "float32", seed=100 + seed)
        check_close(kern(A, B, C, alpha=1.0, beta=-1.0), A, B, C, 1.0, -1.0)
        assert not kern.program.flags.any()


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_kernels_do_not_share_workspace(transform):
    shape = (45, 50, 27)
    k1, k2 = compile_gemm(transform, shape), compile_gemm(transform, shape)
    k3 = compile_gemm(transform, (70, 20, 33))
    progs = [k.program for k in (k1, k2, k3)]
    for i, p in enumerate(progs):
        for q in progs[i + 1 :]:
            assert p is not q
            assert p.workspace is not q.workspace and p.flags is not q.flags
            for x in (p.workspace, p.flags):
                for y in (q.workspace, q.flags):
                    assert not np.shares_memory(x, y)
    # interleaved calls on the kernels stay correct
    (A, B, C), (A3, B3, C3) = operands(shape, "float32", seed=8), operands((70, 20, 33), "float32", seed=9)
    for _ in range(2):
        check_close(k1(A, B, C, beta=1.0), A, B, C, 1.0, 1.0)
        check_close(k3(A3, B3, C3, beta=1.0), A3, B3, C3, 1.0, 1.0)
        check_close(k2(A, B), A, B, None, 1.0, 0.0)


@pytest.mark.parametrize("transform", ["streamk", "streamk2tile"])
def test_concurrent_calls_on_one_kernel(transform):
    shape = (45, 50, 27)
    kern = compile_gemm(transform, shape, workgroups=7)
    kern.program  # build before the threads start  # noqa: B018
    inputs = [operands(shape, "float32", seed=200 + i) for i in range(4)]
    expected = [kern(A, B, C, beta=1.0) for A, B, C in inputs]
    errors = []

    def work(i):
        try:
            for _ in range(5):
                A, B, C = inputs[i]
                if not np.array_equal(kern(A, B, C, beta=1.0), expected[i]):
                    errors.append(i)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert not kern.program.flags.any()


# --- the compiled-module cache and the generated source ----------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_new_shape_reuses_the_compiled_module(transform, dtype):
    tile = (8, 16, 4)
    k1 = compile_gemm(transform, (40, 36, 20), tile, dtype, workgroups=5)
    k2 = compile_gemm(transform, (70, 10, 33), tile, dtype, workgroups=5)
    assert k1.source == k2.source  # sizes are parameters: byte-identical LLVM IR
    A, B, C = operands((40, 36, 20), dtype, seed=10)
    check_close(k1(A, B, C, beta=1.0), A, B, C, 1.0, 1.0)
    before = jit.cache_info()
    A, B, C = operands((70, 10, 33), dtype, seed=11)
    check_close(k2(A, B, C, beta=1.0), A, B, C, 1.0, 1.0)
    after = jit.cache_info()
    assert after["compiles"] == before["compiles"]
    assert after["hits"] > before["hits"]
    assert after["entries"] == before["entries"]


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_new_grid_size_reuses_the_source(transform):
    """The workgroup count is a kernel parameter too."""
    sources = {compile_gemm(transform, (45, 50, 27), workgroups=wg).source for wg in (1, 4, 32, 1000)}
    assert len(sources) == 1


def test_source_depends_on_dtype_tile_and_transform():
    # NOTE: streamk_hybrid is streamk2tile's graph with other sizes, so it shares that kernel by design.
    transforms = [t for t in ctgraph.TRANSFORMS if t != "streamk_hybrid"]
    sources = {
        compile_gemm(t, (45, 50, 27), tile, dtype).source for t in transforms for tile in TILES for dtype in DTYPES
    }
    assert len(sources) == len(transforms) * len(TILES) * len(DTYPES)


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_source_is_deterministic_valid_llvm_ir(transform):
    g = ctgraph.gemm(45, 50, 27, macro_tile=(16, 16, 8), dtype="float16")
    a = ctgraph.compile(g, transform=transform, workgroups=5, target="cpu")
    b = ctgraph.compile(g, transform=transform, workgroups=5, target="cpu")
    assert a.source == b.source
    assert isinstance(a.source, str) and "define" in a.source
    name = a.control[a.control.root].name
    assert f'@"{name}"' in a.source or f"@{name}(" in a.source
    llvm.parse_assembly(a.source).verify()


SOURCE_HASH = """
import hashlib, ctgraph
for t in ctgraph.TRANSFORMS:
    k = ctgraph.compile(ctgraph.gemm(45, 50, 27, macro_tile=(8, 16, 4)), transform=t, workgroups=5, target="cpu")
    print(t, hashlib.sha256(k.source.encode()).hexdigest())
"""


def test_source_is_the_same_across_processes():
    """Nothing in the generated text depends on hash seeds or on what ran before."""
    outs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        res = subprocess.run(
            [sys.executable, "-c", SOURCE_HASH], env=env, capture_output=True, text=True, check=True, timeout=120
        )
        outs.append(res.stdout)
    assert outs[0] == outs[1]
    mine = "".join(
        f"{t} {hashlib.sha256(compile_gemm(t, (45, 50, 27), (8, 16, 4), 'float16').source.encode()).hexdigest()}\n"
        for t in ctgraph.TRANSFORMS
    )
    assert outs[0] == mine


@pytest.mark.parametrize("workgroups", [1, 2, 3, 4, 8])
def test_auto_on_a_grid_of_fewer_workgroups_than_tiles_splits_k_by_stream_k(workgroups):
    """Split-K needs a workgroup per output tile: where the ranker chose it and the caller's grid holds fewer, auto
    runs Stream-K on that grid (it splits K on any grid) and its reason says so."""
    m, n, k = 54, 1, 259  # 4 tiles of 16 x 16, 33 K iterations
    kern = ctgraph.compile(
        ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8), dtype="float32"),
        transform="auto",
        workgroups=workgroups,
        target="cpu",
    )
    assert kern.workgroups == workgroups
    assert (kern.transform == "streamk") == (workgroups < 4)
    assert ("fewer than its 4 tiles" in kern.selection.reason) == (workgroups < 4)
    rng = np.random.default_rng(0)
    A, B = rng.uniform(-1, 1, (m, k)).astype(np.float32), rng.uniform(-1, 1, (k, n)).astype(np.float32)
    np.testing.assert_allclose(kern(A, B), A.astype(np.float64) @ B, rtol=1e-5, atol=1e-4)
