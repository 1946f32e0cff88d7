"""The CUDA backend on a GPU: correctness on odd shapes, determinism, streams, inputs, sanitizers."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import numpy as np
import pytest

import ctgraph
from ctgraph.passes import TAKES_SPLIT
from ctgraph.passes.common import raster_group

pytestmark = pytest.mark.gpu

SHAPES = [
    (1, 1, 1),  # m = 1, n = 1, k < BK
    (1, 257, 64),  # m = 1, partial n tile
    (100, 37, 20),  # k < BK, partial tiles
    (129, 130, 1000),  # k not a multiple of BK, n not a multiple of 8 (element loads)
    (300, 300, 512),  # fewer tiles (9) than SMs
    (1024, 1024, 1024),
    (256, 256, 65536),  # few tiles, long k: Stream-K's case
]


def operands(m, n, k, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(dtype) for s in ((m, k), (k, n), (m, n)))


def check(D, A, B, C, alpha, beta, dtype):
    ref = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + beta * C.astype(np.float64)
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(D.astype(np.float64) - ref).max()) / scale
    tol = 3e-3 if dtype == "float16" else 2e-6 * np.sqrt(A.shape[1]) + 1e-6
    assert err < tol, f"relative error {err:.3e} > {tol:.1e}"


def check_wgmma(shape, transform, tile, **options):
    """``tile`` on the wgmma path with ``options`` (split-K's reduction: 3 chunks, every workgroup they need) against
    float64 with ``alpha`` and ``beta``, and run again for a bit-identical D; returns the kernel and its operands."""
    m, n, k = shape
    A, B, C = operands(m, n, k, "float16")
    if transform == "splitk_reduce":
        options = {**options, "split": 3, "workgroups": 100_000}
    g = ctgraph.gemm(m, n, k, macro_tile=tile)
    kern = ctgraph.compile(g, transform=transform, target="cuda", mainloop="wgmma", **options)
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    check(D, A, B, C, 1.5, 0.5, "float16")
    assert np.array_equal(D, kern(A, B, C, alpha=1.5, beta=0.5))
    return kern, (A, B, C)


MAINLOOPS = [("float16", "auto"), ("float16", "mma"), ("float32", "auto")]  # auto: wgmma on an H100


@pytest.mark.parametrize(("dtype", "mainloop"), MAINLOOPS, ids=lambda x: x)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matches_numpy_and_repeats_bit_identical(shape, transform, dtype, mainloop):
    m, n, k = shape
    A, B, C = operands(m, n, k, dtype)
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, dtype=dtype), transform=transform, target="cuda", mainloop=mainloop)
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    check(D, A, B, C, 1.5, 0.5, dtype)
    assert np.array_equal(D, kern(A, B, C, alpha=1.5, beta=0.5))


@pytest.mark.parametrize("tile", [(256, 160, 64), (128, 96, 96), (64, 176, 32)], ids=str)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", [(129, 136, 1000), (300, 520, 4104)], ids=str)
def test_mma_rows_of_16_byte_chunks_that_are_not_whole_groups_of_8(shape, transform, tile):
    """The mma path's XOR swizzle on B rows of 20, 12 or 22 chunks (BN = 160, 96, 176) and A rows of 12 (BK = 96):
    the chunks past the last group of 8 stay in their row."""
    m, n, k = shape
    A, B, C = operands(m, n, k, "float16")
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile=tile), transform=transform, target="cuda", mainloop="mma")
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    check(D, A, B, C, 1.5, 0.5, "float16")


@pytest.mark.parametrize(("dtype", "mainloop"), MAINLOOPS, ids=lambda x: x)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize(("shape", "raster"), [((300, 300, 512), 8), ((1921, 520, 264), 4), ((1500, 1664, 1032), 8)])
def test_rastered_tile_order(shape, raster, transform, dtype, mainloop):
    m, n, k = shape
    A, B, C = operands(m, n, k, dtype)
    g = ctgraph.gemm(m, n, k, dtype=dtype)
    kern = ctgraph.compile(g, transform=transform, target="cuda", mainloop=mainloop, raster=raster)
    assert kern.raster > 1
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    check(D, A, B, C, 1.5, 0.5, dtype)
    assert np.array_equal(D, kern(A, B, C, alpha=1.5, beta=0.5))


def test_hopper_gpu_runs_the_wgmma_mainloop():
    kern = ctgraph.compile(ctgraph.gemm(512, 512, 512), transform="streamk2tile", target="cuda")
    if kern.program.mainloop != "wgmma":
        pytest.skip("not a compute capability 9.0 GPU")
    assert kern.program.variant == "wgmma" and "wgmma.mma_async" in kern.ptx


@pytest.mark.parametrize(
    "tile", [(128, 256, 64), (64, 64, 32), (128, 64, 64), (64, 192, 64), (192, 128, 64), (256, 128, 64)], ids=str
)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (1408, 1664, 1032)], ids=str)
def test_wgmma_tiles(shape, transform, tile):
    check_wgmma(shape, transform, tile)


@pytest.mark.parametrize(
    ("tile", "cluster"),
    [((256, 256, 64), 2), ((128, 128, 32), 2), ((256, 128, 64), 2), ((512, 256, 64), 4), ((256, 64, 32), 4)],
    ids=str,
)
@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_clusters(shape, transform, tile, cluster):
    """2 or 4 CTAs per workgroup, B multicast: partial tiles (CTAs whose rows are all past m), k % BK != 0."""
    kern, _ = check_wgmma(shape, transform, tile, cluster=cluster)
    assert kern.workgroups <= kern.program.function().resident_workgroups()


@pytest.mark.parametrize(
    ("tile", "cluster", "multicast"),
    [
        ((128, 128, 64), 2, "a"),
        ((128, 256, 64), 2, "a"),
        ((64, 256, 32), 4, "a"),
        ((256, 128, 64), 2, "a"),
        ((256, 256, 64), 4, "ab"),
        ((128, 256, 32), 4, "ab"),
        ((256, 512, 64), 8, "ab"),
        ((288, 128, 64), 4, "ab"),
        ((208, 256, 64), 4, "ab"),  # swapped CTAs of 104 x 128, as auto fits m on 2 x 2 grids
        ((512, 256, 64), 8, "ba"),  # a 4 x 2 grid: A shared in pairs, B in fours
        ((704, 256, 64), 8, "ba"),  # swapped CTAs of 176 x 128, as the wave layouts fit m on 4 x 2 grids
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_clusters_that_multicast_a(shape, transform, tile, cluster, multicast):
    """CTAs split the macro tile's columns and share A ("a"), or form a 2 x cluster/2 ("ab") or cluster/2 x 2 ("ba")
    grid sharing A along its rows and B along its columns: partial tiles (CTAs whose rows or columns are all past m
    or n)."""
    check_wgmma(shape, transform, tile, cluster=cluster, multicast=multicast)


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((128, 160, 64), {}),
        ((64, 48, 32), {}),
        ((256, 160, 64), {"cluster": 2}),
        ((128, 320, 64), {"cluster": 2, "multicast": "a"}),
        ((512, 352, 64), {"cluster": 8, "multicast": "ba"}),
        ((64, 208, 64), {"pingpong": True}),
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_column_tails(shape, transform, tile, options):
    """CTAs whose columns are not whole 64-column chunks (wgmma's N a multiple of 16): the last B chunk partly
    read, the epilogue's unswizzled tail box, partial tiles, k % BK != 0, repeats bit-identical."""
    kern, _ = check_wgmma(shape, transform, tile, **options)
    assert kern.program.layout["D_TAIL"] == kern.program.layout["CTA_N"] % 64 != 0


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((256, 160, 64), {"cluster": 1}),
        ((512, 160, 64), {"cluster": 2, "multicast": "b"}),
        ((512, 320, 64), {"cluster": 4, "multicast": "ab"}),
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_two_row_blocks(shape, transform, tile, options):
    """Consumer warpgroups of two 64-row blocks (``BLOCKS = 2``): a wgmma per block, the accumulators' rows in the
    epilogue, the fixup and split-K's reduction, partial tiles and column tails, repeats bit-identical."""
    kern, _ = check_wgmma(shape, transform, tile, **options)
    assert kern.program.layout["BLOCKS"] == 2


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((192, 176, 64), {}),
        ((192, 352, 64), {"cluster": 2, "multicast": "a"}),
        ((256, 320, 64), {"cluster": 2, "multicast": "a"}),
        ((384, 192, 64), {"cluster": 2, "multicast": "b"}),
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (4928, 880, 264)], ids=str)
def test_wgmma_wave_tiles(shape, transform, tile, options):
    """The wave tiles (``candidates.wave_tiles``): three consumer warpgroups with a column tail box (176 = 2 x 64 +
    48), on clusters of 2 sharing A or B, and two-block warpgroups of 160 columns; partial tiles and, at 4928 x 880,
    one wave of 60 to 130 tiles."""
    kern, _ = check_wgmma(shape, transform, tile, **options)
    assert kern.program.layout["CTA_M"] in (192, 256)


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((256, 32, 64), {"cluster": 4, "multicast": "b"}),  # CTAs of 64 rows
        ((512, 48, 64), {"cluster": 4, "multicast": "b"}),
        ((128, 16, 64), {"cluster": 2, "multicast": "b"}),
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (300, 24, 1000), (2312, 40, 2992)], ids=str)
def test_wgmma_thin_grids(shape, transform, tile, options):
    """The thin-n grids (``candidates.thin_grid``): clusters sharing B whose last cluster holds CTAs past m (1 to 3
    of 4 here), which load their share of B for the others and store nothing, under every transform."""
    kern, _ = check_wgmma(shape, transform, tile, **options)
    assert kern.program.layout["CLUSTER"] == options["cluster"]


