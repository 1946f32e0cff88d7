"""Offline trials of the ranker's model on the tune tables, no GPU (docs/decisions.md, 2026-12-04).

Refits the correction on the tables of the shipped fit with the kernel-hash check bypassed (their timings predate
0c28b21, so nothing here may be shipped) and prints the regrets: train, validation, the analytic model alone, and
the tables outside the fit. ``--p P`` takes a K step's time as the p-norm of the model's bounds instead of their
largest; ``--h200-only`` fits the H200's tables alone.

    python docs/results/offline_fit_trials.py            # the model as shipped
    python docs/results/offline_fit_trials.py --p 4 --h200-only
"""

import argparse
import math
from pathlib import Path

import ctgraph.select.fit as F
import ctgraph.select.model as M
from ctgraph.select.cache import Table
from ctgraph.target import known_target

RESULTS = Path(__file__).resolve().parent
# the pairs of the shipped fit's command, in its order (the trees' bagging follows the rows' order)
PAIRS = ["h200-2", "h100", "h100-smallm", "h200", "h200-midm", "h200-swap64", "h200-thin", "h200-m128", "h200-m16"]
PAIRS += ["h200-l2edge", "h200-narrowmid"]
H100 = {"h100", "h100-smallm"}
OUTSIDE = ["h200-midm-probe", "h200-m128-probe", "h200-general-train", "h200-general-validation"]
OUTSIDE += ["h200-large-train", "h200-large-validation"]


def table(name: str) -> Table:
    return Table.from_json((RESULTS / f"tune-{name}.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=float, help="the p-norm of the bounds (default: their largest, as shipped)")
    ap.add_argument("--h200-only", action="store_true", help="fit the H200's tables alone")
    args = ap.parse_args()
    if args.p:
        p = args.p

        def iteration(c, m, n, k, dtype, target, active, shared):  # model._iteration's
            return sum(t**p for t in M._terms(c, m, n, k, dtype, target, active, shared)) ** (1 / p)

        M._iteration = iteration
    F._timed_on_these = lambda tables, kernels: None  # NOTE: the old timings, knowingly: a trial, never shipped
    pairs = [p for p in PAIRS if not (args.h200_only and p in H100)]
    fit = F.fit(
        [table(f"{p}-train") for p in pairs],
        [table(f"{p}-validation") for p in pairs],
        known_target("NVIDIA H200"),
        kernels="offline",
    )
    print(
        f"lambda {fit.lam}, {fit.trees} trees: train {fit.train_regret:.4f}, validation {fit.validation_regret:.4f}, "
        f"analytic alone {fit.validation_regret_analytic:.4f}"
    )
    logs, shapes = 0.0, 0
    for name in [f"{p}-validation" for p in PAIRS] + OUTSIDE:
        count, _, regret, above = F.table_regret(table(name), fit.correction)
        print(f"  {name:28s} {count:4d} shapes, regret {regret:.4f}, {above} above 1.10")
        if name in OUTSIDE:
            logs, shapes = logs + count * math.log(regret), shapes + count
    print(f"outside the fit: {shapes} shapes, regret {math.exp(logs / shapes):.4f}")


if __name__ == "__main__":
    main()
