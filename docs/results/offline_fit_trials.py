"""Offline trials of the ranker's model on the tune tables, no GPU (docs/decisions.md, 2026-12-04).

Refits the correction on the tables of the shipped fit with the kernel-hash check bypassed (their timings predate
0c28b21, so nothing here may be shipped) and prints the regrets: train, validation, the analytic model alone, and
the tables outside the fit. ``--p P`` takes a K step's time as the p-norm of the model's bounds instead of their
largest (``fit --bounds-norm P``); ``--h200-only`` fits the H200's tables alone; ``--keep F`` (with ``--cv``) fits
each fold on a seeded fraction F of the other shapes: the learning curve that says how many shapes ``tune
--retime`` must time again. ``--retimed`` reads the H200's tables as timed again on the current kernels
(``retime-h200/``, what the shipped fit was fitted on) in place of the tables as tuned.

    python docs/results/offline_fit_trials.py            # the model as shipped
    python docs/results/offline_fit_trials.py --p 4 --h200-only
    python docs/results/offline_fit_trials.py --cv 5 --out max.json           # 5-fold over every table's shapes
    python docs/results/offline_fit_trials.py --cv 5 --p 4 --against max.json  # and paired with the run before
    python docs/results/offline_fit_trials.py --cv 5 --p 4 --h200-only --keep 0.5   # half the H200's shapes fitted
    python docs/results/offline_fit_trials.py --cv 5 --p 4 --h200-only --seed 1000  # another draw of the folds
    python docs/results/offline_fit_trials.py --cv 5 --p 4 --retimed          # 5-fold over the retimed tables
"""

import argparse
import json
import math
import random
from pathlib import Path

import numpy as np

import ctgraph.select.fit as F
from ctgraph.select.cache import Table
from ctgraph.target import known_target

RESULTS = Path(__file__).resolve().parent
# the pairs of the shipped fit's command, in its order (the trees' bagging follows the rows' order)
PAIRS = ["h200-2", "h100", "h100-smallm", "h200", "h200-midm", "h200-swap64", "h200-thin", "h200-m128", "h200-m16"]
PAIRS += ["h200-l2edge", "h200-narrowmid"]
H100 = {"h100", "h100-smallm"}
OUTSIDE = ["h200-midm-probe", "h200-m128-probe", "h200-general-train", "h200-general-validation"]
OUTSIDE += ["h200-large-train", "h200-large-validation"]


def table(name: str, folder: Path = RESULTS) -> Table:
    return Table.from_json((folder / f"tune-{name}.json").read_text())


def sources(retimed: bool) -> tuple[Path, list[str], list[str]]:
    """Where the tables are, the fitted pairs and the tables outside the fit: as tuned, or as timed again (the
    H200's pairs alone, none outside)."""
    if retimed:
        return RESULTS / "retime-h200", [p for p in PAIRS if p not in H100], []
    return RESULTS, PAIRS, OUTSIDE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=float, help="the p-norm of the bounds (default: their largest, as shipped)")
    ap.add_argument("--h200-only", action="store_true", help="fit the H200's tables alone")
    ap.add_argument("--cv", type=int, metavar="K", help="K-fold over the shapes of every table, outside ones included")
    ap.add_argument("--out", help="with --cv: write each shape's regret to this JSON")
    ap.add_argument("--against", help="with --cv: the mean log regret's change from this --out, shape by shape")
    ap.add_argument("--keep", type=float, default=1.0, help="with --cv: fit each fold on this fraction of the others")
    ap.add_argument("--seed", type=int, default=0, help="with --cv: the seed of the folds' draw (another partition)")
    ap.add_argument("--retimed", action="store_true", help="the H200's tables as timed again (retime-h200/)")
    args = ap.parse_args()
    folder, pairs, outside = sources(args.retimed)
    norm = args.p or math.inf
    F._timed_on_these = lambda tables, kernels: None  # NOTE: the old timings, knowingly: a trial, never shipped
    if args.cv:
        names = [f"{p}-{s}" for p in pairs for s in ("train", "validation")] + outside
        return cross_validate(
            args.cv, args.out, args.against, args.keep, args.h200_only, norm, args.seed, folder, names
        )
    fitted = [p for p in pairs if not (args.h200_only and p in H100)]
    fit = F.fit(
        [table(f"{p}-train", folder) for p in fitted],
        [table(f"{p}-validation", folder) for p in fitted],
        known_target("NVIDIA H200"),
        kernels="offline",
        bounds_norm=norm,
    )
    print(
        f"lambda {fit.lam}, {fit.trees} trees: train {fit.train_regret:.4f}, validation {fit.validation_regret:.4f}, "
        f"analytic alone {fit.validation_regret_analytic:.4f}"
    )
    logs, shapes = 0.0, 0
    for name in [f"{p}-validation" for p in pairs] + outside:
        count, _, regret, above = F.table_regret(table(name, folder), fit.correction)
        print(f"  {name:28s} {count:4d} shapes, regret {regret:.4f}, {above} above 1.10")
        if name in outside:
            logs, shapes = logs + count * math.log(regret), shapes + count
    if shapes:
        print(f"outside the fit: {shapes} shapes, regret {math.exp(logs / shapes):.4f}")


