"""How well does ``macro_tile="auto"`` pick? Time every candidate tile on a set of shapes, then score the model.

``--measure shapes.csv`` (GPU, torch): for each shape, every tile of :data:`ctgraph.tiles.CANDIDATES` under
each of ``--policies`` (kernel time by CUDA graph replay, as the benchmark) and cuBLAS, one CSV row each.
``--evaluate sweep.csv`` (no GPU): each tile's time is its best policy's; the model's tile
(:func:`ctgraph.tiles.choose_tile`) is scored against cuBLAS and against the best tile of each shape, as
geomeans, separately for the shapes listed in ``--heldout``. docs/bench/tile-sweep.csv is the sweep behind
the Stream-K fixup constants of :mod:`ctgraph.tiles` (docs/benchmarks.md)::

    python examples/tile_sweep.py --evaluate docs/bench/tile-sweep.csv --heldout docs/bench/heldout-shapes.csv
"""

from __future__ import annotations

import argparse
import csv
import math
from collections import defaultdict
from pathlib import Path

import ctgraph
from ctgraph.bench import geomean, read_shapes
from ctgraph.policy import BY_NAME, tile_name
from ctgraph.tiles import CANDIDATES, choose_tile

FIELDS = ("m", "n", "k", "tile", "policy", "workgroups", "us")
POLICIES = ("dataparallel/resident", "streamk2tile/model", "splitk_reduce/model")


def measure(shapes: list[tuple[int, int, int]], policies: tuple[str, ...], out: Path) -> None:
    import torch
    from tqdm import tqdm

    from ctgraph.bench import _kernel_time
    from ctgraph.tune import time_policy

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for m, n, k in tqdm(shapes, unit="shape"):
            A = torch.randn(m, k, device="cuda", dtype=torch.float16)
            B = torch.randn(k, n, device="cuda", dtype=torch.float16)
            D = torch.empty(m, n, device="cuda", dtype=torch.float16)
            us = _kernel_time(lambda A=A, B=B, D=D: torch.matmul(A, B, out=D), reps=10) * 1e6
            w.writerow({"m": m, "n": n, "k": k, "tile": "cublas", "policy": "cublas", "workgroups": 0, "us": us})
            for tile in CANDIDATES:
                g = ctgraph.gemm(m, n, k, macro_tile=tile)
                for name in policies:
                    timed = time_policy(g, BY_NAME[name], A, B, D)
                    if timed is None:  # split-K with more tiles than workgroups
                        continue
                    row = {"m": m, "n": n, "k": k, "tile": tile_name(tile), "policy": name}
                    w.writerow(row | {"workgroups": timed[1], "us": timed[0] * 1e6})
            f.flush()


def evaluate(sweep: Path, heldout: set[tuple[int, int, int]]) -> dict[str, tuple[float, float, int]]:
    """``{set: (model's tile / cuBLAS, best tile / cuBLAS, shapes)}``: geomean speed ratios."""
    best: dict[tuple[int, int, int], dict[str, float]] = defaultdict(dict)
    with open(sweep) as f:
        for r in csv.DictReader(f):
            shape, us = (int(r["m"]), int(r["n"]), int(r["k"])), float(r["us"])
            best[shape][r["tile"]] = min(us, best[shape].get(r["tile"], math.inf))
    scores: dict[str, tuple[list[float], list[float]]] = {"swept": ([], []), "held out": ([], [])}
    for shape, times in best.items():
        cublas = times.pop("cublas")
        chosen = times["x".join(map(str, choose_tile(*shape)))]
        model, oracle = scores["held out" if shape in heldout else "swept"]
        model.append(cublas / chosen)
        oracle.append(cublas / min(times.values()))
    return {name: (geomean(a), geomean(b), len(a)) for name, (a, b) in scores.items() if a}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--measure", metavar="SHAPES", help="CSV of m,n,k to sweep on this GPU")
    ap.add_argument("--out", default="out/tile-sweep.csv", help="where --measure writes")
    ap.add_argument("--policies", nargs="+", default=POLICIES, choices=sorted(BY_NAME), help="policies per tile")
    ap.add_argument("--evaluate", metavar="SWEEP", help="score the tile model on a sweep CSV")
    ap.add_argument("--heldout", metavar="SHAPES", help="CSV of m,n,k scored apart (shapes no fit has seen)")
    args = ap.parse_args()
    if not (args.measure or args.evaluate):
        ap.error("give --measure SHAPES (GPU) or --evaluate SWEEP")
    if args.measure:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        measure(read_shapes(args.measure), tuple(args.policies), out)
        print(f"wrote {out}")
    if args.evaluate:
        heldout = set(read_shapes(args.heldout)) if args.heldout else set()
        for name, (model, oracle, count) in evaluate(Path(args.evaluate), heldout).items():
            print(f"{name} ({count} shapes): model's tile {model:.3f}x cuBLAS, best tile {oracle:.3f}x")


if __name__ == "__main__":
    main()
