"""``lower_to_control``: a transformed GEMM coordinate graph -> the kernel's control graph.

The program has the shape of seed 004's pseudo-code, once per section (SK, then DP)::

    for (forTile = 0; <every dimension on the walk from (wg, forTile, 0) in bounds>; forTile += forK)
        m, n, kStart = <reverse walk from (wg, forTile, 0)>
        acc = 0
        for (forK = 0; <walk from (wg, forTile, forK) in bounds> && same (m, n) tile; forK += 1)
            k = <reverse walk from (wg, forTile, forK)>
            load A tile (m, k), load B tile (k, n)        (addresses and masks: walks to User(A), User(B))
            acc += A_tile @ B_tile
        fixup, then D = alpha*acc + beta*C                (walk to User(D))

Every index is read off the graph -- parametrized first, so sizes are kernel parameters and one
program serves every shape. Nothing here is specific to a transform: sections, loops and bounds come
from :mod:`ctgraph.schedule` and :meth:`CoordinateGraph.walk`.

Fixup -- the one choice of who writes a shared tile (:data:`OWNER`): **the split that holds k == 0**
(seed 004). A workgroup's range is contiguous, so only its *first* tile can start past k == 0: each
workgroup produces at most one partial per section, kept in workspace slot ``wg`` with flag ``wg``, and
the senders of a tile are the workgroups ``owner+1 .. last`` right after its owner. They add up in a
tree of radix ``R =`` :data:`FIXUP_RADIX` over workgroup ids (:func:`fixup_parent`), so the owner's wait is
``O(log_R P)`` partials deep for ``P`` senders instead of ``P``::

    parent(q) = q with its lowest nonzero base-R digit cleared   if that is a sender of the tile, else the owner

    sender q:  for s = 1, R, R^2, ... while R*s divides q:
                   for c = q + s, q + 2s, .. < q + R*s while c is a sender:   acc += partial[c]
               partial[q] = acc; flag[q] = 1
    owner o:   for s = 1, R, R^2, ... < workgroups:
                   for r = o - o % s + s, + s, .. not a multiple of R*s, while r is a sender:   acc += partial[r]
               write D

The owner's roots at level ``s`` are the senders whose parent, ``o - o % (R*s)``, is not above ``o``: the
multiples of ``s`` in ``(o, o - o % (R*s) + R*s)``. They grow along both loops, so the first one that is not a
sender ends the walk. A level costs a store, a flag round trip and a load of each child's partial, and the
store and round trip cost more than a load (the H100: ~2400 clocks to publish a 64 x 128 partial, ~300 to
load it), so a radix of 4 beats a binary tree where many parts of a tile end together (Stream-K on fewer
tiles than workgroups: 1.02-1.07x on seven long-K shapes, docs/benchmarks.md).

Every sender is added exactly once, by its parent, after waiting for its flag; the order is fixed, so
results are bit-identical from run to run. Waits only point at higher workgroup ids of the same tile,
whose first work that tile is, so they cannot form a cycle. Whoever adds a partial resets its flag to
0 for the next launch. Sections the passes mark as whole-tile (data-parallel) get no fixup at all.

The control graph is a function of the parametrized graph's structure, the macro tile, the dtype and the
schedule's marks (``whole_tiles``, ``reduce``) alone, so a shape whose graph has the structure of one lowered
before (a config seen at another size) takes that control graph (:data:`_LOWERED`); callers read it, never change
it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import replace

import sympy

from . import control as C
from .cache import LRU
from .dimensions import Linear, MacroTileIndex, MacroTileNumber, SubDimension, User, Workgroup
from .expr import Mod, index, to_int
from .graph import CoordinateGraph
from .params import bindings, parametrize
from .passes.common import output_tile_numbers
from .schedule import Section, section_walk, sections, tile_coords

__all__ = [
    "FIXUP_RADIX",
    "OWNER",
    "fixup_dependencies",
    "fixup_parent",
    "launch_grids",
    "lower_to_control",
    "partial_slots",
]

OWNER = "first split (holds k == 0)"
FIXUP_RADIX = 4  # children per node of the fixup tree at each level (see the module docstring)
_LOWERED: LRU[C.ControlGraph] = LRU(256)  # (parametrized structure, tile, dtype, marks, name) -> control graph


def fixup_parent(sender: int, owner: int, senders: set[int]) -> int:
    """The workgroup that adds ``sender``'s partial: ``sender`` with its lowest nonzero base-:data:`FIXUP_RADIX`
    digit cleared, when that is one of the tile's ``senders`` above ``owner``, else the owner (see the module
    docstring)."""
    level = 1
    while sender > 0 and sender % (FIXUP_RADIX * level) == 0:
        level *= FIXUP_RADIX
    parent = sender - sender % (FIXUP_RADIX * level)
    return parent if parent > owner and parent in senders else owner


def fixup_dependencies(schedule: list[list[tuple[int, int, int]]]) -> list[tuple[int, int]]:
    """``(producer, consumer)`` workgroup pairs: the consumer waits for the producer's partial and adds it.

    The tile's owner is the workgroup that runs its k == 0 iteration (:data:`OWNER`); the other workgroups
    on the tile send their partials up the tree of :func:`fixup_parent`.
    """
    owner = {(m, n): wg for wg, work in enumerate(schedule) for m, n, k in work if k == 0}
    senders: dict[tuple[int, int], set[int]] = {}
    for wg, work in enumerate(schedule):
        for m, n, _ in work:
            if owner[m, n] != wg:
                senders.setdefault((m, n), set()).add(wg)
    deps = {(q, fixup_parent(q, owner[t], s)) for t, s in senders.items() for q in s}
    return sorted(deps)


def _tensor_access(
    g: CoordinateGraph, tensor: str, tiles: tuple[sympy.Expr, sympy.Expr], shape: tuple[int, int]
) -> tuple[sympy.Symbol, sympy.Symbol, tuple[int, int], sympy.Expr, sympy.Expr]:
    """``(row, col, shape, address, mask)`` for element ``(row, col)`` of tile ``tiles`` of ``tensor``."""
    row, col = index("i"), index("j")
    values = {}
    for d, (tile, elem) in enumerate(zip(tiles, (row, col), strict=True)):
        values[g.find(MacroTileNumber, tensor=tensor, dim=d)] = tile
        values[g.find(MacroTileIndex, tensor=tensor, dim=d)] = elem
    user = g.find(User, tensor=tensor)
    w = g.walk(values, [user])
    # NOTE: the mask bounds the tensor's axes; the flat User index is then in range by construction.
    axes = [g.find(SubDimension, tensor=tensor, dim=d) for d in (0, 1)]
    return row, col, shape, w[user], sympy.And(*w.in_bounds(axes))


def _tile_origin(g: CoordinateGraph, tensor: str, tiles: tuple[sympy.Expr, sympy.Expr]) -> tuple[sympy.Expr, ...]:
    """The tensor coordinates (row, column) of element (0, 0) of tile ``tiles``: a bulk copy's box origin."""
    values = {}
    for d, tile in enumerate(tiles):
        values[g.find(MacroTileNumber, tensor=tensor, dim=d)] = tile
        values[g.find(MacroTileIndex, tensor=tensor, dim=d)] = sympy.Integer(0)
    axes = [g.find(SubDimension, tensor=tensor, dim=d) for d in (0, 1)]
    w = g.walk(values, axes)
    return tuple(w[a] for a in axes)


