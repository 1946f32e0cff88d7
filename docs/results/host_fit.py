"""The call objective's host times, fitted on measured calls (docs/decisions.md, 2026-12-05; no GPU).

``CTGRAPH_OBJECTIVE=call`` prices a config by ``max(HOST_CALL + (launches - 1) * HOST_LAUNCH, kernel)``
(``ctgraph/select/objective.py``). Every ``heldout`` CSV here holds, per shape, both kernels' times (``ours_us``,
``cublas_us``, CUDA-graph replay) and the ratio of their back-to-back call times (``call_ratio``), timed in the same
run. So the same form, with torch's own host time ``H_t`` for cuBLAS, predicts each row's call ratio::

    call_ratio = max(H_t, cublas_us) / max(H_o + (launches - 1) * H_l, ours_us)

and ``(H_t, H_o, H_l)`` are fitted by least squares on the log of the ratio, on a grid of 0.5 us, over the rows
whose kernels both take under 40 us (where the host can bind), of every CSV of a device but the quoted sets'
(``heldout-*``, ``anchors-*``), their shapes (test, llm, anchors, corpus) left out wherever a probe timed them too.
A bootstrap over the shapes (seeded) gives the 10th to 90th percentiles of each.

    python docs/results/host_fit.py              # H100 and H200
    python docs/results/host_fit.py --boot 100   # more bootstrap draws (default 40)
    python docs/results/host_fit.py OUT/*.csv    # these CSVs alone (a run on today's host path), as one device
"""

import argparse
import csv
from pathlib import Path

import numpy as np

import ctgraph.select.shapes as S

RESULTS = Path(__file__).resolve().parent
SHORT_US = 40.0
GRID = np.arange(0.0, 20.01, 0.5)  # us


def probes(device: str) -> list[Path]:
    """The device's probe CSVs here, the quoted sets' runs left out."""
    return [f for f in sorted(RESULTS.glob(f"*{device}*.csv")) if not f.name.startswith(("heldout-", "anchors-"))]


def rows(files: list[Path]) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """``(call_ratio, ours_us, cublas_us, launches)`` per row of ``files``, and each row's shape."""
    held = set(S.sets()["test"]) | set(S.llm_shapes()) | S.benchmark_shapes()
    out, shapes = [], []
    for f in files:
        with open(f) as fh:
            for r in csv.DictReader(fh):
                try:
                    shape, ratio = S.shape_of(r), float(r["call_ratio"])
                    ours, cublas = float(r["ours_us"]), float(r["cublas_us"])
                except (KeyError, ValueError):  # not a heldout CSV, or a row that did not run
                    continue
                if shape in held or not (ratio > 0 and 0 < ours < SHORT_US and 0 < cublas < SHORT_US):
                    continue
                out.append((ratio, ours, cublas, 2 if "splitk_reduce" in r["config"] else 1))
                shapes.append(shape)
    return np.array(out), shapes


def fit(data: np.ndarray, weights: np.ndarray) -> tuple[float, float, float]:
    """The ``(H_t, H_o, H_l)`` of :data:`GRID` with the least weighted mean square log error (ties: the first)."""
    ratio, ours, cublas, launches = data.T
    num = np.log(np.maximum(GRID[:, None], cublas[None, :]))  # [H_t, row]
    den = np.log(np.maximum(GRID[:, None, None] + (launches - 1)[None, None, :] * GRID[None, :, None], ours))
    best = (np.inf, 0.0, 0.0, 0.0)
    for t, top in enumerate(num):
        err = (((np.log(ratio) - top)[None, None, :] + den) ** 2 * weights).sum(-1)  # [H_o, H_l]
        o, lau = np.unravel_index(int(np.argmin(err)), err.shape)
        if err[o, lau] < best[0]:
            best = (float(err[o, lau]), float(GRID[t]), float(GRID[o]), float(GRID[lau]))
    return best[1:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csvs", nargs="*", type=Path, help="heldout CSVs to fit alone (default: every probe here)")
    ap.add_argument("--boot", type=int, default=40, help="bootstrap draws over the shapes (default 40)")
    args = ap.parse_args()
    sources = {"given": args.csvs} if args.csvs else {device: probes(device) for device in ("h100", "h200")}
    for device, files in sources.items():
        data, shapes = rows(files)
        if not len(data):
            print(f"{device}: no rows")
            continue
        keys = sorted(set(shapes))
        at = {s: i for i, s in enumerate(keys)}
        member = np.array([at[s] for s in shapes])
        h = fit(data, np.ones(len(data)))
        rng, draws = np.random.default_rng(0), []
        for _ in range(args.boot):
            counts = np.bincount(rng.integers(0, len(keys), len(keys)), minlength=len(keys))
            draws.append(fit(data, counts[member].astype(float)))
        q = np.percentile(np.array(draws), [10, 90], axis=0) if draws else np.full((2, 3), np.nan)
        split = int((data[:, 3] == 2).sum())
        print(f"{device}: {len(data)} rows ({split} split-K) of {len(keys)} shapes")
        for i, name in enumerate(("H_t (torch a call)", "H_o (ctgraph a call)", "H_l (a second launch)")):
            print(f"  {name:22s} {h[i]:4.1f} us   bootstrap 10-90%: {q[0, i]:.1f} to {q[1, i]:.1f}")


if __name__ == "__main__":
    main()
