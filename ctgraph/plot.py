"""Pictures: a kernel's schedule, a held-out run against cuBLAS, and the ranker on measured tables.

**Schedules.** ``plot_schedule(kern, path)`` draws ``kern.schedule()``: x is the iteration slot inside a
workgroup, y the workgroup, the colour the output tile. A black triangle marks a workgroup that starts a tile past
k == 0 (it stores a partial for the fixup); a white one marks a workgroup that leaves a tile before its last
k-iteration (it owns the tile and adds the partials of the workgroups after it). Dashed lines separate the sections
of the graph (Stream-K, then data-parallel).

**Held-out runs.** ``plot_heldout(rows, path)`` draws the rows of a ``python -m ctgraph heldout`` CSV
(:func:`ctgraph.heldout.read`): each shape's kernel-time ratio (cuBLAS / ctgraph, log scale) against its
multiply-adds, coloured by the transform chosen and shaped by its kind (:func:`ctgraph.heldout.kind`), with the
geomean and p10 as lines and the worst shapes numbered and named.

**The ranker.** ``plot_fit(points, path)`` draws :func:`ctgraph.select.fit.predictions`: left, every timed
config's measured seconds against the ranker's price (log-log, coloured by transform, the config it ranks first
ringed in black); right, per shape, the measured seconds of that first config over the fastest timed (the regret)
against the shape's multiply-adds.

All need matplotlib (the ``plot`` extra); the output is deterministic (no dates in the file, fixed colours and SVG
ids).
"""

from __future__ import annotations

import colorsys
import contextlib
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .deps import require
from .expr import to_int
from .schedule import sections

__all__ = ["picture_path", "plot_fit", "plot_heldout", "plot_schedule", "seams", "tile_colour"]

SUFFIXES = (".png", ".svg", ".pdf")
META = {".png": {"Software": None}, ".svg": {"Date": None}, ".pdf": {"CreationDate": None}}  # no dates
TRANSFORM_COLOURS = {
    "dataparallel": "#1f77b4",
    "splitk_reduce": "#2ca02c",
    "streamk": "#9467bd",
    "streamk_hybrid": "#ff7f0e",
    "streamk2tile": "#d62728",
}
KIND_MARKERS = {"skinny": "^", "small": "o", "large": "s"}
RATIO_TICKS = (0.25, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.2, 1.5, 2.0, 3.0, 4.0)


def picture_path(path: str | Path, what: str = "plot path") -> Path:
    """``path`` as a picture's file: a ValueError naming ``what`` unless it ends in .png, .svg or .pdf."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"{what} must end in .png, .svg or .pdf, got {str(path)!r}")
    return path


@contextlib.contextmanager
def _figure(path: Path, dpi: int, **subplots: Any) -> Iterator[tuple[Any, Any]]:
    """A figure and its axes (``plt.subplots(**subplots)``) in one fixed style, saved to ``path`` when the block ends
    (no dates in the file: same figure, same bytes), and closed either way."""
    import matplotlib.pyplot as plt

    with plt.rc_context({"svg.hashsalt": "ctgraph", "font.size": 9}):
        fig, axes = plt.subplots(**subplots)
        try:
            yield fig, axes
            fig.tight_layout()
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, dpi=dpi, metadata=META[path.suffix.lower()])
        finally:
            plt.close(fig)


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
    path = picture_path(path, "plot_schedule path")
    matplotlib = require("matplotlib", "plot_schedule")  # MissingDependency: pip install 'ctgraph[plot]'
    matplotlib.use("Agg")
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

    with _figure(path, dpi, figsize=(9.5, max(3.0, min(8.0, 1.5 + 0.08 * g)))) as (_, ax):
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
    return path


def _macs(row: dict[str, Any]) -> int:
    return int(row["m"]) * int(row["n"]) * int(row["k"])


def _transform(config: str) -> str:
    """The transform of a config's name (``"64x64x64 2b/swap splitk_reduce/s2 g66 r1"`` -> ``splitk_reduce``)."""
    parts = config.split()
    return parts[2].split("/")[0] if len(parts) > 2 else ""


