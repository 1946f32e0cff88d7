"""First-call autotune: time the ranker's top candidates of a new shape and keep the winner per device.

``compile(..., transform="auto", autotune=True)`` (or ``CTGRAPH_AUTOTUNE=1``) on a GPU: where the device's entries
(:mod:`ctgraph.select.cache`) hold no config for this shape, the first :data:`TOP` candidates of the ranker are
compiled (their nvcc processes at once, :func:`compile_ahead`), then timed on random operands in :data:`ROUNDS`
interleaved rounds (kernel time, :func:`ctgraph.measure.kernel_time`, the median of the rounds), and the fastest is
stored in the user's cache (``CTGRAPH_CACHE_DIR/autotune/``), where later calls and later processes find it. As Triton's
autotuner: the heuristic proposes, the search times, the result goes to a disk cache keyed by what changes the
answer (device, shape, dtype).
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar

from ..arguments import positive_int
from ..config import Config
from ..measure import in_turn
from ..target import Target
from .cache import Entry, key, store

__all__ = ["ROUNDS", "TOP", "autotune", "compile_ahead", "interleaved", "time_configs"]

T = TypeVar("T")

# The ranker's first candidates timed. Against the best of the 12 configs timed per shape in the tune tables (train
# and validation, H100 and H200, 530 shapes), the best of the first 6 runs 0.13-0.61% slower (geomean per table) and
# of the first 8 0.00-0.15%; the 7th or 8th beat the first 6 on 38 of the 530. A third more compile time on a
# shape's first call buys those few tenths of a percent.
TOP = 8
ROUNDS = 3  # interleaved timing rounds a first-call autotune takes the median of


def _launch(kern: Any, A: Any, B: Any, D: Any) -> Any:
    import torch

    return kern(A, B, out=D, stream=torch.cuda.current_stream())


def time_configs(
    m: int, n: int, k: int, dtype: str, configs: list[Config], build: Callable[[Config], Any], rounds: int = 1
) -> dict[Config, float]:
    """Kernel seconds of each config on one set of random operands (infinity where it does not build or run): every
    config is made first (``build(c)``: a kernel not yet built, ``build=False``), all compiled at once
    (:func:`compile_ahead`), then timed in ``rounds`` interleaved rounds (forward, then backward, ...), and each keeps
    the median of its rounds, so neither the compiler's pauses nor the clocks' drift in a run favour one config."""
    from ..deps import require

    require("torch", "autotune and tune")
    import torch

    from ..measure import kernel_time

    torch_dtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=gen)
    B = torch.randn(k, n, device="cuda", dtype=torch_dtype, generator=gen)
    D = torch.empty(m, n, device="cuda", dtype=torch_dtype)
    kernels: dict[Config, Any] = {}
    for c in configs:
        with contextlib.suppress(ValueError, RuntimeError):  # a config that does not build times as infinity
            kernels[c] = build(c)
    compile_ahead(list(kernels.values()))
    times = interleaved(list(kernels), rounds, lambda c: kernel_time(partial(_launch, kernels[c], A, B, D)))
    return {c: times.get(c, math.inf) for c in configs}


def compile_ahead(kernels: list[Any]) -> None:
    """Each kernel's binary compiled before any is timed, the compilers all at once: the programs (their sources)
    are made here one by one (Python, deterministic), then each program's ``cubin()`` runs on a thread of its own,
    which waits on its own nvcc process; the binaries land in the on-disk cache, where the first launch finds
    them. So a first call with ``autotune=True`` waits for about one nvcc, not eight in a row. Kernels whose
    program has no ``cubin`` (other backends) are left alone, and one that fails here fails again, and is timed
    as infinity, when it is launched."""
    programs = []
    for kern in kernels:
        with contextlib.suppress(ValueError, RuntimeError):
            program = kern.program
            if callable(getattr(program, "cubin", None)):
                programs.append(program)
    if len(programs) < 2:
        return

    def cubin(program: Any) -> None:
        with contextlib.suppress(Exception):  # said again, where it matters, by the launch
            program.cubin()

    with ThreadPoolExecutor(max_workers=min(len(programs), os.cpu_count() or 1)) as pool:
        list(pool.map(cubin, programs))


def interleaved(items: list[T], rounds: int, time: Callable[[T], float]) -> dict[T, float]:
    """``time`` each item in ``rounds`` rounds, forward then backward in turn (so drift over a run favours none),
    and keep each item's median (infinity for a round whose timing raised ``ValueError`` or ``RuntimeError``)."""
    positive_int("rounds", rounds)
    samples: dict[T, list[float]] = {x: [] for x in items}
    for r in range(rounds):
        for x in in_turn(items, r):
            try:
                samples[x].append(time(x))
            except (ValueError, RuntimeError):
                samples[x].append(math.inf)
    return {x: statistics.median(v) for x, v in samples.items()}


def autotune(
    m: int,
    n: int,
    k: int,
    dtype: str,
    target: Target,
    ranked: list[Config],
    build: Callable[[Config], Any],
    top: int = TOP,
) -> Entry:
    """Time ``ranked[:top]`` and store the fastest for this shape on ``target``'s device; returns the entry."""
    times = time_configs(m, n, k, dtype, ranked[:top], build, ROUNDS)
    if not any(math.isfinite(t) for t in times.values()):
        raise RuntimeError(f"autotune: none of the ranker's first {top} configs for {m}x{n}x{k} built and ran")
    best = min(times, key=lambda c: (times[c], ranked.index(c)))
    entry = Entry(best, tuple(sorted((c.name, t) for c, t in times.items() if math.isfinite(t))))
    try:
        store(target.name, {key(m, n, k, dtype): entry})
    except OSError as e:  # NOTE: a cache directory this user cannot write: the winner still runs, in this process
        warnings.warn(
            f"autotune: could not store {m}x{n}x{k}'s winner in the autotune cache ({e}); it is used in this process "
            "only (set CTGRAPH_CACHE_DIR to a directory you can write)",
            stacklevel=2,
        )
    return entry