@pytest.mark.parametrize(
    ("tile", "cluster"), [((256, 96, 64), 4), ((256, 160, 64), 4), ((128, 256, 64), 2), ((256, 144, 64), 4)], ids=str
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize(
    "shape", [(1, 8, 8), (96, 80, 4104), (216, 88, 1000), (2272, 272, 664), (232, 1000, 1000)], ids=str
)
def test_wgmma_narrow_grids(shape, transform, tile, cluster):
    """CTAs of 64 rows on clusters along m sharing B beyond the thin n (``candidates.NARROW``): 80 to 1000 columns,
    one to eleven tile columns, a last cluster with rows for 1 to 4 of its CTAs, under every transform."""
    kern, _ = check_wgmma(shape, transform, tile, cluster=cluster, multicast="b")
    assert kern.program.layout["CLUSTER"] == cluster


@pytest.mark.parametrize(("tile", "cluster"), [((256, 256, 64), 2), ((256, 192, 64), 2), ((512, 128, 64), 4)], ids=str)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1864, 520, 1000), (2104, 200, 4104), (6244, 200, 1000)], ids=str)
def test_wgmma_few_empty(shape, transform, tile, cluster):
    """``candidates.few_empty``: CTAs along m sharing B whose last tile row (56 to 328 rows) leaves CTAs past m: the
    second of 2, or one to three of 4 (6244 x 200 on 512 x 128: three, the most the rule allows there); they load
    their share of B for the others and store nothing, under every transform."""
    kern, _ = check_wgmma(shape, transform, tile, cluster=cluster, multicast="b")
    assert kern.program.layout["CLUSTER"] == cluster


