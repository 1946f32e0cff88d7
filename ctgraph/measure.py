"""One public timer for every benchmark, tuner and calibration (as Triton's ``do_bench``).

- :func:`kernel_time`: GPU time per call from a CUDA graph of ``reps`` back-to-back calls, replayed; the median of
  :data:`SAMPLES` replays (host dispatch excluded: what the kernel costs).
- :func:`call_time`: CUDA events around back-to-back Python calls filling at least :data:`FILL_S`; the median of
  :data:`SAMPLES` (what a Python caller sees, dispatch included).
- :func:`host_time`: ``time.perf_counter`` around one burst of :data:`BURST` calls started on an idle GPU (the host's
  own cost per call, whatever the kernel takes: a burst this short never fills the launch queue).
- :func:`in_turn`: the order of the things a round times, reversed every other round.

Both need torch and a GPU; ``fn`` launches on torch's current stream.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["BURST", "FILL_S", "SAMPLES", "call_time", "host_time", "in_turn", "kernel_time"]

T = TypeVar("T")

SAMPLES = 7
FILL_S = 2e-3
BURST = 100


def call_time(fn: Callable[[], Any]) -> float:
    """Seconds per call of ``fn`` as a Python caller sees it (module docstring)."""
    import torch

    fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    reps = max(1, min(1000, math.ceil(FILL_S / max(start.elapsed_time(end) * 1e-3, 1e-7))))
    samples = []
    for _ in range(SAMPLES):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1e-3 / reps)
    return statistics.median(samples)


def host_time(fn: Callable[[], Any]) -> float:
    """Host seconds per call of ``fn`` over one burst of :data:`BURST` calls started on an idle GPU."""
    import torch

    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(BURST):
        fn()
    elapsed = time.perf_counter() - t
    torch.cuda.synchronize()
    return elapsed / BURST


def kernel_time(fn: Callable[[], Any], reps: int = 10) -> float:
    """GPU seconds per call of ``fn`` from a CUDA graph of ``reps`` calls (module docstring)."""
    import torch

    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        fn()  # allocations (workspace, flags) happen outside the capture
        fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    # NOTE: no garbage collection from the capture to the last sample. During the capture one could free an old
    # kernel's pycuda buffer, and a cuMemFree while a stream captures invalidates the capture; between a start
    # event and its replay, a collection's pause would be idle GPU time in the sample. Disabled, not collected
    # first: a full collection of ctgraph's heap costs about 0.1 s, more than timing a small kernel (torch's own
    # capture stopped collecting for the same reason), and what it would free is freed at the next one anyway.
    gc.disable()
    try:
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(reps):
                fn()
        graph.replay()
        for _ in range(SAMPLES):
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e-3 / reps)
    finally:
        gc.enable()
    return statistics.median(samples)


def in_turn(items: Sequence[T], round_: int) -> list[T]:
    """``items`` in the order timing round ``round_`` (from 0) takes them: forward in even rounds, backward in odd
    ones. Timed always in one order, the first item always meets the clocks a quiet GPU has and the last the heat
    the others left (at 8192^3 the H100 draws near its power limit); in turn, over an even number of rounds, each
    meets both alike (over three, the first item is first twice)."""
    return list(items) if round_ % 2 == 0 else list(items)[::-1]
