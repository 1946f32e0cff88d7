"""The control graph: its data structure, the loop nest lowered for each transform, the seed example's
index formulas (seed 004), a reference interpreter of its documented semantics, and a golden DOT dump."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import sympy

import ctgraph
from ctgraph import control as C
from ctgraph.lower import fixup_dependencies
from ctgraph.params import bindings
from ctgraph.schedule import NUMPY
from lowering.cpu import run_order

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "seed_control_streamk.dot"
SEED = {"m": 160, "n": 192, "k": 4096, "macro_tile": (16, 16, 8)}
SEED_WORKGROUPS = 32
FIXUP = (C.Wait, C.Signal, C.StorePartial, C.AccumulatePartial)


def seed_kernel(transform: str = "streamk") -> ctgraph.Kernel:
    return ctgraph.compile(ctgraph.gemm(**SEED), transform=transform, workgroups=SEED_WORKGROUPS, target="cpu")


@pytest.fixture(scope="module")
def seed_streamk() -> ctgraph.Kernel:
    return seed_kernel("streamk")


def kinds(cg: C.ControlGraph, tags: list[int]) -> list[type]:
    return [type(cg[t]) for t in tags]


def subtree(cg: C.ControlGraph, tag: int) -> list[int]:
    return [t for t, _ in cg.walk(tag)]


def evaluate(expr: sympy.Basic, values: dict[sympy.Symbol, int]) -> sympy.Basic:
    return expr.xreplace({s: sympy.Integer(v) for s, v in values.items()})


def symbols_by_name(kern: ctgraph.Kernel) -> dict[str, sympy.Symbol]:
    return {s.name: s for s in bindings(kern.graph)}


# --- the ControlGraph data structure ----------------------------------------------------------------


def test_controlgraph_add_body_sequence_and_loop_assignments():
    cg = C.ControlGraph()
    i, n = sympy.Symbol("i", integer=True), sympy.Symbol("n", integer=True, positive=True)
    root = cg.add(C.Kernel("k", (n,), sympy.Symbol("wg"), (4, 4, 4), "float32"))
    loop = cg.add(C.ForLoop(i, sympy.Integer(0), sympy.Lt(i, n), sympy.Integer(2)), root)
    a = cg.add(C.ZeroAccumulator(), loop)
    b = cg.add(C.Multiply(), loop)
    tail = cg.add(C.ZeroAccumulator(), root)
    assert cg.root == root
    assert cg.body(root) == [loop, tail]
    assert cg.body(loop) == [a, b]
    cg.body(loop).append(root)  # a copy: the kept order is not the caller's to change
    c = cg.add(C.Multiply(), loop)  # a body asked for, then grown: asked again, it has the new child
    assert cg.body(loop) == [a, b, c] and cg.body(root) == [loop, tail]
    assert cg.initialize(loop) == C.Assign(i, sympy.Integer(0))
    assert cg.increment(loop) == C.Assign(i, i + 2)
    # Initialize/Increment assignments are not part of the body
    assert [t for t, _ in cg.walk()] == [root, loop, a, b, c, tail]
    assert [d for _, d in cg.walk()] == [0, 1, 2, 2, 2, 1]
    assert cg.nodes(C.Multiply) == [b, c]
    assert len(cg) == 8  # 6 body nodes + the loop's init and increment
    kinds_of = {(cg.nx.edges[u, v]["kind"]) for u, v in cg.nx.edges}
    assert kinds_of == set(C.Edge)
    text = cg.pretty().splitlines()
    assert len(text) == 6 and text[0].startswith(f"[{root}] Kernel(") and text[2].startswith("    [")


def test_controlgraph_rejects_non_nodes_and_needs_one_kernel():
    cg = C.ControlGraph()
    with pytest.raises(TypeError):
        cg.add("not a node")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="one Kernel"):
        _ = cg.root
    w = sympy.Symbol("wg")
    cg.add(C.Kernel("a", (), w, (1, 1, 1), "float32"))
    cg.add(C.Kernel("b", (), w, (1, 1, 1), "float32"))
    with pytest.raises(ValueError, match="one Kernel"):
        _ = cg.root


def test_nodes_are_frozen_and_describe_themselves():
    node = C.Signal(sympy.Symbol("wg"), 1)
    with pytest.raises(AttributeError):
        node.value = 2  # type: ignore[misc]
    assert node.describe() == "Signal(flag=wg, value=1)"


# --- the seed example (160x192x4096, 16x16x8, Stream-K, 32 workgroups) -----------------------------


def test_seed_streamk_loop_structure(seed_streamk):
    cg = seed_streamk.control
    assert isinstance(cg, C.ControlGraph)
    kernel = cg[cg.root]
    assert isinstance(kernel, C.Kernel)
    assert kernel.macro_tile == (16, 16, 8) and kernel.dtype == "float16"
    (outer,) = cg.body(cg.root)
    loop = cg[outer]
    assert isinstance(loop, C.ForLoop)
    assert loop.counter.name == "forTile" and loop.init == 0
    # outer increment: however many iterations the inner K loop ran
    assert isinstance(loop.increment, sympy.Symbol) and loop.increment.name == "forK"
    assert cg.initialize(outer) == C.Assign(loop.counter, sympy.Integer(0))
    assert cg.increment(outer) == C.Assign(loop.counter, loop.counter + loop.increment)

    body = cg.body(outer)
    assert kinds(cg, body[:5]) == [C.Assign, C.Assign, C.Assign, C.ZeroAccumulator, C.ForLoop]
    assert [cg[t].target.name for t in body[:3]] == ["m", "n", "kStart"]
    inner = body[4]
    iloop = cg[inner]
    assert iloop.counter == loop.increment and iloop.init == 0 and iloop.increment == 1
    assert cg.increment(inner) == C.Assign(iloop.counter, iloop.counter + 1)
    ibody = cg.body(inner)
    assert kinds(cg, ibody) == [C.Assign, C.LoadTile, C.LoadTile, C.Multiply]
    assert cg[ibody[0]].target.name == "k"
    assert [cg[t].tensor for t in ibody[1:3]] == ["A", "B"]
    assert cg[ibody[1]].shape == (16, 8) and cg[ibody[2]].shape == (8, 16)

    # after the K loop: only the fixup Ifs (and what they hold)
    rest = body[5:]
    assert rest and all(isinstance(cg[t], C.If) for t in rest)
    send = [t for t in rest if C.StorePartial in kinds(cg, subtree(cg, t))]
    recv = [t for t in rest if C.Epilogue in kinds(cg, subtree(cg, t))]
    assert len(send) == 1 and len(recv) == 1 and send != recv
    # a sender adds its children's partials (the fixup tree), then stores its own and signals
    assert kinds(cg, cg.body(send[0])) == [C.ForLoop, C.StorePartial, C.Signal]
    _, store, signal = (cg[t] for t in cg.body(send[0]))
    assert signal.value == 1 and signal.flag == store.slot

    for parent in (send[0], recv[0]):
        (holder,) = [t for t in subtree(cg, parent) if C.Wait in kinds(cg, cg.body(t))]
        peer_body = cg.body(holder)
        assert kinds(cg, peer_body) == [C.Wait, C.AccumulatePartial, C.Signal]
        wait, accumulate, reset = (cg[t] for t in peer_body)
        assert wait.value == 1 and wait.flag == accumulate.slot
        # whoever adds a partial resets its flag, so the next call starts from zero flags
        assert reset.value == 0 and reset.flag == wait.flag

    # exactly one Epilogue, after the partials were added, and guarded by the same If (the owner)
    order = [t for t, _ in cg.walk()]
    (epi,) = cg.nodes(C.Epilogue)
    assert epi in subtree(cg, recv[0])
    assert order.index(epi) > order.index(peer_body[1]) > order.index(inner)
    assert cg[epi].shape == (16, 16)
    # the send/receive conditions: a workgroup that starts a tile at k == 0 owns it
    k_start = cg[body[2]].target
    assert bool(evaluate(cg[send[0]].condition, {k_start: 0})) is False
    assert bool(evaluate(cg[send[0]].condition, {k_start: 5})) is True
    assert bool(evaluate(cg[recv[0]].condition, {k_start: 0})) is True
    assert bool(evaluate(cg[recv[0]].condition, {k_start: 5})) is False


def seed_points(tiles_per_wg: int, workgroups: int, count: int = 150) -> list[tuple[int, int, int]]:
    """(wg, forTile, forK) points: boundaries plus a seeded random sample."""
    rng = np.random.default_rng(4)
    edge = [
        (0, 0, 0),
        (workgroups - 1, 0, 0),
        (workgroups - 1, tiles_per_wg - 1, 0),
        (1, 0, tiles_per_wg - 1),
        (3, 100, 411),
        (7, 511, 1),
        (7, 512, 0),
        (12, 0, 511),
        (12, 0, 512),
    ]
    pts = [
        (int(rng.integers(workgroups)), int(rng.integers(tiles_per_wg)), int(rng.integers(tiles_per_wg)))
        for _ in range(count)
    ]
    return edge + pts


def test_seed_streamk_index_formulas(seed_streamk):
    """m, n, k of the control graph are seed 004's formulas, with tile = tilesPerWG*wg + forTile + forK."""
    kern = seed_streamk
    cg = kern.control
    values = bindings(kern.graph)
    s = symbols_by_name(kern)
    tpw, kt, nt, mt = (values[s[x]] for x in ("tilesPerWG", "numTilesK", "numTilesN", "numTilesM"))
    total, g = values[s["totalTiles"]], values[s["numWGs"]]
    assert (mt, nt, kt, g, total, tpw) == (10, 12, 512, 32, 61440, 1920)

    (outer,) = cg.body(cg.root)
    body = cg.body(outer)
    m_assign, n_assign, k0_assign = (cg[t] for t in body[:3])
    inner = body[4]
    k_assign = cg[cg.body(inner)[0]]
    wg, ft, fk = cg[cg.root].workgroup, cg[outer].counter, cg[inner].counter
    m_sym, n_sym = m_assign.target, n_assign.target

    for w, f_tile, f_k in seed_points(tpw, g):
        at = {**values, wg: w, ft: f_tile, fk: f_k}
        start = tpw * w + f_tile
        tile = start + f_k
        # the outer loop's assignments are at forK == 0: the tile the outer iteration starts on
        assert int(evaluate(m_assign.value, {**at, fk: 0})) == (start // kt) // nt
        assert int(evaluate(n_assign.value, {**at, fk: 0})) == (start // kt) % nt
        assert int(evaluate(k0_assign.value, {**at, fk: 0})) == start % kt
        assert int(evaluate(k_assign.value, at)) == tile % kt
        # loop conditions: seed 004's pseudo-code
        outer_ok = f_tile < tpw and start < total
        assert bool(evaluate(cg[outer].condition, at)) is outer_ok
        start_mn = start // kt
        at_mn = {**at, m_sym: start_mn // nt, n_sym: start_mn % nt}
        inner_ok = tile // kt == start_mn and tile < total and f_tile + f_k < tpw
        assert bool(evaluate(cg[inner].condition, at_mn)) is inner_ok


@pytest.mark.parametrize("transform", ["dataparallel", "streamk2tile"])
def test_seed_section_index_formulas(transform):
    """The other transforms on the seed example: DP tile = wg + round*g; 2-tile SK/DP tiles of seed 004."""
    kern = seed_kernel(transform)
    cg = kern.control
    values = bindings(kern.graph)
    s = symbols_by_name(kern)
    kt, nt, g = (values[s[x]] for x in ("numTilesK", "numTilesN", "numWGs"))
    wg = cg[cg.root].workgroup
    loops = cg.body(cg.root)
    assert all(isinstance(cg[t], C.ForLoop) for t in loops)
    if transform == "dataparallel":
        assert len(loops) == 1
        per_wg = values[s["tilesPerWG"]]

        def tile_of(w: int, local: int) -> tuple[int, int]:
            return (w + g * (local // kt)) * kt + local % kt, per_wg

        sections = [(loops[0], tile_of)]
    else:
        assert len(loops) == 2  # SK section first, then DP
        n_sk, sk_per, dp_per = (values[s[x]] for x in ("numTilesSK", "numSKTilesPerWG", "numDPTilesPerWG"))
        assert (n_sk, values[s["numTilesDP"]]) == (28672, 32768)  # seed 004's Sunder picture
        sections = [
            (loops[0], lambda w, local: (sk_per * w + local, sk_per)),
            (loops[1], lambda w, local: (n_sk + dp_per * w + local, dp_per)),
        ]
    rng = np.random.default_rng(7)
    for outer, tile_of in sections:
        body = cg.body(outer)
        assigns = {cg[t].target.name: cg[t] for t in body if isinstance(cg[t], C.Assign)}
        assert {"m", "n"} <= set(assigns) <= {"m", "n", "kStart"}
        (inner,) = [t for t in body if isinstance(cg[t], C.ForLoop)]
        k_assign = cg[cg.body(inner)[0]]
        assert isinstance(k_assign, C.Assign) and k_assign.target.name == "k"
        ft, fk = cg[outer].counter, cg[inner].counter
        per = tile_of(0, 0)[1]
        for _ in range(60):
            w, f_tile = int(rng.integers(g)), int(rng.integers(per))
            f_k = int(rng.integers(per - f_tile))
            at = {**values, wg: w, ft: f_tile, fk: f_k}
            start, tile = tile_of(w, f_tile)[0], tile_of(w, f_tile + f_k)[0]
            assert int(evaluate(assigns["m"].value, at)) == (start // kt) // nt
            assert int(evaluate(assigns["n"].value, at)) == (start // kt) % nt
            if "kStart" in assigns:
                assert int(evaluate(assigns["kStart"].value, at)) == start % kt
            assert int(evaluate(k_assign.value, at)) == tile % kt


@pytest.mark.parametrize("shape", [(160, 192, 4096), (50, 45, 29), (64, 64, 64)])
def test_dataparallel_has_no_fixup(shape):
    kern = ctgraph.compile(ctgraph.gemm(*shape, (16, 16, 8)), transform="dataparallel", workgroups=7, target="cpu")
    cg = kern.control
    assert not [t for t in cg.nx.nodes if isinstance(cg[t], FIXUP)]
    assert not cg.nodes(C.If)
    assert len(cg.nodes(C.Epilogue)) == 1


def test_streamk2tile_dp_section_has_no_fixup():
    cg = seed_kernel("streamk2tile").control
    sk, dp = cg.body(cg.root)
    assert {cls for cls in kinds(cg, subtree(cg, sk)) if cls in FIXUP} == set(FIXUP)
    assert not [cls for cls in kinds(cg, subtree(cg, dp)) if cls in FIXUP or cls is C.If]
    # the DP section writes D straight from its accumulator
    assert kinds(cg, cg.body(dp))[-1] is C.Epilogue
    assert len(cg.nodes(C.Epilogue)) == 2


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
def test_control_graph_is_deterministic_and_shape_independent(transform):
    def pretty(m, n, k, wg):
        kern = ctgraph.compile(ctgraph.gemm(m, n, k, (8, 16, 4)), transform=transform, workgroups=wg, target="cpu")
        return kern.control.pretty()

    a = pretty(33, 47, 21, 5)
    assert a == pretty(33, 47, 21, 5)
    # sizes are parameters: another shape and grid give the same program
    assert a == pretty(7, 100, 64, 12)


# --- a reference interpreter of the control graph's documented semantics ----------------------------


class Interpreter:
    """Runs a control graph one workgroup at a time, with numpy tiles (control.py's module docstring)."""

    def __init__(self, kern: ctgraph.Kernel) -> None:
        self.kern = kern
        self.cg = kern.control
        self.kernel: C.Kernel = self.cg[self.cg.root]
        self.base = dict(bindings(kern.graph))
        self._fns: dict[sympy.Basic, tuple[list[sympy.Symbol], object]] = {}
        p = kern.problem
        bm, bn, _ = p.macro_tile
        slots = max(1, len(self.cg.nodes(C.StorePartial)) * kern.workgroups)
        self.workspace = np.full((slots, bm, bn), np.nan, dtype=np.float32)
        self.flags = np.zeros(slots, dtype=np.int64)
        self.log: list[tuple[int, int, int, int]] = []  # (wg, m, n, k) at every Multiply
        self.writers: list[tuple[int, int, int]] = []  # (wg, m, n) at every Epilogue
        self.trips: dict[int, list[int]] = {}  # per ForLoop, its iterations each time it was reached

    def ev(self, expr: sympy.Basic, **arrays: np.ndarray):
        if expr not in self._fns:
            syms = sorted(expr.free_symbols, key=lambda s: s.name)
            self._fns[expr] = (syms, sympy.lambdify(syms, expr, modules=NUMPY))
        syms, fn = self._fns[expr]
        env = {**self.env, **{s: arrays[s.name] for s in syms if s.name in arrays}}
        return fn(*[env[s] for s in syms])

    def run(self, A, B, C_, alpha, beta):
        p = self.kern.problem
        self.ops = {"A": A.astype(np.float32).ravel(), "B": B.astype(np.float32).ravel()}
        self.C = None if C_ is None else C_.astype(np.float32).ravel()
        self.D = np.zeros(p.m * p.n, dtype=np.float32)
        self.alpha, self.beta = np.float32(alpha), np.float32(beta)
        for w in run_order(self.kern.schedule()):
            self.env = {**self.base, self.kernel.workgroup: w}
            self.wg = w
            self.tiles: dict[str, np.ndarray] = {}
            self.body(self.cg.root)
        return self.D.reshape(p.m, p.n)

    def body(self, tag: int) -> None:
        for t in self.cg.body(tag):
            node = self.cg[t]
            getattr(self, type(node).__name__)(t, node)

    def ForLoop(self, tag, node):
        self.env[node.counter] = int(self.ev(node.init))
        inc = self.cg.increment(tag)
        trips = self.trips.setdefault(tag, [])
        trips.append(0)
        while bool(self.ev(node.condition)):
            trips[-1] += 1
            self.body(tag)
            self.env[inc.target] = int(self.ev(inc.value))

    def If(self, tag, node):
        if bool(self.ev(node.condition)):
            self.body(tag)

    def Assign(self, tag, node):
        self.env[node.target] = int(self.ev(node.value))

    def ZeroAccumulator(self, tag, node):
        bm, bn, _ = self.kernel.macro_tile
        self.acc = np.zeros((bm, bn), dtype=np.float32)

    def _grid(self, node):
        rows, cols = np.indices(node.shape)
        arrays = {node.row.name: rows, node.col.name: cols}
        mask = np.broadcast_to(self.ev(node.mask, **arrays), node.shape)
        addr = np.broadcast_to(self.ev(node.address, **arrays), node.shape)
        return mask, np.where(mask, addr, 0)

    def LoadTile(self, tag, node):
        mask, addr = self._grid(node)
        src = self.ops[node.tensor]
        assert addr[mask].max(initial=0) < src.size  # the mask keeps every access in bounds
        self.tiles[node.tensor] = np.where(mask, src[addr], np.float32(0))

    def Multiply(self, tag, node):
        self.acc += self.tiles["A"] @ self.tiles["B"]
        e = {s.name: v for s, v in self.env.items()}
        self.log.append((self.wg, e["m"], e["n"], e["k"]))

    def StorePartial(self, tag, node):
        self.workspace[int(self.ev(node.slot))] = self.acc

    def AccumulatePartial(self, tag, node):
        self.acc += self.workspace[int(self.ev(node.slot))]

    def Signal(self, tag, node):
        self.flags[int(self.ev(node.flag))] = node.value

    def Wait(self, tag, node):
        flag = int(self.ev(node.flag))
        assert self.flags[flag] == node.value, f"workgroup {self.wg} waits on flag {flag}, never signalled"

    def Epilogue(self, tag, node):
        mask, addr = self._grid(node)
        val = self.alpha * self.acc
        if self.beta != 0:
            val = val + self.beta * np.where(mask, self.C[addr], 0)
        self.D[addr[mask]] = val[mask]
        e = {s.name: v for s, v in self.env.items()}
        self.writers.append((self.wg, e["m"], e["n"]))


@pytest.mark.parametrize("transform", ctgraph.TRANSFORMS)
@pytest.mark.parametrize(
    ("shape", "tile", "workgroups"),
    [
        ((45, 50, 27), (16, 16, 8), 5),
        ((33, 17, 13), (8, 16, 4), 4),
        ((1, 1, 1), (16, 16, 8), 3),
        ((20, 30, 5), (16, 16, 8), 1),
        ((24, 32, 16), (8, 16, 4), 7),
        ((20, 18, 300), (16, 16, 4), 37),  # ~9 workgroups per tile: a fixup tree several levels deep
        ((16, 16, 512), (16, 16, 8), 23),  # one tile, 22 senders
    ],
)
def test_interpreted_control_graph_computes_the_gemm(transform, shape, tile, workgroups):
    """The control graph, run by a small interpreter of its documented semantics, computes
    alpha*A@B + beta*C, visits exactly kern.schedule()'s iterations, and the owner of each tile is the
    workgroup holding its k == 0 iteration (the documented fixup choice)."""
    m, n, k = shape
    kern = ctgraph.compile(
        ctgraph.gemm(m, n, k, tile, dtype="float32"), transform=transform, workgroups=workgroups, target="cpu"
    )
    rng = np.random.default_rng(11)
    A, B, C_ = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((m, k), (k, n), (m, n)))
    it = Interpreter(kern)
    D = it.run(A, B, C_, 0.5, -2.0)
    ref = 0.5 * A.astype(np.float64) @ B + -2.0 * C_.astype(np.float64)
    np.testing.assert_allclose(D, ref, rtol=0, atol=1e-4)
    assert not it.flags.any()

    schedule = kern.schedule()
    visited = [[] for _ in range(workgroups)]
    for w, mi, ni, ki in it.log:
        visited[w].append((mi, ni, ki))
    assert visited == schedule
    mt, nt, kt = kern.problem.tiles
    assert sorted(itertools.chain.from_iterable(schedule)) == list(itertools.product(range(mt), range(nt), range(kt)))
    owner = {(mi, ni): w for w, work in enumerate(schedule) for mi, ni, ki in work if ki == 0}
    assert sorted(it.writers) == sorted((w, mi, ni) for (mi, ni), w in owner.items())
    for producer, own in fixup_dependencies(schedule):
        assert transform != "dataparallel" and producer != own


def k_loops(cg: C.ControlGraph) -> list[int]:
    return [t for t in cg.nodes(C.ForLoop) if any(isinstance(cg[c], C.Multiply) for c in cg.body(t))]


@pytest.mark.parametrize("transform", [*ctgraph.TRANSFORMS, "splitk", "splitk_reduce"])
@pytest.mark.parametrize(
    ("shape", "tile", "workgroups"),
    [
        ((45, 50, 27), (16, 16, 8), 5),
        ((1, 1, 1), (16, 16, 8), 3),
        ((20, 18, 300), (16, 16, 4), 37),
        ((33, 17, 13), (8, 16, 4), 4),
    ],
)
def test_every_k_loop_is_shown_to_run_where_it_is_reached(transform, shape, tile, workgroups):
    """``ControlGraph.enters`` proves every K loop nonempty (the Hopper producer issues its iteration 0 before
    the trip count), and running the program agrees: each K loop ran at least once each time it was reached."""
    options = {"split": 2} if transform.startswith("splitk") else {}
    if options:
        workgroups = 2 * int(np.prod(ctgraph.gemm(*shape, tile).attrs["gemm"].tiles[:2]))
    kern = ctgraph.compile(
        ctgraph.gemm(*shape, tile, dtype="float32"), transform, workgroups=workgroups, target="cpu", **options
    )
    cg = kern.control
    loops = k_loops(cg)
    assert loops and all(cg.enters(t) for t in loops)
    if transform == "splitk_reduce":
        return  # its second kernel (the reduction) is not a one-kernel program for the interpreter
    it = Interpreter(kern)
    rng = np.random.default_rng(3)
    m, n, k = shape
    it.run(*(rng.uniform(-1, 1, s).astype(np.float32) for s in ((m, k), (k, n), (m, n))), 1.0, 0.0)
    reached = [trips for tag in loops for trips in it.trips.get(tag, [])]  # a section may have no tiles
    assert reached and min(reached) >= 1


def test_enters_is_a_proof_not_a_guess():
    """What ``enters`` cannot show is ``False``: a bound the enclosing loop does not state, a loop after an If
    sibling, a fact about a loop counter from above that loop; and it asks for a ForLoop."""
    i, j, t = (sympy.Symbol(x, integer=True, nonnegative=True) for x in "ijt")
    n, m = sympy.Symbol("n", integer=True, positive=True), sympy.Symbol("m", integer=True, positive=True)

    def program(inner: sympy.Basic, before: C.Node | None = None) -> tuple[C.ControlGraph, int]:
        cg = C.ControlGraph()
        root = cg.add(C.Kernel("k", (n, m), sympy.Symbol("wg"), (4, 4, 4), "float32"))
        outer = cg.add(C.ForLoop(i, sympy.Integer(0), sympy.Lt(i, n), sympy.Integer(1)), root)
        cg.add(C.Assign(t, 2 * i), outer)
        if before is not None:
            cg.add(before, outer)
        return cg, cg.add(C.ForLoop(j, sympy.Integer(0), inner, sympy.Integer(1)), outer)

    cg, loop = program(sympy.And(sympy.Lt(j + t, 2 * n), sympy.Lt(j + i, n)))
    assert not cg.enters(loop)  # t < 2n is not i < n, syntactically
    cg, loop = program(sympy.And(sympy.Eq(t, 2 * (i + j)), sympy.Lt(i + j, n)))
    assert cg.enters(loop)  # t substituted: 2i == 2i, and i < n is the outer loop's own bound
    assert cg.enters(cg.parent(loop))  # the outer loop starts at i = 0, and 0 < n for a positive n
    cg, loop = program(sympy.Lt(i + j, n), before=C.If(sympy.Lt(i, m)))
    assert not cg.enters(loop)
    cg, loop = program(sympy.Lt(i + j, m))
    assert not cg.enters(loop)
    # a fact about the outer loop's counter from above the loop says nothing inside it (i changes there)
    cg = C.ControlGraph()
    root = cg.add(C.Kernel("k", (n, m), sympy.Symbol("wg"), (4, 4, 4), "float32"))
    guard = cg.add(C.If(sympy.Lt(i, m)), root)
    outer = cg.add(C.ForLoop(i, sympy.Integer(0), sympy.Lt(i, n), sympy.Integer(1)), guard)
    loop = cg.add(C.ForLoop(j, sympy.Integer(0), sympy.Lt(i + j, m), sympy.Integer(1)), outer)
    assert not cg.enters(loop)
    assert cg.parent(cg.root) is None
    with pytest.raises(TypeError, match="not a ForLoop"):
        cg.enters(cg.root)


# --- the golden DOT of the seed's Stream-K control graph --------------------------------------------


def write_golden(path: Path) -> Path:
    """The golden file's content: ``ctgraph.dump`` of the seed example's Stream-K control graph."""
    return ctgraph.dump(seed_kernel("streamk").control, path)


def test_golden_seed_control_streamk(tmp_path):
    assert GOLDEN.exists(), f"{GOLDEN} is missing: run `make golden` (python -m tests.golden.regenerate)"
    fresh = write_golden(tmp_path / GOLDEN.name)
    assert fresh.read_bytes() == GOLDEN.read_bytes(), (
        f"the seed's Stream-K control graph differs from {GOLDEN}; if the change is intended, run "
        "`make golden` (python -m tests.golden.regenerate) and review the diff"
    )


def test_golden_seed_control_streamk_content():
    text = GOLDEN.read_text()
    assert text.startswith("digraph control {")
    for word in (
        "Kernel(name=",
        "ForLoop(counter=forTile,",
        "increment=forK",
        "ForLoop(counter=forK,",
        "LoadTile(tensor=A",
        "LoadTile(tensor=B",
        "Multiply()",
        "StorePartial(",
        "Wait(",
        "AccumulatePartial(",
        "Epilogue(",
        "label=Body",
        "label=Sequence",
        "label=Initialize",
        "label=Increment",
    ):
        assert word in text, word


def test_a_graph_of_a_structure_lowered_before_takes_that_control_graph():
    """Lowering reads the parametrized graph, the macro tile, the dtype and the passes' marks alone: another shape
    of one config takes the control graph lowered before (the same object), equal to a fresh lowering; a shape whose
    tile-row group is ragged, another schedule or another tile lowers anew."""
    from ctgraph import lower
    from ctgraph.params import parametrize

    def compiled(m: int, n: int, k: int, transform: str = "streamk", tile=(128, 128, 64)) -> ctgraph.Kernel:
        return ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile=tile), transform, build=False, raster=8)

    def control(*args) -> C.ControlGraph:
        return lower.lower_to_control(compiled(*args).graph)

    first = control(128 * 16, 1024, 512)
    again = control(128 * 24, 4096, 1000)  # 16 and 24 tile rows: groups of 8 divide both
    assert again is first
    kern = compiled(128 * 24, 4096, 1000)
    params = tuple(sorted(bindings(kern.graph), key=lambda s: s.name))
    fresh = lower._lower(parametrize(kern.graph), "ctgraph_gemm", params)
    assert fresh.structure() == again.structure()
    others = [control(128 * 13, 1024, 512), control(128 * 16, 1024, 512, "dataparallel")]
    others.append(control(128 * 16, 1024, 512, "streamk", (128, 256, 64)))
    assert all(o is not first and o.structure() != first.structure() for o in others)
    chosen = ctgraph.gemm(2048, 1024, 512, macro_tile="auto")  # the selection in its attrs is not read
    assert "auto_selection" in chosen.attrs
    tile = chosen.attrs["gemm"].macro_tile
    plain = ctgraph.gemm(2048, 1024, 512, macro_tile=tile)
    a = lower.lower_to_control(ctgraph.compile(chosen, "dataparallel", build=False).graph)
    assert a is lower.lower_to_control(ctgraph.compile(plain, "dataparallel", build=False).graph)
