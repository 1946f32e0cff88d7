"""The Hopper (sm_90a) kernel of the CUDA backend: TMA + mbarrier ring, ``wgmma``, warp specialization (a producer
warpgroup and consumer warpgroups), clusters with multicast, ping-pong and swapped tiles. Its design is in
docs/hopper.md; this module gathers its names: the resource plan (:mod:`lowering.cuda.plan.hopper`) and the
emitter (:mod:`lowering.cuda.emit.hopper`), where they are defined.
"""

from __future__ import annotations

from .emit.base import loads_tiles
from .emit.hopper import R_UNROLL, WATCHDOG_NS, HopperEmitter, k_start
from .plan.hopper import (
    A_STAGE_MIN_BYTES,
    D_BUFFERS,
    EARLY_RELEASE_CONSUMERS,
    MAX_STAGES,
    MULTICAST_ORDER,
    REGISTERS,
    SMEM_LIMIT,
    SPARE_REGS,
    SPARE_REGS_BLOCKS,
    HopperPlan,
    accumulator_budget,
    accumulators_fit,
    d_tail_box,
    hopper_layout,
    hopper_plan,
    launch_registers,
    reduction_launch,
    register_split,
    row_blocks,
    swizzle_bytes,
)

HopperCodegen = HopperEmitter  # the emitter's former name

__all__ = [
    "A_STAGE_MIN_BYTES",
    "D_BUFFERS",
    "EARLY_RELEASE_CONSUMERS",
    "MAX_STAGES",
    "MULTICAST_ORDER",
    "REGISTERS",
    "R_UNROLL",
    "SMEM_LIMIT",
    "SPARE_REGS",
    "SPARE_REGS_BLOCKS",
    "WATCHDOG_NS",
    "HopperCodegen",
    "HopperEmitter",
    "HopperPlan",
    "accumulator_budget",
    "accumulators_fit",
    "d_tail_box",
    "hopper_layout",
    "hopper_plan",
    "k_start",
    "launch_registers",
    "loads_tiles",
    "reduction_launch",
    "register_split",
    "row_blocks",
    "swizzle_bytes",
]