def cross_validate(
    folds: int,
    out: str | None,
    against: str | None,
    keep: float,
    h200_only: bool,
    norm: float,
    seed: int,
    folder: Path,
    names: list[str],
) -> None:
    """Each shape of every table in one of ``folds`` folds drawn with ``seed``; each fold refitted on the others
    (lambda and trees chosen on the fold itself, alike for every variant) and its shapes' regrets kept. ``keep``:
    each fold fitted on that seeded fraction of the others (the same draw for every variant); ``h200_only``: the
    H100's tables never fitted, only scored (as after a retime, which an H200 cannot do for them). ``names``: the
    tables, in ``folder``."""
    tables = [table(n, folder) for n in names]
    fitted = [not (h200_only and n.rsplit("-", 1)[0] in H100) for n in names]
    units = [(i, key) for i, t in enumerate(tables) for key in sorted(t.entries)]
    random.Random(seed).shuffle(units)
    regrets: dict[str, float] = {}
    timings = 0
    for f in range(folds):
        held = set(units[f::folds])
        rest = [u for u in units if u not in held and fitted[u[0]]]
        kept = set(random.Random(seed + 1 + f).sample(rest, round(keep * len(rest))))
        timings += sum(len(tables[i].entries[key].seconds) for i, key in kept)

        def part(chosen: set) -> list[Table]:
            parts = [{k: e for k, e in t.entries.items() if (i, k) in chosen} for i, t in enumerate(tables)]
            return [Table(t.device, p) for t, p in zip(tables, parts, strict=True) if p]

        fit = F.fit(part(kept), part(held), known_target("NVIDIA H200"), kernels="offline", bounds_norm=norm)
        for t in part(held):
            rows = F.samples(t, known_target(t.device), norm)
            weights = np.array(fit.correction.weights)
            for key, r in zip(F._groups(rows), F.regret(rows, weights, fit.correction.trees), strict=True):
                regrets[f"{t.device}|{key}|{f}"] = r
    print(f"fitted on {keep:.0%} of the others: {timings / folds:.0f} timings a fold")
    for device in sorted({k.split("|")[0] for k in regrets}):
        mine = [math.log(r) for k, r in regrets.items() if k.startswith(device + "|")]
        print(f"  {device}: {len(mine)} shapes, regret {math.exp(sum(mine) / len(mine)):.4f}")
    logs = np.log(list(regrets.values()))
    print(f"{folds}-fold: {len(logs)} shapes, regret {math.exp(logs.mean()):.4f}")
    if out:
        Path(out).write_text(json.dumps(regrets, indent=0, sort_keys=True))
    if against:
        before = json.loads(Path(against).read_text())
        d = np.array([math.log(regrets[k] / before[k]) for k in sorted(regrets)])
        se = d.std(ddof=1) / math.sqrt(len(d))
        print(
            f"against {against}: mean log regret {d.mean():+.4f} (standard error {se:.4f}), "
            f"better on {(d < 0).sum()}, worse on {(d > 0).sum()}"
        )


if __name__ == "__main__":
    main()
