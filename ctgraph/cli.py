"""Command line: ``python -m ctgraph compile ...`` (summary and dumps) and ``python -m ctgraph run ...``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .passes import TRANSFORMS

__all__ = ["main"]


def _problem_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--m", type=int, required=True, help="rows of A and D")
    p.add_argument("--n", type=int, required=True, help="columns of B and D")
    p.add_argument("--k", type=int, required=True, help="columns of A, rows of B")
    p.add_argument("--tile", type=int, nargs=3, default=(128, 128, 32), metavar=("BM", "BN", "BK"),
                   help="macro tile (default 128 128 32)")
    p.add_argument("--dtype", choices=("float16", "float32"), default="float16")
    p.add_argument("--transform", choices=TRANSFORMS, default="streamk2tile")
    p.add_argument("--workgroups", type=int, default=None, help="grid size g (default: backend's choice)")
    p.add_argument("--target", choices=("cpu", "cuda", "auto"), default="cpu")


def _compile(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import ctgraph

    g = ctgraph.gemm(args.m, args.n, args.k, macro_tile=tuple(args.tile), dtype=args.dtype)
    return ctgraph.compile(g, transform=args.transform, workgroups=args.workgroups, target=args.target)


def cmd_compile(args: argparse.Namespace) -> int:
    import ctgraph
    from .summary import summarize

    kern = _compile(args)
    print(summarize(kern))
    for path in args.dump or ():
        print(f"wrote {ctgraph.dump(kern.graph, path)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ctgraph", description="ctgraph: a coordinate-graph GEMM compiler")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("compile", help="transform a GEMM graph, print its schedule summary, dump the graph")
    _problem_args(p)
    p.add_argument("--dump", action="append", metavar="PATH",
                   help="write the transformed graph (.dot text, or .svg/.png/.pdf rendered); repeatable")
    p.set_defaults(func=cmd_compile)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except (ValueError, TypeError, RuntimeError, NotImplementedError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
