"""``python -m ctgraph tune shapes.csv``: measure every policy on every shape and build the tuning table.

For each shape (fp16, the given macro tile, recorded per row) each policy of
:data:`ctgraph.policy.POLICIES` is timed (kernel time, as the benchmark; in the tile order ``auto`` gives
the shape, :func:`~ctgraph.policy.raster_for`); the fastest one's Bloom filter gets the shape. The
table goes to the cache directory (``CTGRAPH_CACHE_DIR/tuning/``), where ``transform="auto"`` finds it,
and to ``--out`` when given (the shipped table is made that way). ``--update TABLE`` keeps the rows of
``TABLE`` that still apply (the same tile as ``macro_tile="auto"`` picks now) and times only the other
shapes: after a change of the tile model, only the shapes whose tile changed are re-timed. Needs torch
and a GPU.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .policy import POLICIES, Policy, TuningTable, raster_for, tile_name, user_table_path

__all__ = ["time_policy", "tune"]


def time_policy(g: Any, policy: Policy, A: Any, B: Any, D: Any) -> tuple[float, int] | None:
    """``(kernel seconds, workgroups)`` of GEMM graph ``g`` under ``policy`` on this GPU, with torch operands
    ``A``, ``B`` and output ``D`` (timed as the benchmark does); None where the policy cannot run the shape
    (split-K with more tiles than workgroups)."""
    import torch

    import ctgraph
    from lowering.cuda import l2_bytes, model_workgroups

    from .bench import _kernel_time

    wg = model_workgroups(g, policy.transform, {}, policy.sk_batches) if policy.grid == "model" else None
    p = g.attrs["gemm"]
    raster = raster_for(policy.transform, p.m, p.n, p.k, p.dtype, l2_bytes())
    try:
        kern = ctgraph.compile(
            g, policy.transform, workgroups=wg, target="cuda", sk_batches=policy.sk_batches, raster=raster
        )
    except ValueError:
        return None

    def run() -> Any:
        return kern(A, B, out=D, stream=torch.cuda.current_stream())

    return _kernel_time(run, reps=10), kern.workgroups


def tune(
    shapes: list[tuple[int, int, int]],
    macro_tile: tuple[int, int, int] | str = "auto",
    out: Path | None = None,
    progress: bool = True,
    update: TuningTable | None = None,
) -> TuningTable:
    import torch

    import ctgraph

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    rows: list[dict[str, Any]] = []
    if update is not None and update.macro_tile != tile_name(macro_tile):
        raise ValueError(f"update: the table was tuned with macro_tile {update.macro_tile}, not {macro_tile}")
    gpu = torch.cuda.get_device_name()
    if update is not None and update.device != gpu:
        raise ValueError(f"update: the table is of a {update.device}, this GPU is a {gpu}")
    for m, n, k in shapes:
        g = ctgraph.gemm(m, n, k, macro_tile=macro_tile)
        if update is not None and update.timed(m, n, k, "float16", g.attrs["gemm"].macro_tile):
            continue
        A = torch.randn(m, k, device="cuda", dtype=torch.float16)
        B = torch.randn(k, n, device="cuda", dtype=torch.float16)
        D = torch.empty(m, n, device="cuda", dtype=torch.float16)
        times: dict[str, float] = {}
        for p in POLICIES:
            timed = time_policy(g, p, A, B, D)  # None: not a candidate for this shape
            times[p.name] = timed[0] if timed else float("inf")
        best = min(times, key=lambda name: times[name])
        tile = tile_name(g.attrs["gemm"].macro_tile)
        rows.append({"m": m, "n": n, "k": k, "dtype": "float16", "tile": tile, "best": best, "seconds": times})
        if progress:
            print(f"{m}x{n}x{k}: {best} ({2 * m * n * k / times[best] / 1e12:.0f} TF)", flush=True)
    if update is not None:
        table = update.updated(rows)
        if progress:
            print(f"re-timed {len(rows)} shapes, kept {len(table.rows) - len(rows)} rows of the table", flush=True)
    else:
        table = TuningTable.build(gpu, rows, macro_tile=macro_tile)
    for path in (user_table_path(table.device), out):
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(table.to_json())
            if progress:
                print(f"wrote {path}")
    return table
