"""Command line: ``python -m ctgraph compile ...`` (summary and dumps) and ``python -m ctgraph run ...``.

Every failure the user can fix (a bad argument, a missing optional dependency, a path that cannot be
written) prints one line ``error: ...`` on stderr and exits with status 2, without a traceback; output
paths are checked before any work.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .passes import PIPELINES, TRANSFORMS

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
    """``--workgroups``: a positive integer or ``auto`` (the grid-size model's grid, as ``workgroups="auto"``)."""
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
        help="grid size g, or 'auto' for the grid-size model's (default: the backend's choice)",
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

    from .backends import resolve_target

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

    from .bench import DEFAULT_SHAPES, read_shapes, run_bench
    from .gemm import positive_int

    if args.mainloop == "mma" and args.tile == "auto":
        print("error: --mainloop mma needs --tile BM BN BK (the auto tiles are the wgmma path's)", file=sys.stderr)
        return 2
    positive_int("rounds", args.rounds)
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


def cmd_calibrate(args: argparse.Namespace) -> int:
    _require_gpu_stack("python -m ctgraph calibrate")
    from .calibrate import calibrate, calibrate_tiles, report
    from .model import save_model

    if args.tiles:
        costs, _ = calibrate_tiles(progress=not args.quiet)
        print("\n".join(f"    {c.line()}" for c in costs))
        return 0
    model, rows = calibrate(progress=not args.quiet)
    print(report(model, rows))
    print(f"wrote {save_model(model)}")
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .bench import read_shapes
    from .policy import TuningTable
    from .tune import tune

    _require_gpu_stack("python -m ctgraph tune")
    update = TuningTable.from_json(Path(args.update).read_text()) if args.update else None
    out = Path(args.out) if args.out else None
    tune(
        read_shapes(args.shapes),
        macro_tile=args.tile,
        out=out,
        update=update,
        tiles=args.tiles,
        layouts=args.layouts,
        recheck_within=args.recheck,
    )
    return 0


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
    p.add_argument("shapes", nargs="?", help="CSV with columns m,n,k (default: tests/bench/anchors.csv)")
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
        help="grid of each transform: the grid-size model's (default) or every resident CTA",
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
    p = sub.add_parser("calibrate", help="fit the grid-size model on this GPU (needs torch); stores it per device")
    p.add_argument("--quiet", action="store_true", help="no line per measurement")
    p.add_argument("--tiles", action="store_true", help="fit the per-tile costs of macro_tile='auto' instead")
    p.set_defaults(func=cmd_calibrate)
    p = sub.add_parser("tune", help="time every policy on a CSV of shapes and build transform=auto's tuning table")
    p.add_argument("shapes", help="CSV with columns m,n,k")
    _tile_arg(p, "auto", "macro tile for every policy of a shape")
    p.add_argument("--out", help="also write the table here (besides the cache directory)")
    p.add_argument(
        "--update",
        metavar="TABLE",
        help="keep this table's rows that still apply (same tile) and time only the other shapes",
    )
    p.add_argument(
        "--tiles",
        type=int,
        default=0,
        metavar="N",
        help="also time the tile model's first N candidate tiles per shape and keep the fastest for macro_tile='auto'",
    )
    p.add_argument(
        "--layouts",
        action="store_true",
        help="also time swapped tiles fitted to whole waves on cuBLAS's cluster layouts, and pairs of CTAs of a tile "
        "that splits K, and keep one that is faster",
    )
    p.add_argument(
        "--recheck",
        type=float,
        default=0.0,
        metavar="R",
        help="after a kernel change: time a searched row's tile again, with the tiles and layouts it searched that "
        "came within R times its best (e.g. 1.1), and keep the fastest",
    )
    p.set_defaults(func=cmd_tune)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
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
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