@pytest.mark.parametrize(("tile", "cluster"), [((144, 512, 64), 4), ((72, 256, 64), 2), ((40, 512, 64), 4)], ids=str)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(144, 552, 1000), (40, 1064, 4104), (72, 2600, 1000), (1, 8, 8)], ids=str)
def test_wgmma_few_empty_swapped_sharing_a(shape, transform, tile, cluster):
    """``candidates.few_empty``: swapped CTAs along n sharing A whose last tile column (8 to 40 columns) leaves CTAs
    past n, one to three of a cluster; they load their share of A for the others and store nothing, under every
    transform."""
    kern, _ = check_wgmma(shape, transform, tile, cluster=cluster, multicast="a", swap=True)
    assert kern.program.layout["CLUSTER"] == cluster and kern.program.layout["SWAP"] == 1


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((136, 128, 64), {}),
        ((72, 64, 64), {}),
        ((8, 256, 32), {}),
        ((24, 192, 64), {}),
        ((128, 128, 64), {"swap": True}),
        ((256, 64, 64), {"swap": True}),
        ((272, 128, 64), {"cluster": 2}),
        ((144, 256, 32), {"cluster": 2, "multicast": "a"}),
    ],
    ids=str,
)
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_swapped(shape, transform, tile, options):
    """D^T = B^T A^T (CTAs whose rows are a multiple of 8, not of 64, or swap=True): partial tiles, k % BK != 0,
    the transposed TMA-store epilogue and split-K's register epilogue."""
    kern, (A, B, C) = check_wgmma(shape, transform, tile, **options)
    assert kern.program.layout["SWAP"] == 1
    check(kern(A, B), A, B, C, 1.0, 0.0, "float16")  # beta = 0: the epilogue's other copy of the box loop


