"""Make the pictures of docs/streamk.md: ``python docs/make_figures.py`` (writes docs/img/).

Everything is drawn for the seed example of seed 004 (160 x 192 x 4096, 16 x 16 x 8 macro tiles: 10 x 12
output tiles, 512 k-iterations each, 32 workgroups):

- ``img/<graph>.svg``: the precondition graph and the graphs after the data-parallel and Stream-K
  transforms, dumped with :func:`ctgraph.dump` (needs graphviz's ``dot``). The two-tile graph is
  ``docs/streamk2tile.svg`` (made the same way, kept beside the README).
- ``img/schedule_<transform>.png``: ``kern.schedule()`` as a picture. x is the iteration slot inside a
  workgroup, y the workgroup, the colour the output tile; a black triangle marks a workgroup that starts
  a tile past k == 0 (it stores a partial for the fixup), a white one a workgroup that stops before the
  tile's last k-iteration (it owns the tile and adds the partials of the workgroups after it).

The output is deterministic: same code, same files (no dates, fixed SVG ids, fixed colours).
"""

from __future__ import annotations

import colorsys
import shutil
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D

import ctgraph
from ctgraph.params import bindings

HERE = Path(__file__).resolve().parent
IMG = HERE / "img"

SEED = {"m": 160, "n": 192, "k": 4096, "macro_tile": (16, 16, 8), "dtype": "float16"}
WORKGROUPS = 32
DPI = 90

plt.rcParams.update({"svg.hashsalt": "ctgraph", "font.size": 9})


def tile_colour(tile: int) -> tuple[float, float, float]:
    """A fixed colour per output tile; neighbouring tiles get far-apart hues (golden-ratio steps)."""
    hue = (tile * 0.618033988749895) % 1.0
    light = (0.45, 0.62, 0.78)[tile % 3]
    return colorsys.hls_to_rgb(hue, light, 0.65)


def seams(work: list[tuple[int, int, int]], kt: int) -> tuple[list[int], list[int]]:
    """Slots where a workgroup starts a tile past k == 0, and slots where it leaves a tile before k == Kt-1."""
    starts, stops = [], []
    for i, (m, n, k) in enumerate(work):
        if (i == 0 or work[i - 1][:2] != (m, n)) and k != 0:
            starts.append(i)
        if (i == len(work) - 1 or work[i + 1][:2] != (m, n)) and k != kt - 1:
            stops.append(i)
    return starts, stops


def schedule_figure(kern: ctgraph.Kernel, path: Path) -> None:
    sched = kern.schedule()
    mt, nt, kt = kern.problem.tiles
    g = len(sched)
    width = max(len(w) for w in sched)
    img = np.ones((g, width, 3))  # white: no work
    for wg, work in enumerate(sched):
        for i, (m, n, _) in enumerate(work):
            img[wg, i] = tile_colour(m * nt + n)

    fig, ax = plt.subplots(figsize=(9.5, 3.9))
    ax.imshow(img, aspect="auto", interpolation="nearest", extent=(0, width, g - 0.5, -0.5))
    owners: dict[tuple[int, int], set[int]] = {}  # output tile -> the workgroups that work on it
    for wg, work in enumerate(sched):
        for m, n, _ in work:
            owners.setdefault((m, n), set()).add(wg)
        starts, stops = seams(work, kt)
        ax.scatter(starts, [wg] * len(starts), marker=">", s=24, c="black", zorder=3, clip_on=False)
        ax.scatter([s + 1 for s in stops], [wg] * len(stops), marker="<", s=24, c="white",
                   edgecolors="black", linewidths=0.6, zorder=3, clip_on=False)
    shared = sum(1 for w in owners.values() if len(w) > 1)

    sizes = {s.name: v for s, v in bindings(kern.graph).items()}
    if "numSKTilesPerWG" in sizes:  # two-tile: the DP section starts after the SK iterations
        ax.axvline(sizes["numSKTilesPerWG"], color="black", lw=1, ls="--")
        ax.text(sizes["numSKTilesPerWG"] / 2, -1.2, "SK section", ha="center")
        ax.text(sizes["numSKTilesPerWG"] + sizes["numDPTilesPerWG"] / 2, -1.2, "DP section", ha="center")

    per_wg = [len(w) for w in sched]
    ax.set_title(f"{kern.transform}: {mt} x {nt} = {mt * nt} output tiles, Kt = {kt}, g = {g}\n"
                 f"iterations per workgroup {min(per_wg)}..{max(per_wg)}, "
                 f"output tiles shared by several workgroups: {shared}", pad=16)
    ax.set_xlabel("iteration slot within the workgroup (one slot = one BM x BN x BK multiply-accumulate)")
    ax.set_ylabel("workgroup")
    ax.set_xlim(-0.015 * width, 1.015 * width)  # room for the seam markers at both ends
    ax.set_yticks(range(0, g, 4))
    legend = [
        Line2D([], [], marker=">", ls="", color="black", label="starts mid-tile (stores a partial)"),
        Line2D([], [], marker="<", ls="", markerfacecolor="white", markeredgecolor="black",
               label="stops mid-tile (owner: adds the partials)"),
    ]
    ax.legend(handles=legend, loc="upper right", bbox_to_anchor=(1.0, -0.13), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=DPI, metadata={"Software": None})
    plt.close(fig)


def main() -> int:
    IMG.mkdir(exist_ok=True)
    g = ctgraph.gemm(**SEED)
    have_dot = shutil.which("dot") is not None
    if have_dot:
        print(f"wrote {ctgraph.dump(g, IMG / 'gemm.svg')}")
    else:
        print("graphviz 'dot' not found: skipping the graph SVGs", file=sys.stderr)
    for transform in ctgraph.TRANSFORMS:
        kern = ctgraph.compile(g, transform=transform, workgroups=WORKGROUPS, target="cpu")
        if have_dot and transform != "streamk2tile":  # that one is docs/streamk2tile.svg
            print(f"wrote {ctgraph.dump(kern.graph, IMG / f'{transform}.svg')}")
        path = IMG / f"schedule_{transform}.png"
        schedule_figure(kern, path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
