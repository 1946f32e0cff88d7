"""Bad calls on the CPU backend: argument checks run before any workgroup (D/out untouched), and a
fixup wait that can never be satisfied raises instead of hanging."""

from __future__ import annotations

import numpy as np
import pytest

import ctgraph
from ctgraph.lower import FIXUP_RADIX, fixup_dependencies
from lowering.cpu import run_order

SHAPE = (45, 50, 27)  # m, n, k: partial tiles everywhere
SENTINEL = 1234.0


def compile_gemm(transform="streamk", dtype="float32", workgroups=5, shape=SHAPE):
    m, n, k = shape
    return ctgraph.compile(
        ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8), dtype=dtype),
        transform=transform,
        workgroups=workgroups,
        target="cpu",
    )


def good(dtype="float32", shape=SHAPE, seed=0):
    m, n, k = shape
    rng = np.random.default_rng(seed)
    return tuple(rng.uniform(-1, 1, s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def sentinel_out(dtype="float32"):
    return np.full(SHAPE[:2], SENTINEL, dtype=dtype)


def reference(A, B, C, alpha=1.0, beta=0.0):
    ref = alpha * (A.astype(np.float64) @ B.astype(np.float64))
    return ref if C is None else ref + beta * C.astype(np.float64)


@pytest.fixture(scope="module", params=ctgraph.TRANSFORMS)
def kern(request):
    return compile_gemm(request.param)


def expect_rejected(kern, exc, match, *args, dtype="float32", **kw):
    """The call raises ``exc`` naming the problem; the out buffer, workspace and flags are untouched."""
    out = sentinel_out(dtype)
    ws = kern.program.workspace.copy()
    with pytest.raises(exc, match=match):
        kern(*args, out=out, **kw)
    assert (out == SENTINEL).all(), "out was written although the arguments were rejected"
    assert np.array_equal(kern.program.workspace, ws)
    assert not kern.program.flags.any()


def transposed(shape, dtype="float32"):
    """A Fortran-ordered (not C-contiguous) array of ``shape``."""
    return np.asfortranarray(np.ones(shape, dtype=dtype))


def strided(shape, dtype="float32"):
    """A view with a column stride of 2 (``X[:, ::2]``)."""
    return np.ones((shape[0], 2 * shape[1]), dtype=dtype)[:, ::2]


M, N, K = SHAPE


@pytest.mark.parametrize(
    ("name", "bad"),
    [
        ("A", np.ones((M + 1, K), np.float32)),
        ("A", np.ones((K, M), np.float32)),
        ("A", np.ones((M * K,), np.float32)),
        ("B", np.ones((K, N + 3), np.float32)),
        ("B", np.ones((N, K), np.float32)),
        ("C", np.ones((M, N - 1), np.float32)),
        ("C", np.ones((N, M), np.float32)),
        ("C", np.ones((1, M, N), np.float32)),
    ],
)
def test_wrong_shape(kern, name, bad):
    ops = dict(zip("ABC", good(), strict=True))
    ops[name] = bad
    expect_rejected(kern, ValueError, rf"\b{name}\b", ops["A"], ops["B"], ops["C"], beta=1.0)


def test_wrong_out_shape(kern):
    A, B, C = good()
    with pytest.raises(ValueError, match="out"):
        kern(A, B, C, beta=1.0, out=np.zeros((M, N + 1), np.float32))


@pytest.mark.parametrize("name", ["A", "B", "C"])
@pytest.mark.parametrize("dtype", ["float64", "float16", "int32"])
def test_wrong_dtype(kern, name, dtype):
    ops = dict(zip("ABC", good(), strict=True))
    ops[name] = ops[name].astype(dtype)
    expect_rejected(kern, TypeError, rf"\b{name}\b", ops["A"], ops["B"], ops["C"], beta=1.0)


def test_wrong_dtype_fp16_kernel():
    kern = compile_gemm("streamk2tile", dtype="float16")
    A, B, C = good("float16")
    expect_rejected(kern, TypeError, r"\bA\b", A.astype(np.float32), B, C, beta=1.0, dtype="float16")
    expect_rejected(kern, TypeError, r"\bB\b", A, B.astype(np.float32), C, beta=1.0, dtype="float16")
    with pytest.raises(TypeError, match="out"):
        kern(A, B, C, beta=1.0, out=np.zeros(SHAPE[:2], np.float32))


@pytest.mark.parametrize("layout", [transposed, strided])
@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_non_contiguous(kern, name, layout):
    ops = dict(zip("ABC", good(), strict=True))
    bad = layout(ops[name].shape)
    assert bad.shape == ops[name].shape and not bad.flags.c_contiguous
    ops[name] = bad
    expect_rejected(kern, ValueError, rf"\b{name}\b", ops["A"], ops["B"], ops["C"], beta=1.0)


def test_non_contiguous_out(kern):
    A, B, _ = good()
    out = strided(SHAPE[:2])
    out[...] = SENTINEL
    with pytest.raises(ValueError, match="out"):
        kern(A, B, out=out)
    assert (out == SENTINEL).all()


def test_read_only_out(kern):
    A, B, _ = good()
    out = sentinel_out()
    out.flags.writeable = False
    with pytest.raises(ValueError, match="out"):
        kern(A, B, out=out)


@pytest.mark.parametrize("name", ["A", "B", "C"])
@pytest.mark.parametrize(
    "convert", [lambda x: x.tolist(), lambda x: tuple(map(tuple, x)), lambda x: 3.0], ids=["list", "tuple", "scalar"]
)
def test_not_a_numpy_array(kern, name, convert):
    ops = dict(zip("ABC", good(), strict=True))
    ops[name] = convert(ops[name])
    expect_rejected(kern, TypeError, rf"\b{name}\b", ops["A"], ops["B"], ops["C"], beta=1.0)


def test_out_not_a_numpy_array(kern):
    A, B, _ = good()
    with pytest.raises(TypeError, match="out"):
        kern(A, B, out=sentinel_out().tolist())


@pytest.mark.parametrize("beta", [1.0, -0.5, 1e-3, 2])
def test_c_missing_while_beta_nonzero(kern, beta):
    A, B, _ = good()
    expect_rejected(kern, ValueError, r"\bC\b", A, B, beta=beta)
    expect_rejected(kern, ValueError, r"\bC\b", A, B, None, beta=beta)


@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize(
    "value", ["1.0", None, 1 + 2j, [1.0], np.ones(2)], ids=["str", "None", "complex", "list", "array"]
)
def test_bad_scalar(kern, name, value):
    A, B, C = good()
    expect_rejected(kern, TypeError, name, A, B, C, **{name: value})


def test_missing_a_or_b(kern):
    A, B, _ = good()
    expect_rejected(kern, TypeError, r"\bA\b", None, B)
    expect_rejected(kern, TypeError, r"\bB\b", A, None)


def test_valid_call_after_rejections(kern):
    """Failed validation leaves the kernel usable."""
    A, B, C = good(seed=3)
    for bad in (A.astype(np.float64), A.tolist(), transposed(A.shape)):
        with pytest.raises((TypeError, ValueError)):
            kern(bad, B, C, beta=1.0)
    out = sentinel_out()
    D = kern(A, B, C, alpha=2.0, beta=0.5, out=out)
    assert D is out
    np.testing.assert_allclose(D, reference(A, B, C, 2.0, 0.5), rtol=0, atol=1e-4)


# --- waits that could never be satisfied ---------------------------------------------------------


def producer_owner(kern):
    deps = fixup_dependencies(kern.schedule())
    assert deps, "this case should need a fixup"
    return deps[0]


@pytest.mark.parametrize("transform", ["streamk", "streamk2tile"])
@pytest.mark.parametrize("how", ["owner_first", "producer_missing"])
def test_unsatisfiable_wait_raises_then_recovers(transform, how, monkeypatch):
    kern = compile_gemm(transform, workgroups=7)
    order = list(kern.program.order)
    assert sorted(order) == list(range(7))
    producer, owner = producer_owner(kern)
    assert order.index(producer) < order.index(owner)
    bad = {
        "owner_first": [owner] + [w for w in order if w != owner],
        "producer_missing": [w for w in order if w != producer],
    }[how]
    monkeypatch.setattr(kern.program, "order", bad)
    A, B, C = good(seed=4)
    with pytest.raises(RuntimeError, match="flag"):
        kern(A, B, C, beta=1.0)
    assert not kern.program.flags.any(), "flags must be reset after a failed call"
    monkeypatch.undo()
    assert kern.program.order == order
    # new data: no partial or flag of the failed call leaks into this one
    A, B, C = good(seed=5)
    D = kern(A, B, C, alpha=1.0, beta=1.0)
    np.testing.assert_allclose(D, reference(A, B, C, 1.0, 1.0), rtol=0, atol=1e-4)
    assert not kern.program.flags.any()


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("workgroups", [1, 3, 7, 64])
def test_run_order_puts_producers_first(transform, workgroups):
    kern = compile_gemm(transform, workgroups=workgroups)
    sched = kern.schedule()
    order = run_order(sched)
    assert sorted(order) == list(range(workgroups))
    pos = {w: i for i, w in enumerate(order)}
    deps = fixup_dependencies(sched)
    if transform == "dataparallel" or workgroups == 1:
        assert deps == []
    for producer, owner in deps:
        assert pos[producer] < pos[owner]


def test_run_order_cycle_raises():
    # wg 0 owns tile (0, 0) and helps with tile (1, 0); wg 1 owns (1, 0) and helps with (0, 0)
    schedule = [[(0, 0, 0), (1, 0, 1)], [(1, 0, 0), (0, 0, 1)]]
    assert fixup_dependencies(schedule) == [(0, 1), (1, 0)]
    with pytest.raises(RuntimeError, match="cycle"):
        run_order(schedule)


def test_run_order_fabricated_chain():
    # wg 2 produces for wg 1, wg 1 produces for wg 0: order 2, 1, 0
    schedule = [[(0, 0, 0)], [(0, 0, 1), (0, 1, 0)], [(0, 1, 1)]]
    assert fixup_dependencies(schedule) == [(1, 0), (2, 1)]
    assert run_order(schedule) == [2, 1, 0]


@pytest.mark.parametrize(
    ("owner", "senders", "parents"),
    [
        (0, range(1, 13), {1: 0, 2: 0, 3: 0, 4: 0, 5: 4, 6: 4, 7: 4, 8: 0, 9: 8, 10: 8, 11: 8, 12: 0}),
        (5, range(6, 14), {6: 5, 7: 5, 8: 5, 9: 8, 10: 8, 11: 8, 12: 5, 13: 12}),
        (3, range(4, 5), {4: 3}),
        (
            0,
            range(1, 21),
            {
                **dict.fromkeys((1, 2, 3, 4, 8, 12, 16), 0),
                5: 4,
                6: 4,
                7: 4,
                9: 8,
                10: 8,
                11: 8,
                13: 12,
                14: 12,
                15: 12,
                17: 16,
                18: 16,
                19: 16,
                20: 16,
            },
        ),
    ],
)
def test_fixup_tree(owner, senders, parents):
    """Senders add up in a tree of radix 4 over workgroup ids: q's parent is q with its lowest nonzero base-4
    digit cleared when that is a sender of the same tile, else the owner."""
    assert FIXUP_RADIX == 4
    schedule = [[] for _ in range(max(senders) + 1)]
    schedule[owner].append((0, 0, 0))
    for k, q in enumerate(senders, start=1):
        schedule[q].append((0, 0, k))
    assert dict(fixup_dependencies(schedule)) == parents
    order = run_order(schedule)
    assert order[-1] == owner


def test_fixup_tree_is_logarithmically_deep():
    """With 100 senders on one tile the longest chain of waits is 4 partials deep (the most nonzero base-4 digits
    of a number up to 100: 85 = 1111 in base 4), not 100 (nor 6, a binary tree's)."""
    schedule = [[(0, 0, k)] for k in range(101)]
    parent = dict(fixup_dependencies(schedule))

    def depth(q):
        return 0 if q == 0 else 1 + depth(parent[q])

    assert max(depth(q) for q in range(1, 101)) == 4
    assert sorted(parent) == list(range(1, 101))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
def test_backend_options_are_checked_before_any_work(target):
    """Options are the CUDA backend's on every target (one call works with target="auto"), checked by
    compile itself: an unknown name or a bad value never reaches generation (build=False included)."""
    g = ctgraph.gemm(*SHAPE, macro_tile=(16, 16, 8), dtype="float32")
    with pytest.raises(ValueError, match=r"unknown CUDA options \['bogus'\]; valid: .*'warps'"):
        ctgraph.compile(g, transform="streamk", workgroups=5, target=target, build=False, bogus=1)
    with pytest.raises(ValueError, match="warps must be 1, 2, 4, 8 or 16, got 3"):
        ctgraph.compile(g, transform="streamk", workgroups=5, target=target, build=False, warps=3)
    ctgraph.compile(g, transform="streamk", workgroups=5, target=target, build=False, warps=8)  # valid: accepted


def test_stream_is_refused_on_the_cpu():
    kern = compile_gemm()
    A, B, C = good()
    D = kern(A, B, C, beta=0.5, stream=None)  # None: the same call as on the cuda target
    with pytest.raises(TypeError, match="stream is for the cuda target"):
        kern(A, B, C, beta=0.5, stream=5)
    np.testing.assert_allclose(D, reference(A, B, C, beta=0.5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("tile", [(2048, 1024, 8), (128, 128, 16384), (16, 1000000, 8)])
def test_a_tile_that_would_overflow_the_stack_is_refused_before_any_work(tile):
    """The cpu backend keeps a workgroup's tiles on the calling thread's stack: a tile past TILE_BYTES would kill
    the process in the call, so compile (or, built later, the first use) says so, naming macro_tile."""
    from ctgraph.config import Layout
    from lowering.cpu import TILE_BYTES, supports, tile_bytes

    assert tile_bytes(tile) > TILE_BYTES and not supports(tile, "float16", Layout(), "cpu")
    g = ctgraph.gemm(10, 34, 11, macro_tile=tile, dtype="float16")
    with pytest.raises(ValueError, match=r"macro_tile .* on the calling thread's stack: at most 4 MiB"):
        ctgraph.compile(g, transform="streamk", workgroups=2, target="cpu")
    lazy = ctgraph.compile(g, transform="streamk", workgroups=2, target="cpu", build=False)
    with pytest.raises(ValueError, match="use a smaller macro_tile"):
        lazy(np.ones((10, 11), np.float16), np.ones((11, 34), np.float16))


def test_the_largest_tile_the_stack_holds_runs():
    big = (512, 512, 512)  # 3 x 256K fp32 = 3 MiB
    kern = ctgraph.compile(ctgraph.gemm(10, 34, 11, macro_tile=big, dtype="float32"), transform="streamk", target="cpu")
    A, B = np.ones((10, 11), np.float32), np.ones((11, 34), np.float32)
    assert np.array_equal(kern(A, B), np.full((10, 34), 11, np.float32))