@pytest.mark.parametrize(
    ("tile", "options", "defer"),
    [
        ((128, 256, 64), {}, True),
        ((128, 240, 64), {}, True),  # a tail box of 48 columns
        ((232, 128, 64), {}, True),  # swapped, a tail box of 40 rows
        ((256, 256, 64), {"cluster": 2}, True),
        ((256, 128, 64), {}, False),  # four consumer warpgroups: the staged epilogue
    ],
    ids=str,
)
@pytest.mark.parametrize(("alpha", "beta"), [(1.0, 0.0), (2.5, 0.0), (1.0, 0.5)], ids=str)
@pytest.mark.parametrize("transform", ["dataparallel", "streamk2tile"])
@pytest.mark.parametrize(
    ("shape", "workgroups"), [((1000, 1000, 64), 3), ((777, 1032, 1000), 5), ((300, 520, 200), 66)], ids=str
)
def test_wgmma_deferred_epilogue(shape, workgroups, transform, alpha, beta, tile, options, defer):
    """``DEFER_D``: a tile's D is packed and its boxes are stored under the next tile's K steps, the rest at the
    next epilogue (one K step a tile here, against four boxes or more) and at the end; each copy of the pack
    (beta != 0, alpha == 1, else). Few workgroups, so that each runs several tiles; and more workgroups than
    tiles, so that each runs at most one tile (or piece), whose boxes go at the end."""
    m, n, k = shape
    A, B, C = operands(m, n, k, "float16")
    g = ctgraph.gemm(m, n, k, macro_tile=tile)
    kern = ctgraph.compile(g, transform=transform, workgroups=workgroups, target="cuda", mainloop="wgmma", **options)
    assert kern.program.layout["DEFER_D"] == defer
    D = kern(A, B, C, alpha=alpha, beta=beta)
    check(D, A, B, C, alpha, beta, "float16")
    assert np.array_equal(D, kern(A, B, C, alpha=alpha, beta=beta))


@pytest.mark.parametrize("shape", [(1, 8, 8), (200, 688, 128), (1592, 2656, 1224), (256, 256, 65536)], ids=str)
def test_auto_tile(shape):
    """``macro_tile="auto"`` with ``transform="auto"``: the tile and the policy chosen per shape."""
    m, n, k = shape
    A, B, C = operands(m, n, k, "float16")
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), transform="auto", target="cuda")
    check(kern(A, B, C, beta=1.0), A, B, C, 1.0, 1.0, "float16")


def test_misaligned_output_falls_back_from_the_tma_store():
    torch = pytest.importorskip("torch")
    A, B, _ = operands(200, 136, 264, "float16")
    kern = ctgraph.compile(ctgraph.gemm(200, 136, 264), transform="streamk", target="cuda")
    flat = torch.zeros(200 * 136 + 1, dtype=torch.float16, device="cuda")
    out = flat[1:].view(200, 136)  # 2-byte offset: no TMA box can write it
    kern(torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda(), out=out)
    check(out.cpu().numpy(), A, B, np.zeros((200, 136), np.float16), 1.0, 0.0, "float16")
    assert float(flat[0]) == 0.0


def test_misaligned_operands_fall_back_to_element_loads():
    torch = pytest.importorskip("torch")
    A, B, C = operands(200, 136, 264, "float16")
    kern = ctgraph.compile(ctgraph.gemm(200, 136, 264), transform="streamk2tile", target="cuda")
    flat = torch.from_numpy(np.concatenate([[0], A.ravel()]).astype(np.float16)).cuda()
    a = flat[1:].view(200, 264)  # 2-byte offset: no TMA box or 16-byte vector can read it
    assert a.data_ptr() % 16
    check(kern(a, B, C, beta=1.0).cpu().numpy(), A, B, C, 1.0, 1.0, "float16")


