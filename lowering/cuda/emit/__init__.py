"""Emitters of the CUDA backend: a control graph -> one CUDA C++ translation unit with an ``extern "C" __global__``
entry point per kernel, printed from each kernel's resource plan (:mod:`lowering.cuda.plan`). The shared base
(:mod:`.base`) prints the control graph; :mod:`.mma` adds the mma.sync kernel, :mod:`.hopper` the wgmma kernel.
"""

from __future__ import annotations

from ctgraph import control as C

from ..divisors import fast_divisors
from ..options import CudaOptions
from .base import Emitter
from .hopper import HopperEmitter
from .mma import MmaEmitter

__all__ = ["Emitter", "HopperEmitter", "MmaEmitter", "generate"]


def generate(cg: C.ControlGraph, opts: CudaOptions) -> str:
    """One CUDA C++ translation unit with an entry point per kernel of the control graph (byte-identical for
    the same graph and options)."""
    templates: set[str] = set()
    divisors = fast_divisors(cg)  # NOTE: of the whole unit: its kernels share one parameter list
    parts: list[Emitter]
    if opts.mainloop == "wgmma":
        parts = [HopperEmitter(cg, opts, tag, templates, divisors) for tag in cg.kernels]
    else:
        templates |= {"cp_async_commit", "cp_async_wait"}
        parts = [MmaEmitter(cg, opts, tag, templates, divisors) for tag in cg.kernels]
    bodies = "\n".join(p.body for p in parts)
    return parts[0].prelude(bodies) + bodies
