"""``python -m ctgraph bench``: time the transforms against cuBLAS on the GPU, in the same run.

For every shape of a CSV (``m,n,k``), with fp16 inputs and the same macro tile for every transform (by
default ``macro_tile="auto"``'s choice for the shape, :mod:`ctgraph.select`):
ctgraph's dataparallel, streamk and streamk2tile kernels and ``torch.matmul`` (cuBLAS, fp32 accumulate,
reduced-precision reduction off). Each transform runs on the ranker's grid
(``workgroups="auto"``, the ranker's grid; ``--workgroups resident``: every resident CTA) and on the
mainloop ``--mainloop`` names (default ``auto``: wgmma on compute capability 9.0), in the tile order
``--raster`` gives (default row-major; ``auto`` its policy's). Two times
per GEMM, as ``docs/benchmarks.md`` explains:

- **kernel**: GPU time only -- a CUDA graph of back-to-back launches, replayed; median of 7 replays;
- **call**: what Python callers see -- CUDA events around back-to-back calls filling >= 2 ms, median of 7.

With ``--rounds R`` every kernel of a shape (cuBLAS's too) is timed ``R`` times, in interleaved rounds
(cuBLAS, then each transform; the next round backward: :func:`~ctgraph.measure.in_turn`), and each time is the
median of its ``R``: a drift of the GPU's
clocks over a long run then falls on every kernel alike instead of on whichever ran during it (at 8192^3 on
the H100 one kernel's figures spread over 640-765 TFLOP/s from one round to the next, docs/benchmarks.md).
The ratio to cuBLAS is taken in each round, against the cuBLAS time of that round::

    ratio_r = cublas_r / ours_r        (r = 1 .. R; the table gives the median and, for R > 1, [min-max])

so that a drift common to a round's kernels cancels instead of widening the spread of either median.

Writes ``results.csv``, ``results.md`` (TFLOP/s, % of the 989 TF fp16 peak, ratio to cuBLAS and to
ctgraph's own data-parallel kernel) and ``results.png`` into ``--out``. Needs torch and a GPU.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .arguments import positive_int
from .config import tile_name
from .deps import require
from .gemm import check_problem
from .measure import call_time as _call_time
from .measure import in_turn
from .measure import kernel_time as _kernel_time
from .passes import TAKES_SPLIT, TRANSFORMS

__all__ = ["PEAK_TFLOPS", "run_bench"]

PEAK_TFLOPS = 989.0  # H100 SXM dense fp16 tensor peak
DEFAULT_SHAPES = Path(__file__).resolve().parent / "data" / "shapes" / "anchors.csv"
SAMPLES = 7
FILL_S = 2e-3


def read_shapes(path: str | Path) -> list[tuple[int, int, int]]:
    """The ``m,n,k`` rows of a CSV, checked (:func:`ctgraph.select.shapes.read`)."""
    from .select.shapes import read

    return read(path)


def run_bench(
    shapes: list[tuple[int, int, int]],
    out: Path,
    macro_tile: tuple[int, int, int] | str = "auto",
    transforms: tuple[str, ...] = TRANSFORMS,
    progress: bool = True,
    workgroups: str | None = "auto",
    mainloop: str = "auto",
    raster: int | None = None,
    rounds: int = 1,
) -> list[dict[str, Any]]:
    rounds = positive_int("rounds", rounds)
    torch = require("torch", "run_bench")

    import ctgraph

    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is in the plot extra
        tqdm = None
    jobs = [(s, t) for s in shapes for t in (*transforms, "cublas")]
    bar = tqdm(total=len(jobs) * rounds, unit="gemm", disable=not progress) if tqdm else None
    rows = []
    for m, n, k in shapes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        A = torch.randn(m, k, device="cuda", dtype=torch.float16, generator=gen)
        B = torch.randn(k, n, device="cuda", dtype=torch.float16, generator=gen)
        D = torch.empty(m, n, device="cuda", dtype=torch.float16)
        ref = torch.matmul(A, B)
        flop = 2.0 * m * n * k
        tile = check_problem(m, n, k, macro_tile, "float16").macro_tile  # "auto": this shape's
        row: dict[str, Any] = {"m": m, "n": n, "k": k, "tile": tile_name(tile)}

        def cublas(A: Any = A, B: Any = B, D: Any = D) -> Any:
            return torch.matmul(A, B, out=D)

        runners: dict[str, Callable[[], Any]] = {"cublas": cublas}
        for t in transforms:
            try:
                grid = None if t == "auto" else workgroups  # "auto" sizes its own grid
                order = None if t in TAKES_SPLIT else raster  # None: 1, or the policy's for "auto"
                g = ctgraph.gemm(m, n, k, macro_tile=tile)
                kern = ctgraph.compile(g, t, workgroups=grid, target="cuda", mainloop=mainloop, raster=order)
            except ValueError:  # split-K needs a workgroup per (tile, chunk): not for shapes with many tiles
                for key in ("tflops", "call_tflops", "call_us", "kernel_us"):
                    row[f"{t}_{key}"] = float("nan")
                if bar:
                    bar.update(rounds)
                continue
            row[f"{t}_workgroups"], row[f"{t}_raster"] = kern.workgroups, kern.raster
            if kern.selection is not None:
                row[f"{t}_policy"] = kern.selection.config.name

            def ours(kern: Any = kern, A: Any = A, B: Any = B, D: Any = D) -> Any:
                return kern(A, B, out=D)  # on torch's current stream

            runners[t] = ours
            runners[t]()
            row[f"{t}_maxerr"] = float((D.float() - ref.float()).abs().max())
        timed: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
        for r in range(rounds):
            for name in in_turn(list(runners), r):
                fn = runners[name]
                call = _call_time(fn)
                timed[name].append((call, _kernel_time(fn, max(1, min(200, math.ceil(FILL_S / call))))))
                if bar:
                    bar.set_description(f"{m}x{n}x{k} {name}: {flop / timed[name][-1][1] / 1e12:.0f} TF")
                    bar.update()
        for name, times in timed.items():
            call, kernel = (statistics.median(t[i] for t in times) for i in (0, 1))
            row[f"{name}_call_us"], row[f"{name}_kernel_us"] = call * 1e6, kernel * 1e6
            row[f"{name}_tflops"] = flop / kernel / 1e12
            row[f"{name}_call_tflops"] = flop / call / 1e12
            if name != "cublas":
                row |= round_ratios(name, [t[1] for t in timed["cublas"]], [t[1] for t in times])
        rows.append(row)
    if bar:
        bar.close()
    out.mkdir(parents=True, exist_ok=True)
    write_csv(rows, out / "results.csv")
    device = torch.cuda.get_device_name() + ("" if mainloop == "auto" else f", {mainloop} mainloop")
    (out / "results.md").write_text(markdown(rows, transforms, device))
    plot(rows, transforms, out / "results.png")
    return rows


def round_ratios(name: str, cublas: list[float], ours: list[float]) -> dict[str, float]:
    """``{name}_ratio`` (the median over the rounds of cuBLAS's kernel time over ours, each round's against the
    same round's) and its ``_min`` and ``_max``."""
    ratios = [c / t for c, t in zip(cublas, ours, strict=True)]
    return {
        f"{name}_ratio": statistics.median(ratios),
        f"{name}_ratio_min": min(ratios),
        f"{name}_ratio_max": max(ratios),
    }


def vs_cublas(row: dict[str, Any], name: str) -> float:
    """The kernel's speed over cuBLAS's: the per-round median where the row has one, else the ratio of the medians
    (rows written before the per-round ratios)."""
    return row.get(f"{name}_ratio", row[f"{name}_tflops"] / row["cublas_tflops"])


def _ratio_cell(row: dict[str, Any], name: str) -> str:
    """``0.99``, or over several rounds whose ratios differ ``0.99 [0.97-1.02]``."""
    cell = _fmt(vs_cublas(row, name), ".2f")
    lo, hi = row.get(f"{name}_ratio_min"), row.get(f"{name}_ratio_max")
    return cell if lo is None or hi is None or f"{lo:.2f}" == f"{hi:.2f}" else f"{cell} [{lo:.2f}-{hi:.2f}]"


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    keys = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def geomean(xs: list[float]) -> float:
    """Geometric mean of the finite values (a transform that cannot run a shape gives NaN there)."""
    xs = [x for x in xs if math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def _finite(xs: Any) -> list[float]:
    return [x for x in xs if math.isfinite(x)] or [float("nan")]


def _fmt(x: float, spec: str) -> str:
    return format(x, spec) if math.isfinite(x) else "-"


def markdown(rows: list[dict[str, Any]], transforms: tuple[str, ...], device: str) -> str:
    vs_dp = [t for t in transforms if t != "dataparallel"] if "dataparallel" in transforms else []
    short = {
        "dataparallel": "DP",
        "streamk": "SK",
        "streamk2tile": "SK2T",
        "streamk_hybrid": "HYB",
        "splitk": "SPLITK",
        "splitk_reduce": "SPLITK-R",
        "auto": "AUTO",
        "cublas": "cuBLAS",
    }
    head = [
        "m",
        "n",
        "k",
        "tile",
        *[f"{short[t]} TF" for t in (*transforms, "cublas")],
        *[f"{short[t]} / cuBLAS" for t in transforms],
        *[f"{short[t]} / DP" for t in vs_dp],
        "best % peak",
    ]
    lines = [
        f"Device: {device}. Kernel time (CUDA graph replay), fp16 in/out, fp32 accumulate. Ratios to cuBLAS: each "
        "round's against the same round's cuBLAS, their median [and range] over the rounds.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for r in rows:
        tf = {t: r[f"{t}_tflops"] for t in (*transforms, "cublas")}
        cells = [
            r["m"],
            r["n"],
            r["k"],
            r.get("tile", "-"),
            *[_fmt(tf[t], ".0f") for t in tf],
            *[_ratio_cell(r, t) for t in transforms],
            *[_fmt(tf[t] / tf["dataparallel"], ".2f") for t in vs_dp],
            f"{100 * max(_finite(tf[t] for t in transforms)) / PEAK_TFLOPS:.0f}%",
        ]
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    lines += ["", "Geomean over these shapes (kernel time / call time):", ""]
    fixed = [t for t in transforms if t != "auto"]
    if "auto" in transforms and fixed:  # how often auto is within 3% of the best fixed policy of this run
        near = sum(r["auto_tflops"] >= 0.97 * max(_finite(r[f"{t}_tflops"] for t in fixed)) for r in rows)
        lines.append(f"- auto within 3% of the best of {', '.join(fixed)}: {near} of {len(rows)} shapes")
    for t in transforms:
        kr = geomean([vs_cublas(r, t) for r in rows])
        cr = geomean([r[f"{t}_call_tflops"] / r["cublas_call_tflops"] for r in rows])
        line = f"- {t}: {kr:.3f}x cuBLAS (call time {cr:.3f}x)"
        if t in vs_dp:
            line += f", {geomean([r[f'{t}_tflops'] / r['dataparallel_tflops'] for r in rows]):.3f}x own dataparallel"
        lines.append(line)
    return "\n".join(lines) + "\n"


def plot(rows: list[dict[str, Any]], transforms: tuple[str, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['m']}x{r['n']}x{r['k']}" for r in rows]
    names = (*transforms, "cublas")
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(rows) + 2), 4), dpi=90)
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(rows))]
        ax.bar(xs, [r[f"{name}_tflops"] for r in rows], width, label=name)
    ax.axhline(PEAK_TFLOPS, color="k", lw=0.6, ls="--")
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("TFLOP/s (kernel time)")
    ax.legend(fontsize=7, ncol=len(names))
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