def lower_to_control(graph: CoordinateGraph, name: str = "ctgraph_gemm") -> C.ControlGraph:
    """The control graph of a transformed GEMM graph (see the module docstring)."""
    params = tuple(sorted(bindings(graph), key=lambda s: s.name))
    g = parametrize(graph)
    return _LOWERED.made(_lowering_key(g, name, params), lambda: _lower(g, name, params))


def _lowering_key(g: CoordinateGraph, name: str, params: tuple[sympy.Symbol, ...]) -> Hashable:
    """What :func:`_lower` reads of ``g`` (module docstring): its nodes and arcs, sizes as parameters, the problem's
    macro tile and dtype (not its sizes) and the other marks the passes left (not the selection that chose it)."""
    nodes, arcs, _ = g.structure()
    p = g.attrs["gemm"]
    marks = tuple(sorted((k, v) for k, v in g.attrs.items() if k not in ("gemm", "auto_selection")))
    return nodes, arcs, p.macro_tile, p.dtype, marks, name, params


def _lower(g: CoordinateGraph, name: str, params: tuple[sympy.Symbol, ...]) -> C.ControlGraph:
    """The control graph of the parametrized graph ``g``: a kernel of each section's loops, then the reduction."""
    p = g.attrs["gemm"]
    wg = index("wg")
    cg = C.ControlGraph()
    root = cg.add(C.Kernel(name, params, wg, p.macro_tile, p.dtype))
    slot = 0
    for sec in sections(g):
        _lower_section(cg, root, g, sec, wg, slot_base=slot)
        if not sec.whole_tiles:
            slot += 1
    if g.attrs.get("reduce"):
        _lower_reduction(cg, g, C.Kernel(f"{name}_reduce", params, wg, p.macro_tile, p.dtype))
    return cg


