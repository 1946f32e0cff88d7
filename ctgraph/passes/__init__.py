"""Passes: pure functions ``graph -> new graph`` that attach a GEMM's tile coordinates to hardware.

Each transform is a named pipeline of passes (:data:`PIPELINES`); :func:`transform` runs one, and
with ``CTGRAPH_DUMP=<dir>`` writes the graph after every step as ``<transform>-<i>-<pass>.dot``.
"""

from __future__ import annotations

from collections.abc import Callable

from .. import knobs
from ..counts import split_chunks, split_for_budget, split_sk_dp
from ..graph import CoordinateGraph
from .common import PassOptions
from .dataparallel import dataparallel
from .splitk import splitk, splitk_reduce
from .streamk import flatten_mnk, streamk
from .streamk2tile import streamk2tile, sunder_sk_dp

__all__ = [
    "PIPELINES",
    "TAKES_SK_BATCHES",
    "TAKES_SPLIT",
    "TRANSFORMS",
    "PassOptions",
    "pass_options",
    "split_chunks",
    "split_for_budget",
    "split_sk_dp",
    "transform",
]

Pass = Callable[[CoordinateGraph, PassOptions], CoordinateGraph]

PIPELINES: dict[str, tuple[Pass, ...]] = {
    "dataparallel": (dataparallel,),
    "streamk": (flatten_mnk, streamk),
    "streamk2tile": (flatten_mnk, sunder_sk_dp, streamk2tile),
    "streamk_hybrid": (flatten_mnk, sunder_sk_dp, streamk2tile),  # with PassOptions.sk_batches
    "splitk": (splitk,),  # with PassOptions.split; one workgroup per (tile, K chunk)
    "splitk_reduce": (splitk_reduce,),  # the same, reduced by a second kernel: no spin-waits
}
TAKES_SPLIT = frozenset({"splitk", "splitk_reduce"})
# Transforms whose pipeline reads ``sk_batches`` from the caller (the others fix it).
TAKES_SK_BATCHES = frozenset({"streamk_hybrid"})
# The transforms that run on any grid size g; split-K's grid follows from the shape (tiles x chunks).
TRANSFORMS = tuple(t for t in PIPELINES if t not in TAKES_SPLIT)


def check_transform(name: object) -> str:
    if not isinstance(name, str) or name not in PIPELINES:
        raise ValueError(f"unknown transform {name!r}; valid transforms: {', '.join(PIPELINES)}, or 'auto'")
    return name  # type: ignore[return-value]


def pass_options(
    name: str, workgroups: int, sk_batches: int | None = None, split: int | None = None, raster: int | None = None
) -> PassOptions:
    """The options the pipeline ``name`` runs with. ``sk_batches`` (1 to 6, default 1) is for
    "streamk_hybrid" only: data-parallel plus that many waves of Stream-K work; ``split`` (default 4)
    for "splitk" only: K chunks per output tile; ``raster`` (default 1, row-major) for the persistent
    transforms: output tile rows walked together (:func:`~ctgraph.passes.common.tile_order`)."""
    check_transform(name)
    if sk_batches is not None and name not in TAKES_SK_BATCHES:
        raise ValueError(f"sk_batches applies to {', '.join(sorted(TAKES_SK_BATCHES))}, not to {name!r}")
    if split is not None and name not in TAKES_SPLIT:
        raise ValueError(f"split applies to {', '.join(sorted(TAKES_SPLIT))}, not to {name!r}")
    if raster not in (None, 1) and name in TAKES_SPLIT:
        raise ValueError(f"raster applies to {', '.join(TRANSFORMS)}, not to {name!r} (one workgroup per chunk)")
    batches = (1 if sk_batches is None else sk_batches) if name in TAKES_SK_BATCHES else 2  # streamk2tile: 2
    return PassOptions(workgroups, batches, 4 if split is None else split, 1 if raster is None else raster)


def transform(
    graph: CoordinateGraph,
    name: str,
    workgroups: int,
    sk_batches: int | None = None,
    split: int | None = None,
    raster: int | None = None,
) -> CoordinateGraph:
    """Run the pipeline ``name`` on a GEMM precondition graph with ``workgroups`` workgroups."""
    opts = pass_options(name, workgroups, sk_batches, split, raster)
    steps = PIPELINES[check_transform(name)]
    out = knobs.dump_dir()
    if out is not None:
        from ..dump import dump

        dump(graph, out / f"{name}-0-input.dot")
    for i, step in enumerate(steps, 1):
        graph = step(graph, opts)
        if out is not None:
            dump(graph, out / f"{name}-{i}-{step.__name__}.dot")
    return graph
