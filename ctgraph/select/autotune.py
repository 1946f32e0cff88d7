"""First-call autotune: time the ranker's top candidates of a new shape and keep the winner per device.

``compile(..., transform="auto", autotune=True)`` (or ``CTGRAPH_AUTOTUNE=1``) on a GPU: where the device's entries
(:mod:`ctgraph.select.cache`) hold no config for this shape, the first :data:`TOP` candidates of the ranker are
compiled and timed on random operands (kernel time, :func:`ctgraph.measure.kernel_time`), and the fastest is stored in
the user's cache (``CTGRAPH_CACHE_DIR/autotune/``), where later calls and later processes find it. As Triton's
autotuner: the heuristic proposes, the search times, the result goes to a disk cache keyed by what changes the
answer (device, shape, dtype).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

from .cache import Entry, key, store
from .config import Config
from .target import Target

__all__ = ["TOP", "autotune", "time_configs"]

TOP = 6


def _launch(kern: Any, A: Any, B: Any, D: Any) -> Any:
    import torch

    return kern(A, B, out=D, stream=torch.cuda.current_stream())


def time_configs(
    m: int, n: int, k: int, dtype: str, configs: list[Config], build: Callable[[Config], Any]
) -> dict[Config, float]:
    """Kernel seconds of each config on one set of random operands (infinity where it does not build or run)."""
    from ..deps import require

    require("torch", "autotune and tune")
    import torch

    from ..measure import kernel_time

    torch_dtype = getattr(torch, dtype)
    gen = torch.Generator(device="cuda").manual_seed(0)
    A = torch.randn(m, k, device="cuda", dtype=torch_dtype, generator=gen)
    B = torch.randn(k, n, device="cuda", dtype=torch_dtype, generator=gen)
    D = torch.empty(m, n, device="cuda", dtype=torch_dtype)
    out: dict[Config, float] = {}
    for c in configs:
        try:
            kern = build(c)
            out[c] = kernel_time(partial(_launch, kern, A, B, D))
        except (ValueError, RuntimeError):
            out[c] = math.inf
    return out


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
    times = time_configs(m, n, k, dtype, ranked[:top], build)
    if not any(math.isfinite(t) for t in times.values()):
        raise RuntimeError(f"autotune: none of the ranker's first {top} configs for {m}x{n}x{k} built and ran")
    best = min(times, key=lambda c: (times[c], ranked.index(c)))
    entry = Entry(best, tuple(sorted((c.name, t) for c, t in times.items() if math.isfinite(t))))
    store(target.name, {key(m, n, k, dtype): entry})
    return entry