def plot_heldout(rows: list[dict[str, Any]], path: str | Path, title: str = "", worst: int = 5, dpi: int = 90) -> Path:
    """Draw a held-out run's ``rows`` to ``path`` (.png, .svg or .pdf; module docstring)."""
    from .heldout import kind, summary
    from .select.shapes import shape_of

    path = picture_path(path, "heldout --plot")
    done = [r for r in rows if math.isfinite(r["kernel_ratio"]) and r["kernel_ratio"] > 0]
    if not done:
        raise ValueError("heldout plot: no shape with a finite kernel ratio to draw")
    matplotlib = require("matplotlib", "heldout --plot")  # MissingDependency: pip install 'ctgraph[plot]'
    matplotlib.use("Agg")
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    s = summary(done)
    ratios = [r["kernel_ratio"] for r in done]
    worst_rows = sorted(done, key=lambda r: r["kernel_ratio"])[:worst]
    with _figure(path, dpi, figsize=(8, 4.5)) as (_, ax):
        for r in done:
            colour = TRANSFORM_COLOURS.get(_transform(str(r.get("config", ""))), "#7f7f7f")
            shape = KIND_MARKERS[kind(*shape_of(r))]
            ax.scatter(_macs(r), r["kernel_ratio"], s=22, marker=shape, color=colour, alpha=0.8, linewidths=0)
        for i, r in enumerate(worst_rows, 1):  # numbered here, named in the legend
            ax.annotate(str(i), (_macs(r), r["kernel_ratio"]), fontsize=7, xytext=(4, -3), textcoords="offset points")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(
            FixedLocator([t for t in RATIO_TICKS if min(ratios) / 1.1 <= t <= max(ratios) * 1.1])
        )
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.yaxis.set_minor_locator(NullLocator())
        for y, style in ((1.0, "-"), (s["geomean"], "--"), (s["p10"], ":")):
            ax.axhline(y, color="black", lw=0.8, ls=style)
        ax.set_xlabel("multiply-adds m n k")
        ax.set_ylabel("cuBLAS time / ctgraph time (kernel)")
        head = f"{title}: " if title else ""
        ax.set_title(f"{head}{s['shapes']} shapes, geomean {s['geomean']:.3f}x, p10 {s['p10']:.2f}x", fontsize=10)
        handles = [Line2D([], [], marker="o", ls="", color=c, label=t) for t, c in TRANSFORM_COLOURS.items()]
        handles += [Line2D([], [], marker=mk, ls="", color="#555555", label=k) for k, mk in KIND_MARKERS.items()]
        handles += [
            Line2D([], [], color="black", lw=0.8, ls=ls, label=w) for w, ls in (("geomean", "--"), ("p10", ":"))
        ]
        handles += [
            Line2D([], [], ls="", label=f"{i}: {r['m']}x{r['n']}x{r['k']} {r['kernel_ratio']:.2f}x")
            for i, r in enumerate(worst_rows, 1)
        ]
        ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    return path


def plot_fit(
    points: list[tuple[str, Any, float, float, bool]], path: str | Path, title: str = "", dpi: int = 90
) -> Path:
    """Draw the ranker's ``points`` (:func:`ctgraph.select.fit.predictions`) to ``path`` (module docstring)."""
    from .select.cache import parse_key

    path = picture_path(path, "fit --plot")
    if not points:
        raise ValueError("fit plot: no timed config to draw")
    matplotlib = require("matplotlib", "fit --plot")
    matplotlib.use("Agg")
    from matplotlib.lines import Line2D

    fastest: dict[str, float] = {}
    for key, _, _, measured, _ in points:
        fastest[key] = min(measured, fastest.get(key, math.inf))
    chosen = [(key, measured / fastest[key]) for key, _, _, measured, first in points if first]
    regrets = [r for _, r in chosen]
    geomean = math.exp(sum(map(math.log, regrets)) / len(regrets))
    with _figure(path, dpi, ncols=2, figsize=(10, 4.5)) as (fig, (left, right)):
        groups: dict[str, list[tuple[float, float]]] = {}
        for _, config, predicted, measured, _ in points:  # one scatter per transform, in a fixed order
            groups.setdefault(config.transform, []).append((predicted * 1e6, measured * 1e6))
        for transform in sorted(groups):
            x, y = zip(*groups[transform], strict=True)
            colour = TRANSFORM_COLOURS.get(transform, "#7f7f7f")
            left.scatter(x, y, s=10, color=colour, alpha=0.5, linewidths=0)
        x, y = zip(*[(p * 1e6, m * 1e6) for _, _, p, m, first in points if first], strict=True)
        left.scatter(x, y, s=24, facecolors="none", edgecolors="black", lw=0.6)
        low = min(min(p, m) for _, _, p, m, _ in points) * 1e6
        high = max(max(p, m) for _, _, p, m, _ in points) * 1e6
        left.plot([low, high], [low, high], color="black", lw=0.8)
        left.set_xscale("log")
        left.set_yscale("log")
        left.set_xlabel("the ranker's price (us)")
        left.set_ylabel("measured (us)")
        handles = [Line2D([], [], marker="o", ls="", color=c, label=t) for t, c in TRANSFORM_COLOURS.items()]
        handles.append(Line2D([], [], marker="o", ls="", mfc="none", mec="black", label="ranked first"))
        left.legend(handles=handles, fontsize=7, frameon=False, loc="upper left")
        shapes = [parse_key(key.rsplit(":", 1)[-1]) for key, _ in chosen]  # keys of several tables: "table:key"
        right.scatter([m * n * k for m, n, k, _ in shapes], regrets, s=14, color="#1f77b4", alpha=0.7, linewidths=0)
        right.axhline(geomean, color="black", lw=0.8, ls="--")
        right.set_xscale("log")
        right.set_xlabel("multiply-adds m n k")
        right.set_ylabel("first config / fastest timed (regret)")
        head = f"{title}: " if title else ""
        fig.suptitle(f"{head}{len(points)} timings, {len(chosen)} shapes, regret geomean {geomean:.4f}", fontsize=10)
    return path
