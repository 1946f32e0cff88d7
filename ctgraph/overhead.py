"""``python -m ctgraph overhead``: what a Python call costs the host, against ``torch.matmul``.

For each shape, five callers on the same torch tensors, on torch's current stream: ``torch.matmul(a, b, out=d)``
and ``torch.matmul(a, b)`` (cuBLAS; the second allocates its result), a compiled kernel ``kern(a, b, out=d)``,
``ctgraph.matmul(a, b, out=d)`` and ``ctgraph.matmul(a, b)``. Three times each (all by
:mod:`ctgraph.measure`):

- **kernel**: GPU time per call, by CUDA-graph replay;
- **call**: events around back-to-back Python calls (what a caller sees: the larger of host and GPU time);
- **host**: :func:`ctgraph.measure.host_time`, a burst of calls on an idle GPU timed on the host, per call; the
  median of :data:`ROUNDS` rounds in which every caller runs one burst, so a noisy moment of the host hits them all.

The default shapes: a GEMM with next to nothing to compute (8 x 8 x 8: the launch alone), a ~5 us one and 1024^3.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

__all__ = ["ROUNDS", "SHAPES", "run", "table"]

ROUNDS = 9
SHAPES = ((8, 8, 8), (512, 1024, 2048), (1024, 1024, 1024))


def run(shapes: tuple[tuple[int, int, int], ...] = SHAPES) -> list[dict[str, Any]]:
    """One row per (shape, caller): kernel, call and host microseconds."""
    import torch

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    return [row for shape in shapes for row in _shape(*shape)]


def _shape(m: int, n: int, k: int) -> list[dict[str, Any]]:
    import torch

    import ctgraph
    from ctgraph.measure import call_time, host_time, kernel_time

    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(k, n, device="cuda", dtype=torch.float16)
    d = torch.empty(m, n, device="cuda", dtype=torch.float16)
    kern = ctgraph.compile(ctgraph.gemm(m, n, k, macro_tile="auto"), transform="auto", target="cuda")
    callers: dict[str, Callable[[], Any]] = {
        "torch.matmul(a, b, out=d)": lambda: torch.matmul(a, b, out=d),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
        "kern(a, b, out=d)": lambda: kern(a, b, out=d),
        "ctgraph.matmul(a, b, out=d)": lambda: ctgraph.matmul(a, b, out=d),
        "ctgraph.matmul(a, b)": lambda: ctgraph.matmul(a, b),
    }
    for fn in callers.values():
        fn()
    # NOTE: host time in interleaved rounds, every caller once a round (a noisy moment hits them all), median
    hosts: dict[str, list[float]] = {name: [] for name in callers}
    for _ in range(ROUNDS):
        for name, fn in callers.items():
            hosts[name].append(host_time(fn))
    return [
        {
            "shape": f"{m}x{n}x{k}",
            "caller": name,
            "kernel_us": kernel_time(fn) * 1e6,
            "call_us": call_time(fn) * 1e6,
            "host_us": statistics.median(hosts[name]) * 1e6,
        }
        for name, fn in callers.items()
    ]


def table(rows: list[dict[str, Any]]) -> str:
    """A markdown table; ``host - torch``: the host microseconds above those of ``torch.matmul`` called the same way
    (with ``out=d`` or allocating) for the same shape."""
    torch_host = {(r["shape"], "out=" in r["caller"]): r["host_us"] for r in rows if r["caller"].startswith("torch")}
    lines = [
        "| shape | caller | kernel us | call us | host us | host - torch |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        extra = r["host_us"] - torch_host[r["shape"], "out=" in r["caller"]]
        lines.append(
            f"| {r['shape']} | `{r['caller']}` | {r['kernel_us']:.1f} | {r['call_us']:.1f} | {r['host_us']:.1f} "
            f"| {extra:+.1f} |"
        )
    return "\n".join(lines)
