"""Make the pictures of the docs: ``python docs/make_figures.py`` (writes docs/img/).

Everything is drawn for the seed example of seed 004 (160 x 192 x 4096, 16 x 16 x 8 macro tiles: 10 x 12
output tiles, 512 k-iterations each, 32 workgroups):

- ``img/<graph>.svg``: the precondition graph and the graphs after the data-parallel and Stream-K
  transforms, dumped with :func:`ctgraph.dump` (needs graphviz's ``dot``). The two-tile graph is
  ``docs/streamk2tile.svg`` (made the same way, kept beside the README).
- ``img/schedule_<transform>.png``: ``kern.schedule()`` as a picture, drawn by
  :func:`ctgraph.plot_schedule` (see :mod:`ctgraph.plot` for what the marks mean).

and the held-out runs of docs/benchmarks.md, from their CSVs in ``docs/results/``:

- ``img/heldout_<set>_<device>.png``: :func:`ctgraph.plot.plot_heldout` of ``results/heldout-<set>-<device>.csv``.

and the shipped ranker on the H200's validation tables (``results/retime-h200/tune-h200*-validation.json``, its
lambda and tree count chosen on them):

- ``img/ranker_h200.png``: :func:`ctgraph.plot.plot_fit` of :func:`ctgraph.select.fit.table_predictions`, as
  ``python -m ctgraph fit --report TABLES --plot PATH`` draws it.

The output is deterministic: same code, same files (no dates, fixed SVG ids, fixed colours).
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import ctgraph
from ctgraph import heldout
from ctgraph.plot import plot_fit, plot_heldout, plot_schedule
from ctgraph.select.cache import Table
from ctgraph.select.fit import table_predictions
from ctgraph.select.model import load_correction

HERE = Path(__file__).resolve().parent
IMG = HERE / "img"

SEED = {"m": 160, "n": 192, "k": 4096, "macro_tile": (16, 16, 8), "dtype": "float16"}
WORKGROUPS = 32
HELDOUT = (("test", "h100"), ("llm", "h100"), ("test", "h200"), ("llm", "h200"))
DPI = 90


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
        plot_schedule(kern, path, dpi=DPI)
        print(f"wrote {path}")
    for name, device in HELDOUT:
        rows = heldout.read(HERE / "results" / f"heldout-{name}-{device}.csv")
        title = f"{name} (held out), {device.upper()}"
        print(f"wrote {plot_heldout(rows, IMG / f'heldout_{name}_{device}.png', title, dpi=DPI)}")
    validation = sorted((HERE / "results" / "retime-h200").glob("tune-h200*-validation.json"))
    tables = [Table.from_json(path.read_text()) for path in validation]
    points = table_predictions(tables, load_correction("sm90"))
    title = "the shipped ranker, H200 validation tables"
    print(f"wrote {plot_fit(points, IMG / 'ranker_h200.png', title, dpi=DPI)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
