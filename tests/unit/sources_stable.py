"""Hashes of the CUDA sources and tile plans a broad set of configurations generates: the check that a structural
change of ``lowering.cuda`` leaves every generated source byte-identical.

``python -m tests.unit.sources_stable write`` records ``sources_stable.json`` (from the tree before a change);
``python -m tests.unit.sources_stable`` (or ``tests/unit/test_sources_stable.py``, which samples the cases) checks
it. Cases: every config of the shipped H100 table (its wgmma source, and the mma variants where they differ), the
mma path in fp16 and fp32 on several tiles, ping-pong, two-block CTAs, swapped tiles, every transform, PDL, and the
layout dictionaries of both planners over a grid of tiles and options (errors included).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import sys
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
RECORD = HERE / "sources_stable.json"
SHAPE = (1000, 1000, 1000)
TRANSFORMS: dict[str, dict[str, Any]] = {
    "dataparallel": {},
    "streamk": {},
    "streamk2tile": {},
    "streamk_hybrid": {"sk_batches": 2},
    "splitk": {"split": 4},
    "splitk_reduce": {"split": 3},
}


def _wgs(
    workgroups: int, extra: dict[str, Any], tile: tuple[int, int, int], shape: tuple[int, int, int] = SHAPE
) -> int:
    """Split-K takes as many workgroups as tiles times chunks."""
    if "split" not in extra:
        return workgroups
    return -(-shape[0] // tile[0]) * -(-shape[1] // tile[1]) * extra["split"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _source(shape: tuple[int, int, int], tile: tuple[int, int, int], dtype: str, variants: bool, **kw: Any) -> str:
    """The kernel's source, then (``variants``) its vector and scalar fallbacks, each as ``"name:sha"``."""
    import ctgraph

    g = ctgraph.gemm(*shape, macro_tile=tile, dtype=dtype)
    kern = ctgraph.compile(g, target="cuda", build=False, **kw)
    out = [f"main:{_sha(kern.source)}"]
    if variants:
        for v in ("vector", "scalar"):
            try:
                out.append(f"{v}:{_sha(kern.program.source_of(v))}")
            except (ValueError, NotImplementedError) as e:
                out.append(f"{v}:error:{e}")
    return " ".join(out)


def _layout(which: str, tile: tuple[int, int, int], dtype: str, **opts: Any) -> str:
    from lowering.cuda import hopper_layout, layout
    from lowering.cuda.options import CudaOptions

    try:
        lay = (hopper_layout if which == "wgmma" else layout)(tile, dtype, CudaOptions(**opts))
    except ValueError as e:
        return f"error:{e}"
    return json.dumps(dict(lay), sort_keys=False)


def _run(case: tuple[str, str, tuple[Any, ...], dict[str, Any]]) -> tuple[str, str]:
    name, kind, args, kw = case
    try:
        text = _source(*args, **kw) if kind == "source" else _layout(*args, **kw)
    except (ValueError, NotImplementedError) as e:
        text = f"error:{type(e).__name__}:{e}"
    return name, _sha(text)


