"""``python -m ctgraph overhead``: what a Python call costs the host, against ``torch.matmul``.

For each shape, six callers on the same torch tensors, on torch's current stream: ``torch.matmul(a, b, out=d)``
and ``torch.matmul(a, b)`` (cuBLAS; the second allocates its result), a compiled kernel ``kern(a, b, out=d)``, the
same tile as split-K with its reduction kernel (``splitk_reduce``: two launches a call), ``ctgraph.matmul(a, b,
out=d)`` and ``ctgraph.matmul(a, b)``. Three times each (all by :mod:`ctgraph.measure`):

- **kernel**: GPU time per call, by CUDA-graph replay;
- **call**: events around back-to-back Python calls (what a caller sees: the larger of host and GPU time);
- **host**: :func:`ctgraph.measure.host_time`, a burst of calls on an idle GPU timed on the host, per call; the
  median of :data:`ROUNDS` rounds in which every caller runs one burst, so a noisy moment of the host hits them all.

The default shapes: a GEMM with next to nothing to compute (8 x 8 x 8: the launch alone), a ~5 us one and 1024^3.
:func:`host_check` sets the host and call times against those the call objective assumes
(:data:`~ctgraph.select.objective.HOST_CALL`, :data:`~ctgraph.select.objective.HOST_LAUNCH`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

__all__ = ["ROUNDS", "SHAPES", "host_check", "run", "table"]

KERN, SPLIT = "kern(a, b, out=d)", "split-K kern(a, b, out=d)"

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
    g = ctgraph.gemm(m, n, k, macro_tile="auto")
    kern = ctgraph.compile(g, transform="auto", target="cuda")
    layout = kern.selection.config.layout.options() if kern.selection is not None else {}
    split = ctgraph.compile(g, transform="splitk_reduce", target="cuda", **layout)  # the default's tile and layout
    callers: dict[str, Callable[[], Any]] = {
        "torch.matmul(a, b, out=d)": lambda: torch.matmul(a, b, out=d),
        "torch.matmul(a, b)": lambda: torch.matmul(a, b),
        KERN: lambda: kern(a, b, out=d),
        SPLIT: lambda: split(a, b, out=d),
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


def host_check(rows: list[dict[str, Any]]) -> str:
    """What the call objective assumes (:data:`~ctgraph.select.objective.HOST_CALL` a call,
    :data:`~ctgraph.select.objective.HOST_LAUNCH` more for a second launch; fitted on back-to-back calls) against
    this run: the host times of a kernel's call (:data:`KERN`, one launch unless the default chose split-K) and of
    split-K's second launch (:data:`SPLIT` less :data:`KERN`, per shape), and the same two by call time on the shapes
    whose kernels take under half their call (where the host sets the call's time, as the objective prices it)."""
    from ctgraph.select.objective import HOST_CALL, HOST_LAUNCH

    by = {(r["shape"], r["caller"]): r for r in rows}
    shapes = sorted({r["shape"] for r in rows if (r["shape"], KERN) in by and (r["shape"], SPLIT) in by})
    if not shapes:
        return "no shape timed both kern and split-K: nothing to set against the call objective's host times"

    def spans(key: str, among: list[str]) -> str:
        one = [by[s, KERN][key] for s in among]
        two = [by[s, SPLIT][key] - by[s, KERN][key] for s in among]
        return f"{min(one):.1f} to {max(one):.1f} us a call, {min(two):+.1f} to {max(two):+.1f} us for split-K's second"

    bound = [s for s in shapes if all(2 * by[s, c]["kernel_us"] < by[s, c]["call_us"] for c in (KERN, SPLIT))]
    calls = f"; by call time where the host binds, {spans('call_us', bound)}" if bound else ""
    return (
        f"the call objective (ctgraph/select/objective.py) assumes {HOST_CALL * 1e6:.1f} us a call and "
        f"{HOST_LAUNCH * 1e6:.1f} us more for a second launch; here by host time, {spans('host_us', shapes)}{calls}"
    )
