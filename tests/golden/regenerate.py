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


def seed_control_streamk() -> object:
    """The control graph of the seed example under plain Stream-K."""
    g = ctgraph.gemm(**SEED)
    return ctgraph.compile(g, transform="streamk", workgroups=SEED_WORKGROUPS, target="cpu").control


def seed_cuda_source() -> str:
    """CUDA C++ for the seed's numbers (10 x 12 tiles, 512 k-iterations, 32 WGs) on a one-warp 16x16x16 tile."""
    g = ctgraph.gemm(160, 192, 8192, macro_tile=(16, 16, 16))
    return ctgraph.compile(
        g, transform="streamk2tile", workgroups=SEED_WORKGROUPS, target="cuda", build=False, warps=1
    ).source


def seed_hopper_source() -> str:
    """The same GEMM through the Hopper mainloop (TMA, mbarriers, wgmma) on its smallest tile, 64x64x32."""
    g = ctgraph.gemm(160, 192, 8192, macro_tile=(64, 64, 32))
    return ctgraph.compile(
        g, transform="streamk2tile", workgroups=SEED_WORKGROUPS, target="cuda", build=False, mainloop="wgmma"
    ).source


GOLDEN = {
    "seed_streamk2tile.dot": seed_streamk2tile_graph,
    "seed_control_streamk.dot": seed_control_streamk,
    "seed_streamk2tile.cu": seed_cuda_source,
    "seed_streamk2tile_hopper.cu": seed_hopper_source,
}


def write(name: str, directory: Path = HERE) -> Path:
    """Write golden file ``name`` into ``directory``; returns its path."""
    made = GOLDEN[name]()
    path = directory / name
    if isinstance(made, str):
        path.write_text(made)
        return path
    return ctgraph.dump(made, path)


def main() -> None:
    for name in GOLDEN:
        print(f"wrote {write(name)}")


if __name__ == "__main__":
    main()
