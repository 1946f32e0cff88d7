"""``python -m ctgraph calibrate``: fit the grid-size model's constants on this GPU from our own kernels.

Times (CUDA-graph kernel time, as the benchmark) every transform at several grid sizes on a set of
shapes, turns each run into the model's regressors (:meth:`GridModel.features`) and solves for
``(a, b, c_alone, c_shared, d, c_spread)`` by nonnegative least squares. The fit is stored per device name in the
cache directory (``CTGRAPH_CACHE_DIR``), where ``workgroups="auto"`` finds it. Needs torch and a GPU.

``--tiles`` fits instead the per-tile costs behind ``macro_tile="auto"`` (:func:`calibrate_tiles`) and
prints them as the table :mod:`ctgraph.tiles` ships.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .model import GridModel, work
from .passes import TRANSFORMS, pass_options
from .tiles import CANDIDATES, TileCost, tile_layout

__all__ = ["calibrate", "calibrate_tiles", "nnls"]

DEFAULT_SHAPES = (
    (1408, 1664, 8192),
    (2176, 1024, 4096),
    (1280, 1536, 16384),
    (256, 256, 65536),
    (4096, 4096, 4096),
    (3072, 4096, 512),
    (1024, 1024, 1024),
    (512, 768, 2048),
)


REPS = 20  # launches per CUDA graph


def nnls(X: np.ndarray, y: np.ndarray, iters: int = 5000) -> np.ndarray:
    """Nonnegative least squares (scipy's when available, else projected gradient)."""
    try:
        from scipy.optimize import nnls as scipy_nnls

        return scipy_nnls(X, y)[0]
    except ImportError:
        scale = np.linalg.norm(X, axis=0) + 1e-30
        Z, x = X / scale, np.zeros(X.shape[1])
        step = 1.0 / np.linalg.norm(Z, 2) ** 2
        for _ in range(iters):
            x = np.maximum(0.0, x - step * Z.T @ (Z @ x - y))
        return x / scale


def calibrate(
    shapes: tuple[tuple[int, int, int], ...] = DEFAULT_SHAPES,
    macro_tile: tuple[int, int, int] = (128, 128, 64),
    progress: bool = True,
) -> tuple[GridModel, list[dict[str, Any]]]:
    import pycuda.driver as drv
    import torch

    import ctgraph

    from .bench import _kernel_time

    probe = ctgraph.compile(ctgraph.gemm(256, 256, 256, macro_tile=macro_tile), transform="streamk", target="cuda")
    dev = drv.Context.get_device()  # NOTE: after the first compile, which makes the primary context current
    sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
    resident = probe.program.function().resident_workgroups()
    grids = sorted({max(1, sms // 4), sms // 2, sms, (sms + resident) // 2, resident})
    rows: list[dict[str, Any]] = []
    template = GridModel(0, 0, 0, 0, 0, sms=sms, ctas_per_sm=max(1, resident // sms), device=dev.name())
    for m, n, k in shapes:
        A = torch.randn(m, k, device="cuda", dtype=torch.float16)
        B = torch.randn(k, n, device="cuda", dtype=torch.float16)
        D = torch.empty(m, n, device="cuda", dtype=torch.float16)
        for t in TRANSFORMS:
            for g in grids:
                kern = ctgraph.compile(
                    ctgraph.gemm(m, n, k, macro_tile=macro_tile), transform=t, workgroups=g, target="cuda"
                )

                def run(kern=kern, A=A, B=B, D=D):
                    return kern(A, B, out=D, stream=torch.cuda.current_stream())

                seconds = _kernel_time(run, reps=REPS)
                tiles_m, tiles_n, kt = kern.problem.tiles
                w = work(t, tiles_m * tiles_n, kt, g, pass_options(t, g).sk_batches)
                rows.append(
                    {
                        "m": m,
                        "n": n,
                        "k": k,
                        "transform": t,
                        "g": g,
                        "seconds": seconds,
                        "features": template.features(w, g),
                    }
                )
                if progress:
                    print(f"{m}x{n}x{k} {t:14s} g={g:4d}: {seconds * 1e6:9.1f} us", flush=True)
    X = np.array([r["features"] for r in rows])
    y = np.array([r["seconds"] for r in rows])
    a, b, c1, c2, d, spread = (float(v) for v in nnls(X, y))
    model = GridModel(
        a, b, c1, c2, d, sms=template.sms, ctas_per_sm=template.ctas_per_sm, device=dev.name(), c_spread=spread
    )
    for r in rows:
        r["predicted"] = float(np.dot(r["features"], model.constants))
    return model, rows


def report(model: GridModel, rows: list[dict[str, Any]]) -> str:
    err = [abs(r["predicted"] - r["seconds"]) / r["seconds"] for r in rows]
    picks = []
    for shape in sorted({(r["m"], r["n"], r["k"], r["transform"]) for r in rows}):
        runs = [r for r in rows if (r["m"], r["n"], r["k"], r["transform"]) == shape]
        best = min(runs, key=lambda r: r["seconds"])
        chosen = min(runs, key=lambda r: (r["predicted"], r["g"]))
        picks.append(best["seconds"] / chosen["seconds"])
    return (
        f"device {model.device}: a={model.a:.3e} s, b={model.b:.3e} s, c_alone={model.c_alone:.3e} s/iter, "
        f"c_shared={model.c_shared:.3e} s/iter, d={model.d:.3e} s, c_spread={model.c_spread:.3e} s/iter\n"
        f"median relative error {float(np.median(err)):.1%} over {len(rows)} runs; the model's grid reaches "
        f"{float(np.mean(picks)):.1%} of the best measured grid on average ({min(picks):.1%} worst)"
    )


def _grid_shape(tiles: int) -> tuple[int, int]:
    """``(tiles along m, tiles along n)`` with product ``tiles``, as square as divisors allow."""
    tm = math.isqrt(tiles)
    while tiles % tm:
        tm -= 1
    return tm, tiles // tm


def calibrate_tiles(
    candidates: tuple[tuple[int, int, int], ...] = CANDIDATES, progress: bool = True
) -> tuple[tuple[TileCost, ...], list[dict[str, Any]]]:
    """Fit each candidate tile's costs (:mod:`ctgraph.tiles`) on this GPU: data-parallel kernels over exactly
    ``waves x g`` tiles of ``kt`` iterations take ``launch + waves * (t0 + kt * c)``; least squares over
    waves in {1, 2} and kt in {8, 32, 96}, each once with K and N whole 128-byte lines (``c``) and once
    8 elements short of that (``c_unaligned``, the same tiles and iterations). K up to 96 iterations makes
    the operands outgrow the L2, as in real GEMMs, so ``c`` includes the traffic a tile shape causes."""
    import torch

    import ctgraph

    from .bench import _kernel_time

    costs, rows = [], []
    for bm, bn, bk in candidates:
        cluster, multicast = tile_layout((bm, bn, bk)) or (0, None)  # 0: the fewest CTAs that fit
        opts: dict[str, Any] = {"cluster": cluster, "multicast": multicast}
        probe = ctgraph.compile(
            ctgraph.gemm(bm, bn, bk, macro_tile=(bm, bn, bk)), "dataparallel", target="cuda", **opts
        )
        g, cluster = probe.workgroups, probe.program.layout.get("CLUSTER", 1)
        X, y = [], []
        for waves in (1, 2):
            for kt in (8, 32, 96):
                for short in (0, 8):
                    tm, tn = _grid_shape(waves * g)
                    m, n, k = tm * bm, tn * bn - short, kt * bk - short
                    kern = ctgraph.compile(
                        ctgraph.gemm(m, n, k, macro_tile=(bm, bn, bk)), "dataparallel", target="cuda", **opts
                    )
                    A = torch.randn(m, k, device="cuda", dtype=torch.float16)
                    B = torch.randn(k, n, device="cuda", dtype=torch.float16)
                    D = torch.empty(m, n, device="cuda", dtype=torch.float16)

                    def run(kern=kern, A=A, B=B, D=D):
                        return kern(A, B, out=D, stream=torch.cuda.current_stream())

                    seconds = _kernel_time(run, reps=REPS)
                    X.append([1, waves, waves * kt * (not short), waves * kt * bool(short)])
                    y.append(seconds)
                    rows.append({"tile": (bm, bn, bk), "m": m, "n": n, "k": k, "g": g, "seconds": seconds})
                    if progress:
                        print(f"{(bm, bn, bk)} {m}x{n}x{k} g={g}: {seconds * 1e6:8.1f} us", flush=True)
        launch, t0, c, c_unaligned = (float(v) for v in nnls(np.array(X, dtype=float), np.array(y)))
        costs.append(TileCost((bm, bn, bk), launch, t0, c, cluster, c_unaligned, g, multicast or "b"))
    return tuple(costs), rows
