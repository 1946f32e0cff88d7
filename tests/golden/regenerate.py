"""Regenerate the golden files: ``python -m tests.golden.regenerate`` (or ``make golden``).

Review the diff before committing: a golden file changes only when the graph or its dump is meant to.
"""

from __future__ import annotations

from pathlib import Path

import ctgraph

HERE = Path(__file__).resolve().parent

SEED = {"m": 160, "n": 192, "k": 4096, "macro_tile": (16, 16, 8)}
SEED_WORKGROUPS = 32


def seed_streamk2tile_graph() -> ctgraph.CoordinateGraph:
    """The transformed graph of seed 004's example: 160x192x4096, 16x16x8 tiles, two-tile Stream-K, 32 WGs."""
    g = ctgraph.gemm(**SEED)
    return ctgraph.compile(g, transform="streamk2tile", workgroups=SEED_WORKGROUPS, target="cpu").graph


GOLDEN = {
    "seed_streamk2tile.dot": seed_streamk2tile_graph,
}


def write(name: str, directory: Path = HERE) -> Path:
    """Write golden file ``name`` into ``directory``; returns its path."""
    return ctgraph.dump(GOLDEN[name](), directory / name)


def main() -> None:
    for name in GOLDEN:
        print(f"wrote {write(name)}")


if __name__ == "__main__":
    main()