@pytest.mark.parametrize("workgroups", [1, 7, 64])
def test_any_grid_up_to_resident(workgroups):
    A, B, C = operands(700, 500, 3000, "float16")
    kern = ctgraph.compile(ctgraph.gemm(700, 500, 3000), transform="streamk2tile", workgroups=workgroups, target="cuda")
    check(kern(A, B, C, beta=1.0), A, B, C, 1.0, 1.0, "float16")


def test_grid_larger_than_resident_is_refused():
    kern = ctgraph.compile(ctgraph.gemm(256, 256, 256), transform="streamk", workgroups=100, target="cuda")
    resident = kern.program.function().resident_workgroups()
    with pytest.raises(ValueError, match="resident"):
        ctgraph.compile(ctgraph.gemm(256, 256, 256), transform="streamk", workgroups=resident + 1, target="cuda")


def test_torch_tensors_streams_and_out():
    torch = pytest.importorskip("torch")
    m, n, k = 1408, 1664, 8192
    A = torch.randn(m, k, device="cuda", dtype=torch.float16)
    B = torch.randn(k, n, device="cuda", dtype=torch.float16)
    ref = (A.double() @ B.double()).cpu().numpy()
    k1 = ctgraph.compile(ctgraph.gemm(m, n, k), transform="streamk2tile", target="cuda")
    k2 = ctgraph.compile(ctgraph.gemm(m, n, k), transform="streamk", target="cuda")
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    D1 = torch.empty(m, n, device="cuda", dtype=torch.float16)
    D2 = torch.empty(m, n, device="cuda", dtype=torch.float16)
    for _ in range(5):  # two kernels with fixup on two streams at once
        with torch.cuda.stream(s1):
            k1(A, B, out=D1, stream=s1)
        with torch.cuda.stream(s2):
            k2(A, B, out=D2, stream=s2)
    torch.cuda.synchronize()
    for D in (D1, D2):
        assert np.abs(D.double().cpu().numpy() - ref).max() / np.abs(ref).max() < 3e-3
    D3 = k1(A, B)  # allocated output, a torch tensor like A
    assert isinstance(D3, torch.Tensor) and torch.equal(D3, D1)


@pytest.mark.parametrize("pdl", [True, False])
def test_dependent_launches_keep_the_stream_order(pdl):
    """Back-to-back kernels, each reading the output of the one before and overwriting what that one read: with
    programmatic dependent launch their prologues overlap, their results must not. Launched back to back, the
    chain gives bit for bit what it gives with a synchronize after every kernel."""
    torch = pytest.importorskip("torch")
    m, k = 640, 1032
    X = torch.randn(m, k, device="cuda", dtype=torch.float16)
    B = (torch.randn(k, k, device="cuda", dtype=torch.float32) / k**0.5).half()
    g = ctgraph.gemm(m, k, k)
    chain = [
        ctgraph.compile(g, transform=t, target="cuda", pdl=pdl, **({"split": 2} if t == "splitk_reduce" else {}))
        for t in ("dataparallel", "streamk", "splitk_reduce", "streamk2tile", "streamk_hybrid")
    ]

    def run(sync):
        P, Q = X.clone(), torch.empty_like(X)
        for kern in chain * 2:
            kern(P, B, out=Q)  # Q = P @ B, then the next kernel overwrites P, which this one read
            P, Q = Q, P
            if sync:
                torch.cuda.synchronize()
        torch.cuda.synchronize()
        return P

    ref = X.double().cpu().numpy()
    for _ in chain * 2:
        ref = (ref @ B.double().cpu().numpy()).astype(np.float16).astype(np.float64)
    stepped, overlapped = run(sync=True), run(sync=False)
    assert torch.equal(stepped, overlapped)
    assert np.abs(overlapped.double().cpu().numpy() - ref).max() / np.abs(ref).max() < 1e-2


def test_gpuarray_inputs():
    import pycuda.autoprimaryctx  # noqa: F401 -- pycuda's own context stack, which GPUArrays need
    import pycuda.gpuarray as ga

    A, B, C = operands(200, 300, 400, "float16")
    kern = ctgraph.compile(ctgraph.gemm(200, 300, 400), transform="streamk", target="cuda")
    D = kern(ga.to_gpu(A), ga.to_gpu(B), ga.to_gpu(C), beta=2.0)
    check(D.get(), A, B, C, 1.0, 2.0, "float16")


