"""ctgraph.gemm: the precondition graph of seed 004, its sizes, labels and argument checks."""

import itertools

import numpy as np
import pytest

import ctgraph
from ctgraph.dimensions import ForLoop, MacroTileIndex, MacroTileNumber, SubDimension, User
from ctgraph.edges import PassThrough, Split, Tile

SEED = (160, 192, 4096, (16, 16, 8))
SHAPES = {"A": ("m", "k"), "B": ("k", "n"), "D": ("m", "n")}


def tags(g, tensor):
    user = g.find(User, tensor=tensor)
    subs = [g.find(SubDimension, tensor=tensor, dim=d) for d in (0, 1)]
    nums = [g.find(MacroTileNumber, tensor=tensor, dim=d) for d in (0, 1)]
    idxs = [g.find(MacroTileIndex, tensor=tensor, dim=d) for d in (0, 1)]
    return user, subs, nums, idxs


@pytest.mark.parametrize("tensor", ["A", "B", "D"])
def test_tensor_structure(tensor):
    g = ctgraph.gemm(*SEED[:3], macro_tile=SEED[3])
    user, subs, nums, idxs = tags(g, tensor)
    (split,) = g.edges_out(user)
    assert isinstance(g[split], Split)
    assert g.inputs(split) == [user] and g.outputs(split) == subs
    for d in (0, 1):
        (tile,) = g.edges_out(subs[d])
        assert isinstance(g[tile], Tile)
        assert g.inputs(tile) == [subs[d]] and g.outputs(tile) == [nums[d], idxs[d]]
    assert user in g.sources()


def test_dangling_coordinates_and_passthroughs():
    g = ctgraph.gemm(*SEED[:3], macro_tile=SEED[3])
    a0 = g.find(MacroTileNumber, tensor="A", dim=0)
    a1 = g.find(MacroTileNumber, tensor="A", dim=1)
    b0 = g.find(MacroTileNumber, tensor="B", dim=0)
    b1 = g.find(MacroTileNumber, tensor="B", dim=1)
    fk = g.find(ForLoop, name="K")
    sinks = set(g.sinks())
    assert {a0, b1, fk} <= sinks
    assert a1 not in sinks and b0 not in sinks
    # the sinks are the three dangling coordinates and the six tile indices
    assert sinks == {a0, b1, fk, *g.dimensions(MacroTileIndex)}
    assert len(g.dimensions(MacroTileIndex)) == 6
    # A's and B's K tile numbers both pass through to ForLoop(K)
    into_k = g.edges_in(fk)
    assert len(into_k) == 2 and all(isinstance(g[e], PassThrough) for e in into_k)
    assert sorted(g.inputs(e)[0] for e in into_k) == sorted([a1, b0])
    assert g.sources() == [g.find(User, tensor=t) for t in "ABD"]


@pytest.mark.parametrize(
    ("m", "n", "k", "tile", "want"),
    [
        (160, 192, 4096, (16, 16, 8), (10, 12, 512)),
        (17, 16, 8, (16, 16, 8), (2, 1, 1)),
        (33, 17, 70, (16, 16, 8), (3, 2, 9)),
        (1, 1, 1, (128, 128, 32), (1, 1, 1)),
        (128, 129, 31, (128, 128, 32), (1, 2, 1)),
    ],
)
def test_sizes_with_partial_tiles(m, n, k, tile, want):
    g = ctgraph.gemm(m, n, k, macro_tile=tile)
    extent = {"m": m, "n": n, "k": k}
    block = {"m": tile[0], "n": tile[1], "k": tile[2]}
    count = dict(zip("mnk", want, strict=True))
    for tensor, axes in SHAPES.items():
        user, subs, nums, idxs = tags(g, tensor)
        assert g.size(user) == extent[axes[0]] * extent[axes[1]]
        for d, axis in enumerate(axes):
            assert g.size(subs[d]) == extent[axis]
            assert g.size(nums[d]) == count[axis]
            assert g.size(idxs[d]) == block[axis]
    assert g.size(g.find(ForLoop, name="K")) == want[2]
    p = g.attrs["gemm"]
    assert (p.m, p.n, p.k, p.macro_tile, p.tiles) == (m, n, k, tile, want)


def test_labels():
    g = ctgraph.gemm(160, 192, 4096, (16, 16, 8))
    labels = {g[t].label for t in g.dimensions()}
    for want in [
        "MacroTileNumber(A; 0) size=10",
        "MacroTileNumber(B; 1) size=12",
        "MacroTileNumber(A; 1) size=512",
        "MacroTileIndex(A; 0) size=16",
        "SubDimension(A; 1) size=4096",
        "User(A) size=655360",
        "ForLoop(K) size=512",
    ]:
        assert want in labels
    a0 = g.find(MacroTileNumber, tensor="A", dim=0)
    assert str(g[a0]) == "MacroTileNumber(A; 0) size=10"
    assert g.label(a0) == f"MacroTileNumber(A; 0) size=10 [{a0}]"


def test_defaults_and_dtypes():
    g = ctgraph.gemm(256, 256, 64)
    p = g.attrs["gemm"]
    assert p.macro_tile == (128, 128, 32) and p.dtype == "float16"
    assert ctgraph.gemm(8, 8, 8, dtype="float32").attrs["gemm"].dtype == "float32"
    assert ctgraph.gemm(8, 8, 8, dtype=np.float32).attrs["gemm"].dtype == "float32"
    assert ctgraph.gemm(np.int64(8), 8, 8).attrs["gemm"].m == 8


def test_reverse_from_tile_coordinates_to_user_index():
    bm, bk = 4, 8
    g = ctgraph.gemm(8, 4, 16, macro_tile=(bm, 4, bk))
    user, _, (n0, n1), (i0, i1) = tags(g, "A")
    for a, b, c, d in itertools.product(range(2), range(bm), range(2), range(bk)):
        got = g.reverse({n0: a, i0: b, n1: c, i1: d}, targets=[user])[user]
        assert int(got) == (a * bm + b) * 16 + c * bk + d


@pytest.mark.parametrize("arg", ["m", "n", "k"])
@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8", None])
def test_bad_sizes(arg, bad):
    kw = {"m": 16, "n": 16, "k": 16, arg: bad}
    with pytest.raises(ValueError, match=rf"^{arg} must be a positive integer"):
        ctgraph.gemm(**kw)


@pytest.mark.parametrize("tile", [(16, 16), (16, 16, 8, 8), 16, "abc", (16, 0, 8), (16, 16, -8), (16.0, 16, 8)])
def test_bad_macro_tile(tile):
    with pytest.raises(ValueError, match="macro_tile"):
        ctgraph.gemm(16, 16, 16, macro_tile=tile)


@pytest.mark.parametrize("dtype", ["int8", "float64", "fp16", None])
def test_bad_dtype(dtype):
    with pytest.raises(ValueError, match="dtype") as info:
        ctgraph.gemm(16, 16, 16, dtype=dtype)
    assert "float16" in str(info.value) and "float32" in str(info.value)
