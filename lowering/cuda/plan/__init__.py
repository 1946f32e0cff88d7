"""Resource plans of the CUDA kernels: macro tile, element type and options -> a frozen record of the kernel's tile
constants, computed once in named steps before anything is printed (:mod:`.mma` for the mma.sync kernel,
:mod:`.hopper` for the wgmma kernel). The emitters (:mod:`lowering.cuda.emit`) print them; the runtime sizes its
launches and workspaces from them.
"""

from __future__ import annotations

from .hopper import MULTICAST_ORDER, HopperPlan, hopper_layout, hopper_plan
from .mma import MmaPlan, layout, mma_plan

__all__ = ["MULTICAST_ORDER", "HopperPlan", "MmaPlan", "hopper_layout", "hopper_plan", "layout", "mma_plan"]
