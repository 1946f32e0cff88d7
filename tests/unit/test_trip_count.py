"""The K loop's trip count on the CUDA path: the guess of where a workgroup's run of one tile ends
(``lowering.cuda.emit.base.trip_guess``) against the schedule, and the emitted search (whole range, guess, bisection)
exact for any guess."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import sympy

import ctgraph
from ctgraph import control as C
from ctgraph.evaluate import evaluate, lambdify
from ctgraph.params import bindings
from lowering.cuda.emit.base import trip_guess

F = sympy.Symbol("f_", integer=True, nonnegative=True)


def _k_loop(kern) -> C.ForLoop:
    loops = [n for t, _ in kern.control.walk() if isinstance(n := kern.control[t], C.ForLoop) and n.extent is not None]
    assert len(loops) == 1
    return loops[0]


def _runs(schedule: list) -> list[tuple[int, int, int, int]]:
    """``(workgroup, start, tile m, tile n, length)`` of each run of one tile in a workgroup's iterations."""
    out = []
    for wg, its in enumerate(schedule):
        start = 0
        for (m, n), run in itertools.groupby(its, key=lambda it: it[:2]):
            length = len(list(run))
            out.append((wg, start, m, n, length))
            start += length
    return out


@pytest.mark.parametrize(
    ("shape", "tile", "workgroups", "raster"),
    [
        ((1000, 300, 1000), (128, 128, 64), 7, 1),
        ((4928, 152, 5936), (128, 160, 64), 66, 3),
        ((2000, 2000, 700), (128, 256, 64), 13, 1),
        ((1387, 3000, 640), (128, 128, 64), 24, 8),  # 11 tile rows: a ragged last group
        ((64, 64, 64), (64, 64, 64), 5, 1),  # more workgroups than iterations
    ],
)
def test_the_guess_is_where_each_run_of_a_tile_ends_in_stream_k(shape, tile, workgroups, raster):
    kern = ctgraph.compile(
        ctgraph.gemm(*shape, macro_tile=tile),
        transform="streamk",
        target="cuda",
        build=False,
        workgroups=workgroups,
        raster=raster,
    )
    loop = _k_loop(kern)
    cond = loop.condition.subs(loop.counter, F)
    guess = trip_guess(cond, F)
    assert guess is not None and guess == trip_guess.__wrapped__(cond, F)  # remembered, as a fresh guess
    values = {s.name: v for s, v in bindings(kern.graph).items()}
    extent = int(evaluate(loop.extent, values))
    holds, ends = lambdify(cond), lambdify(guess)
    f = np.arange(extent)
    for wg, start, m, n, length in _runs(kern.schedule()):
        at = {**values, "wg": wg, "forTile": start, "m": m, "n": n}
        row = holds(**{k: v for k, v in {**at, "f_": f}.items() if k in holds.names})
        assert list(row) == [x < length for x in f], (wg, start)  # a prefix, as the emitter assumes
        g = int(ends(**{k: v for k, v in at.items() if k in ends.names}))
        assert length == extent or min(extent - 1, g) == length, (wg, start, g, length)


def _search(holds, extent: int, guess: int) -> tuple[int, int]:
    """The emitted search (``Emitter._trip_count``) in Python: ``(count, tests)``."""
    tests = 0

    def test(f: int) -> bool:
        nonlocal tests
        tests += 1
        return holds(f)

    lo, hi = 0, extent
    if hi > 0 and test(hi - 1):
        lo = hi
    if lo < hi:
        g = min(hi - 1, guess)
        if g >= 0:
            if g > 0 and not test(g - 1):
                hi = g - 1
            elif test(g):
                lo = g + 1
            else:
                lo = hi = g
    while lo < hi:
        f = (lo + hi) >> 1
        if test(f):
            lo = f + 1
        else:
            hi = f
    return lo, tests


@pytest.mark.parametrize("extent", [1, 2, 3, 7, 16, 93])
def test_the_search_is_exact_for_any_guess(extent):
    for count in range(extent + 1):
        for guess in range(-2, extent + 3):
            got, tests = _search(lambda f, count=count: f < count, extent, guess)
            assert got == count, (extent, count, guess)
            if guess == count or count == extent:
                assert tests <= 3  # the whole range, or the guess's two tests
