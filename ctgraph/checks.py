"""Argument checks of :func:`ctgraph.compile` that are not a pass's: ``build``, index range, grid size.

They run in the front end, before any pass, so a bad call fails at once with a message that names
the argument:

- ``build`` is a bool (``build="no"`` would be true);
- every index a kernel forms fits a 64-bit integer with room to add two of them: the element counts
  ``m*k``, ``k*n``, ``m*n`` and the iteration count ``T*Kt`` (output tiles x k-iterations) are below
  :data:`INDEX_LIMIT` = 2**62;
- the grid ``g`` is at most :data:`GRID_LIMIT` (2**31 - 1, CUDA's grid and a 32-bit workgroup id), and a
  grid that leaves workgroups idle (``g > T*Kt``) at most :data:`IDLE_GRID_LIMIT` (65,536, above the
  resident CTA count of any GPU): a workgroup costs a workspace tile and a flag whether it works or not,
  so ``workgroups=10**6`` on a small GEMM would allocate tens of GiB for nothing.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .counts import INDEX_LIMIT, check_counts, element_counts
from .gemm import GemmProblem

__all__ = ["GRID_LIMIT", "IDLE_GRID_LIMIT", "INDEX_LIMIT", "check_build", "check_grid", "check_index_range"]

GRID_LIMIT = 2**31 - 1
IDLE_GRID_LIMIT = 2**16


def check_build(options: dict[str, Any]) -> bool:
    """``options["build"]`` (default True) as a bool; a ``TypeError`` for anything but True or False."""
    build = options.get("build", True)
    if not isinstance(build, bool | np.bool_):
        raise TypeError(f"build must be True or False, got {build!r}")
    if "build" in options:
        options["build"] = bool(build)
    return bool(build)


def check_index_range(p: GemmProblem) -> None:
    """``ValueError`` when an index of this GEMM could overflow the kernels' 64-bit integers."""
    mt, nt, kt = p.tiles
    counts = element_counts(p.m, p.n, p.k) | {"iterations (output tiles x k-iterations)": mt * nt * kt}
    check_counts(p.m, p.n, p.k, counts, " (a larger macro tile reduces the iteration count)")


def check_grid(p: GemmProblem, workgroups: int) -> int:
    """``workgroups`` where the grid is within :data:`GRID_LIMIT` and any idle part within :data:`IDLE_GRID_LIMIT`."""
    mt, nt, kt = p.tiles
    work = mt * nt * kt
    if workgroups > GRID_LIMIT:
        raise ValueError(f"workgroups must be at most 2**31 - 1 = {GRID_LIMIT} (a CUDA grid), got {workgroups}")
    if workgroups > max(work, IDLE_GRID_LIMIT):
        raise ValueError(
            f"workgroups={workgroups} is more than this GEMM's {work} iterations ({mt} x {nt} output tiles x {kt} "
            f"k-iterations): at least {workgroups - work} workgroups would have nothing to do, and a grid above "
            f"{IDLE_GRID_LIMIT} must give every workgroup work; pass at most {max(work, IDLE_GRID_LIMIT)}"
        )
    return workgroups
