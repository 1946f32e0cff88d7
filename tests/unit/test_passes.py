"""The transform passes: schedules cover every iteration once, match seed 004's formulas, and are pure."""

import functools
import itertools
import random
from collections import Counter

import pytest
import sympy

import ctgraph
from ctgraph.dimensions import Linear
from ctgraph.edges import Flatten, Split, Sunder, Tile
from ctgraph.expr import index, size
from ctgraph.params import bindings
from ctgraph.passes import PIPELINES, PassOptions, pass_options, split_sk_dp
from ctgraph.schedule import section_walk, sections, tile_coords

SEED = (160, 192, 4096, (16, 16, 8), 32)

# (m, n, k, macro tile, workgroups)
CASES = {
    "seed": SEED,
    "one-tile-g4": (16, 16, 64, (16, 16, 8), 4),
    "fewer-tiles-than-wgs": (32, 48, 24, (16, 16, 8), 8),
    "partial": (33, 17, 70, (16, 16, 8), 4),
    "partial-g5": (33, 17, 70, (16, 16, 8), 5),
    "one-wg": (33, 17, 70, (16, 16, 8), 1),
    "T%g==0": (32, 64, 32, (16, 16, 8), 4),
    "m=1": (1, 40, 24, (16, 16, 8), 3),
    "k<BK": (48, 32, 5, (16, 16, 8), 4),
    "T=g+1": (80, 16, 16, (16, 16, 8), 4),
    "mixed": (48, 48, 24, (16, 16, 8), 4),
    "mixed-partial": (33, 40, 70, (16, 16, 8), 2),
}


@functools.cache
def kernel(case, transform):
    m, n, k, tile, g = CASES[case]
    return ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile=tile), transform=transform, workgroups=g, target="cpu")


