"""Schedule arithmetic as selection reads it: a re-export of :mod:`ctgraph.counts`, its one home.

Kept so that ``from ctgraph.select.counts import ...`` keeps working; new code imports :mod:`ctgraph.counts`.
"""

from __future__ import annotations

from ..counts import (
    in_step,
    k_iterations,
    output_tiles,
    padding,
    sk_tiles,
    split_sk_dp,
    step_grids,
    tile_counts,
    waves,
)

__all__ = [
    "in_step",
    "k_iterations",
    "output_tiles",
    "padding",
    "sk_tiles",
    "split_sk_dp",
    "step_grids",
    "tile_counts",
    "waves",
]
