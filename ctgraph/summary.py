"""A human-readable summary of a compiled kernel: tiles, work per workgroup, sections, index formulas."""

from __future__ import annotations

from collections import Counter

from .api import Kernel
from .expr import index
from .params import bindings, parametrize
from .schedule import section_walk, sections, tile_coords

__all__ = ["summarize"]


def summarize(kern: Kernel) -> str:
    p, g = kern.problem, kern.graph
    mt, nt, kt = p.tiles
    sched = kern.schedule()
    per_wg = [len(s) for s in sched]
    owners: Counter[tuple[int, int]] = Counter()
    for work in sched:
        owners.update({(m, n) for m, n, _ in work})
    shared = sum(1 for c in owners.values() if c > 1)
    lines = [
        f"GEMM {p.m} x {p.n} x {p.k}  dtype={p.dtype}  macro tile {'x'.join(map(str, p.macro_tile))}",
        f"tiles: {mt} x {nt} = {mt * nt} output tiles, {kt} k-iterations each, {mt * nt * kt} iterations in all",
        "tile order: "
        + (f"groups of {kern.raster} tile rows, column by column" if kern.raster > 1 else "row-major (seed 004)")
        + (f", the last group {mt % kern.raster} rows" if kern.raster > 1 and mt % kern.raster else ""),
        f"transform: {kern.transform} over {kern.workgroups} workgroups (target {kern.target})"
        + (f"; chosen by auto: {kern.selection}" if kern.selection else ""),
        f"iterations per workgroup: min {min(per_wg)}, max {max(per_wg)}, mean {sum(per_wg) / len(per_wg):.1f}",
        f"output tiles shared by several workgroups (fixup): {shared}",
    ]
    values = bindings(g)
    sym = parametrize(g)
    tc = tile_coords(sym)
    wg, ft, fk = index("wg"), index("forTile"), index("forK")
    for sec in sections(sym):
        name = sec.name or "main"
        size = values.get(sym.size(sec.for_tile), sym.size(sec.for_tile))
        lines.append(f"section {name}: {size} iterations per workgroup")
        w = section_walk(sym, sec, wg, ft, fk, [tc.m, tc.n, tc.k])
        for axis, tag in (("m", tc.m), ("n", tc.n), ("k", tc.k)):
            lines.append(f"  {axis} = {w[tag]}")
    for key in ("numTilesSK", "numTilesDP"):
        hit = [v for s, v in values.items() if s.name == key]
        if hit:
            lines.append(f"{key} = {hit[0]}")
    lines.append("sizes: " + ", ".join(f"{s.name}={v}" for s, v in sorted(values.items(), key=lambda kv: kv[0].name)))
    return "\n".join(lines)
