"""The seed example of the design (seed 004): 10 x 12 output tiles, 512 k-iterations, 32 workgroups.

Builds the GEMM graph (160 x 192 x 4096 with 16 x 16 x 8 macro tiles), runs every transform, prints
the schedule summary, writes the graphs to ``--out`` (DOT always; SVG when graphviz's ``dot`` is
installed), and runs the kernels on the CPU against numpy.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

import numpy as np

import ctgraph
from ctgraph.summary import summarize


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="out", help="directory for the dumps")
    ap.add_argument("--no-run", action="store_true", help="only compile and dump, do not execute")
    args = ap.parse_args()
    out = Path(args.out)
    m, n, k = 160, 192, 4096
    g = ctgraph.gemm(m, n, k, macro_tile=(16, 16, 8), dtype="float16")
    ctgraph.dump(g, out / "gemm.dot")
    rng = np.random.default_rng(0)
    A = rng.standard_normal((m, k)).astype(np.float16)
    B = rng.standard_normal((k, n)).astype(np.float16)
    C = rng.standard_normal((m, n)).astype(np.float16)
    ref = 1.5 * (A.astype(np.float64) @ B.astype(np.float64)) + 0.5 * C.astype(np.float64)
    for transform in ctgraph.TRANSFORMS:
        kern = ctgraph.compile(g, transform=transform, workgroups=32, target="cpu")
        print(summarize(kern))
        ctgraph.dump(kern.graph, out / f"{transform}.dot")
        if shutil.which("dot"):
            ctgraph.dump(kern.graph, out / f"{transform}.svg")
        if not args.no_run:
            t0 = time.perf_counter()
            D = kern(A, B, C, alpha=1.5, beta=0.5)
            dt = time.perf_counter() - t0
            err = np.abs(D.astype(np.float64) - ref).max() / np.abs(ref).max()
            print(f"ran on the CPU in {dt * 1e3:.1f} ms; max relative error vs numpy float64: {err:.2e}")
            assert err < 1e-2, f"{transform}: error {err} too large"
        print()
    print(f"dumps written to {out}/")


if __name__ == "__main__":
    main()
