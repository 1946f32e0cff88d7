"""Command line: ``python -m ctgraph compile ...`` (summary and dumps) and ``python -m ctgraph run ...``.

Every failure the user can fix (a bad argument, a missing optional dependency, a path that cannot be
written) prints one line ``error: ...`` on stderr and exits with status 2, without a traceback; output
paths are checked before any work.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .passes import PIPELINES, TRANSFORMS
from .select.objective import OBJECTIVES

SETS = ("train", "validation", "test", "llm", "anchors", "corpus")  # ctgraph/data/shapes/<name>.csv
SETS_HELP = f"a set ({', '.join(SETS)}) or a CSV with columns m,n,k"
OBJECTIVE_HELP = (
    "what the default path minimises: the kernel's GPU time (default) or an eager call's (host included); sets "
    "CTGRAPH_OBJECTIVE for this run"
)
CHOICE_FIELDS = ("m", "n", "k", "config", "reason", "predicted_us", "runner_up", "margin")  # what choose writes

__all__ = ["main"]


class _TileAction(argparse.Action):
    """``--tile BM BN BK`` (three positive integers) or ``--tile auto`` (chosen per shape)."""

    def __call__(self, parser: argparse.ArgumentParser, ns: argparse.Namespace, values: Any, opt: Any = None) -> None:
        if values == ["auto"]:
            setattr(ns, self.dest, "auto")
        elif len(values) == 3 and all(v.isdigit() for v in values):
            setattr(ns, self.dest, tuple(int(v) for v in values))
        else:
            parser.error(f"--tile takes three positive integers BM BN BK or 'auto', got {' '.join(values)}")


def _tile_arg(p: argparse.ArgumentParser, default: tuple[int, int, int] | str, what: str) -> None:
    shown = default if isinstance(default, str) else " ".join(map(str, default))
    p.add_argument(
        "--tile",
        nargs="+",
        action=_TileAction,
        default=default,
        metavar="BM BN BK | auto",
        help=f"{what}: three integers, or 'auto' for the tile macro_tile='auto' picks per shape (default {shown})",
    )


def _raster_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--raster",
        type=int,
        default=None,
        metavar="G",
        help="tile order: walk G tile rows at once, column by column (1: row-major; default: 1, or the policy's)",
    )


def _workgroups(text: str) -> int | str:
    """``--workgroups``: a positive integer or ``auto`` (the ranker's grid, as ``workgroups="auto"``)."""
    if text == "auto":
        return text
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto', got {value}")
    return value


def _problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--m", type=int, required=True, help="rows of A and D")
    p.add_argument("--n", type=int, required=True, help="columns of B and D")
    p.add_argument("--k", type=int, required=True, help="columns of A, rows of B")
    _tile_arg(p, (128, 128, 32), "macro tile")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    p.add_argument("--transform", choices=(*PIPELINES, "auto"), default="streamk2tile")
    p.add_argument("--sk-batches", type=int, default=None, help="streamk_hybrid: waves of Stream-K work (1-6)")
    p.add_argument("--split", type=int, default=None, help="splitk: K chunks per output tile")
    _raster_arg(p)
    p.add_argument(
        "--workgroups",
        type=_workgroups,
        default=None,
        metavar="G|auto",
        help="grid size g, or 'auto' for the ranker's (default: the backend's choice)",
    )
    p.add_argument("--target", choices=("cpu", "cuda", "auto"), default="cpu")


def _compile(args: argparse.Namespace, **options: Any):  # type: ignore[no-untyped-def]
    import ctgraph

    g = ctgraph.gemm(args.m, args.n, args.k, macro_tile=args.tile, dtype=args.dtype)
    return ctgraph.compile(
        g,
        transform=args.transform,
        workgroups=args.workgroups,
        target=args.target,
        sk_batches=args.sk_batches,
        split=args.split,
        raster=args.raster,
        **options,
    )


def check_output(path: str, suffixes: tuple[str, ...], what: str) -> None:
    """``path`` ends in one of ``suffixes`` and its folder exists or can be made, and is writable: a
    ``ValueError`` before any work otherwise."""
    import os
    from pathlib import Path

    out = Path(path)
    if out.suffix.lower() not in suffixes:
        raise ValueError(f"{what} path must end in {', '.join(suffixes)}, got {path!r}")
    folder = out.parent
    while not folder.exists():  # the first folder that exists must be a writable folder
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        raise ValueError(f"cannot write {path!r}: {str(folder)!r} is not a writable folder")


def cmd_compile(args: argparse.Namespace) -> int:
    import ctgraph

    from .deps import require, require_program
    from .summary import summarize

    for path in args.dump or ():
        check_output(path, (".dot", ".gv", ".svg", ".png", ".pdf"), "--dump")
        if not path.lower().endswith((".dot", ".gv")):
            require_program("dot", f"--dump {path}")
    for path in args.control or ():
        check_output(path, (".dot", ".gv", ".svg", ".png", ".pdf", ".txt"), "--control")
        if not path.lower().endswith((".dot", ".gv", ".txt")):
            require_program("dot", f"--control {path}")
    for path in args.plot or ():
        check_output(path, (".png", ".svg", ".pdf"), "--plot")
        require("matplotlib", f"--plot {path}")
    kern = _compile(args)
    print(summarize(kern))
    for path in args.dump or ():
        print(f"wrote {ctgraph.dump(kern.graph, path)}")
    for path in args.control or ():
        print(f"wrote {ctgraph.dump(kern.control, path)}")
    for path in args.plot or ():
        print(f"wrote {ctgraph.plot_schedule(kern, path)}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import time

    import numpy as np

    from .arguments import count
    from .backends import resolve_target

    count("run --seed", args.seed)  # NOTE: before any work
    # NOTE: the passes and the lowering are timed apart where build=False can defer the lowering: always on
    # the CPU; on CUDA only with an explicit grid (the default one asks the GPU, which needs a built kernel).
    deferred = resolve_target(args.target) == "cpu" or (isinstance(args.workgroups, int) and args.transform != "auto")
    tc = time.perf_counter()
    kern = _compile(args, build=not deferred)
    compiled = time.perf_counter() - tc
    p = kern.problem
    rng = np.random.default_rng(args.seed)
    A = rng.standard_normal((p.m, p.k)).astype(p.dtype)
    B = rng.standard_normal((p.k, p.n)).astype(p.dtype)
    C = rng.standard_normal((p.m, p.n)).astype(p.dtype)
    t0 = time.perf_counter()
    kern.program  # noqa: B018 -- lower and generate (on CUDA: also compile) before the calls are timed
    t1 = time.perf_counter()
    D = kern(A, B, C, alpha=args.alpha, beta=args.beta)
    t2 = time.perf_counter()
    D2 = kern(A, B, C, alpha=args.alpha, beta=args.beta)
    t3 = time.perf_counter()
    ref = args.alpha * (A.astype(np.float64) @ B.astype(np.float64)) + args.beta * C.astype(np.float64)
    err = float(np.abs(D.astype(np.float64) - ref).max())
    scale = float(np.abs(ref).max()) or 1.0
    print(f"{kern}")
    steps = (
        f"passes {1e3 * compiled:.1f} ms, lowering {1e3 * (t1 - t0):.1f} ms"
        if deferred
        else f"compile (passes, lowering, build) {1e3 * compiled:.1f} ms"
    )
    print(
        f"{steps}, first call (incl. JIT) {1e3 * (t2 - t1):.1f} ms, "
        f"second call {1e3 * (t3 - t2):.1f} ms ({2 * p.m * p.n * p.k / (t3 - t2) / 1e9:.2f} GFLOP/s)"
    )
    print(
        f"max abs error vs numpy float64: {err:.3e} (relative to max |D|: {err / scale:.3e}); "
        f"repeat bit-identical: {np.array_equal(D, D2)}"
    )
    tol = (2e-3 if p.dtype == "float16" else 1e-5 * max(1.0, p.k**0.5)) * scale
    if err > tol or not np.array_equal(D, D2):
        print("error: result does not match numpy", file=sys.stderr)
        return 1
    return 0


def _require_gpu_stack(what: str) -> None:
    """The GPU commands time kernels with torch on a CUDA device: say what is missing before any work."""
    from .deps import require, require_cuda

    require("torch", what)
    require_cuda(what)


def cmd_bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .arguments import count, positive_int
    from .bench import DEFAULT_SHAPES, read_shapes, run_bench

    if args.mainloop == "mma" and args.tile == "auto":
        print("error: --mainloop mma needs --tile BM BN BK (the auto tiles are the wgmma path's)", file=sys.stderr)
        return 2
    positive_int("bench --rounds", args.rounds)
    count("bench --limit", args.limit)
    shapes = read_shapes(args.shapes or DEFAULT_SHAPES)
    if args.limit:
        shapes = shapes[: args.limit]
    _require_gpu_stack("python -m ctgraph bench")  # NOTE: after the checks that need no GPU
    grid = None if args.workgroups == "resident" else "auto"
    run_bench(
        shapes,
        Path(args.out),
        macro_tile=args.tile,
        transforms=tuple(args.transforms),
        workgroups=grid,
        mainloop=args.mainloop,
        raster=args.raster,
        rounds=args.rounds,
    )
    print((Path(args.out) / "results.md").read_text())
    return 0


def _shapes(name: str, limit: int = 0, skip: int = 0) -> list[tuple[int, int, int]]:
    """A shape set by name (:data:`SETS`: ctgraph/data/shapes/, :mod:`ctgraph.select.shapes`) or a CSV of m,n,k;
    without its first ``skip`` shapes, then its first ``limit`` (0: all)."""
    from .arguments import count
    from .select import shapes

    count("--limit", limit)
    count("--skip", skip)

    path = shapes.DATA / f"{name}.csv"
    if name in SETS and path.exists():
        out = shapes.read(path)
    elif Path(name).exists():
        out = shapes.read(name)
    else:
        raise ValueError(f"shapes: a set ({', '.join(SETS)}) or a CSV of m,n,k, got {name!r}")
    if not out:
        raise ValueError(f"shapes: {name!r} holds no shapes (a header m,n,k and a row per shape)")
    if skip and skip >= len(out):
        raise ValueError(f"--skip {skip} leaves none of the {len(out)} shapes of {name!r}")
    out = out[skip:]
    return out[:limit] if limit else out


def cmd_tune(args: argparse.Namespace) -> int:
    from .tune import check_options, merge, parse_shard, run

    if args.merge:
        check_output(args.out, (".json",), "tune --out")
        table = merge([_table_path(p, "tune --merge: the table") for p in args.merge], Path(args.out))
        print(f"merged {len(args.merge)} tables: {len(table.entries)} shapes -> {args.out}")
        return 0
    if not args.shapes:
        raise ValueError("tune: give a shape set (or --merge TABLES)")
    shard = parse_shard(args.shard, "tune --shard")  # the options, before the GPU stack is asked for
    check_options(args.rounds, args.top, args.extra, shard, "tune: --")
    check_output(args.out, (".json",), "tune --out")
    if args.fraction != 1 and not args.retime:
        raise ValueError(f"tune: --fraction {args.fraction:g} is a share of a table to time again: add --retime")
    if args.retime:
        return _retime(args, shard)
    shapes = _shapes(args.shapes, args.limit, args.skip)
    _require_gpu_stack("python -m ctgraph tune")
    table = run(shapes, Path(args.out), top=args.top, extra=args.extra, shard=shard, rounds=args.rounds)
    print(f"timed {len(table.entries)} shapes -> {args.out}")
    if args.install:
        from .select.cache import store

        print(f"installed into {store(table.device, table.entries)}")
    return 0


def _retime(args: argparse.Namespace, shard: tuple[int, int]) -> int:
    """``tune TABLE.json --retime``: time again the configs of the table's shapes not timed on these kernels."""
    from .cache import write_whole
    from .select.cache import read_table
    from .select.fit import kernel_hash
    from .tune import run, sample, stale, timed_before

    path = Path(args.shapes)
    if path.suffix != ".json" or not path.is_file():
        raise ValueError(f"tune --retime: give a tune table (a .json that tune wrote), got {args.shapes!r}")
    old, out = read_table(path), Path(args.out)
    in_place = out.resolve() == path.resolve()
    if args.fraction != 1:  # a share of the table, drawn from its keys: --out holds that share alone
        if in_place:
            raise ValueError(f"tune --retime --fraction: --out must be another file than {path} (it holds the share)")
        old = sample(old, args.fraction)
        print(f"a seeded {args.fraction:g} of {path}'s shapes: {len(old.entries)}")
    kernels = kernel_hash()
    before = timed_before(path, out, old.device, kernels)
    if before.entries:  # an earlier run that stopped: keep what it timed, written at once so a later stop loses none
        old = old.merged(before)
        write_whole(out, (old if shard[1] == 1 else before).to_json())  # a shard's table holds its share alone
        print(f"an earlier run timed {len(before.entries)} of the shapes on these kernels: kept (in {out})")
    configs = stale(old, kernels)
    unnamed = [k for k, e in old.entries.items() if e.kernels != kernels and not e.timed()]
    if unnamed:  # NOTE: labels of the old tuning table (by policy), not configs: nothing there to time again
        print(
            f"{path}: {len(unnamed)} shapes timed on other kernels name no config to time again (labels of the old "
            "tuning table); they stay as they are, and fit refuses them: tune their shapes afresh to fit on them"
        )
    if not configs:
        wrote = ""
        if shard[1] == 1 and not in_place:  # --out is the table timed on these kernels, always
            write_whole(out, old.to_json())
            wrote = f" ({out} holds it)"
        print(f"{path}: every shape that names its configs was timed on these kernels; nothing to time{wrote}")
        return 0
    _require_gpu_stack("python -m ctgraph tune --retime")
    _same_device(old.device, path)
    shapes = list(configs)
    new = run(shapes, out, shard=shard, rounds=args.rounds, configs=configs)
    if shard[1] > 1:  # this host's share alone: merged after the old table, every host's share wins over it
        write_whole(out, before.merged(new).to_json())
        print(f"timed {len(new.entries)} stale shapes of this shard -> {out}; then tune --merge {path} SHARDS...")
        return 0
    write_whole(out, old.merged(new).to_json())
    print(f"timed {len(new.entries)} of {len(shapes)} stale shapes again -> {out}")
    return 0


def _same_device(device: str, path: Path) -> None:
    """A retime times a table's configs on this GPU and files them under the table's device: refuse another device
    (an H100's table timed on an H200 would pass for the H100's, and the fit reads each table on its own device)."""
    from .select.resolve import device_target

    here = device_target("cuda").name
    if here != device:
        raise ValueError(
            f"tune --retime: {path} was timed on {device!r} and this GPU is {here!r}; time it again on {device!r} "
            "(or tune this GPU's own table: python -m ctgraph tune SHAPES --out NEW.json)"
        )


def cmd_fit(args: argparse.Namespace) -> int:
    from .cache import write_whole
    from .deps import require
    from .plot import picture_path
    from .select.cache import read_table
    from .select.fit import fit, is_current, kernel_hash, timed_on
    from .select.model import load_correction, user_correction_path
    from .target import KNOWN, known_target

    norm = _bounds_norm(args.bounds_norm)  # before any work
    if args.plot:
        picture_path(args.plot, "fit --plot")
    if args.check:  # is the shipped (or calibrated) correction fitted on the kernels this code generates?
        families = sorted({t.family for t in KNOWN.values()} - {"cpu"})
        if args.check not in families and not user_correction_path(args.check).is_file():
            raise ValueError(
                f"fit --check: a family of the known devices ({', '.join(families)}) or one calibrated here, got "
                f"{args.check!r}"
            )
        correction = load_correction(args.check)
        if is_current(correction):
            print(f"{args.check}: current")
            return 0
        print(
            f"{args.check}: stale: fitted on kernels {correction.kernels}, this code generates {kernel_hash()}; time "
            "its tables again (python -m ctgraph tune TABLE.json --retime --out NEW.json), then fit on those"
        )
        return 1
    if not (args.train and args.validation):
        if args.report:  # only the report: the correction in use, on these tables
            tables = [(path, read_table(_table_path(path, "fit --report: the table"))) for path in args.report]
            correction = load_correction(known_target(tables[0][1].device).family)
            _report(tables, correction)
            if args.plot:
                _plot_fit([t for _, t in tables], correction, args.plot, "the correction in use")
            return 0
        raise ValueError(
            "fit: give a train and a validation table (from python -m ctgraph tune), --report TABLE..., or "
            "--check FAMILY"
        )
    require("lightgbm", "python -m ctgraph fit")
    check_output(args.out, (".json",), "fit --out")
    read = [(args.train, args.validation), *(args.also or [])]
    for path, what in [(p, w) for pair in read for p, w in zip(pair, ("train", "validation"), strict=True)]:
        _table_path(path, f"fit: the {what} table")
    for path in args.report or ():
        _table_path(path, "fit --report: the table")
    train = [read_table(t) for t, _ in read]
    validation = [read_table(v) for _, v in read]
    for (t, v), tt, vt in zip(read, train, validation, strict=True):
        if tt.device != vt.device:
            raise ValueError(
                f"fit: the train table {t} was timed on {tt.device!r}, its validation table {v} on {vt.device!r}: "
                "a pair's tables are of one device (give another device's pair with --also)"
            )
    f = fit(train, validation, known_target(train[0].device), bounds_norm=norm)
    counts = timed_on([*train, *validation])
    hashed = f.correction.kernels
    print(f"shapes timed on these kernels ({hashed}): {counts.get(hashed, 0)}; not recorded: {counts.get('', 0)}")
    print(
        f"lambda {f.lam}, {f.trees} trees: regret train {f.train_regret:.4f}, validation {f.validation_regret:.4f} "
        f"(linear alone {f.validation_regret_linear:.4f}, analytic alone {f.validation_regret_analytic:.4f}), "
        f"{f.rows} rows; the first config's measured / predicted seconds on validation: p10 "
        f"{f.validation_spread[0]:.2f}, p90 {f.validation_spread[1]:.2f}"
    )
    write_whole(Path(args.out), f.correction.to_json())
    print(f"wrote {args.out}")
    if args.report is not None:
        paths = [path for pair in read for path in pair]
        timed = [table for pair in zip(train, validation, strict=True) for table in pair]
        fitted = list(zip(paths, timed, strict=True))
        extra = [(path, read_table(path)) for path in args.report]
        _report(fitted + extra, f.correction)
    if args.plot:
        _plot_fit(validation, f.correction, args.plot, "the new fit, on its validation tables")
    return 0


def _plot_fit(tables: list, correction: Any, path: str, title: str) -> None:
    """``fit --plot``: the ranker's prices against the timings of ``tables`` (:func:`ctgraph.plot.plot_fit` of
    :func:`ctgraph.select.fit.table_predictions`), each table as ``--report`` scores it."""
    from .plot import plot_fit
    from .select.fit import table_predictions

    print(f"wrote {plot_fit(table_predictions(tables, correction), path, title)}")


def _table_path(path: str, what: str) -> Path:
    """``path`` where it is a file, else a ``ValueError`` naming ``what`` it was given as ("fit: the train table")."""
    if not Path(path).is_file():
        raise ValueError(f"{what} {path!r} is not a file; give a table that python -m ctgraph tune wrote (.json)")
    return Path(path)


def _bounds_norm(text: str) -> float:
    """``fit --bounds-norm``: ``"max"`` (the largest bound) or a p-norm's p >= 1."""
    try:
        norm = math.inf if text == "max" else float(text)
    except ValueError:
        norm = math.nan
    if not norm >= 1:
        raise ValueError(f"fit: --bounds-norm is 'max' or a p >= 1 (the p-norm of a K step's bounds), got {text!r}")
    return norm


def _report(tables: list, correction: Any) -> None:
    """``correction``'s regret on each table: the linear part alone, the whole, the shapes above 1.10."""
    from .select.fit import table_regret

    width = max(len(str(path)) for path, _ in tables)
    print(f"{'table':{width}}  shapes  linear  whole  above 1.10")
    for path, table in tables:
        shapes, linear, whole, above = table_regret(table, correction)
        print(f"{path!s:{width}}  {shapes:6}  {linear:.4f}  {whole:.4f}  {above:10}")


def cmd_calibrate(args: argparse.Namespace) -> int:
    """A short tune of train and validation shapes on this GPU, then the fit, stored for this device's family."""
    from .arguments import positive_int
    from .cache import write_whole
    from .deps import require
    from .select.fit import fit
    from .select.model import user_correction_path
    from .select.resolve import device_target
    from .tune import run

    positive_int("calibrate --shapes", args.shapes)  # before the GPU stack is asked for (0 would mean every shape)
    _require_gpu_stack("python -m ctgraph calibrate")
    require("lightgbm", "python -m ctgraph calibrate")  # before the tune it fits on
    out = Path(args.out)
    train = run(_shapes("train", args.shapes), out / "train.json", top=6, extra=2)
    validation = run(_shapes("validation", max(4, args.shapes // 2)), out / "validation.json", top=6, extra=2)
    target = device_target("cuda")
    f = fit(train, validation, target)
    path = write_whole(user_correction_path(target.family), f.correction.to_json())
    print(
        f"{target.family}: regret on validation {f.validation_regret:.4f} (analytic alone "
        f"{f.validation_regret_analytic:.4f}); wrote {path}"
    )
    return 0


def cmd_heldout(args: argparse.Namespace) -> int:
    from .heldout import (
        RESULT_COLUMNS,
        by_kind,
        check_options,
        chosen_by,
        compare,
        flip_costs,
        read,
        run,
        stability,
        summary,
    )
    from .plot import picture_path, plot_heldout
    from .target import known_target

    if args.plot:
        picture_path(args.plot, "heldout --plot")  # a bad path fails before any work starts
    _objective(args.objective)
    if not (args.summarize or args.stability):  # what a run takes, checked before the GPU stack is asked for
        check_options(args.rounds, args.regret, "heldout --")
        check_output(args.out, (".csv",), "heldout --out")
    if args.against and not Path(args.against).is_file():
        raise ValueError(f"heldout --against: {args.against!r} is not a file; give a CSV that heldout --out wrote")
    if args.device is not None:
        if not args.stability:
            raise ValueError("heldout --device: only with --stability (a run times the GPU at hand)")
        known_target(args.device)  # an unknown name fails before any work
    if args.summarize:  # a CSV an earlier run wrote: no GPU
        if not Path(args.shapes).is_file():
            raise ValueError(f"heldout --summarize: {args.shapes!r} is not a file; give a CSV that heldout --out wrote")
        rows = read(Path(args.shapes), RESULT_COLUMNS)
        if not rows:
            raise ValueError(f"heldout --summarize: {args.shapes!r} has no rows")
    else:
        shapes = _shapes(args.shapes, args.limit, args.skip)
        if args.stability:
            on = args.device or "the H100 SXM"
            for d in (8, 64):
                moved = stability(shapes, d, args.device)
                print(f"+{d}: {moved.kept:.3f} of {len(shapes)} shapes keep their tile, layout and transform ({on})")
                print(f"  {flip_costs(moved)}")
            return 0
        _require_gpu_stack("python -m ctgraph heldout")
        rows = run(shapes, Path(args.out), rounds=args.rounds, autotune=args.autotune, regret=args.regret)
    print(summary(rows))
    print(by_kind(rows))
    print({"chosen by": chosen_by(rows)})
    if args.against:
        print(compare(rows, read(Path(args.against), RESULT_COLUMNS)))
    if args.plot:
        print(f"wrote {plot_heldout(rows, args.plot, Path(args.shapes).stem)}")
    return 0


def _objective(objective: str | None) -> None:
    """``--objective``: this process's selections, and its spawned workers', by that objective."""
    if objective is not None:
        os.environ["CTGRAPH_OBJECTIVE"] = objective


def cmd_choose(args: argparse.Namespace) -> int:
    from .heldout import changed, choices
    from .select import shapes
    from .target import known_target

    known_target(args.device)  # an unknown device fails before any work starts
    check_output(args.out, (".csv",), "choose --out")
    _objective(args.objective)
    before = _choices_csv(args.against) if args.against else None
    rows = choices(_shapes(args.shapes, args.limit, args.skip), args.device)
    kept = changed(rows, before) if before is not None else rows
    shapes.write(args.out, [tuple(r[c] for c in CHOICE_FIELDS) for r in kept], CHOICE_FIELDS)
    if before is not None:
        print(f"{len(kept)} of {len(rows)} shapes change their config against {args.against} -> {args.out}")
    else:
        print(f"{len(rows)} shapes -> {args.out}")
    return 0


def _choices_csv(path: str) -> list[dict[str, Any]]:
    """The rows of a CSV that ``choose`` or ``heldout`` wrote (m, n, k and config columns), checked."""
    from .heldout import read

    if not Path(path).is_file():
        raise ValueError(f"choose --against: {path!r} is not a file; give a CSV that choose or heldout wrote")
    rows = read(Path(path), ("m", "n", "k", "config"))
    if not rows:
        raise ValueError(f"choose --against: {path!r} has no rows")
    return rows


def _bounds(args: argparse.Namespace) -> dict[str, tuple[int, int]]:
    """``--m LO:HI`` and the like -> ``{"m": (LO, HI)}`` (inclusive, each at least 1)."""
    out = {}
    for d in "mnk":
        text = getattr(args, d)
        if text is None:
            continue
        lo, sep, hi = text.partition(":")
        if not (sep and lo.isdigit() and hi.isdigit() and 1 <= int(lo) <= int(hi)):
            raise ValueError(f"draw --{d}: give LO:HI, two integers with 1 <= LO <= HI (e.g. 16:256), got {text!r}")
        out[d] = (int(lo), int(hi))
    return out


def cmd_draw(args: argparse.Namespace) -> int:
    from .arguments import count
    from .select import shapes

    if not 0 <= args.start <= args.stop:
        raise ValueError(f"draw: need 0 <= --start <= --stop, got {args.start} and {args.stop}")
    shapes.fresh(args.set, args.start, args.start)  # the set checked, no draw
    count("draw --limit", args.limit)
    bounds = _bounds(args)
    check_output(args.out, (".csv",), "draw --out")
    if args.stop > 10**6:  # the generator runs from draw 0: about 25 s a million draws
        print(f"drawing the {args.set} seed up to draw {args.stop} (about {args.stop // 40000} s)", file=sys.stderr)
    rows = shapes.fresh(args.set, args.start, args.stop, bounds, args.limit)
    shapes.write(args.out, [(*s, i, stratum) for i, s, stratum in rows], ("m", "n", "k", "draw", "stratum"))
    span = f"draws {rows[0][0]}-{rows[-1][0]}" if rows else "no draw"
    print(f"{len(rows)} fresh shapes of the {args.set} seed ({span}) -> {args.out}")
    return 0


def cmd_overhead(args: argparse.Namespace) -> int:
    from .overhead import host_check, run, table

    _require_gpu_stack("python -m ctgraph overhead")
    rows = run()
    print(table(rows))
    print(host_check(rows))
    return 0


def _quiet_stdout() -> None:
    """Point stdout at the null device once its reader has gone, so that what is left in its buffer goes nowhere
    (the interpreter's last flush would raise ``BrokenPipeError`` again)."""
    with contextlib.suppress(OSError, ValueError):  # a stdout without a descriptor (a test's capture)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctgraph", description="ctgraph: a coordinate-graph GEMM compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="transform a GEMM graph, print its schedule summary, dump the graph")
    _problem_args(p)
    p.add_argument(
        "--dump",
        action="append",
        metavar="PATH",
        help="write the transformed graph (.dot text, or .svg/.png/.pdf rendered); repeatable",
    )
    p.add_argument(
        "--control",
        action="append",
        metavar="PATH",
        help="write the control graph (.dot text, .svg/.png/.pdf rendered, one box per loop; .txt: one node a line)",
    )
    p.add_argument(
        "--plot",
        action="append",
        metavar="PATH",
        help="draw the schedule: workgroups x iterations, tiles, sections, fixup seams (.png/.svg/.pdf)",
    )
    p.set_defaults(func=cmd_compile)
    p = sub.add_parser("run", help="compile and run a GEMM on random data; check against numpy, print error and time")
    _problem_args(p)
    p.add_argument("--alpha", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.5)
    p.add_argument("--seed", type=int, default=0, help="random seed for A, B, C")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("bench", help="time the transforms and cuBLAS on the GPU for a CSV of shapes (needs torch)")
    p.add_argument("shapes", nargs="?", help="CSV with columns m,n,k (default: ctgraph/data/shapes/anchors.csv)")
    p.add_argument("--out", default="out/bench", help="directory for results.csv/.md/.png")
    _tile_arg(p, "auto", "macro tile for every transform of a shape")
    p.add_argument(
        "--transforms",
        nargs="+",
        choices=(*PIPELINES, "auto"),
        default=[*TRANSFORMS, "splitk_reduce", "auto"],
        help="split-K runs only where its workgroups fit (tiles x chunks); '-' elsewhere",
    )
    p.add_argument(
        "--workgroups",
        choices=("auto", "resident"),
        default="auto",
        help="grid of each transform: the ranker's (default) or every resident CTA",
    )
    p.add_argument(
        "--mainloop",
        choices=("auto", "wgmma", "mma"),  # lowering.cuda.options.MAINLOOPS (ctgraph does not import lowering)
        default="auto",
        help="ctgraph's mainloop: wgmma (Hopper), mma (mma.sync, any sm_80+) or auto (wgmma on compute capability 9.0)",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="R",
        help="time every kernel of a shape R times in interleaved rounds and keep each one's median (default 1)",
    )
    _raster_arg(p)
    p.set_defaults(func=cmd_bench)
    p = sub.add_parser("tune", help="time the ranker's candidates on a shape set, on every GPU (needs torch)")
    p.add_argument("shapes", nargs="?", help=SETS_HELP)
    p.add_argument("--out", default="tune.json", help="the merged table (default tune.json)")
    p.add_argument("--top", type=int, default=8, help="the ranker's first N candidates per shape (default 8)")
    p.add_argument("--extra", type=int, default=4, help="and N others drawn with a seed (default 4)")
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes (after --skip)")
    p.add_argument("--skip", type=int, default=0, help="leave out the first N shapes (those timed before)")
    p.add_argument("--shard", help="i/n: this host's share (default RANK/WORLD_SIZE, else all)")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        metavar="R",
        help="time every config R times in interleaved rounds and keep each one's median (default 1)",
    )
    p.add_argument("--merge", nargs="+", metavar="TABLE", help="merge these tables into --out instead")
    p.add_argument(
        "--retime",
        action="store_true",
        help="SHAPES is a tune table: time again the configs of its shapes not timed on this code's kernels",
    )
    p.add_argument(
        "--fraction",
        type=float,
        default=1.0,
        metavar="F",
        help="with --retime: a seeded share F (0 < F <= 1) of the table's shapes, --out holds them alone (default 1)",
    )
    p.add_argument("--install", action="store_true", help="add the entries to this device's autotune cache")
    p.set_defaults(func=cmd_tune)
    p = sub.add_parser("fit", help="fit the ranker's correction on a train table, choosing on a validation table")
    p.add_argument("train", nargs="?")
    p.add_argument("validation", nargs="?")
    p.add_argument("--out", default="ranker.json")
    p.add_argument(
        "--also",
        nargs=2,
        action="append",
        metavar=("TRAIN", "VALIDATION"),
        help="the tables of another device of the same family, fitted together (repeatable)",
    )
    p.add_argument("--check", metavar="FAMILY", help="only say whether FAMILY's correction (e.g. sm90) is current")
    p.add_argument(
        "--bounds-norm",
        default="max",
        metavar="P",
        help="how the analytic model joins a K step's bounds: 'max' (the largest, default) or their P-norm",
    )
    p.add_argument(
        "--report",
        nargs="*",
        metavar="TABLE",
        help="the regret on each table fitted and on these (without a train table: of the correction in use)",
    )
    p.add_argument(
        "--plot",
        metavar="PATH",
        help="also draw the prices against the timings (.png, .svg or .pdf): the validation tables, or with --report "
        "alone its tables",
    )
    p.set_defaults(func=cmd_fit)
    p = sub.add_parser("calibrate", help="a short tune and fit for this GPU's family (needs torch and a GPU)")
    p.add_argument("--shapes", type=int, default=24, help="train shapes to time (validation: half as many)")
    p.add_argument("--out", default="out/calibrate", help="where the tune tables go")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("heldout", help="the default path against cuBLAS on a shape set (needs torch and a GPU)")
    p.add_argument("shapes", help=SETS_HELP)
    p.add_argument("--out", default="out/heldout.csv")
    p.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="interleaved rounds, cuBLAS first in even ones and ctgraph in odd ones: an even count gives each the "
        "first place as often (default 2)",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes (after --skip)")
    p.add_argument("--skip", type=int, default=0, help="leave out the first N shapes (a run split over several calls)")
    p.add_argument("--autotune", action="store_true", help="time the ranker's top candidates on first call")
    p.add_argument("--regret", type=int, default=0, metavar="N", help="also time the ranker's first N candidates")
    p.add_argument("--stability", action="store_true", help="only the selection's stability under +8 and +64")
    p.add_argument("--objective", choices=OBJECTIVES, help=OBJECTIVE_HELP)
    p.add_argument("--device", help="with --stability: a known device, e.g. 'NVIDIA H200' (default: the H100 SXM)")
    p.add_argument(
        "--summarize", action="store_true", help="SHAPES is a CSV an earlier run wrote: print its summary (no GPU)"
    )
    p.add_argument(
        "--against",
        metavar="OLD",
        help="also compare with the CSV of an earlier run (another commit or device): the shapes whose config changed",
    )
    p.add_argument(
        "--plot", metavar="PATH", help="also draw the shapes' ratios to PATH (.png, .svg or .pdf; needs matplotlib)"
    )
    p.set_defaults(func=cmd_heldout)
    p = sub.add_parser("choose", help="the config the default path runs for each shape on a known device (no GPU)")
    p.add_argument("shapes", help=SETS_HELP)
    p.add_argument("--device", help="a known device, e.g. 'NVIDIA H200' (default: the H100 SXM)")
    p.add_argument("--objective", choices=OBJECTIVES, help=OBJECTIVE_HELP)
    p.add_argument(
        "--against",
        metavar="OLD",
        help="keep only the shapes whose config differs from OLD's (a CSV that choose or heldout wrote)",
    )
    p.add_argument("--limit", type=int, default=0, help="only the first N shapes (after --skip)")
    p.add_argument("--skip", type=int, default=0, help="leave out the first N shapes")
    p.add_argument(
        "--out",
        default="out/choices.csv",
        help="a CSV of m,n,k,config,reason, the ranker's price, its runner-up and margin (heldout reads it)",
    )
    p.set_defaults(func=cmd_choose)
    p = sub.add_parser(
        "draw", help="fresh shapes from a set's seeded generator, past the set, to probe a change on (no GPU)"
    )
    p.add_argument("set", help="whose seed: train, validation or test")
    p.add_argument("--start", type=int, required=True, help="the first draw (counting every draw of the seed)")
    p.add_argument("--stop", type=int, required=True, help="the draw to stop before")
    for d in "mnk":
        p.add_argument(f"--{d}", metavar="LO:HI", help=f"keep only {d} in LO..HI")
    p.add_argument("--limit", type=int, default=0, help="at most N shapes (0: all)")
    p.add_argument("--out", default="out/fresh.csv", help="a CSV of m,n,k,draw,stratum (tune and heldout read it)")
    p.set_defaults(func=cmd_draw)
    p = sub.add_parser("overhead", help="host time per Python call against torch.matmul (needs torch and a GPU)")
    p.set_defaults(func=cmd_overhead)
    args = parser.parse_args(argv)
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # a reader that stopped (``| head``) shows here, not in the interpreter's last flush
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return 1
    except ImportError as e:  # a MissingDependency, or an optional package the code imported itself
        from .deps import from_import_error

        missing = from_import_error(e, f"python -m ctgraph {args.command}")
        if missing is None:
            raise
        print(f"error: {missing}", file=sys.stderr)
        return 2
    except OSError as e:  # a file that cannot be written or read
        print(f"error: {e}", file=sys.stderr)
        return 2
    except MemoryError as e:  # e.g. run's operands of a GEMM larger than this machine holds
        print(f"error: out of memory ({e or type(e).__name__}): try a smaller GEMM", file=sys.stderr)
        return 2
    except (ValueError, TypeError, RuntimeError, NotImplementedError, OverflowError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