@pytest.mark.parametrize(
    ("tile", "options"),
    [
        ((64, 128, 64), {}),
        ((64, 256, 64), {}),
        ((64, 64, 32), {}),
        ((128, 256, 64), {"cluster": 2}),
        ((72, 64, 64), {}),  # swapped: 72 rows on one warpgroup's 64 columns
        ((208, 128, 64), {"cluster": 4, "multicast": "ab"}),  # swapped CTAs of 104 x 64 on a 2 x 2 grid
    ],
    ids=str,
)
@pytest.mark.parametrize("workgroups", [None, 5], ids=["resident", "few"])
@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk_reduce"])
@pytest.mark.parametrize("shape", [(1, 8, 8), (129, 136, 1000), (300, 520, 4104), (1408, 1664, 1032)], ids=str)
def test_wgmma_pingpong(shape, transform, workgroups, tile, options):
    """Two consumer warpgroups taking the work units in turn: many units per workgroup (5 workgroups), Stream-K's
    partial tiles and their fixup in either warpgroup, partial tiles, k % BK != 0, repeats bit-identical."""
    kern, _ = check_wgmma(shape, transform, tile, pingpong=True, workgroups=workgroups, **options)
    assert kern.program.layout["PINGPONG"] == 1 and kern.program.layout["WARPGROUPS"] == 2


def test_bad_operands_raise_before_launch():
    A, B, _ = operands(64, 64, 64, "float16")
    kern = ctgraph.compile(ctgraph.gemm(64, 64, 64), transform="streamk", target="cuda")
    with pytest.raises(ValueError, match="A must have shape"):
        kern(A[:32], B)
    with pytest.raises(TypeError, match="dtype"):
        kern(A.astype(np.float32), B)
    with pytest.raises(ValueError, match="contiguous"):
        kern(np.asfortranarray(A), B)
    with pytest.raises(ValueError, match="C is required"):
        kern(A, B, beta=1.0)
    with pytest.raises(TypeError, match="numpy array"):
        kern(A.tolist(), B)


SANITIZE = textwrap.dedent("""
    import numpy as np, ctgraph
    A = np.ones((150, 72), np.float16); B = np.ones((72, 88), np.float16)  # rows of whole 16-byte vectors: TMA
    wgmma = [((64, 64, 32), 5, {}), ((128, 64, 32), 3, {"cluster": 2}), ((256, 64, 32), 2, {"cluster": 4}),
             ((64, 128, 32), 3, {"cluster": 2, "multicast": "a"}), ((40, 64, 32), 5, {}),
             ((64, 128, 64), 3, {"swap": True}), ((128, 128, 32), 2, {"cluster": 4, "multicast": "ab"}),
             ((64, 64, 32), 2, {"pingpong": True}), ((128, 64, 32), 1, {"cluster": 2, "pingpong": True}),
             ((256, 128, 32), 1, {"cluster": 8, "multicast": "ba"}), ((64, 48, 32), 5, {}), ((128, 80, 32), 2, {})]
    for t in ctgraph.TRANSFORMS:
        kern = ctgraph.compile(ctgraph.gemm(150, 88, 72, macro_tile=(64, 64, 16)), transform=t, workgroups=5,
                               target="cuda", warps=4, stages=2)
        assert (kern(A, B) == 72).all()
        for tile, g, options in wgmma:
            kern = ctgraph.compile(ctgraph.gemm(150, 88, 72, macro_tile=tile), transform=t, workgroups=g,
                                   target="cuda", mainloop="wgmma", **options)
            assert kern.program.variant == "wgmma" and (kern(A, B) == 72).all(), (t, tile, options)
""")