def cases() -> Iterator[tuple[str, str, tuple[Any, ...], dict[str, Any]]]:
    from ctgraph.select import cache

    table = cache.load("NVIDIA H100 80GB HBM3")
    for key, entry in sorted(table.entries.items()):
        m, n, k, dtype = key.split(",")
        c = entry.config
        kw = {"mainloop": "wgmma", **c.compile_args(), **c.layout.options()}
        yield f"table/{key}/{c.name}", "source", ((int(m), int(n), int(k)), c.tile, dtype, True), kw
    for t, (transform, extra) in itertools.product(
        [(128, 128, 32), (64, 128, 32), (128, 64, 64), (16, 16, 16), (64, 64, 32), (256, 128, 32)], TRANSFORMS.items()
    ):
        for dtype in ("float16", "float32"):
            kw = {"mainloop": "mma", "transform": transform, "workgroups": _wgs(132, extra, t), **extra}
            yield f"mma/{t}/{dtype}/{transform}", "source", (SHAPE, t, dtype, False), kw
        kw = {
            "mainloop": "mma",
            "transform": transform,
            "workgroups": _wgs(100, extra, t, (1000, 1000, 999)),
            "vector": False,
            **extra,
        }
        yield f"mma-scalar/{t}/{transform}", "source", ((1000, 1000, 999), t, "float16", False), kw
    for kw2 in ({"warps": 2}, {"warps": 8, "stages": 4}, {"fetch_step": 0}, {"ctas_per_sm": 2}):
        kw = {"mainloop": "mma", "transform": "streamk", "workgroups": 132, **kw2}
        yield f"mma-opts/{kw2}", "source", (SHAPE, (128, 128, 32), "float16", False), kw
    wgmma: list[tuple[tuple[int, int, int], dict[str, Any]]] = [
        ((128, 128, 64), {}),
        ((64, 64, 32), {}),
        ((128, 256, 64), {}),
        ((256, 128, 64), {}),
        ((256, 128, 64), {"cluster": 2}),
        ((256, 256, 64), {}),
        ((512, 256, 64), {"cluster": 4, "multicast": "ab"}),
        ((512, 160, 64), {"cluster": 2, "multicast": "b"}),
        ((256, 160, 64), {}),
        ((64, 128, 64), {"pingpong": True}),
        ((64, 256, 64), {"pingpong": True}),
        ((128, 128, 64), {"pingpong": True, "cluster": 2}),
        ((128, 64, 64), {"pingpong": True, "swap": True}),
        ((40, 128, 64), {}),
        ((232, 128, 64), {}),
        ((136, 128, 32), {"swap": True}),
        ((128, 128, 64), {"swap": True}),
        ((128, 256, 64), {"cluster": 2, "multicast": "a"}),
        ((256, 256, 64), {"cluster": 4, "multicast": "ba"}),
        ((128, 192, 64), {}),
        ((128, 200, 64), {"cluster": 1}),
        ((192, 192, 64), {"pdl": True}),
    ]
    for (t, opts), (transform, extra) in itertools.product(wgmma, TRANSFORMS.items()):
        kw = {"mainloop": "wgmma", "transform": transform, "workgroups": _wgs(66, extra, t), **extra, **opts}
        yield f"wgmma/{t}/{opts}/{transform}", "source", ((1000, 1000, 1000), t, "float16", False), kw
    for t, opts in wgmma:
        kw = {"mainloop": "wgmma", "transform": "streamk", "workgroups": 30, "raster": 4, **opts}
        yield f"wgmma-odd/{t}/{opts}", "source", ((2000, 1000, 1536), t, "float16", True), kw
    tiles = [(bm, bn, bk) for bm in (16, 40, 64, 128, 192, 256, 512) for bn in (64, 128, 160, 256) for bk in (32, 64)]
    for t, dtype in itertools.product(tiles, ("float16", "float32")):
        yield f"layout/mma/{t}/{dtype}", "layout", ("mma", t, dtype), {"mainloop": "mma"}
    for t, cluster, multicast, swap, pingpong in itertools.product(
        tiles, (0, 1, 2, 4, 8), (None, "b", "a", "ab", "ba"), (None, True, False), (False, True)
    ):
        opts = {"mainloop": "wgmma", "cluster": cluster, "multicast": multicast, "swap": swap, "pingpong": pingpong}
        yield f"layout/wgmma/{t}/{cluster}{multicast}/{swap}/{pingpong}", "layout", ("wgmma", t, "float16"), opts


def compute(jobs: int = 8) -> dict[str, str]:
    todo = list(cases())
    with ProcessPoolExecutor(jobs) as pool:
        return dict(pool.map(_run, todo, chunksize=8))


def main(argv: list[str]) -> int:
    hashes = compute()
    if argv[1:2] == ["write"]:
        RECORD.write_text(json.dumps(hashes, indent=0, sort_keys=True) + "\n")
        print(f"wrote {len(hashes)} hashes to {RECORD}")
        return 0
    want = json.loads(RECORD.read_text())
    bad = sorted(k for k in want.keys() | hashes.keys() if want.get(k) != hashes.get(k))
    for k in bad[:40]:
        print("DIFFERS", k)
    print(f"{len(hashes) - len(bad)} of {len(want)} cases identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
