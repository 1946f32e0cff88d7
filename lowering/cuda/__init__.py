"""The CUDA backend: control graph -> CUDA C++ with inline PTX -> cubin (pycuda's nvcc) -> launch.

This module is the backend's contract with ctgraph (:mod:`ctgraph.backends`): :func:`build` (a
:class:`~lowering.cuda.runtime.CudaProgram`, whose ``source`` needs no GPU; the binary is built on first call or by
``compile(..., build=True)``), :func:`target` (the device as selection sees it), :func:`layout_of` and
:func:`supports` (what the wgmma and mma paths run), :func:`options_from` and :func:`resolve_mainloop`. The pipeline
below it: resource plans (:mod:`.plan`), emitters (:mod:`.emit`), nvcc (:mod:`.nvcc`), the runtime
(:mod:`.runtime`: loading, workspaces, launching; :mod:`.driver`).
"""

from __future__ import annotations

import functools
from typing import Any

from ctgraph.config import Layout, cluster_grid
from ctgraph.target import Target

from .emit import generate as generate  # re-exported: the names this module had before the split
from .options import CudaOptions, options_from
from .plan.hopper import MULTICAST_ORDER, hopper_layout
from .plan.mma import layout
from .runtime import CudaProgram, resolve_mainloop

__all__ = [
    "MULTICAST_ORDER",
    "CudaProgram",
    "build",
    "generate",
    "hopper_layout",
    "layout",
    "layout_of",
    "options_from",
    "resolve_mainloop",
    "supports",
    "target",
]


def build(kernel: Any) -> CudaProgram:
    prog = CudaProgram(kernel)
    if kernel.options.get("build", True):
        prog.build()
    return prog


def layout_of(macro_tile: tuple[int, int, int], dtype: str, options: dict[str, Any]) -> Layout | None:
    """The cluster layout the wgmma path runs ``macro_tile`` on with these options (``cluster=0``, ``multicast=None``
    and ``swap=None`` resolved as :func:`~lowering.cuda.plan.hopper.hopper_layout` does), or None where it does not
    fit:
    what selection asks to keep every candidate valid for its path."""
    try:
        opts = options_from(options)
        lay = hopper_layout(macro_tile, dtype, opts)
    except ValueError:
        return None
    cluster, grid = lay["CLUSTER"], (lay["CLUSTER_M"], lay["CLUSTER_N"])
    fits = [mc for mc in MULTICAST_ORDER if (mc in ("a", "b") or cluster >= 4) and cluster_grid(cluster, mc) == grid]
    multicast = opts.multicast or fits[0]
    return Layout(cluster, multicast, bool(lay["SWAP"]))


@functools.lru_cache(maxsize=4096)
def supports(macro_tile: tuple[int, int, int], dtype: str, cluster_layout: Layout, path: str) -> bool:
    """Whether ``path`` runs ``macro_tile`` on exactly ``cluster_layout``: the wgmma kernel's layout, or one CTA on
    the mma.sync paths (``"vector"``, ``"scalar"``). Remembered: a pure function of its arguments, asked of ~70
    candidates a shape, most of them asked before."""
    if path == "wgmma":
        return layout_of(macro_tile, dtype, cluster_layout.options()) == cluster_layout
    if cluster_layout != Layout():
        return False
    try:
        layout(macro_tile, dtype, CudaOptions(mainloop="mma"))
    except ValueError:
        return False
    return True


def target() -> Target:
    """The current device as selection sees it (:func:`lowering.cuda.device.device_target`)."""
    from .device import device_target

    return device_target()