@pytest.mark.slow
@pytest.mark.parametrize("tool", ["memcheck", "racecheck"])
def test_compute_sanitizer(tool):
    exe = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not os.path.exists(exe):
        pytest.skip("compute-sanitizer is not installed")
    r = subprocess.run(
        [exe, f"--tool={tool}", "--error-exitcode=3", sys.executable, "-c", SANITIZE],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "ERROR SUMMARY: 0 errors" in r.stdout or "RACECHECK SUMMARY: 0 hazards" in r.stdout, r.stdout[-2000:]


NEVER_COMPLETES = textwrap.dedent("""
    import time
    import numpy as np, ctgraph
    import dataclasses
    import lowering.cuda.emit.hopper as hopper
    hopper.WATCHDOG_NS = 300_000_000  # 0.3 s instead of 20
    plan = hopper.hopper_plan
    def short_by_16_bytes(*args, **kwargs):  # each stage expects 16 bytes more than its boxes bring
        P = plan(*args, **kwargs)
        return dataclasses.replace(P, stage_bytes=P.stage_bytes + 16)
    hopper.hopper_plan = short_by_16_bytes
    begin = time.monotonic()
    kern = ctgraph.compile(ctgraph.gemm(256, 256, 256, macro_tile=MACRO_TILE), transform="streamk2tile",
                           target="cuda", mainloop="wgmma", **OPTIONS)
    kern.program.function()  # compiled and loaded before the clock starts
    A = np.ones((256, 256), np.float16)
    print(f"COMPILED in {time.monotonic() - begin:.1f} s", flush=True)
    start = time.monotonic()
    try:
        kern(A, A)
    except Exception as e:
        print(f"RAISED after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}", flush=True)
    else:
        print(f"RETURNED after {time.monotonic() - start:.1f} s", flush=True)
""")


@pytest.mark.parametrize(
    "tile, options", [((128, 128, 64), {}), ((256, 128, 64), {"cluster": 2})], ids=["one CTA", "cluster"]
)
def test_an_mbarrier_phase_that_never_completes_traps_instead_of_hanging(tile, options):
    """The mbarrier waits are bare loops: the CTA's watchdog must turn a phase that never completes (here: every
    stage armed for 16 bytes more than its TMA boxes bring) into a launch failure within WATCHDOG_NS. A child
    process, since the failure takes its CUDA context down. One such child at a time on the machine (a file lock
    across pytest-xdist's workers): with 8 processes trapping at once, 16 of 88 never returned from their launch
    (one CTA or clusters, with programmatic dependent launch or without), while 12 that trapped beside 7 processes
    running GEMMs all returned (H100, 2026-11-26, docs/benchmarks.md)."""
    if ctgraph.compile(ctgraph.gemm(64, 64, 64), target="cuda").program.mainloop != "wgmma":
        pytest.skip("not a compute capability 9.0 GPU")
    script = f"MACRO_TILE, OPTIONS = {tile!r}, {options!r}\n" + NEVER_COMPLETES
    with open(os.path.join(tempfile.gettempdir(), "ctgraph-trap-test.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        except subprocess.TimeoutExpired as e:  # what the child printed says where it stopped: compiling, or launched
            pytest.fail(f"the child did not finish in 300 s; its output: {e.stdout!r} {e.stderr!r}")
    out = r.stdout + r.stderr
    assert "RAISED after" in out, out[-3000:]
    seconds = float(out.split("RAISED after ")[1].split(" s")[0])
    assert seconds < 10 and "unspecified launch failure" in out, out[-3000:]  # CUDA error 719: the trap


@pytest.mark.parametrize("transform", ["dataparallel", "streamk2tile"])
def test_model_chosen_grid_is_correct(transform):
    A, B, C = operands(1280, 1536, 2048, "float16")
    kern = ctgraph.compile(ctgraph.gemm(1280, 1536, 2048), transform=transform, workgroups="auto", target="cuda")
    assert 1 <= kern.workgroups <= kern.program.function().resident_workgroups()
    check(kern(A, B, C, beta=1.0), A, B, C, 1.0, 1.0, "float16")


def test_mixed_operands_and_numpy_out_on_a_stream():
    torch = pytest.importorskip("torch")
    A, B, C = operands(300, 200, 500, "float16")
    kern = ctgraph.compile(ctgraph.gemm(300, 200, 500), transform="streamk2tile", target="cuda")
    out = np.full((300, 200), np.nan, np.float16)
    s = torch.cuda.Stream()
    got = kern(torch.from_numpy(A).cuda(), B, C, beta=1.0, out=out, stream=s)  # torch A, numpy B/C/out
    assert got is out
    check(out, A, B, C, 1.0, 1.0, "float16")


@pytest.mark.parametrize("transform", ["splitk", "splitk_reduce"])
@pytest.mark.parametrize("dtype", ["float16", "float32"])
@pytest.mark.parametrize(("shape", "split"), [((256, 256, 65536), 16), ((100, 37, 1000), 5), ((1, 1, 1), 3)])
def test_splitk(shape, split, dtype, transform):
    m, n, k = shape
    A, B, C = operands(m, n, k, dtype)
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, dtype=dtype), transform=transform, split=split, target="cuda")
    D = kern(A, B, C, alpha=1.5, beta=0.5)
    check(D, A, B, C, 1.5, 0.5, dtype)
    assert np.array_equal(D, kern(A, B, C, alpha=1.5, beta=0.5))


def test_splitk_reduce_runs_more_workgroups_than_resident():
    """No spin-waits, so the grid may exceed what is resident at once."""
    A, B, C = operands(1024, 1024, 8192, "float16")
    g = ctgraph.gemm(1024, 1024, 8192)
    kern = ctgraph.compile(g, transform="splitk_reduce", split=8, workgroups=100_000, target="cuda")
    assert kern.workgroups > kern.program.function().resident_workgroups()
    check(kern(A, B, C, beta=1.0), A, B, C, 1.0, 1.0, "float16")


@pytest.mark.parametrize(
    "shape", [(256, 256, 65536), (1408, 1664, 8192), (1000, 1000, 1000), (192, 1744, 6048), (4096, 4096, 4096)]
)
def test_transform_auto(shape):
    m, n, k = shape
    A, B, C = operands(m, n, k, "float16")
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile=(128, 128, 64)), transform="auto", target="cuda")
    assert kern.selection is not None and kern.transform == kern.selection.config.transform
    split = kern.transform in TAKES_SPLIT
    assert kern.raster == (1 if split else raster_group(kern.problem.tiles[0], kern.selection.config.raster))
    check(kern(A, B, C, beta=1.0), A, B, C, 1.0, 1.0, "float16")