def _lower_reduction(cg: C.ControlGraph, g: CoordinateGraph, kernel: C.Kernel) -> None:
    """The second kernel of a separately reduced split-K: one workgroup per output tile adds its
    chunks' partials in chunk order (bit-reproducible) and writes D. No flags, no waits."""
    bm, bn, _ = g.attrs["gemm"].macro_tile
    reducer = g.find(Workgroup, section=g.attrs["reduce"])
    root = cg.add(replace(kernel, grid=g.size(reducer)))
    m_a, n_b = output_tile_numbers(g)
    tc = tile_coords(g)
    w = g.walk({reducer: kernel.workgroup}, [tc.m, tc.n])
    m, n, chunk = index("m"), index("n"), index("chunk")
    cg.add(C.Assign(m, w[tc.m]), root)
    cg.add(C.Assign(n, w[tc.n]), root)
    cg.add(C.ZeroAccumulator(), root)
    chunks, units = g.find(Linear, name="K chunk"), g.find(Linear, name="split-K units")
    # NOTE: the partial of (m, n, chunk) sits in the slot of the workgroup that made it: its unit index.
    slot = g.walk({m_a: m, n_b: n, chunks: chunk}, [units], "forward")[units]
    loop = cg.add(C.ForLoop(chunk, sympy.Integer(0), sympy.Lt(chunk, g.size(chunks)), sympy.Integer(1)), root)
    cg.add(C.AccumulatePartial(slot), loop)
    cg.add(C.Epilogue(*_tensor_access(g, "D", (m, n), (bm, bn)), origin=_tile_origin(g, "D", (m, n))), root)


def launch_grids(cg: C.ControlGraph, graph: CoordinateGraph, workgroups: int) -> list[tuple[str, int]]:
    """``(kernel name, workgroups to launch)`` for each kernel of the program, in launch order."""
    values = bindings(graph)
    out = []
    for tag in cg.kernels:
        k: C.Kernel = cg[tag]  # type: ignore[assignment]
        out.append((k.name, workgroups if k.grid is None else to_int(sympy.sympify(k.grid).xreplace(values))))
    return out


def partial_slots(graph: CoordinateGraph) -> int:
    """How many workspace tiles (and flags) the fixup needs: one per workgroup per section that shares tiles."""
    return sum(0 if s.whole_tiles else to_int(graph.size(s.workgroup)) for s in sections(graph))


