"""Schedule pictures: which workgroup computes which (tile, k-range), sections, and fixup seams.

``plot_schedule(kern, path)`` draws ``kern.schedule()``: x is the iteration slot inside a workgroup,
y the workgroup, the colour the output tile. A black triangle marks a workgroup that starts a tile
past k == 0 (it stores a partial for the fixup); a white one marks a workgroup that leaves a tile
before its last k-iteration (it owns the tile and adds the partials of the workgroups after it).
Dashed lines separate the sections of the graph (Stream-K, then data-parallel). Needs matplotlib
(the ``plot`` extra); the output is deterministic (no dates in the file, fixed colours and SVG ids).
"""

from __future__ import annotations

import colorsys
from pathlib import Path
from typing import Any

from .deps import require
from .expr import to_int
from .schedule import sections

__all__ = ["plot_schedule", "seams", "tile_colour"]


def tile_colour(tile: int) -> tuple[float, float, float]:
    """A fixed colour per output tile; neighbouring tiles get far-apart hues (golden-ratio steps)."""
    hue = (tile * 0.618033988749895) % 1.0
    light = (0.45, 0.62, 0.78)[tile % 3]
    return colorsys.hls_to_rgb(hue, light, 0.65)


def seams(work: list[tuple[int, int, int]], kt: int) -> tuple[list[int], list[int]]:
    """Slots where a workgroup starts a tile past k == 0, and slots where it leaves one before k == Kt-1."""
    starts, stops = [], []
    for i, (m, n, k) in enumerate(work):
        if (i == 0 or work[i - 1][:2] != (m, n)) and k != 0:
            starts.append(i)
        if (i == len(work) - 1 or work[i + 1][:2] != (m, n)) and k != kt - 1:
            stops.append(i)
    return starts, stops


def plot_schedule(kern: Any, path: str | Path, dpi: int = 90) -> Path:
    """Draw the schedule of ``kern`` (a :class:`ctgraph.Kernel`) to ``path`` (.png, .svg or .pdf)."""
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg", ".pdf"):
        raise ValueError(f"plot_schedule path must end in .png, .svg or .pdf, got {str(path)!r}")
    matplotlib = require("matplotlib", "plot_schedule")  # MissingDependency: pip install 'ctgraph[plot]'
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.lines import Line2D

    sched = kern.schedule()
    mt, nt, kt = kern.problem.tiles
    g = len(sched)
    width = max(1, max(len(w) for w in sched))
    img = np.ones((g, width, 3))  # white: no work
    owners: dict[tuple[int, int], set[int]] = {}
    for wg, work in enumerate(sched):
        for i, (m, n, _) in enumerate(work):
            img[wg, i] = tile_colour(m * nt + n)
            owners.setdefault((m, n), set()).add(wg)
    shared = sum(1 for w in owners.values() if len(w) > 1)

    with plt.rc_context({"svg.hashsalt": "ctgraph", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(9.5, max(3.0, min(8.0, 1.5 + 0.08 * g))))
        ax.imshow(img, aspect="auto", interpolation="nearest", extent=(0, width, g - 0.5, -0.5))
        for wg, work in enumerate(sched):
            starts, stops = seams(work, kt)
            ax.scatter(starts, [wg] * len(starts), marker=">", s=24, c="black", zorder=3, clip_on=False)
            ax.scatter(
                [s + 1 for s in stops],
                [wg] * len(stops),
                marker="<",
                s=24,
                c="white",
                edgecolors="black",
                linewidths=0.6,
                zorder=3,
                clip_on=False,
            )
        secs = sections(kern.graph)
        if len(secs) > 1:  # a section's per-workgroup range, one after the other
            x = 0
            for sec in secs:
                size = to_int(kern.graph.size(sec.for_tile))
                ax.text(x + size / 2, -0.9 - 0.01 * g, f"{sec.name} section", ha="center")
                x += size
                ax.axvline(x, color="black", lw=1, ls="--")
        per_wg = [len(w) for w in sched]
        ax.set_title(
            f"{kern.transform}: {mt} x {nt} = {mt * nt} output tiles, Kt = {kt}, g = {g}\n"
            f"iterations per workgroup {min(per_wg)}..{max(per_wg)}, "
            f"output tiles shared by several workgroups: {shared}",
            pad=16,
        )
        ax.set_xlabel("iteration slot within the workgroup (one slot = one BM x BN x BK multiply-accumulate)")
        ax.set_ylabel("workgroup")
        ax.set_xlim(-0.015 * width, 1.015 * width)
        ax.set_yticks(range(0, g, max(1, g // 8)))
        legend = [
            Line2D([], [], marker=">", ls="", color="black", label="starts mid-tile (stores a partial)"),
            Line2D(
                [],
                [],
                marker="<",
                ls="",
                markerfacecolor="white",
                markeredgecolor="black",
                label="stops mid-tile (owner: adds the partials)",
            ),
        ]
        ax.legend(handles=legend, loc="upper right", bbox_to_anchor=(1.0, -0.13), ncol=2, frameon=False)
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        meta = {".png": {"Software": None}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}
        fig.savefig(path, dpi=dpi, metadata=meta[path.suffix.lower()])  # no dates: byte-identical files
        plt.close(fig)
    return path