def tiles(case):
    m, n, k, (bm, bn, bk), g = CASES[case]
    return -(-m // bm), -(-n // bn), -(-k // bk), g


def flat(it, nt, kt):
    m, n, k = it
    return (m * nt + n) * kt + k


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize("case", CASES)
def test_every_iteration_exactly_once(case, transform):
    mt, nt, kt, g = tiles(case)
    sched = kernel(case, transform).schedule()
    assert len(sched) == g
    seen = Counter(it for work in sched for it in work)
    want = set(itertools.product(range(mt), range(nt), range(kt)))
    assert set(seen) == want
    assert max(seen.values()) == 1
    assert all(isinstance(v, int) for work in sched for it in work for v in it)


@pytest.mark.parametrize("case", CASES)
def test_streamk_contiguous_ranges(case):
    mt, nt, kt, g = tiles(case)
    total = mt * nt * kt
    per = -(-total // g)
    sched = kernel(case, "streamk").schedule()
    for w, work in enumerate(sched):
        assert [flat(it, nt, kt) for it in work] == list(range(w * per, min(total, (w + 1) * per)))


@pytest.mark.parametrize("case", CASES)
def test_dataparallel_whole_tiles_round_robin(case):
    mt, nt, kt, g = tiles(case)
    sched = kernel(case, "dataparallel").schedule()
    for w, work in enumerate(sched):
        want = [(t // nt, t % nt, k) for t in range(w, mt * nt, g) for k in range(kt)]
        assert work == want


def sk_dp(case):
    g = kernel(case, "streamk2tile").graph
    return int(g.size(g.find(Linear, name="SK tiles"))), int(g.size(g.find(Linear, name="DP tiles")))


def test_streamk2tile_seed_split():
    assert sk_dp("seed") == (28672, 32768)
    b = {s.name: v for s, v in bindings(kernel("seed", "streamk2tile").graph).items()}
    assert b["numTilesSK"] == 28672 and b["numTilesDP"] == 32768
    assert b["numSKTilesPerWG"] == 896 and b["numDPTilesPerWG"] == 1024


@pytest.mark.parametrize("case", CASES)
def test_streamk2tile_split_sizes(case):
    mt, nt, kt, g = tiles(case)
    tiles_mn = mt * nt
    n_sk, n_dp = sk_dp(case)
    assert n_sk >= 0 and n_dp >= 0 and n_sk + n_dp == tiles_mn * kt
    if tiles_mn % g == 0:
        assert (n_sk, n_dp) == (0, tiles_mn * kt)
    elif tiles_mn < g:
        assert (n_sk, n_dp) == (tiles_mn * kt, 0)
    else:
        assert n_dp == (tiles_mn // g - 1) * g * kt
        assert n_sk == kt * (tiles_mn % g + g)
    assert n_dp % (g * kt) == 0  # whole tiles in the DP section
    if n_sk and tiles_mn >= g:
        assert kt <= -(-n_sk // g) <= 2 * kt  # each workgroup streams one to two tiles' worth


def test_cases_cover_every_regime():
    regimes = set()
    for case in CASES:
        n_sk, n_dp = sk_dp(case)
        regimes.add((n_sk > 0, n_dp > 0))
    assert regimes == {(True, True), (True, False), (False, True)}


@pytest.mark.parametrize(
    ("T", "kt", "g", "want"),
    [
        (120, 512, 32, (28672, 32768)),
        (8, 3, 4, (0, 24)),
        (3, 5, 8, (15, 0)),
        (1, 1, 1, (0, 1)),
        (5, 2, 4, (10, 0)),
        (9, 2, 4, (10, 8)),
        (7, 4, 7, (0, 28)),
    ],
)
def test_split_sk_dp(T, kt, g, want):
    assert tuple(int(v) for v in split_sk_dp(T, kt, g)) == want


def test_split_sk_dp_never_negative():
    for T, kt, g in itertools.product(range(1, 13), (1, 3), range(1, 10)):
        n_sk, n_dp = (int(v) for v in split_sk_dp(T, kt, g))
        assert n_sk >= 0 and n_dp >= 0 and n_sk + n_dp == T * kt, (T, kt, g)


@pytest.mark.parametrize("case", CASES)
def test_streamk2tile_sk_before_dp(case):
    _mt, nt, kt, _g = tiles(case)
    n_sk, _ = sk_dp(case)
    for work in kernel(case, "streamk2tile").schedule():
        is_dp = [flat(it, nt, kt) >= n_sk for it in work]
        assert is_dp == sorted(is_dp)
        dp = [it for it, d in zip(work, is_dp, strict=True) if d]
        # the DP section hands out whole tiles, k in order
        assert [k for _, _, k in dp] == list(range(kt)) * (len(dp) // kt)


def test_streamk2tile_seed_schedule_shape():
    sched = kernel("seed", "streamk2tile").schedule()
    assert [len(w) for w in sched] == [1920] * 32


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_seed_schedule_completes(transform):
    sched = kernel("seed", transform).schedule()
    assert sum(len(w) for w in sched) == 61440


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_passes_are_pure(transform):
    g = ctgraph.gemm(33, 17, 70, macro_tile=(16, 16, 8))
    before = g.structure()
    kern = ctgraph.compile(g, transform=transform, workgroups=4, target="cpu")
    assert g.structure() == before
    assert kern.graph is not g and kern.graph.structure() != before
    # step by step: no pass touches its input
    h, opts = g, pass_options(transform, 4)
    for step in PIPELINES[transform]:
        s = h.structure()
        out = step(h, opts)
        assert h.structure() == s and out is not h
        h = out
    assert h.structure() == kern.graph.structure()


def test_pass_refuses_transformed_graph():
    kern = kernel("partial", "streamk")
    with pytest.raises(ValueError, match="already transformed"):
        PIPELINES["dataparallel"][0](kern.graph, PassOptions(4))


def test_streamk_graph_shape():
    g = kernel("seed", "streamk").graph
    (fl,) = g.edges(Flatten)
    (space,) = g.outputs(fl)
    assert g.size(space) == 61440
    (tile,) = g.edges_out(space)
    assert isinstance(g[tile], Tile)
    wg, local = g.outputs(tile)
    assert g.size(wg) == 32 and g.size(local) == 1920
    (split,) = g.edges_out(local)
    assert isinstance(g[split], Split) and tuple(g[split].strides) == (1, 1)


def test_streamk2tile_graph_shape():
    g = kernel("seed", "streamk2tile").graph
    (sunder,) = g.edges(Sunder)
    sk, dp, sel = g.outputs(sunder)
    assert [int(g.size(t)) for t in (sk, dp, sel)] == [28672, 32768, 2]
    assert [s.name for s in sections(g)] == ["SK", "DP"]


def evaluate(exprs, point):
    out = []
    for e in exprs:
        v = e.subs(point)
        assert isinstance(v, sympy.Integer), (e, v)
        out.append(int(v))
    return out


def seed_points(per_wg, n=120):
    rng = random.Random(4)
    pts = [(0, 0, 0), (31, per_wg - 1, 0), (31, 0, per_wg - 1), (5, 17, 3)]
    while len(pts) < n:
        ft = rng.randrange(per_wg)
        pts.append((rng.randrange(32), ft, rng.randrange(per_wg - ft)))
    return pts


def test_streamk_reverse_matches_seed_formulas():
    g = kernel("seed", "streamk").graph
    (sec,) = sections(g)
    tc = tile_coords(g)
    wg, ft, fk = index("wg"), index("forTile"), index("forK")
    w = section_walk(g, sec, wg, ft, fk, [tc.m, tc.n, tc.k])
    exprs = [w[tc.m], w[tc.n], w[tc.k]]
    Nt, Kt, per = 12, 512, 1920
    for pw, pt, pk in seed_points(per):
        tile = per * pw + pt + pk
        got = evaluate(exprs, {wg: pw, ft: pt, fk: pk})
        assert got == [(tile // Kt) // Nt, (tile // Kt) % Nt, tile % Kt], (pw, pt, pk)


def test_streamk2tile_reverse_matches_seed_formulas():
    g = kernel("seed", "streamk2tile").graph
    tc = tile_coords(g)
    wg, ft, fk = index("wg"), index("forTile"), index("forK")
    Nt, Kt = 12, 512
    offsets = {"SK": (0, 896), "DP": (28672, 1024)}
    for sec in sections(g):
        w = section_walk(g, sec, wg, ft, fk, [tc.m, tc.n, tc.k])
        exprs = [w[tc.m], w[tc.n], w[tc.k]]
        base, per = offsets[sec.name]
        for pw, pt, pk in seed_points(per, n=60):
            tile = base + per * pw + pt + pk
            got = evaluate(exprs, {wg: pw, ft: pt, fk: pk})
            assert got == [(tile // Kt) // Nt, (tile // Kt) % Nt, tile % Kt], (sec.name, pw, pt, pk)


def test_parametrized_expressions_serve_other_shapes():
    """The symbolic expressions of one shape's graph, bound to another shape's sizes, give its schedule."""
    from ctgraph.params import parametrize

    sym = parametrize(kernel("seed", "streamk").graph)
    (sec,) = sections(sym)
    tc = tile_coords(sym)
    wg, ft, fk = index("wg"), index("forTile"), index("forK")
    w = section_walk(sym, sec, wg, ft, fk, [tc.m, tc.n, tc.k])
    exprs = [w[tc.m], w[tc.n], w[tc.k]]
    other = kernel("partial-g5", "streamk")
    b = bindings(other.graph)
    mt, nt, kt, _g = tiles("partial-g5")
    per = b[size("tilesPerWG")]
    bound = [e.subs(b) for e in exprs]
    for pw, work in enumerate(other.schedule()):
        for local, it in enumerate(work):
            assert tuple(evaluate(bound, {wg: pw, ft: local, fk: 0})) == it
        assert len(work) == max(0, min(per, mt * nt * kt - pw * per))


def test_unknown_transform_lists_valid_names():
    g = ctgraph.gemm(16, 16, 16)
    with pytest.raises(ValueError) as info:
        ctgraph.compile(g, transform="splitk-ish", workgroups=2, target="cpu")
    msg = str(info.value)
    assert "splitk-ish" in msg
    assert all(name in msg for name in ("dataparallel", "streamk", "streamk2tile"))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_bad_workgroups(bad):
    with pytest.raises(ValueError, match="workgroups"):
        ctgraph.compile(ctgraph.gemm(16, 16, 16), transform="streamk", workgroups=bad, target="cpu")


def test_compile_rejects_non_gemm_graph():
    with pytest.raises(TypeError):
        ctgraph.compile(ctgraph.CoordinateGraph(), transform="streamk", workgroups=2, target="cpu")


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_dump_env_writes_one_dot_per_step(transform, tmp_path, monkeypatch):
    monkeypatch.setenv("CTGRAPH_DUMP", str(tmp_path))
    kern = ctgraph.compile(
        ctgraph.gemm(33, 17, 70, macro_tile=(16, 16, 8)), transform=transform, workgroups=4, target="cpu"
    )
    steps = PIPELINES[transform]
    files = sorted(p.name for p in tmp_path.glob("*.dot"))
    want = [f"{transform}-{i}-{step.__name__}.dot" for i, step in enumerate(steps, 1)]
    assert set(want) <= set(files)
    assert len(files) in (len(steps), len(steps) + 1)  # the input graph may be dumped too
    for name in files:
        assert (tmp_path / name).read_text().startswith("digraph")
    out = tmp_path / "final.dot"
    ctgraph.dump(kern.graph, out)
    assert (tmp_path / want[-1]).read_text() == out.read_text()