def _lower_section(
    cg: C.ControlGraph, root: int, g: CoordinateGraph, sec: Section, wg: sympy.Symbol, slot_base: int
) -> None:
    bm, bn, bk = g.attrs["gemm"].macro_tile
    tc = tile_coords(g)
    tiles = [tc.m, tc.n, tc.k]
    sfx = f"_{sec.name.lower()}" if sec.name else ""
    ft, fk = index(f"forTile{sfx}"), index(f"forK{sfx}")
    m, n, k, k0 = index("m"), index("n"), index("k"), index("kStart")

    first = section_walk(g, sec, wg, ft, sympy.Integer(0), tiles)
    outer = cg.add(C.ForLoop(ft, sympy.Integer(0), sympy.And(*first.in_bounds(tiles)), fk), root)
    fixup_here = not sec.whole_tiles and not g.attrs.get("reduce")
    for sym, tag in ((m, tc.m), (n, tc.n), (k0, tc.k))[: 3 if fixup_here else 2]:
        cg.add(C.Assign(sym, first[tag]), outer)
    cg.add(C.ZeroAccumulator(), outer)

    it = section_walk(g, sec, wg, ft, fk, tiles)
    same_tile = [sympy.Eq(it[tc.m], m), sympy.Eq(it[tc.n], n)]
    inner_cond = sympy.And(*it.in_bounds(tiles), *same_tile)
    # NOTE: the inner loop stays in one output tile, so it runs at most |k tiles| times.
    extent = sympy.Min(g.size(sec.for_k), g.size(tc.k))
    inner = cg.add(C.ForLoop(fk, sympy.Integer(0), inner_cond, sympy.Integer(1), extent=extent), outer)
    cg.add(C.Assign(k, it[tc.k]), inner)
    for x, tile, shape in (("A", (m, k), (bm, bk)), ("B", (k, n), (bk, bn))):
        cg.add(C.LoadTile(x, *_tensor_access(g, x, tile, shape), origin=_tile_origin(g, x, tile)), inner)
    cg.add(C.Multiply(), inner)

    epilogue = C.Epilogue(*_tensor_access(g, "D", (m, n), (bm, bn)), origin=_tile_origin(g, "D", (m, n)))
    if sec.whole_tiles:
        cg.add(epilogue, outer)
        return
    workgroups = g.size(sec.workgroup)
    slot = wg + slot_base * workgroups
    if g.attrs.get("reduce"):  # every split stores its partial; the reduction kernel adds them
        cg.add(C.StorePartial(slot), outer)
        return
    pw = section_walk(g, sec, index("peer"), sympy.Integer(0), sympy.Integer(0), tiles)

    def shares(q: sympy.Expr) -> sympy.Expr:
        """Workgroup ``q`` is a sender of this tile: its first iteration lies in tile ``(m, n)``."""
        w = {index("peer"): q}
        same = (sympy.Eq(pw[tc.m].xreplace(w), m), sympy.Eq(pw[tc.n].xreplace(w), n))
        return sympy.And(sympy.Lt(q, workgroups), *(c.xreplace(w) for c in pw.in_bounds(tiles)), *same)

    def collect(parent: int, q: sympy.Expr) -> None:
        """Wait for sender ``q``'s partial, add it, reset its flag for the next launch."""
        theirs = q + slot_base * workgroups
        cg.add(C.Wait(theirs, 1), parent)
        cg.add(C.AccumulatePartial(theirs), parent)
        cg.add(C.Signal(theirs, 0), parent)

    r = FIXUP_RADIX
    send = cg.add(C.If(sympy.Ne(k0, 0)), outer)
    stride, child = index(f"stride{sfx}"), index(f"child{sfx}")
    # a sender's children: wg + j*stride (j = 1 .. r-1) for stride = 1, r, r^2, ... while r*stride divides wg
    strides = C.ForLoop(
        stride, sympy.Integer(1), sympy.And(sympy.Eq(Mod(wg, r * stride), 0), shares(wg + stride)), (r - 1) * stride
    )
    kids = C.ForLoop(child, wg + stride, sympy.And(sympy.Lt(child, wg + r * stride), shares(child)), stride)
    collect(cg.add(kids, cg.add(strides, send)), child)
    cg.add(C.StorePartial(slot), send)
    cg.add(C.Signal(slot, 1), send)
    own = cg.add(C.If(sympy.Eq(k0, 0)), outer)
    level, root = index(f"level{sfx}"), index(f"root{sfx}")
    # NOTE: the owner's roots at a level are the multiples of it above wg and below the next multiple of
    # r*level; the first is top, the next multiple of level above wg. wg has roots at this level unless its
    # base-r digit there is r-1 (then top is a multiple of r*level). Roots grow along the walk, so the first
    # one that does not share the tile ends it (instead of testing every level up to the workgroup count).
    top = wg - Mod(wg, level) + level
    has_roots = sympy.Lt(Mod(wg, r * level), (r - 1) * level)
    walk = sympy.And(sympy.Lt(level, workgroups), sympy.Or(sympy.Not(has_roots), shares(top)))
    roots = C.ForLoop(root, top, sympy.And(sympy.Ne(Mod(root, r * level), 0), shares(root)), level)
    # NOTE: after the K loop fk is this workgroup's iteration count on the tile; an owner that ran all
    # |k tiles| of them shares the tile with nobody and skips the walk (one compare instead of a sender test).
    shared = cg.add(C.If(sympy.Lt(fk, g.size(tc.k))), own)
    collect(cg.add(roots, cg.add(C.ForLoop(level, sympy.Integer(1), walk, (r - 1) * level), shared)), root)
    cg.add(epilogue, own)