def test_bench_rounds_time_every_kernel_in_interleaved_rounds(tmp_path, monkeypatch):
    """``bench --rounds 3``: every kernel of a shape, cuBLAS's too, is timed three times, one round after the
    other (the second backward: measure.in_turn), and reports the median of its three and of its three ratios to the
    same round's cuBLAS; the results are checked against cuBLAS as in one round."""
    import statistics

    from ctgraph import bench

    monkeypatch.setenv("CTGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    order, figures = [], iter(range(1, 100))
    real = bench._kernel_time

    def kernel_time(fn, reps):
        order.append(fn)
        real(fn, reps)  # the kernel really runs; its figure is the counter, so the median is known
        return next(figures) * 1e-6

    monkeypatch.setattr(bench, "_kernel_time", kernel_time)
    rows = bench.run_bench([(100, 37, 200), (64, 64, 64)], tmp_path, transforms=("dataparallel", "auto"), rounds=3)
    assert len(order) == 2 * 3 * 3  # shapes x kernels (cuBLAS, dataparallel, auto) x rounds
    for shape in (order[:9], order[9:]):  # three distinct kernels, forward in rounds 1 and 3, backward in round 2
        assert len({id(fn) for fn in shape[:3]}) == 3
        assert all(shape[i] is shape[5 - i] is shape[i + 6] for i in range(3))

    def figure(first, i, r):  # kernel i's figure in round r (from 0): the counter at its place in that round
        return first + 3 * r + (i if r % 2 == 0 else 2 - i)

    for first, row in zip((1, 10), rows, strict=True):  # the second shape's figures start at 10
        for i, name in enumerate(("cublas", "dataparallel", "auto")):
            rounds = [figure(first, i, r) for r in range(3)]
            assert row[f"{name}_kernel_us"] == pytest.approx(statistics.median(rounds))
            if name != "cublas":  # each round's ratio is against the same round's cuBLAS figure
                ratios = [figure(first, 0, r) / figure(first, i, r) for r in range(3)]
                assert row[f"{name}_ratio"] == pytest.approx(statistics.median(ratios))
                assert (row[f"{name}_ratio_min"], row[f"{name}_ratio_max"]) == pytest.approx((min(ratios), max(ratios)))
        assert row["dataparallel_maxerr"] < 0.1 and row["auto_maxerr"] < 0.1
    assert (tmp_path / "results.md").exists() and (tmp_path / "results.png").exists()
